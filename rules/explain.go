package rules

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/rules/internal/cond"
)

// Explain says why the events of stages (by stage index of
// r.NFA.Stages(), as a test's expected match gives them) are not a match
// of r: the first fault its checks find, in the order a reader looks for
// one. Events are named by their Seq (a test's event numbers). stream is
// the events of the match's key in the order the rule reads them (by
// time, ties in arrival order), which the contiguity and negation checks
// read. The checks, each of which only reports what the NFA's semantics
// make certain:
//
//   - the events are of one key, each taken once, in the order the rule
//     reads them (within each stage when the pattern has groups);
//   - each stage (outside groups) holds the number of events its
//     quantifier allows, and a negated stage none;
//   - the first and last events fit the pattern's window;
//   - each event passes its stage's where and or clauses, read with the
//     events of the stages before (and of its own stage before it), and a
//     loop's later events do not pass its until;
//   - a stage that follows with next (strict) takes the event right after
//     the stage before it, one that follows with followedBy the first event
//     that passes its condition; a loop takes each event between its
//     events that passes its condition (none may come between when it is
//     consecutive; with allowCombinations any may); no event passes a
//     notNext stage right after the stage before it, or a notFollowedBy
//     stage between the stages around it (or, at the pattern's end,
//     within its window).
//
// A timed-out partial match (timedOut) is checked for keys, order,
// negated stages and conditions only. Explain returns "" when no check
// finds a fault: what dropped the match is then outside them (an
// after-match skip strategy, a gap (within d of previous), a stage in a
// group). named
// are the events of stream outside the match that the reason names.
func (r *Rule) Explain(stages [][]*event.Event, stream []*event.Event, timedOut bool) (why string, named []*event.Event) {
	if r.decl == nil || r.decl.Pattern == nil {
		return "", nil
	}
	x := &explainer{r: r, stages: stages, stream: stream, pos: make(map[*event.Event]int, len(stream))}
	x.leaves = leavesOf(r.decl.Pattern.Elems, false, nil)
	if len(x.leaves) != len(stages) {
		return "", nil
	}
	for i, ev := range stream {
		x.pos[ev] = i
	}
	for _, evs := range stages {
		x.all = append(x.all, evs...)
	}
	if len(x.all) == 0 {
		return "", nil
	}
	checks := []func() string{x.keys, x.counts, x.order, x.windows, x.conditions, x.contiguity}
	if timedOut {
		checks = []func() string{x.keys, x.negated, x.order, x.conditions}
	}
	for _, check := range checks {
		if why := check(); why != "" {
			return why, x.named
		}
	}
	return "", nil
}

// leaf is a stage of a pattern, and whether it is inside a group.
type leaf struct {
	node    *StageNode
	grouped bool
}

// leavesOf appends the stages of es, in nfa.Stages() order, to out.
func leavesOf(es []PatternElem, grouped bool, out []leaf) []leaf {
	for _, e := range es {
		switch e := e.(type) {
		case *StageNode:
			out = append(out, leaf{e, grouped})
		case *GroupNode:
			out = leavesOf(e.Elems, true, out)
		}
	}
	return out
}

type explainer struct {
	r      *Rule
	leaves []leaf
	stages [][]*event.Event
	all    []*event.Event // the events of stages, in stage order
	stream []*event.Event
	pos    map[*event.Event]int // place in stream
	named  []*event.Event       // the events outside the match a reason names
}

// naming records that the reason names ev and returns its number.
func (x *explainer) naming(ev *event.Event) uint64 {
	x.named = append(x.named, ev)
	return ev.Seq
}

func (x *explainer) name(i int) string { return quoteName(x.leaves[i].node.Name.Value) }

func (x *explainer) grouped() bool {
	for _, l := range x.leaves {
		if l.grouped {
			return true
		}
	}
	return false
}

