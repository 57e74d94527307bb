package rules

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/nfa"
	"github.com/cepheus-cep/cepheus/rules/internal/cond"
)

// Compile checks a parsed file and compiles its rules (to NFAs, through the
// nfa builder) and its tests. f must come from [ParseFile] without errors.
// The error is an [ErrorList] of every problem found, each at its place in
// the file: checker errors, expression errors (remapped from the
// expression into the file), and the rejections of the nfa builder (Flink's
// Pattern API), placed at the stage they name.
func Compile(f *File) (*Ruleset, error) { return CompileLayout(f, nil) }

// CompileLayout is [Compile] with the schema placed over a slot layout:
// the fields of layout keep their slots (typed as this file declares
// them, if it does), this file's other fields come after. A running
// engine compiles a new version over the layout of the events it holds,
// so that they need no remapping (nil: the file's own schema).
func CompileLayout(f *File, layout *event.Schema) (*Ruleset, error) {
	return compileLayout(f, layout, false)
}

// compileLayout is CompileLayout; with testsLenient the errors of the
// file's tests are warnings and its tests are left out (LoadRules).
func compileLayout(f *File, layout *event.Schema, testsLenient bool) (*Ruleset, error) {
	if f.src == nil {
		return nil, errors.New("rules: Compile needs a File from ParseFile")
	}
	var errs ErrorList
	c := &ruleChecker{f: f, errs: &errs, layout: layout}
	c.check()
	rs := &Ruleset{
		Name:      f.Name.Value,
		Schema:    c.schema,
		Declared:  c.schemaDecl != nil,
		TimeSlot:  c.timeSlot,
		timeSlots: c.timeSlots,
		Lookups:   c.compileLookups(),
	}
	rs.Aggregates = c.compileAggregates()
	for _, name := range c.inputs {
		if slot, ok := c.schema.Slot(name); ok {
			rs.IDSlots = append(rs.IDSlots, slot)
		}
	}
	if c.timeDecl != nil {
		rs.TimeField = c.timeDecl.Field.Value
	}
	for _, rd := range c.rules {
		rc := &ruleCompiler{c: c, rd: rd}
		r := rc.compile(c.ruleHeader(rd))
		reads := ruleFields(rd, c.lookupNames())
		for _, d := range c.aggregates {
			if slices.Contains(reads, d.Name.Value) {
				r.Aggregates = append(r.Aggregates, d.Name.Value)
			}
		}
		rs.Rules = append(rs.Rules, r)
	}
	if testsLenient {
		var testErrs ErrorList
		c.errs = &testErrs
		c.compileTests(rs)
		c.errs = &errs
		for _, e := range testErrs {
			c.warns = append(c.warns, &Error{Pos: e.Pos, Msg: "warning: " + e.Msg + " (a test of the file: cepheus test checks it; the rules run without it)", line: e.line})
		}
		rs.Tests = nil
	} else {
		c.compileTests(rs)
	}
	p := &printer{}
	p.file(f)
	rs.Source = p.b.String()
	rs.Hash = hashOf(rs.Source)
	if err := errs.finish(tooManyErrors).Err(); err != nil {
		return nil, err
	}
	rs.Warnings = c.warns.finish(tooManyWarnings)
	return rs, nil
}

func hashOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// ruleHeader is the canonical source, without comments, of what rule rd
// depends on besides its own text: the event time field and the declared
// types of the fields it reads. So a field added to the schema, or one
// the rule does not read changing type, leaves the rule's hash alone
// (and a running engine keeps its partial matches across such a deploy).
func (c *ruleChecker) ruleHeader(rd *RuleDecl) string {
	p := &printer{}
	if c.timeDecl != nil {
		p.eventTime(c.timeDecl)
	}
	if c.schemaDecl != nil {
		reads := ruleFields(rd, c.lookupNames())
		p.b.WriteString("schema {\n")
		for _, f := range c.schemaDecl.Fields {
			if slices.Contains(reads, f.Name.Value) || c.timeDecl != nil && f.Name.Value == c.timeDecl.Field.Value {
				p.b.WriteString("  " + f.Name.String() + ": " + f.Type.String() + "\n")
			}
		}
		p.b.WriteString("}\n")
	}
	// The lookups the rule reads: their key, types, defaults and policy
	// decide its matches.
	reads := ruleFields(rd, c.lookupNames())
	for _, d := range c.lookups {
		prefix := d.Name.Value + "."
		if slices.ContainsFunc(reads, func(f string) bool { return strings.HasPrefix(f, prefix) }) {
			p.lookup(d)
		}
	}
	for _, d := range c.aggregates {
		if slices.Contains(reads, d.Name.Value) {
			p.aggregate(d)
		}
	}
	return p.b.String()
}

