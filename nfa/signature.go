package nfa

import (
	"slices"
	"strconv"
	"strings"

	"github.com/cepheus-cep/cepheus/event"
)

// Signer is implemented by conditions that can say when another condition
// is the same predicate: two conditions whose Signature is the same
// non-empty string accept the same events in every [Context] that holds
// no events (the context of a start computation). A condition without a
// signature (or with an empty one) equals no other.
type Signer interface {
	Signature() string
}

// StartSignature describes what the start state decides about an event:
// its transitions and those reached from it through proceed transitions,
// with their actions and conditions. When two automata give the same
// signature (ok true), [Run.Inert] of an idle run of one gives, for every
// event and timestamp, what it gives for an idle run of the other, so a
// caller hosting many rules can evaluate it once for all of them. ok is
// false when a condition has no signature, or when the proceed
// transitions from the start state could make the evaluation depend on
// more than the conditions (a cycle, or so many paths that the run's
// bound on them might apply).
func (n *NFA) StartSignature() (sig string, ok bool) {
	start := n.states[n.start]
	// The states reached through proceed transitions, numbered in the
	// order first met, and how many paths reach each (decisionGraph visits
	// a state once per path).
	idx := map[*state]int{start: 0}
	order := []*state{start}
	for i := 0; i < len(order); i++ {
		for _, t := range order[i].trans {
			if _, seen := idx[t.dst]; t.act == actProceed && !seen {
				idx[t.dst] = len(order)
				order = append(order, t.dst)
			}
		}
	}
	paths := make([]int, len(order))
	paths[0] = 1
	if !pathCounts(order, idx, paths) {
		return "", false
	}
	total := 0
	for _, p := range paths {
		total += p
	}
	if total > 64 { // decisionGraph's bound is at least 64 visits
		return "", false
	}
	var b strings.Builder
	for i, s := range order {
		if i > 0 {
			b.WriteByte(';')
		}
		for j, t := range s.trans {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteString(t.act.String())
			switch {
			case t.act == actProceed:
				b.WriteString(">" + strconv.Itoa(idx[t.dst]))
			case t.act == actIgnore && t.dst == start:
				b.WriteString(">self")
			}
			if t.negOf > 0 && t.negOf <= 16 { // see decisionGraph's took
				b.WriteString("!" + strconv.Itoa(t.negOf))
				continue
			}
			c, ok := condSignature(t.cond)
			if !ok {
				return "", false
			}
			b.WriteString("(" + c + ")")
		}
	}
	return b.String(), true
}

// pathCounts fills paths[i], the number of proceed paths from the start
// state to order[i], given paths[0] = 1; false if the proceed
// transitions among the states form a cycle.
func pathCounts(order []*state, idx map[*state]int, paths []int) bool {
	// Kahn's algorithm over the proceed edges of the closure.
	indeg := make([]int, len(order))
	for _, s := range order {
		for _, t := range s.trans {
			if t.act == actProceed {
				indeg[idx[t.dst]]++
			}
		}
	}
	queue := []int{}
	for i, d := range indeg {
		if d == 0 {
			queue = append(queue, i)
		}
	}
	done := 0
	for len(queue) > 0 {
		i := queue[0]
		queue = queue[1:]
		done++
		for _, t := range order[i].trans {
			if t.act != actProceed {
				continue
			}
			j := idx[t.dst]
			paths[j] = min(paths[j]+paths[i], 1<<20)
			if indeg[j]--; indeg[j] == 0 {
				queue = append(queue, j)
			}
		}
	}
	return done == len(order)
}

// condSignature is c's signature, through the combinators of this
// package.
func condSignature(c Condition) (string, bool) {
	switch c := c.(type) {
	case nil, trueCond:
		return "true", true
	case andCond:
		return pairSignature("and", c.a, c.b)
	case orCond:
		return pairSignature("or", c.a, c.b)
	case notCond:
		s, ok := condSignature(c.c)
		return "not(" + s + ")", ok
	case Signer:
		if s := c.Signature(); s != "" {
			return strconv.Quote(s), true
		}
	}
	return "", false
}

func pairSignature(op string, a, b Condition) (string, bool) {
	sa, oka := condSignature(a)
	sb, okb := condSignature(b)
	return op + "(" + sa + "," + sb + ")", oka && okb
}

// DeferrableStart reports whether what an idle run does with its first
// event is known without running it, for a caller that would rather not
// make a run for every key whose first event starts a partial match (most
// of which expire without a second event). It holds for automata whose
// start state has exactly one transition, a take, to a state that is
// neither final, stop nor pending and has no proceed transition; with no
// gap window on any state and no timeout reporting. Then, for an idle run
// with no partial-match limit and an event ev that is not [Run.Inert] for
// it at ts:
//
//   - Process(ev, ts) releases nothing (no match, timeout or drop) and
//     leaves one partial match, with NextDeadline ts + Window() (none
//     without a window);
//   - AdvanceTime(t) releases nothing for any t; with a window, for
//     t >= ts + Window() it leaves the run [Run.Empty]; without one, the
//     partial match stays;
//   - the conditions it evaluates are those of the start state, nothing
//     more.
//
// So a caller may note (ev, ts) instead and either replay Process(ev, ts)
// (and the AdvanceTime calls it skipped) on a new run when the next event
// comes, or forget it once time reaches ts + Window() with no event.
func (n *NFA) DeferrableStart() bool { return n.deferrable }