// keys checks that the events are of one key.
func (x *explainer) keys() string {
	first := x.all[0]
	k := x.r.Key(first)
	for _, ev := range x.all[1:] {
		if x.r.Key(ev) != k {
			return fmt.Sprintf("events %d and %d are of different keys (%s: %s and %s): a match holds the events of one key",
				first.Seq, ev.Seq, strings.Join(x.r.KeyFields, ", "), keyText(x.r, first), keyText(x.r, ev))
		}
	}
	return ""
}

func keyText(r *Rule, ev *event.Event) string {
	vs := r.KeyValues(ev)
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.String()
	}
	return strings.Join(out, ", ")
}

// negated checks that no negated stage holds an event.
func (x *explainer) negated() string {
	for i, l := range x.leaves {
		if l.node.Contiguity.IsNot() && len(x.stages[i]) > 0 {
			return fmt.Sprintf("stage %s is a %s stage: a match holds no event of it (an event that passes it ends the partial match)", x.name(i), l.node.Contiguity)
		}
	}
	return ""
}

// counts checks the negated stages and the number of events each stage
// outside a group holds.
func (x *explainer) counts() string {
	if why := x.negated(); why != "" {
		return why
	}
	for i, l := range x.leaves {
		if l.grouped || l.node.Contiguity.IsNot() {
			continue
		}
		lo, hi, what := quantCounts(&l.node.Quant)
		if n := len(x.stages[i]); n < lo || n > hi {
			return fmt.Sprintf("stage %s takes %s; the expected match gives it %d", x.name(i), what, n)
		}
	}
	return ""
}

// quantCounts returns the fewest and most events q lets a stage take, and
// their description.
func quantCounts(q *Quantifier) (lo, hi int, what string) {
	switch q.Kind {
	case QuantOneOrMore:
		lo, hi, what = 1, math.MaxInt, "one event or more (oneOrMore)"
	case QuantTimesOrMore:
		lo, hi, what = q.Min, math.MaxInt, fmt.Sprintf("%d events or more (timesOrMore %d)", q.Min, q.Min)
	case QuantTimes:
		lo, hi = q.Min, q.Max
		if q.Min == q.Max {
			what = fmt.Sprintf("%d events (times %d)", q.Min, q.Min)
		} else {
			what = fmt.Sprintf("%d to %d events (times %d..%d)", q.Min, q.Max, q.Min, q.Max)
		}
	default:
		lo, hi, what = 1, 1, "one event"
	}
	if q.Optional.Set && lo > 0 {
		lo, what = 0, what+", or none (optional)"
	}
	return lo, hi, what
}

// order checks that each event is taken once, in the order the rule
// reads them: over all stages, or within each stage when the pattern has
// groups (whose stages interleave).
func (x *explainer) order() string {
	seqs := [][]*event.Event{x.all}
	if x.grouped() {
		seqs = x.stages
	}
	seen := map[*event.Event]bool{}
	for _, ev := range x.all {
		if seen[ev] {
			return fmt.Sprintf("event %d is taken twice: a match takes an event once", ev.Seq)
		}
		seen[ev] = true
	}
	for _, evs := range seqs {
		for j := 1; j < len(evs); j++ {
			a, b := evs[j-1], evs[j]
			pa, oka := x.pos[a]
			pb, okb := x.pos[b]
			if !oka || !okb || pb > pa {
				continue
			}
			if a.Time == b.Time {
				return fmt.Sprintf("events %d and %d have the same time, %v, so the rule reads them in the test's order, %d first; the expected match takes %d after %d",
					b.Seq, a.Seq, a.Time, b.Seq, b.Seq, a.Seq)
			}
			return fmt.Sprintf("event %d (%v) is earlier than event %d (%v), and the expected match takes it after: a match takes its events in event-time order",
				b.Seq, b.Time, a.Seq, a.Time)
		}
	}
	return ""
}

// windows checks the pattern's window. (A stage's gap, within d of
// previous, is not checked: which event its time runs from depends on
// the states Flink's compiler makes of the stages around it.)
func (x *explainer) windows() string {
	first, last := x.all[0], x.all[0]
	for _, ev := range x.all {
		if ev.Time < first.Time {
			first = ev
		}
		if ev.Time > last.Time {
			last = ev
		}
	}
	if w := x.r.NFA.Window(); w > 0 && int64(last.Time)-int64(first.Time) >= w {
		return fmt.Sprintf("events %d and %d are %s apart: the pattern's window (within %s) drops a partial match when an event comes that long or longer after its first",
			first.Seq, last.Seq, formatDuration(millis(int64(last.Time)-int64(first.Time))), formatDuration(millis(w)))
	}
	return ""
}