// ruleCompiler compiles one rule.
type ruleCompiler struct {
	c      *ruleChecker
	rd     *RuleDecl
	env    *cond.Env
	conds  map[*Clause]*cond.BoolExpr
	failed bool // an expression did not compile
}

func (rc *ruleCompiler) compile(header string) *Rule {
	rd := rc.rd
	p := &printer{}
	p.rule(rd)
	r := &Rule{
		Name:     rd.Name.Value,
		Severity: SeverityMedium,
		Source:   p.b.String(),
	}
	r.Hash = hashOf(header + r.Source)
	r.Reads = ruleFields(rd, rc.c.lookupNames())
	if rd.Description != nil {
		r.Description = rd.Description.Value
	}
	if rd.Severity != nil {
		if s, ok := parseSeverity(rd.Severity.Name.Value); ok {
			r.Severity = s
		}
	}
	if rd.Key != nil {
		for _, k := range rd.Key.Fields {
			slot, ok := rc.c.schema.Slot(k.Value)
			if !ok {
				continue // reported by the checker
			}
			r.KeyFields = append(r.KeyFields, k.Value)
			r.KeySlots = append(r.KeySlots, slot)
		}
	}
	leaves := leafStages(rd)
	names := make([]string, len(leaves))
	for i, s := range leaves {
		names[i] = s.Name.Value
	}
	rc.env = &cond.Env{Schema: rc.c.schema, Declared: rc.c.schemaDecl != nil, Stages: names, Lookups: rc.c.lookupNames()}
	rc.compileConditions()
	defer rc.stageRefWarnings() // after the emits: their expressions too
	r.Emits = rc.compileEmits(rd.Emit)
	if t := rd.Timeout; t != nil {
		r.Timeout = &TimeoutOutput{Only: t.Only != nil, Severity: r.Severity, Emits: rc.compileEmits(t.Emit)}
		if t.Severity != nil {
			if s, ok := parseSeverity(t.Severity.Name.Value); ok {
				r.Timeout.Severity = s
			}
		}
		if t.Only != nil && rd.Emit != nil {
			rc.c.warnf(rd.Emit.Pos, "the emit block of rule %s is never used: its timeout block says only, so its completed matches raise no alert (the timeout block's emit gives the alerts' fields)", rd.Name)
		}
	}
	if rc.c.bad[rd] || rd.Pattern == nil {
		return r
	}
	for _, cl := range clausesOf(rd) {
		if b := rc.conds[cl]; b != nil {
			r.conds = append(r.conds, b)
		}
	}
	last := rc.build(rd.Pattern.Elems)
	if w := rd.Pattern.Within; w != nil {
		last.Within(w.Dur.Value)
	}
	if sk := rd.Skip; sk != nil {
		last.Skip(skipStrategy(sk))
	}
	var opts []nfa.Option
	if rd.Timeout != nil {
		opts = append(opts, nfa.WithTimeouts())
	}
	n, err := nfa.Compile(last, opts...)
	if err != nil {
		rc.patternErrors(err)
		return r
	}
	if rd.Timeout != nil && !n.CanTimeOut() {
		rc.c.errorf(rd.Timeout.Pos, "rule %s has a timeout block but no window, so none of its partial matches times out: add a window (within d) to the pattern", rd.Name)
		return r
	}
	if rd.Timeout != nil && !n.PartialMatchesTimeOut() {
		rc.c.warnf(rd.Timeout.Pos, "the timeout block of rule %s never raises an alert: no partial match of its pattern waits where a window can end it (a match of one event completes at once, the wait for a trailing notFollowedBy ends as a match, and a loop gap on the first stage bounds nothing)", rd.Name)
	}
	if es := rd.Pattern.Elems; len(es) > 0 {
		if st, ok := es[len(es)-1].(*StageNode); ok && st.Quant.Greedy.Set {
			// Flink's compiler makes greedy a condition on the edges into
			// the next stage: after the last one there is none.
			rc.c.warnf(st.Quant.Greedy.Pos, "greedy on stage %s changes nothing: it is the pattern's last stage, and greedy only keeps a loop from ending at an event the next stage also accepts (the loop gives a match at each count it reaches, greedy or not)", st.Name)
		}
	}
	if stage, ok := n.WaitsForever(); ok {
		rc.c.warnf(rd.Pattern.Pos, "rule %s has no window: a partial match waiting at stage %s is kept until it completes, for ever if it never does (each key's state grows with the matches it begins and never ends); add a window to the pattern (within d)", rd.Name, stage)
	}
	if got := n.Stages(); !slices.Equal(got, names) {
		// The front end computes the stage order (for the conditions'
		// environment) the way nfa does; a difference is a bug.
		rc.c.errorf(rd.Name.Pos, "internal error: stage order %q, nfa says %q", names, got)
		return r
	}
	r.Pattern, r.NFA = last, n
	r.decl, r.env, r.clauseConds = rd, rc.env, rc.conds
	return r
}