// deferrableStart is DeferrableStart, found from the state graph once, by
// Compile (the operator asks at every event of a key holding a note).
func (n *NFA) deferrableStart() bool {
	if n.handleTimeout {
		return false
	}
	for _, s := range n.states {
		if s.gap > 0 || s.typ == stPending {
			return false
		}
	}
	start := n.states[n.start]
	if len(start.trans) != 1 || start.trans[0].act != actTake {
		return false
	}
	dst := start.trans[0].dst
	if dst.typ != stNormal {
		return false
	}
	for _, t := range dst.trans {
		if t.act == actProceed {
			return false
		}
	}
	return true
}

// PendingIgnores is, for an automaton with a deferrable start
// ([NFA.DeferrableStart]), whether an event leaves the partial match of a
// start unchanged: given a run of the automaton that took only first, from
// idle, and an event ev at ts (before the end of the window) that is
// inert for its start state, it reports whether Process(ev, ts) would
// change nothing, the partial match staying where it waits with no take
// and no branch (exactly one transition of that state accepts ev: an
// ignore that loops on it). It evaluates that state's conditions as
// Process would, in a context holding first; r may be any run of the
// automaton (only its automaton and working storage are used).
//
// With it, a caller that noted first instead of making the run can skip
// ev too: the run it makes later, given first and then advanced to a
// later time, is the run that would have taken first, been advanced, been
// given ev and been advanced again (TestPendingIgnores).
func (r *Run) PendingIgnores(first, ev *event.Event, ts event.Time, res *Result) bool {
	d, ctx, ok := r.pendingContext(first, ts, res)
	if !ok {
		return false
	}
	var took [16]bool // as decisionGraph
	loops := 0
	for i := range d.trans {
		t := &d.trans[i]
		if !t.accepts(i, &took, ev, ctx) {
			continue
		}
		if t.act != actIgnore || t.dst != d {
			return false
		}
		loops++
	}
	return loops == 1
}

// PendingDies is, for an automaton with a deferrable start
// ([NFA.DeferrableStart]), whether an event ends the partial match of a
// start: given a run of the automaton that took only first, from idle,
// and an event ev at ts (before the end of the window, if any), it
// reports whether no transition of the state that partial match waits in
// accepts ev, so that Process(ev, ts) drops it, releasing nothing (strict
// contiguity: `next` after the start, and ev fails its condition). It
// evaluates that state's conditions as Process would, in a context
// holding first; r may be any run of the automaton (only its automaton
// and working storage are used).
//
// With it, a caller that noted first instead of making the run can forget
// first and treat ev as the first event of an idle run: the run that
// took first, was advanced to ts (releasing nothing) and was given ev
// holds what an idle run given ev holds, and releases what it releases
// (TestPendingDies).
func (r *Run) PendingDies(first, ev *event.Event, ts event.Time, res *Result) bool {
	if !r.nfa.startDies {
		return false // not evaluated: an ignore loop (relaxed contiguity) keeps it
	}
	d, ctx, ok := r.pendingContext(first, ts, res)
	if !ok {
		return false
	}
	var took [16]bool // as decisionGraph
	for i := range d.trans {
		if d.trans[i].accepts(i, &took, ev, ctx) {
			return false
		}
	}
	return true
}

// startCanDie reports, for an automaton with a deferrable start, whether
// the state a start's partial match waits in has no ignore transition, so
// that an event may end it (PendingDies); with one, PendingDies does not
// evaluate anything: a partial match whose wait state ignores what it does
// not take (relaxed contiguity) does not die, and the caller's
// PendingIgnores evaluates that state instead. Compile finds it once.
func (n *NFA) startCanDie() bool {
	for _, t := range n.states[n.start].trans[0].dst.trans {
		if t.act == actIgnore {
			return false
		}
	}
	return true
}

// pendingContext returns, for PendingIgnores and PendingDies, the state a
// start's partial match waits in and a condition context at ts holding
// first as the start stage's event; ok is false when the automaton's start
// is not deferrable.
func (r *Run) pendingContext(first *event.Event, ts event.Time, res *Result) (*state, *Context, bool) {
	n := r.nfa
	if !n.deferrable || len(r.partial.q) == 0 {
		return nil, nil, false
	}
	take := &n.states[n.start].trans[0]
	d, stage := take.dst, take.src.stage
	if stage < 0 {
		return nil, nil, false
	}
	r.use(res)
	ctx := &r.ctx
	ctx.reset(r, r.partial.q[0], ts) // any computation: the match is set below
	ctx.store = slices.Grow(ctx.store[:0], n.numStages())[:n.numStages()]
	for i := range ctx.store {
		clear(ctx.store[i])
		ctx.store[i] = ctx.store[i][:0]
	}
	ctx.store[stage] = append(ctx.store[stage], first)
	ctx.match, ctx.ready = ctx.store, true
	return d, ctx, true
}
