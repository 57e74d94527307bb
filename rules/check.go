package rules

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/rules/internal/cond"
)

// reservedStageNames are names the NFA uses for states of its own: the
// final state, and the node of a group.
var reservedStageNames = map[string]bool{"$endState$": true, "GroupPattern": true}

// fieldTypes maps the type names of a schema to value kinds; time is an
// int of epoch milliseconds (decoded from RFC 3339 or a number).
var fieldTypes = map[string]event.Kind{
	"string": event.KindString, "int": event.KindInt, "float": event.KindFloat,
	"bool": event.KindBool, "time": event.KindInt,
}

// ruleChecker checks a parsed file for what the grammar cannot say (names
// unique and defined, the event time field, the schema, the shape of
// patterns, severities, quantifier counts) and works out the schema. The
// rejections of Flink's Pattern API are left to the nfa builder, except
// where the checker can point at the fault more precisely.
type ruleChecker struct {
	f     *File
	errs  *ErrorList
	warns ErrorList // see Ruleset.Warnings

	timeDecl   *EventTimeDecl
	schemaDecl *SchemaDecl
	lookups    []*LookupDecl
	aggregates []*AggregateDecl
	rules      []*RuleDecl
	tests      []*TestDecl

	// layout, when set, is the slot layout the schema is placed over
	// (CompileLayout).
	layout *event.Schema

	// The outcome.
	schema *event.Schema
	// inputs are the event fields of the file's own schema (not a
	// lookup's or an aggregate's, nor a field only the layout has), in
	// its order: what an alert id hashes (Ruleset.IDSlots).
	inputs    []string
	timeSlot  int
	timeSlots map[int]bool
	// bad marks rules with errors the nfa builder must not see (it would
	// report them again, less precisely).
	bad map[*RuleDecl]bool
}

func (c *ruleChecker) errorf(p Pos, format string, args ...any) {
	c.errs.add(c.f.src, p, fmt.Sprintf(format, args...))
}

// twice reports the second definition at p of a name first defined at
// first: "WHAT is defined twice (first at line N)".
func (c *ruleChecker) twice(p, first Pos, what string) {
	c.errorf(p, "%s is defined twice (first at line %d)", what, c.f.src.position(first).Line)
}

// warnf reports a warning at p: "warning: " and the message.
func (c *ruleChecker) warnf(p Pos, format string, args ...any) {
	c.warns.add(c.f.src, p, "warning: "+fmt.Sprintf(format, args...))
}

// ruleErrorf reports an error in rule r and marks r as bad.
func (c *ruleChecker) ruleErrorf(r *RuleDecl, p Pos, format string, args ...any) {
	c.bad[r] = true
	c.errorf(p, format, args...)
}

// check runs every check. The schema is set afterwards, also when there
// were errors (it may then lack fields).
func (c *ruleChecker) check() {
	c.bad = map[*RuleDecl]bool{}
	c.timeSlots = map[int]bool{}
	c.timeSlot = -1
	ruleNames := map[string]Pos{}
	testNames := map[string]Pos{}
	for _, d := range c.f.Decls {
		switch d := d.(type) {
		case *EventTimeDecl:
			if c.timeDecl != nil {
				c.errorf(d.Pos, "the event time field is given twice")
				continue
			}
			c.timeDecl = d
		case *SchemaDecl:
			if c.schemaDecl != nil {
				c.errorf(d.Pos, "the schema is given twice")
				continue
			}
			c.schemaDecl = d
		case *LookupDecl:
			c.lookups = append(c.lookups, d)
		case *AggregateDecl:
			c.aggregates = append(c.aggregates, d)
		case *RuleDecl:
			if first, ok := ruleNames[d.Name.Value]; ok {
				c.twice(d.Name.Pos, first, "rule "+d.Name.Value)
			} else {
				ruleNames[d.Name.Value] = d.Name.Pos
			}
			c.rules = append(c.rules, d)
		case *TestDecl:
			if first, ok := testNames[d.Name]; ok {
				c.twice(d.Pos, first, fmt.Sprintf("test %q", d.Name))
			} else {
				testNames[d.Name] = d.Pos
			}
			c.tests = append(c.tests, d)
		}
	}
	if c.timeDecl == nil {
		c.errorf(c.f.Pos, "the ruleset does not say which field carries event time: add 'event time FIELD'")
	}
	if c.schemaDecl != nil {
		c.checkSchema()
	}
	c.checkLookups()
	c.checkAggregates()
	for _, r := range c.rules {
		c.checkRule(r)
	}
	if c.schemaDecl == nil {
		c.inferSchema()
	}
	for i := range c.schema.Len() {
		c.inputs = append(c.inputs, c.schema.Field(i).Name)
	}
	c.lookupSchema()
	c.aggregateSchema()
	if c.layout != nil && c.errs.Len() == 0 {
		c.applyLayout(c.layout)
	}
	if c.timeDecl != nil {
		if slot, ok := c.schema.Slot(c.timeDecl.Field.Value); ok {
			c.timeSlot = slot
			c.timeSlots[slot] = true
		}
	}
}