// compileEmits compiles the fields of emit block e (nil: none).
func (rc *ruleCompiler) compileEmits(e *EmitBlock) []Emit {
	if e == nil {
		return nil
	}
	var out []Emit
	for _, f := range e.Fields {
		v, err := cond.CompileValueExpr(f.Expr.raw, rc.env)
		if err != nil {
			rc.exprError(f.Expr, err)
			continue
		}
		out = append(out, Emit{Name: f.Name.Value, Expr: &ValueExpr{v}})
	}
	return out
}

// clausesOf returns the clauses of every element of r, in pattern order.
func clausesOf(r *RuleDecl) []*Clause {
	var out []*Clause
	walkElems(r.Pattern.Elems, func(e PatternElem) { out = append(out, e.head().Clauses...) })
	return out
}

// compileConditions compiles every where, or and until expression.
func (rc *ruleCompiler) compileConditions() {
	rc.conds = map[*Clause]*cond.BoolExpr{}
	if rc.rd.Pattern == nil {
		return
	}
	for _, cl := range clausesOf(rc.rd) {
		if cl.Expr == nil {
			continue
		}
		b, err := cond.CompileBoolExpr(cl.Expr.raw, rc.env)
		if err != nil {
			rc.exprError(cl.Expr, err)
			continue
		}
		rc.conds[cl] = b
	}
}

// cond returns the compiled condition of cl (true when it failed to
// compile: the rule is then reported and not used).
func (rc *ruleCompiler) cond(cl *Clause) nfa.Condition {
	if b := rc.conds[cl]; b != nil {
		return b.Condition()
	}
	return nfa.True
}

// exprError reports an error of the expression x at its place in the
// file: the expression's position plus the byte offset the expression
// compiler gives (its errors are *cond.Error, with a message of one line
// that does not repeat the position).
func (rc *ruleCompiler) exprError(x *Expr, err error) {
	rc.failed = true
	var ce *cond.Error
	if !errors.As(err, &ce) {
		rc.c.errorf(x.Pos, "internal error: %v", err)
		return
	}
	off := min(max(ce.Offset, 0), len(x.raw))
	rc.c.errorf(x.Pos+Pos(off), "%s", exprHint(ce.Msg, x.raw[:off], x.raw[off:]))
}

// inParen finds "in (" (a list written in parentheses).
var inParen = regexp.MustCompile(`\sin\s*\(`)

// bracketed is the list of "in (a, b)", src from its "(", written in
// brackets: in ["a", "b"]; "in [a, b]" when its ")" is not on the line.
func bracketed(src string) string {
	depth := 0
	var quote rune // in a string literal: its quote
	escaped := false
	for k, r := range src {
		switch {
		case quote != 0:
			switch {
			case escaped:
				escaped = false
			case r == '\\' && quote != '`':
				escaped = true
			case r == quote:
				quote = 0
			}
		case r == '"' || r == '\'' || r == '`':
			quote = r
		case r == '(' || r == '[' || r == '{':
			depth++
		case r == ')' || r == ']' || r == '}':
			if depth--; depth == 0 {
				return "in [" + src[1:k] + "]"
			}
		}
	}
	return "in [a, b]"
}

// durationCall is expr's duration("15m") at the start of a source.
var durationCall = regexp.MustCompile(`^duration\(\s*["']([^"']+)["']\s*\)`)