func millis(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }

// before returns the last event of the nearest stage before i that holds
// events, and that stage's index (nil and -1 when none does).
func (x *explainer) before(i int) (*event.Event, int) {
	for j := i - 1; j >= 0; j-- {
		if evs := x.stages[j]; len(evs) > 0 {
			return evs[len(evs)-1], j
		}
	}
	return nil, -1
}

// context returns the events a condition reads when ev comes: the
// match's events the rule reads before it, by stage (for a pattern without
// groups, the stages before ev's and its own events before ev).
func (x *explainer) context(ev *event.Event) [][]*event.Event {
	p, ok := x.pos[ev]
	ctx := make([][]*event.Event, len(x.stages))
	for i, evs := range x.stages {
		for _, e := range evs {
			if q, in := x.pos[e]; ok && in && q < p {
				ctx[i] = append(ctx[i], e)
			}
		}
	}
	return ctx
}

// conditions checks each event against its stage's where and or clauses,
// and a loop's later events against its until.
func (x *explainer) conditions() string {
	for i := range x.leaves {
		for j, ev := range x.stages[i] {
			ctx := x.context(ev)
			if ok, _ := x.holds(i, ev, ctx); !ok {
				return x.whyNot(i, ev, ctx)
			}
			if j > 0 && x.untilHolds(i, ev, ctx) {
				return fmt.Sprintf("event %d passes the until of stage %s (%s): its loop ends at that event, without taking it", ev.Seq, x.name(i), x.untilSource(i))
			}
		}
	}
	return ""
}

// holds evaluates stage i's where and or clauses, as the pattern folds
// them (where ANDs with the clauses before, or ORs), on ev with ctx; err is
// the run-time error of a clause, which counts as false.
func (x *explainer) holds(i int, ev *event.Event, ctx [][]*event.Event) (ok bool, err error) {
	set := false
	for _, cl := range x.leaves[i].node.Clauses {
		b := x.r.clauseConds[cl]
		if b == nil || (cl.Kind != ClauseWhere && cl.Kind != ClauseOr) {
			continue
		}
		v, e := b.EvalStages(ev, ctx)
		if e != nil && err == nil {
			err = e
		}
		switch {
		case !set:
			ok, set = v, true
		case cl.Kind == ClauseWhere:
			ok = ok && v
		default:
			ok = ok || v
		}
	}
	return ok || !set, err
}

func (x *explainer) until(i int) *Clause {
	for _, cl := range x.leaves[i].node.Clauses {
		if cl.Kind == ClauseUntil && x.r.clauseConds[cl] != nil {
			return cl
		}
	}
	return nil
}

func (x *explainer) untilHolds(i int, ev *event.Event, ctx [][]*event.Event) bool {
	cl := x.until(i)
	if cl == nil {
		return false
	}
	ok, _ := x.r.clauseConds[cl].EvalStages(ev, ctx)
	return ok
}

func (x *explainer) untilSource(i int) string { return x.r.clauseConds[x.until(i)].Source() }

// whyNot says why ev does not pass stage i: the clause that failed at run
// time, or the first false term of each false clause, with the values of
// the fields the term reads.
func (x *explainer) whyNot(i int, ev *event.Event, ctx [][]*event.Event) string {
	var parts []string
	for _, cl := range x.leaves[i].node.Clauses {
		b := x.r.clauseConds[cl]
		if b == nil || (cl.Kind != ClauseWhere && cl.Kind != ClauseOr) {
			continue
		}
		v, err := b.EvalStages(ev, ctx)
		switch {
		case err != nil:
			return fmt.Sprintf("event %d does not pass stage %s: its condition %s fails at run time, which counts as false: %s",
				ev.Seq, x.name(i), b.Source(), ExprErrorMessage(err))
		case v:
			parts = append(parts, fmt.Sprintf("%s %s holds", cl.Kind, b.Source()))
		default:
			parts = append(parts, cl.Kind.String()+" "+x.falseTerm(b, ev, ctx))
		}
	}
	return fmt.Sprintf("event %d does not pass stage %s: %s", ev.Seq, x.name(i), strings.Join(parts, "; "))
}