// checkSchema checks the declared schema and builds it.
func (c *ruleChecker) checkSchema() {
	var fields []event.Field
	seen := map[string]bool{}
	timeField := ""
	if c.timeDecl != nil {
		timeField = c.timeDecl.Field.Value
	}
	foundTime := false
	for _, fd := range c.schemaDecl.Fields {
		if seen[fd.Name.Value] {
			c.errorf(fd.Name.Pos, "field %s is declared twice", fd.Name)
			continue
		}
		seen[fd.Name.Value] = true
		kind, ok := fieldTypes[fd.Type.Value]
		if !ok {
			c.errorf(fd.Type.Pos, "unknown type %s (want string, int, float, bool or time)", fd.Type)
		}
		if fd.Name.Value == timeField {
			foundTime = true
			if ok && fd.Type.Value != "time" {
				c.errorf(fd.Type.Pos, "the event time field %s must have type time, not %s", fd.Name, fd.Type)
			}
		}
		if fd.Type.Value == "time" {
			c.timeSlots[len(fields)] = true
		}
		fields = append(fields, event.Field{Name: fd.Name.Value, Kind: kind})
	}
	if c.timeDecl != nil && !foundTime {
		c.errorf(c.timeDecl.Field.Pos, "the event time field %s is not in the schema", c.timeDecl.Field)
	}
	c.schema = event.MustSchema(fields...)
}