func exprHint(msg, before, rest string) string {
	// A duration written as in the rule's own lines (15m), or through
	// expr's duration(): in an expression it is a number of milliseconds.
	if lit, ok := strings.CutPrefix(msg, "bad number syntax: "); ok {
		if d, err := parseDurationText(strings.Trim(lit, `"`)); err == nil && d > 0 {
			return fmt.Sprintf("%s (a duration in an expression is a number of milliseconds: write %d for %s)", msg, d.Milliseconds(), formatDuration(d))
		}
		return msg
	}
	for _, m := range []string{"or", "where", "until"} {
		if strings.HasSuffix(msg, " has no method "+m) {
			// Flink's .or(...) chained on a condition.
			return fmt.Sprintf("%s (Flink's .%s(...) is a clause of its own here: %s CONDITION, on a line of the stage)", msg, m, m)
		}
	}
	if strings.HasPrefix(msg, "duration() is not allowed") {
		if m := durationCall.FindStringSubmatch(rest); m != nil {
			if d, err := parseDurationText(m[1]); err == nil && d > 0 {
				return fmt.Sprintf("%s: write %d for %s", msg, d.Milliseconds(), formatDuration(d))
			}
			if d, err := time.ParseDuration(m[1]); err == nil && d > 0 {
				return fmt.Sprintf("%s: write %d for %s", msg, d.Milliseconds(), formatDuration(d))
			}
		}
		return msg
	}
	if c, ok := strings.CutPrefix(msg, "unrecognized character: U+"); ok {
		// Typographic quotes, as a word processor or a chat pastes them.
		for _, q := range []string{"201C", "201D", "201E", "00AB", "00BB", "2018", "2019", "201A"} {
			if strings.HasPrefix(c, q) {
				return msg + ` (a string goes in straight quotes, " or ')`
			}
		}
		return msg
	}
	tok, ok := strings.CutPrefix(msg, "unexpected token ")
	if !ok {
		return msg
	}
	var hint string
	switch tok {
	case "EOF":
		// The span ended, not the file: say where and why.
		hint = "the expression ends here, at the end of its line or before a '#' comment, and is not complete; it goes on past its line only inside brackets"
	case `Operator("=")`:
		switch {
		case strings.HasPrefix(rest, "=>"):
			hint = "did you mean >=?"
		case strings.HasPrefix(rest, "=<"):
			hint = "did you mean <=?"
		default:
			hint = "compare with =="
		}
	case `Operator("&")`:
		hint = "did you mean &&?"
	case `Operator(">")`:
		if strings.HasSuffix(strings.TrimRight(before, " "), "-") {
			// t -> t.getType() == "auth", a Java lambda.
			hint = "a condition is no Java lambda: it reads the event's fields by name (type == \"auth\", not t -> t.getType().equals(\"auth\"))"
		}
	case `Operator("#")`:
		// A '#' outside brackets ends the span (a comment), so expr sees
		// one only inside brackets, most often a comment written there.
		hint = "inside brackets '#' is expr's closure element, not a comment: a comment there starts with //"
	case `Operator(",")`:
		if m := inParen.FindAllStringIndex(before, -1); m != nil {
			hint = "a list is written in brackets: " + bracketed(before[m[len(m)-1][1]-1:]+rest)
		} else if strings.TrimSpace(strings.TrimPrefix(rest, ",")) == "" {
			// x: b.amount, as in a JSON object.
			hint = "the expression ends at the end of its line: emit fields and clauses are one per line, with no comma between them"
		}
	case `Identifier("AND")`, `Identifier("OR")`, `Identifier("NOT")`:
		hint = "did you mean " + strings.ToLower(tok[len(`Identifier("`):len(tok)-2]) + "?"
	case `Identifier("where")`, `Identifier("until")`:
		hint = "a condition runs to the end of the line: put the next clause on a line of its own"
	case `Identifier("within")`:
		hint = "a condition runs to the end of the line: a loop gap follows the count (oneOrMore within d); within d of previous and the pattern window go on lines of their own"
	default:
		w, ok := strings.CutPrefix(tok, `Identifier("`)
		if ok && slices.Contains(quantWords, strings.TrimSuffix(w, `")`)) {
			hint = "quantifiers come right after the stage name, before where"
		}
	}
	if hint == "" {
		return msg
	}
	return msg + " (" + hint + ")"
}

// build builds the elements with the nfa builder and returns the last
// element of the chain.
func (rc *ruleCompiler) build(es []PatternElem) *nfa.Pattern {
	var p *nfa.Pattern
	for _, e := range es {
		p = rc.elem(p, e)
	}
	return p
}