// falseTerm names the first false term of b's conjunction on ev, with the
// values of the event's fields it reads: b's source when b is no
// conjunction or its terms do not compile alone (a let).
func (x *explainer) falseTerm(b *cond.BoolExpr, ev *event.Event, ctx [][]*event.Event) string {
	src := b.Source()
	terms, err := cond.Conjuncts(src)
	if err != nil {
		return src + " is false"
	}
	for _, t := range terms {
		tb := b
		if len(terms) > 1 {
			if tb, err = cond.CompileBoolExpr(t, x.r.env); err != nil {
				return src + " is false"
			}
		}
		if ok, _ := tb.EvalStages(ev, ctx); ok {
			continue
		}
		return t + " is false" + x.values(t, ev, ctx)
	}
	return src + " is false"
}

// values returns " (f = v, ...)" for the fields of the current event that
// the expression src reads, then those of the stages' last events it reads
// (s.f, from ctx), "" when it reads none.
func (x *explainer) values(src string, ev *event.Event, ctx [][]*event.Event) string {
	ids, err := cond.Identifiers(src, x.r.env.Lookups...)
	if err != nil || x.r.env.Schema == nil {
		return ""
	}
	var out []string
	for _, id := range ids {
		if slot, ok := x.r.env.Schema.Slot(id); ok {
			out = append(out, id+" = "+ev.Field(slot).String())
		}
	}
	refs, _ := cond.StageRefs(src, x.r.env.Stages, x.r.env.Lookups...)
	seen := map[string]bool{}
	for _, r := range refs {
		slot, ok := x.r.env.Schema.Slot(r.Field)
		name := x.r.env.Stages[r.Stage] + "." + r.Field
		if r.Field == "" || !ok || seen[name] || r.Stage >= len(ctx) {
			continue
		}
		seen[name] = true
		if evs := ctx[r.Stage]; len(evs) > 0 {
			out = append(out, name+" = "+evs[len(evs)-1].Field(slot).String())
		} else {
			out = append(out, name+" = null (no event of the stage yet)")
		}
	}
	if len(out) == 0 {
		return ""
	}
	return " (" + strings.Join(out, ", ") + ")"
}

// between returns the events the rule reads after a and before b.
func (x *explainer) between(a, b *event.Event) []*event.Event {
	pa, oka := x.pos[a]
	pb, okb := x.pos[b]
	if !oka || !okb || pb <= pa {
		return nil
	}
	return x.stream[pa+1 : pb]
}