// inferSchema builds the schema of a file that declares none: every field
// an expression reads (identifiers that are not stage names of the rule),
// the key fields and the event time field, sorted by name, untyped.
func (c *ruleChecker) inferSchema() {
	names := map[string]bool{}
	if c.timeDecl != nil {
		names[c.timeDecl.Field.Value] = true
	}
	for _, r := range c.rules {
		for _, n := range ruleFields(r, c.lookupNames()) {
			if !c.isLookupField(n) && !slices.Contains(c.aggregateNames(), n) {
				names[n] = true
			}
		}
	}
	c.inferredAggregateFields(names)
	for _, d := range c.lookups {
		if d.Key != nil {
			for _, k := range d.Key.Fields {
				names[k.Value] = true
			}
		}
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	fields := make([]event.Field, len(sorted))
	for i, n := range sorted {
		fields[i] = event.Field{Name: n}
	}
	c.schema = event.MustSchema(fields...)
}

// ruleFields are the fields rule r reads, sorted: its key fields and
// every field an expression reads (identifiers that are not stage names,
// and fields read through a stage (x.f) or a closure (.f)); the fields of
// the lookups named read as lookup.field.
func ruleFields(r *RuleDecl, lookups []string) []string {
	names := map[string]bool{}
	stages := map[string]bool{}
	for _, s := range leafStages(r) {
		stages[s.Name.Value] = true
	}
	if r.Key != nil {
		for _, k := range r.Key.Fields {
			names[k.Value] = true
		}
	}
	forEachExpr(r, func(x *Expr) {
		ids, err := cond.Identifiers(x.raw, lookups...)
		if err != nil {
			return // the compiler reports it
		}
		for _, id := range ids {
			if !stages[id] && id != "ctx" {
				names[id] = true
			}
		}
		members, err := cond.MemberNames(x.raw, lookups...)
		if err != nil {
			return
		}
		for _, m := range members {
			if !stages[m] {
				names[m] = true
			}
		}
	})
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	return sorted
}

// applyLayout places the schema over layout (CompileLayout): the fields
// of layout keep their slots (with this file's type where it declares
// the field), the others follow in the schema's order.
func (c *ruleChecker) applyLayout(layout *event.Schema) {
	fields := make([]event.Field, 0, layout.Len()+c.schema.Len())
	for i := range layout.Len() {
		f := layout.Field(i)
		if s, ok := c.schema.Slot(f.Name); ok {
			f.Kind = c.schema.Field(s).Kind
		}
		fields = append(fields, f)
	}
	for i := range c.schema.Len() {
		if f := c.schema.Field(i); !slices.ContainsFunc(fields, func(x event.Field) bool { return x.Name == f.Name }) {
			fields = append(fields, f)
		}
	}
	placed := event.MustSchema(fields...)
	times := map[int]bool{}
	for s := range c.timeSlots {
		if ns, ok := placed.Slot(c.schema.Field(s).Name); ok {
			times[ns] = true
		}
	}
	c.schema, c.timeSlots = placed, times
}

// forEachExpr calls fn for every expression of r: conditions, then emits.
func forEachExpr(r *RuleDecl, fn func(*Expr)) {
	if r.Pattern != nil {
		walkElems(r.Pattern.Elems, func(e PatternElem) {
			for _, cl := range e.head().Clauses {
				if cl.Expr != nil {
					fn(cl.Expr)
				}
			}
		})
	}
	for _, e := range r.emitBlocks() {
		for _, f := range e.Fields {
			fn(f.Expr)
		}
	}
}

// emitBlocks returns the rule's emit blocks: its own, then its timeout
// block's, those it has.
func (r *RuleDecl) emitBlocks() []*EmitBlock {
	var out []*EmitBlock
	if r.Emit != nil {
		out = append(out, r.Emit)
	}
	if r.Timeout != nil && r.Timeout.Emit != nil {
		out = append(out, r.Timeout.Emit)
	}
	return out
}

// walkElems calls fn for every element, groups before their stages, in
// pattern order.
func walkElems(es []PatternElem, fn func(PatternElem)) {
	for _, e := range es {
		fn(e)
		if g, ok := e.(*GroupNode); ok {
			walkElems(g.Elems, fn)
		}
	}
}

// leafStages returns the stages of r in the order of nfa.NFA.Stages:
// pattern order, groups replaced by their stages.
func leafStages(r *RuleDecl) []*StageNode {
	var out []*StageNode
	if r.Pattern == nil {
		return nil
	}
	walkElems(r.Pattern.Elems, func(e PatternElem) {
		if s, ok := e.(*StageNode); ok {
			out = append(out, s)
		}
	})
	return out
}

// checkKeyFields checks the fields of a key item (a rule's, a lookup's,
// an aggregate's): each once, and declared when the schema is.
func (c *ruleChecker) checkKeyFields(key *KeyItem) {
	seen := map[string]bool{}
	for _, k := range key.Fields {
		if seen[k.Value] {
			c.errorf(k.Pos, "key field %s is given twice", k)
		}
		seen[k.Value] = true
		if c.schemaDecl != nil && !c.declared(k.Value) {
			c.errorf(k.Pos, "unknown key field %s%s", k, c.schemaHint(k.Value))
		}
	}
}

// schemaHint is what an error about name, a field the declared schema
// lacks, adds: the closest field (" (did you mean x?)"), else
// " (not in the schema)".
func (c *ruleChecker) schemaHint(name string) string {
	var names []string
	for _, fd := range c.schemaDecl.Fields {
		names = append(names, fd.Name.Value)
	}
	if hint := Suggest(name, names); hint != "" {
		return hint
	}
	return " (not in the schema)"
}

func (c *ruleChecker) checkRule(r *RuleDecl) {
	for _, sev := range []*NameItem{r.Severity, r.timeoutSeverity()} {
		if sev == nil {
			continue
		}
		if _, ok := parseSeverity(sev.Name.Value); !ok {
			hint := ""
			if _, ok := parseSeverity(strings.ToLower(sev.Name.Value)); ok {
				hint = " (did you mean " + strings.ToLower(sev.Name.Value) + "?)"
			}
			c.errorf(sev.Name.Pos, "unknown severity %s (want info, low, medium, high or critical)%s", sev.Name, hint)
		}
	}
	if r.Key != nil {
		c.checkKeyFields(r.Key)
	}
	if r.Pattern == nil {
		c.ruleErrorf(r, r.Name.Pos, "rule %s has no pattern", r.Name)
		return
	}
	c.checkElems(r, r.Pattern.Elems, r.Pattern.Pos, false)
	if n := unrolledSize(r.Pattern.Elems); n > maxUnrolled {
		c.ruleErrorf(r, largestQuant(r.Pattern.Elems, r.Pattern.Pos), "the pattern is too large: its quantifiers unroll it to more than %d stages; use smaller counts, or a loop (oneOrMore, timesOrMore) with a condition", maxUnrolled)
	}
	stages := map[string]*StageNode{}
	for _, s := range leafStages(r) {
		n := s.Name
		switch {
		case stages[n.Value] != nil:
			c.ruleErrorf(r, n.Pos, "stage %s is defined twice in rule %s (first at line %d; Flink: duplicate pattern name)", n, r.Name, c.f.src.position(stages[n.Value].Name.Pos).Line)
			continue
		case reservedStageNames[n.Value]:
			c.ruleErrorf(r, n.Pos, "stage name %s is reserved", n)
		case c.schemaDecl != nil && c.declared(n.Value):
			c.ruleErrorf(r, n.Pos, "stage %s has the name of a schema field; rename one (in an expression the name would mean the stage)", n)
		case slices.Contains(c.lookupNames(), n.Value):
			c.ruleErrorf(r, n.Pos, "stage %s has the name of a lookup; rename one (%s.x would be ambiguous)", n, n)
		case slices.Contains(c.aggregateNames(), n.Value):
			c.ruleErrorf(r, n.Pos, "stage %s has the name of an aggregate; rename one (in an expression the name would mean the stage)", n)
		}
		stages[n.Value] = s
	}
	if sk := r.Skip; sk != nil {
		switch sk.Kind {
		case SkipToFirst, SkipToLast:
			top := slices.ContainsFunc(r.Pattern.Elems, func(e PatternElem) bool {
				s, ok := e.(*StageNode)
				return ok && s.Name.Value == sk.Stage.Value
			})
			switch {
			case stages[sk.Stage.Value] == nil:
				c.ruleErrorf(r, sk.Stage.Pos, "skip %s: rule %s has no stage %s%s", sk.Kind, r.Name, sk.Stage, Suggest(sk.Stage.Value, slices.Sorted(maps.Keys(stages))))
			case !top:
				c.ruleErrorf(r, sk.Stage.Pos, "skip %s: stage %s is inside a group, and Flink looks for the skip target among the stages outside groups only", sk.Kind, sk.Stage)
			}
		default:
			if sk.OrFail.Set {
				c.ruleErrorf(r, sk.OrFail.Pos, "orFail applies to toFirst and toLast only (Flink's throwExceptionOnMiss)")
			}
		}
	}
	for _, e := range r.emitBlocks() {
		seen := map[string]bool{}
		for _, f := range e.Fields {
			if seen[f.Name.Value] {
				c.errorf(f.Name.Pos, "emit field %s is given twice", f.Name)
			}
			seen[f.Name.Value] = true
		}
	}
}

// timeoutSeverity is the severity item of the rule's timeout block, nil
// when there is none.
func (r *RuleDecl) timeoutSeverity() *NameItem {
	if r.Timeout == nil {
		return nil
	}
	return r.Timeout.Severity
}

func (c *ruleChecker) declared(field string) bool {
	for _, fd := range c.schemaDecl.Fields {
		if fd.Name.Value == field {
			return true
		}
	}
	return false
}

// checkElems checks the elements of a pattern (or, with inGroup, of the
// group at pos).
func (c *ruleChecker) checkElems(r *RuleDecl, es []PatternElem, pos Pos, inGroup bool) {
	what := "a pattern"
	if inGroup {
		what = "a group"
	}
	if len(es) == 0 {
		c.ruleErrorf(r, pos, "%s needs at least one stage", what)
		return
	}
	for i, e := range es {
		h := e.head()
		ep := elemPos(e)
		switch {
		case i == 0 && h.Contiguity != ContBegin:
			c.ruleErrorf(r, ep, "%s starts with begin, not %s", what, h.Contiguity)
		case i > 0 && h.Contiguity == ContBegin:
			c.ruleErrorf(r, ep, "begin starts %s; use next, followedBy or followedByAny", what)
		}
		c.checkQuant(r, &h.Quant)
		var until, gap *Clause
		for _, cl := range h.Clauses {
			switch cl.Kind {
			case ClauseUntil:
				if until != nil {
					c.ruleErrorf(r, cl.Pos, "until is given twice (Flink: only one until condition can be applied)")
				}
				until = cl
			case ClauseGap:
				if gap != nil {
					c.ruleErrorf(r, cl.Pos, "within ... of previous is given twice")
				}
				gap = cl
			}
		}
		g, ok := e.(*GroupNode)
		if !ok {
			name := e.(*StageNode).Name.Value
			if gap != nil {
				c.gapWarnings(h, gap, name, i == 0 && !inGroup)
			}
			if q := h.Quant; q.AllowCombinations.Set && (q.Kind == QuantOneOrMore || q.Kind == QuantTimesOrMore) && !h.Contiguity.IsNot() {
				c.warnf(q.AllowCombinations.Pos, "stage %s takes every combination of the events it matches, with no largest count: a key's partial matches, and the matches one event completes, double with each event it may take (20 make a million); give the loop a largest count (times N..M), or cap each key's partial matches (-max-partial-matches)", name)
			}
			if h.Quant.Gap != nil && loopGapReach(h.Quant, i == 0 && !inGroup) == 0 {
				count := Quantifier{Kind: h.Quant.Kind, Min: h.Quant.Min, Max: h.Quant.Max}.String()
				why := "no event comes before the first stage"
				if i > 0 || inGroup {
					why = count + " counts no event before its last"
				}
				c.warnf(h.Quant.Gap.Pos, "the loop gap does nothing on %s: Flink bounds with it only the time to the loop's first events, not to its last, and %s (to bound the time between every two events of the loop, compare ts with %s.ts in its condition)",
					name, why, exprStage(name))
			}
			continue
		}
		if h.Contiguity.IsNot() {
			c.ruleErrorf(r, ep, "a group cannot be negated (Flink has no %s for a group)", h.Contiguity)
		}
		for _, cl := range h.Clauses {
			if cl.Kind == ClauseWhere || cl.Kind == ClauseOr {
				c.ruleErrorf(r, cl.Pos, "a group has no condition of its own; put %s on its stages (Flink: a group pattern does not support %s)", cl.Kind, cl.Kind)
			}
		}
		if h.Quant.Greedy.Set {
			c.ruleErrorf(r, h.Quant.Greedy.Pos, "greedy does not apply to a group (Flink: option not applicable to group pattern)")
		}
		c.checkElems(r, g.Elems, g.Pos, true)
	}
}

// gapWarnings warns of a within ... of previous that Flink accepts and
// ignores: on a stage with a counting quantifier (its NFACompiler keeps the
// PREVIOUS_AND_CURRENT window only of a stage without Times, and oneOrMore
// has Times too), and on the first stage of a pattern, before which no event
// was matched.
func (c *ruleChecker) gapWarnings(h *elemHead, gap *Clause, name string, first bool) {
	q := h.Quant
	between := fmt.Sprintf("to bound the time between every two events of the loop, compare ts with %s.ts in its condition", exprStage(name))
	switch {
	case q.Kind != QuantOne && q.Gap != nil:
		count := Quantifier{Kind: q.Kind, Min: q.Min, Max: q.Max}.String()
		c.warnf(gap.Pos, "within ... of previous does nothing on a stage with %s: Flink keeps it only on a stage that takes one event (the loop gap, %s within %s, bounds %s; %s)",
			count, count, q.Gap, reachText(loopGapReach(q, first)), between)
	case q.Kind == QuantTimes && q.Min <= 1 && q.Max == 1:
		c.warnf(gap.Pos, "within ... of previous does nothing on a stage with %s: Flink keeps it only on a stage that takes one event (leave out %s: the stage takes one event without it)",
			Quantifier{Kind: q.Kind, Min: q.Min, Max: q.Max}, Quantifier{Kind: q.Kind, Min: q.Min, Max: q.Max})
	case q.Kind != QuantOne:
		count := Quantifier{Kind: q.Kind, Min: q.Min, Max: q.Max}.String()
		c.warnf(gap.Pos, "within ... of previous does nothing on a stage with %s: Flink keeps it only on a stage that takes one event (a loop gap, %s within %s, would bound %s; %s)",
			count, count, gap.Dur, reachText(loopGapReach(q, first)), between)
	case first:
		c.warnf(gap.Pos, "within ... of previous does nothing on the first stage: no event is matched before it (the pattern window, within d on its own line, bounds the whole match)")
	}
}

// checkQuant checks the counts of a quantifier, as Flink's times and
// timesOrMore do.
func (c *ruleChecker) checkQuant(r *RuleDecl, q *Quantifier) {
	switch q.Kind {
	case QuantTimes:
		switch {
		case q.Min == q.Max && q.Min <= 0:
			c.ruleErrorf(r, q.Pos, "times needs a positive number of events, got %d", q.Min)
		case q.Min < 0:
			c.ruleErrorf(r, q.Pos, "times %d..%d: the least number of events cannot be negative", q.Min, q.Max)
		case q.Max < q.Min || q.Max < 1:
			c.ruleErrorf(r, q.Pos, "times %d..%d: the largest number of events must be at least the least number and at least 1", q.Min, q.Max)
		}
	case QuantTimesOrMore:
		if q.Min <= 0 {
			c.ruleErrorf(r, q.Pos, "timesOrMore needs a positive number of events, got %d", q.Min)
		}
	}
}

func elemPos(e PatternElem) Pos {
	switch e := e.(type) {
	case *StageNode:
		return e.Pos
	case *GroupNode:
		return e.Pos
	}
	return NoPos
}

// maxUnrolled bounds the size of a compiled pattern. The automaton has a
// state (or two) for every event a quantifier counts (times 50 is fifty
// copies of its stage, and a quantified group multiplies the stages inside
// it), and building it takes time quadratic in that number: times 1000
// compiles in a fraction of a second, times 10000 in seconds, nested
// quantified groups in an exponential time.
const maxUnrolled = 1000

// largestQuant returns the position of the counting quantifier that
// multiplies its stage (or group) the most, where the error of a pattern
// too large points; def when there is none.
func largestQuant(es []PatternElem, def Pos) Pos {
	best, bestN := def, 1
	var walk func(es []PatternElem)
	walk = func(es []PatternElem) {
		for _, e := range es {
			q := e.head().Quant
			n := 1
			switch q.Kind {
			case QuantTimes:
				n = q.Max
			case QuantTimesOrMore:
				n = q.Min + 1
			}
			if n > bestN && q.Pos.IsValid() {
				best, bestN = q.Pos, n
			}
			if g, ok := e.(*GroupNode); ok {
				walk(g.Elems)
			}
		}
	}
	walk(es)
	return best
}

// unrolledSize estimates the number of stage copies the automaton of es
// has (saturating at maxUnrolled+1).
func unrolledSize(es []PatternElem) int {
	total := 0
	for _, e := range es {
		h := e.head()
		n := 1
		if g, ok := e.(*GroupNode); ok {
			n = unrolledSize(g.Elems)
		}
		// Factors are clamped, so that n stays below (maxUnrolled+1)^2.
		switch q := h.Quant; q.Kind {
		case QuantOneOrMore:
			n *= 2
		case QuantTimes:
			n *= min(max(q.Max, 1), maxUnrolled+1)
		case QuantTimesOrMore:
			n *= min(max(q.Min, 0), maxUnrolled) + 1
		}
		total += n
		if total > maxUnrolled {
			return maxUnrolled + 1
		}
	}
	return total
}

// loopGapReach is the number of a loop's first events whose time since the
// event before them its loop gap bounds. Flink's NFACompiler gives the gap
// only to the states it renames with a ":n" suffix: not to the state the
// loop goes on in (the last counted event of times n, the events after the
// n-th of timesOrMore n, all but the first of oneOrMore), nor to the first
// state of a pattern, which no event precedes. times 0..m is times 1..m
// optional, as Flink's times(0, m) makes it.
func loopGapReach(q Quantifier, first bool) int {
	n := 0
	switch q.Kind {
	case QuantOneOrMore:
		n = 1
	case QuantTimesOrMore:
		n = q.Min
	case QuantTimes:
		n = max(q.Min, 1)
		if n == q.Max {
			n--
		}
	}
	if first && n > 0 {
		n--
	}
	return n
}

// reachText says what a loop gap that bounds a loop's first n events
// bounds.
func reachText(n int) string {
	switch n {
	case 0:
		return "nothing here"
	case 1:
		return "only the time to its first event"
	}
	return fmt.Sprintf("only the time to each of its first %d events", n)
}

// exprStage writes a stage's last event as an expression reads it: the
// bare name when it is an identifier, else stage("...")[-1].
func exprStage(name string) string {
	if isIdent(name) {
		return name
	}
	return fmt.Sprintf("stage(%q)[-1]", name)
}