// elem appends e to prev (nil for the first element) and applies its
// quantifier and clauses.
func (rc *ruleCompiler) elem(prev *nfa.Pattern, e PatternElem) *nfa.Pattern {
	h := e.head()
	var p *nfa.Pattern
	switch e := e.(type) {
	case *StageNode:
		name := e.Name.Value
		switch {
		case prev == nil:
			p = nfa.Begin(name)
		case h.Contiguity == ContNext:
			p = prev.Next(name)
		case h.Contiguity == ContFollowedByAny:
			p = prev.FollowedByAny(name)
		case h.Contiguity == ContNotNext:
			p = prev.NotNext(name)
		case h.Contiguity == ContNotFollowedBy:
			p = prev.NotFollowedBy(name)
		default:
			p = prev.FollowedBy(name)
		}
	case *GroupNode:
		inner := rc.build(e.Elems)
		switch {
		case prev == nil:
			p = nfa.BeginGroup(inner)
		case h.Contiguity == ContNext:
			p = prev.NextGroup(inner)
		case h.Contiguity == ContFollowedByAny:
			p = prev.FollowedByAnyGroup(inner)
		default:
			p = prev.FollowedByGroup(inner)
		}
	}
	applyQuantifier(p, &h.Quant)
	for _, cl := range h.Clauses {
		switch cl.Kind {
		case ClauseWhere:
			p.Where(rc.cond(cl))
		case ClauseOr:
			p.Or(rc.cond(cl))
		case ClauseUntil:
			p.Until(rc.cond(cl))
		case ClauseGap:
			p.WithinGap(cl.Dur.Value)
		}
	}
	return p
}

// applyQuantifier applies q in its canonical order: count (with the loop
// gap), consecutive or allowCombinations, optional, greedy. times 0..n is
// Flink's times(0, n), which makes the stage optional itself.
func applyQuantifier(p *nfa.Pattern, q *Quantifier) {
	var gap []time.Duration
	if q.Gap != nil {
		gap = append(gap, q.Gap.Value)
	}
	switch q.Kind {
	case QuantOneOrMore:
		p.OneOrMore(gap...)
	case QuantTimesOrMore:
		p.TimesOrMore(q.Min, gap...)
	case QuantTimes:
		if q.Min == q.Max {
			p.Times(q.Min, gap...)
		} else {
			p.TimesRange(q.Min, q.Max, gap...)
		}
	}
	if q.Consecutive.Set {
		p.Consecutive()
	}
	if q.AllowCombinations.Set {
		p.AllowCombinations()
	}
	if q.Optional.Set {
		p.Optional()
	}
	if q.Greedy.Set {
		p.Greedy()
	}
}

func skipStrategy(sk *SkipItem) nfa.SkipStrategy {
	var s nfa.SkipStrategy
	switch sk.Kind {
	case SkipToNext:
		s = nfa.SkipToNextEvent()
	case SkipPastLastEvent:
		s = nfa.SkipPastLast()
	case SkipToFirst:
		s = nfa.SkipToFirstOf(sk.Stage.Value)
	case SkipToLast:
		s = nfa.SkipToLastOf(sk.Stage.Value)
	}
	if sk.OrFail.Set {
		s = s.OrThrow()
	}
	return s
}

