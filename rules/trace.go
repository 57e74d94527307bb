package rules

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/rules/internal/cond"
)

// Trace writes what the conditions of r read of the events of a match
// (stages, by stage index of r.NFA.Stages(), as an alert's matched events
// give them, each event named by name): for each event, its stage and each
// where, or and until clause of the stage, true or false, with the terms
// of a && chain each with its value and the values of the fields it reads
// (the event's, and the earlier stages' last events', as the automaton
// read them: the match's events before it, by stage); then the time from
// the first event to the last against the pattern's window. It is why an
// alert fired, in the rule's own terms. A clause that reads what the
// events do not carry reads null there and may show false (an alert's
// events carry the velocity aggregates its rule reads). Of a timed-out
// partial match (timedOut), the last line says what did not come in time:
// the stages after its last event's that took none.
func (r *Rule) Trace(stages [][]*event.Event, timedOut bool, name func(*event.Event) string) string {
	if r.decl == nil || r.decl.Pattern == nil {
		return ""
	}
	x := &explainer{r: r, stages: stages, pos: map[*event.Event]int{}}
	x.leaves = leavesOf(r.decl.Pattern.Elems, false, nil)
	if len(x.leaves) != len(stages) {
		return ""
	}
	// The match's events in the order the rule read them: by time, then
	// in stage order (a tie keeps the order the match took them).
	for _, evs := range stages {
		x.all = append(x.all, evs...)
	}
	x.stream = append([]*event.Event(nil), x.all...)
	slices.SortStableFunc(x.stream, func(a, b *event.Event) int { return cmp.Compare(a.Time, b.Time) })
	for i, ev := range x.stream {
		x.pos[ev] = i
	}
	var b strings.Builder
	for i, l := range x.leaves {
		if l.node.Contiguity.IsNot() {
			x.absent(&b, i, timedOut, name)
			continue
		}
		for j, ev := range stages[i] {
			ctx := x.context(ev)
			fmt.Fprintf(&b, "stage %s, %s:\n", x.name(i), name(ev))
			for _, cl := range l.node.Clauses {
				cb := r.clauseConds[cl]
				if cb == nil {
					continue
				}
				if cl.Kind == ClauseUntil && j == 0 {
					continue // a loop's first event is not tested against until
				}
				ok, err := cb.EvalStages(ev, ctx)
				terms, terr := cond.Conjuncts(cb.Source())
				if terr != nil || len(terms) < 2 {
					// One term: its values on the clause's line.
					fmt.Fprintf(&b, "  %s %s: %s%s\n", cl.Kind, cb.Source(), truth(ok, err), x.values(cb.Source(), ev, ctx))
					continue
				}
				fmt.Fprintf(&b, "  %s %s: %s\n", cl.Kind, cb.Source(), truth(ok, err))
				for _, t := range terms {
					tb, terr := cond.CompileBoolExpr(t, r.env)
					if terr != nil {
						break // a let's terms do not stand alone
					}
					tok, terr := tb.EvalStages(ev, ctx)
					fmt.Fprintf(&b, "    %s: %s%s\n", t, truth(tok, terr), x.values(t, ev, ctx))
				}
			}
		}
	}
	if w := r.NFA.Window(); w > 0 && len(x.stream) > 1 {
		first, last := x.stream[0], x.stream[len(x.stream)-1]
		fmt.Fprintf(&b, "within %s: %s to %s, %s apart\n", formatDuration(millis(w)), name(first), name(last),
			formatDuration(millis(int64(last.Time)-int64(first.Time))))
	}
	if timedOut && len(x.stream) > 0 {
		x.timedOut(&b, name(x.stream[0]))
	}
	return b.String()
}

// absent writes what the negated stage i held the match to: no event
// matching it came between the events of the stages around it (the one
// right after, for notNext), or, a trailing notFollowedBy, within the
// window. Nothing for a stage a timed-out match had not reached, or one
// without a stage with events before it.
func (x *explainer) absent(b *strings.Builder, i int, timedOut bool, name func(*event.Event) string) {
	var before, after *event.Event
	for k := i - 1; k >= 0 && before == nil; k-- {
		if evs := x.stages[k]; len(evs) > 0 {
			before = evs[len(evs)-1]
		}
	}
	for k := i + 1; k < len(x.stages) && after == nil; k++ {
		if evs := x.stages[k]; len(evs) > 0 {
			after = evs[0]
		}
	}
	node := x.leaves[i].node
	var conds []string
	for _, cl := range node.Clauses {
		if cb := x.r.clauseConds[cl]; cb != nil {
			conds = append(conds, fmt.Sprintf("%s %s", cl.Kind, cb.Source()))
		}
	}
	head := fmt.Sprintf("stage %s, %s %s:", x.name(i), node.Contiguity, strings.Join(conds, " "))
	switch {
	case before == nil || timedOut && after == nil:
	case node.Contiguity == ContNotNext:
		fmt.Fprintf(b, "%s the event after %s did not match\n", head, name(before))
	case after != nil:
		fmt.Fprintf(b, "%s no event matched between %s and %s\n", head, name(before), name(after))
	default:
		w := "its window"
		if win := x.r.NFA.Window(); win > 0 {
			w = formatDuration(millis(win))
		}
		fmt.Fprintf(b, "%s no event matched within %s of %s\n", head, w, name(x.stream[0]))
	}
}

// timedOut writes what a timed-out partial match lacked: the stages after
// the last one holding events (but negated ones) took no event before
// the window, counted from its first event (at first), ended.
func (x *explainer) timedOut(b *strings.Builder, first string) {
	last := -1
	for i, evs := range x.stages {
		if len(evs) > 0 {
			last = i
		}
	}
	var missing []string
	for i := last + 1; i < len(x.leaves); i++ {
		if !x.leaves[i].node.Contiguity.IsNot() {
			missing = append(missing, x.name(i))
		}
	}
	w := "its window"
	if win := x.r.NFA.Window(); win > 0 {
		w = formatDuration(millis(win))
	}
	switch len(missing) {
	case 0:
		// The last stage took events: a loop the window ended (or its
		// until had not come).
		fmt.Fprintf(b, "timed out: the match was not complete within %s of %s\n", w, first)
	case 1:
		fmt.Fprintf(b, "timed out: stage %s took no event within %s of %s\n", missing[0], w, first)
	default:
		fmt.Fprintf(b, "timed out: stages %s took no event within %s of %s\n", strings.Join(missing, ", "), w, first)
	}
}

// truth writes a condition's value: true, false, or its run-time error.
func truth(ok bool, err error) string {
	switch {
	case err != nil:
		return "false (an error: " + ExprErrorMessage(err) + ")"
	case ok:
		return "true"
	}
	return "false"
}