// contiguity checks how the stages outside groups follow each other, the
// events between a loop's events, and the negated stages.
func (x *explainer) contiguity() string {
	if x.grouped() {
		return ""
	}
	start := x.all[0]
	for i, l := range x.leaves {
		q := &l.node.Quant
		prev, pi := x.before(i)
		immediate := prev != nil && pi == i-1
		if l.node.Contiguity.IsNot() && immediate {
			if why := x.negation(i, pi, prev, start); why != "" {
				return why
			}
		}
		evs := x.stages[i]
		if l.node.Contiguity.IsNot() || len(evs) == 0 {
			continue
		}
		if immediate {
			f := evs[0]
			switch l.node.Contiguity {
			case ContNext:
				if mid := x.between(prev, f); len(mid) > 0 {
					return fmt.Sprintf("stage %s follows stage %s with next (strict contiguity), but event %d comes between event %d and event %d",
						x.name(i), x.name(pi), x.naming(mid[0]), prev.Seq, f.Seq)
				}
			case ContFollowedBy:
				for _, ev := range x.between(prev, f) {
					if x.passes(i, ev, x.context(ev)) {
						return fmt.Sprintf("stage %s follows stage %s with followedBy, which takes the first event after event %d that passes its condition: event %d passes it, before event %d (followedByAny would let the match skip it)",
							x.name(i), x.name(pi), prev.Seq, x.naming(ev), f.Seq)
					}
				}
			}
			if why := x.greedy(i, pi, prev, f); why != "" {
				return why
			}
		}
		if q.AllowCombinations.Set {
			continue
		}
		for j := 1; j < len(evs); j++ {
			a, b := evs[j-1], evs[j]
			for _, ev := range x.between(a, b) {
				ctx := x.context(ev)
				switch {
				case x.untilHolds(i, ev, ctx):
					return fmt.Sprintf("event %d passes the until of stage %s (%s) between the stage's events %d and %d: its loop ends there", x.naming(ev), x.name(i), x.untilSource(i), a.Seq, b.Seq)
				case q.Consecutive.Set:
					return fmt.Sprintf("stage %s is consecutive, but event %d comes between its events %d and %d", x.name(i), x.naming(ev), a.Seq, b.Seq)
				case x.passes(i, ev, ctx):
					return fmt.Sprintf("the loop of stage %s takes each event that passes its condition (allowCombinations would let it skip some), and event %d passes it between the stage's events %d and %d",
						x.name(i), x.naming(ev), a.Seq, b.Seq)
				}
			}
		}
	}
	return ""
}

// greedy checks, when stage pi right before stage i is a greedy loop,
// that no event from its last event prev to f, stage i's first, passes
// the loop's condition: as in Flink's compiler, greedy adds "not the
// loop's condition" to each edge of the stage after the loop, so such an
// event is the loop's or ends the partial match (the telecom trial's storm of
// resets broken by another event, then a reset: no match). A loop with an
// until clause is not checked: its until proceeds through a copy of the
// next stage without the greedy condition. Nor is a loop that takes one
// event at most (times 0..1 is an optional times 1, which the compiler
// gives no greedy condition), nor a stage after it that is optional
// (times 0..n: its own ignore state goes without the greedy condition).
func (x *explainer) greedy(i, pi int, prev, f *event.Event) string {
	q, next := &x.leaves[pi].node.Quant, &x.leaves[i].node.Quant
	loops := q.Kind == QuantOneOrMore || q.Kind == QuantTimesOrMore || q.Kind == QuantTimes && max(q.Min, 1) != q.Max
	optional := next.Optional.Set || next.Kind == QuantTimes && next.Min == 0
	if !q.Greedy.Set || !loops || optional || x.until(pi) != nil {
		return ""
	}
	for _, ev := range append(x.between(prev, f), f) {
		if !x.passes(pi, ev, x.context(ev)) {
			continue
		}
		if ev == f {
			return fmt.Sprintf("stage %s is a greedy loop, and event %d, which stage %s would take, passes the loop's condition: greedy gives such an event to the loop (or, when the loop can take no more, ends the partial match), never to the stage after it",
				x.name(pi), f.Seq, x.name(i))
		}
		return fmt.Sprintf("stage %s is a greedy loop, and event %d passes its condition after its last event %d, before event %d (stage %s): greedy lets no event the loop's condition accepts pass the stage after the loop, so the loop takes it or, when it can take no more (its count reached, a consecutive loop broken), the partial match ends there",
			x.name(pi), x.naming(ev), prev.Seq, f.Seq, x.name(i))
	}
	return ""
}