// patternErrors reports the errors of nfa.Compile, each at the stage it
// names. Errors of a group (the builder names every group GroupPattern)
// are placed at the first top-level element whose addition to the pattern
// made them appear.
func (rc *ruleCompiler) patternErrors(err error) {
	var groupAt func(msg string) Pos
	for _, e := range flattenErrors(err) {
		var pe *nfa.PatternError
		if !errors.As(e, &pe) {
			rc.c.errorf(rc.rd.Name.Pos, "%v", e)
			continue
		}
		pos := rc.rd.Pattern.Pos
		hint := flinkHints[pe.Msg]
		switch {
		case pe.Stage == "":
			if rc.rd.Skip != nil && strings.Contains(pe.Msg, "skip") {
				pos = rc.rd.Skip.Pos
			}
		case pe.Stage == "GroupPattern":
			if groupAt == nil {
				groupAt = rc.groupErrorPositions()
			}
			pos = groupAt(pe.Msg)
			// An until on a group that does not loop: the fault is the
			// until.
			if strings.Contains(pe.Msg, "until condition is only applicable") {
				if p := clausePos(rc.rd.Pattern.Elems, pos, ClauseUntil); p.IsValid() {
					pos = p
				}
			}
		default:
			leaves := leafStages(rc.rd)
			for i, s := range leaves {
				if s.Name.Value != pe.Stage {
					continue
				}
				pos = s.Pos
				// A NOT stage loops never: the hint to give it a
				// quantifier would lead to the next error.
				if s.Contiguity.IsNot() && notStageHints[pe.Msg] {
					hint = " (a notNext or notFollowedBy stage takes no quantifier, nor what applies to a loop: leave it out)"
				}
				// The builder reports a NOT stage after an optional one on
				// the optional stage; the fault is the NOT stage.
				if strings.Contains(pe.Msg, "cannot follow an optional") && i+1 < len(leaves) {
					pos = leaves[i+1].Pos
				}
				// A gap longer than the pattern window: the fault is the
				// gap (within ... of previous).
				if strings.Contains(pe.Msg, "window length between the previous and current event") {
					if p := clausePos(rc.rd.Pattern.Elems, s.Pos, ClauseGap); p.IsValid() {
						pos = p
					}
				}
				// An until on a stage that does not loop: the fault is
				// the until.
				if strings.Contains(pe.Msg, "until condition is only applicable") {
					if p := clausePos(rc.rd.Pattern.Elems, s.Pos, ClauseUntil); p.IsValid() {
						pos = p
					}
				}
				break
			}
		}
		rc.c.errorf(pos, "%s%s", pe.Msg, hint)
	}
}

// notStageHints are the messages of flinkHints whose fix, on a NOT stage,
// is not a quantifier but leaving the option out.
var notStageHints = map[string]bool{
	"consecutive is only applicable to looping or times states":   true,
	"combinations are only applicable to looping or times states": true,
	"the until condition is only applicable to looping states":    true,
}

// flinkHints are the fixes of Flink's messages that name the fault only.
var flinkHints = map[string]string{
	"option not applicable to singleton quantifier":               " (greedy applies to a stage that loops: give it oneOrMore, timesOrMore or times)",
	"consecutive is only applicable to looping or times states":   " (give the stage oneOrMore, timesOrMore or times)",
	"combinations are only applicable to looping or times states": " (give the stage oneOrMore, timesOrMore or times)",
	"you can apply either combinations or consecutive, not both": " (consecutive: the loop's events come one right after another; " +
		"allowCombinations: every combination of them; keep one)",
	"the until condition is only applicable to looping states": " (until ends a loop: give the stage oneOrMore or timesOrMore, or drop the until)",
	"option not applicable to NOT pattern":                     " (a notNext or notFollowedBy stage takes no quantifier: it matches no event)",
	"option not applicable to FollowedByAny pattern":           " (greedy does not apply to a loop with allowCombinations: keep one)",
	"optional pattern cannot be preceded by greedy pattern":    " (the stage before is a greedy loop: drop greedy there, or optional here)",
	"optional already applied":                                 " (times 0..n makes the stage optional already: leave out optional)",
}

// clausePos returns the position of the last clause of kind k of the
// element (stage or group, inside groups too) at at; NoPos when it has
// none.
func clausePos(es []PatternElem, at Pos, k ClauseKind) Pos {
	pos := NoPos
	walkElems(es, func(e PatternElem) {
		if elemPos(e) == at {
			for _, c := range e.head().Clauses {
				if c.Kind == k {
					pos = c.Pos
				}
			}
		}
	})
	return pos
}

// groupErrorPositions builds the pattern one top-level element at a time
// and returns a function that gives, for the message of a builder error,
// the position of the element with which it first appeared.
func (rc *ruleCompiler) groupErrorPositions() func(string) Pos {
	first := map[string]Pos{}
	es := rc.rd.Pattern.Elems
	var p *nfa.Pattern
	for _, e := range es {
		p = rc.elem(p, e)
		_, err := nfa.Compile(p)
		for _, e2 := range flattenErrors(err) {
			var pe *nfa.PatternError
			if errors.As(e2, &pe) && pe.Stage == "GroupPattern" {
				if _, seen := first[pe.Msg]; !seen {
					first[pe.Msg] = elemPos(e)
				}
			}
		}
	}
	return func(msg string) Pos {
		if p, ok := first[msg]; ok {
			return p
		}
		return rc.rd.Pattern.Pos
	}
}

// flattenErrors returns the errors joined in err (err itself when it is
// not a join).
func flattenErrors(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, flattenErrors(e)...)
		}
		return out
	}
	return []error{err}
}