// negation checks the negated stage i, which follows stage pi, whose last
// event is prev: notNext when the stage after it holds events (when the
// stages after it hold none, the match may complete at prev through
// optional stages, before the event after it), notFollowedBy between
// prev and the first event of the stage after it, or at the pattern's end
// (no gap of its own: the gap, not the window, would end its wait).
func (x *explainer) negation(i, pi int, prev, start *event.Event) string {
	var next *event.Event
	if j := i + 1; j < len(x.leaves) && !x.leaves[j].node.Contiguity.IsNot() && len(x.stages[j]) > 0 {
		next = x.stages[j][0]
	}
	switch l := x.leaves[i]; {
	case l.node.Contiguity == ContNotNext && next != nil:
		if p := x.pos[prev] + 1; p < len(x.stream) {
			if ev := x.stream[p]; x.passes(i, ev, x.context(ev)) {
				return fmt.Sprintf("event %d comes right after event %d (stage %s) and passes the notNext stage %s: the partial match ends there",
					x.naming(ev), prev.Seq, x.name(pi), x.name(i))
			}
		}
	case l.node.Contiguity == ContNotFollowedBy && next != nil:
		for _, ev := range x.between(prev, next) {
			if x.passes(i, ev, x.context(ev)) {
				return fmt.Sprintf("event %d passes the notFollowedBy stage %s between event %d (stage %s) and event %d (stage %s): the partial match ends there",
					x.naming(ev), x.name(i), prev.Seq, x.name(pi), next.Seq, x.name(i+1))
			}
		}
	case l.node.Contiguity == ContNotFollowedBy && i == len(x.leaves)-1 && !hasGap(l.node):
		for _, ev := range x.after(prev, start) {
			if x.passes(i, ev, x.context(ev)) {
				return fmt.Sprintf("event %d passes the notFollowedBy stage %s after event %d (stage %s), within the pattern's window: the partial match ends there",
					x.naming(ev), x.name(i), prev.Seq, x.name(pi))
			}
		}
	}
	return ""
}

func hasGap(s *StageNode) bool {
	return slices.ContainsFunc(s.Clauses, func(cl *Clause) bool { return cl.Kind == ClauseGap })
}

func (x *explainer) passes(i int, ev *event.Event, ctx [][]*event.Event) bool {
	ok, _ := x.holds(i, ev, ctx)
	return ok
}

// after returns the events the rule reads after prev before the
// pattern's window from start ends (none without a window).
func (x *explainer) after(prev, start *event.Event) []*event.Event {
	w := x.r.NFA.Window()
	p, ok := x.pos[prev]
	if w <= 0 || !ok {
		return nil
	}
	var out []*event.Event
	for _, ev := range x.stream[p+1:] {
		if int64(ev.Time)-int64(start.Time) >= w {
			break
		}
		out = append(out, ev)
	}
	return out
}

// Unchecked names what r uses that [Rule.Explain] does not check (for a
// timed-out partial match when timedOut): the gaps (within d of
// previous), loop gaps, groups, and for a timed-out one the counts, the
// window and the contiguity ([Rule.SkipStrategy] names the after-match
// skip, which it does not check either).
func (r *Rule) Unchecked(timedOut bool) []string {
	if r.decl == nil || r.decl.Pattern == nil {
		return nil
	}
	var gaps, loopGaps, groups bool
	walkElems(r.decl.Pattern.Elems, func(e PatternElem) {
		h := e.head()
		if _, ok := e.(*GroupNode); ok {
			groups = true
		}
		loopGaps = loopGaps || h.Quant.Gap != nil
		gaps = gaps || slices.ContainsFunc(h.Clauses, func(cl *Clause) bool { return cl.Kind == ClauseGap })
	})
	var out []string
	if timedOut {
		out = append(out, "the counts, the window and the contiguity of a timed-out partial match")
	}
	if gaps {
		out = append(out, "the gaps (within d of previous)")
	}
	if loopGaps {
		out = append(out, "the loop gaps")
	}
	if groups {
		out = append(out, "the groups (the order, counts and contiguity of their stages)")
	}
	return out
}

// SkipStrategy returns the rule's after-match skip strategy as written
// after skip (pastLastEvent, toFirst s), "" for noSkip or none.
func (r *Rule) SkipStrategy() string {
	if r.decl == nil || r.decl.Skip == nil || r.decl.Skip.Kind == SkipNoSkip {
		return ""
	}
	s := r.decl.Skip
	out := s.Kind.String()
	if s.Kind == SkipToFirst || s.Kind == SkipToLast {
		out += " " + s.Stage.Value
	}
	return out
}
