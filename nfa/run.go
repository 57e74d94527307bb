package nfa

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"unsafe"

	"github.com/cepheus-cep/cepheus/event"
)

// NFA is a compiled pattern. It is immutable and safe for concurrent use;
// the per-key matching state lives in a [Run].
type NFA struct {
	states          []*state
	start           int
	windowTime      int64 // FIRST_AND_LAST window in ms, 0 = none
	handleTimeout   bool
	skip            SkipStrategy
	stages          []string
	stageContiguity []Contiguity
	stageIndex      map[string]int
	fingerprint     uint64 // of the state graph, checked by DecodeRun
	// deferrable and startDies are DeferrableStart and, when it holds,
	// startCanDie: found once by Compile, asked at every event of a key
	// whose start is noted.
	deferrable, startDies bool
	// startTake is the start state's transition when it is its only one,
	// a take (nil otherwise): Inert is then its condition's negation.
	startTake *transition
}

// Stages returns the stage names in pattern order, group stages replaced by
// their inner stages (NOT stages included). Match and timeout events are
// indexed by these positions. The caller must not modify the slice.
func (n *NFA) Stages() []string { return n.stages }

// StageIndex returns the position of a stage name in [NFA.Stages].
func (n *NFA) StageIndex(name string) (int, bool) {
	i, ok := n.stageIndex[name]
	return i, ok
}

// IsNegative reports whether stage i is a notNext/notFollowedBy stage (it
// never holds events in a match).
func (n *NFA) IsNegative(i int) bool { return n.stageContiguity[i].isNot() }

// Window returns the pattern window (first to last event) in ms; 0 = none.
func (n *NFA) Window() int64 { return n.windowTime }

// CanTimeOut reports whether a partial match of n can time out: n has a
// window (Within) or a gap window (a stage's PREVIOUS_AND_CURRENT window,
// a loop's gap).
func (n *NFA) CanTimeOut() bool {
	if n.windowTime > 0 {
		return true
	}
	for _, s := range n.states {
		if s.gap > 0 {
			return true
		}
	}
	return false
}

// PartialMatchesTimeOut reports whether a partial match of n can ever
// time out (so that WithTimeouts reports one): a computation that took an
// event must be able to wait at a state that is neither the start, nor
// final or stop, nor pending (a trailing NOT stage, whose wait ends as a
// match), with a deadline there (the window, or the state's gap). A
// pattern whose every partial match completes at the event that makes it,
// or waits only for the end of a trailing NOT, has none.
func (n *NFA) PartialMatchesTimeOut() bool {
	for _, s := range n.states {
		for _, t := range s.trans {
			if t.act != actTake && t.act != actIgnore {
				continue
			}
			d := t.dst
			switch d.typ {
			case stStart, stFinal, stStop, stPending:
				continue
			}
			if n.windowTime > 0 || d.gap > 0 {
				return true
			}
		}
	}
	return false
}

// WaitsForever returns the first stage (by its order in [NFA.Stages])
// where a partial match can wait with no deadline: n has no window, and
// an event that fails the stage's condition leaves a computation that
// took an event waiting there (relaxed contiguity, a relaxed loop)
// without a gap. Such a partial match is kept until it completes: for
// ever if it never does. A pattern whose every wait is strict (next,
// consecutive) or bounded has none ("", false).
//
// Under skip toNext and pastLastEvent a wait is no such wait when every
// computation that can wait there completed a match at its latest take
// (a trailing loop or optional stage, whose state proceeds to the end
// unconditionally): that match prunes the computation itself, since it
// started with (toNext), or not after (pastLastEvent), the match's first
// event, so nothing waits past the event that brought it there. noSkip
// prunes nothing, and toFirst and toLast prune a partial match only when
// it started before the target's event, which may be the match's first
// (their waits are reported as under noSkip).
func (n *NFA) WaitsForever() (stage string, ok bool) {
	if n.windowTime > 0 {
		return "", false
	}
	var unsure map[*state]bool // states a computation can wait at without a match at its latest take
	if k := n.skip.Kind; k == SkipToNext || k == SkipPastLastEvent {
		unsure = n.waitsWithoutMatch()
	}
	first := -1
	for _, s := range n.states {
		for _, t := range s.trans {
			d := t.dst
			if t.act != actIgnore || d.typ != stNormal || d.gap > 0 || d.stage < 0 {
				continue
			}
			if neverHolds(t.cond) && !takesSelf(s) {
				// A stage without a condition ignores no event: its
				// partial match takes the next one (a loop's goes on
				// taking them: it waits all the same).
				continue
			}
			if unsure != nil && !unsure[s] {
				// Pruned by the match it completed at its latest take.
				continue
			}
			if first < 0 || d.stage < first {
				first = d.stage
			}
		}
	}
	if first < 0 {
		return "", false
	}
	return n.stages[first], true
}

// waitsWithoutMatch returns the states a computation can be in, between
// events, when its latest take completed no match: those reached by
// proceeds and ignores from the target of a take whose state does not
// proceed to the end unconditionally (see [Run.findFinalAfterProceed]).
func (n *NFA) waitsWithoutMatch() map[*state]bool {
	out := map[*state]bool{}
	var stack []*state
	for _, s := range n.states {
		for _, t := range s.trans {
			if t.act == actTake && !proceedsToEnd(t.dst) && !out[t.dst] {
				out[t.dst] = true
				stack = append(stack, t.dst)
			}
		}
	}
	for len(stack) > 0 {
		s := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, t := range s.trans {
			if t.act != actTake && !out[t.dst] {
				out[t.dst] = true
				stack = append(stack, t.dst)
			}
		}
	}
	return out
}

// proceedsToEnd reports whether s reaches the final state by proceeds
// whose conditions accept every event (True), as a trailing loop's or
// optional stage's state does: a take into s completes a match at once.
func proceedsToEnd(s *state) bool {
	seen := map[*state]bool{s: true}
	stack := []*state{s}
	for len(stack) > 0 {
		cur := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if cur.isFinal() {
			return true
		}
		for _, t := range cur.trans {
			if t.act != actProceed || seen[t.dst] {
				continue
			}
			if _, ok := t.cond.(trueCond); !ok && t.cond != nil {
				continue
			}
			seen[t.dst] = true
			stack = append(stack, t.dst)
		}
	}
	return false
}

// neverHolds reports whether c is false for every event by its form: the
// ignore condition of a relaxed stage without a condition (Not(True)),
// also extended with an until or a greedy loop's condition (And).
func neverHolds(c Condition) bool {
	switch c := c.(type) {
	case notCond:
		_, ok := c.c.(trueCond)
		return ok
	case andCond:
		return neverHolds(c.a) || neverHolds(c.b)
	}
	return false
}

// takesSelf reports whether s has a take back to itself (a loop's state).
func takesSelf(s *state) bool {
	for _, t := range s.trans {
		if t.act == actTake && t.dst == s {
			return true
		}
	}
	return false
}

// Skip returns the after-match skip strategy.
func (n *NFA) Skip() SkipStrategy { return n.skip }

func (n *NFA) numStages() int { return len(n.stages) }

// NewRun returns an empty run: one start computation, nothing buffered.
func (n *NFA) NewRun() *Run {
	// The buffer maps are made on first use: most keys of a keyed stream
	// never get past the start state.
	r := &Run{nfa: n}
	r.partial.offer(n.startComputation(startVersion))
	r.summarize()
	return r
}

// startVersion is the version of a fresh run's start computation. dewey
// values are never modified in place, so one shared value is safe.
var startVersion = newDewey(1)

func (n *NFA) startComputation(v dewey) *computation {
	return &computation{state: n.states[n.start], version: v, startTs: -1, prevTs: -1}
}

// Match is a complete match: the events of each stage (by [NFA.Stages]
// position) in the order the stage took them. Stages that took nothing hold
// nil.
type Match struct {
	Events [][]*event.Event
	// At is the event time at which the match completed: the timestamp of
	// the event that completed it, or, for a match released by time (a
	// notFollowedBy at the end of the pattern), the end of its window. It
	// does not depend on when the caller advanced time, so a backtest and
	// a live run report the same value.
	At event.Time
}

// Timeout is a partial match dropped because its window expired, with the
// time Flink reports for it (start + window, or previous + gap window).
type Timeout struct {
	Match
	At event.Time
}

// Result collects what one [Run.Process] or [Run.AdvanceTime] call released.
// Callers reuse a Result across calls by calling Reset. It also holds the
// working storage and the free lists of the runs it is given, so one
// goroutine uses one Result for all its runs, and no other goroutine uses
// those runs or the Result. The Matches and Timeouts it hands out are the
// caller's: Reset forgets them without reusing their events' storage.
type Result struct {
	Matches  []Match
	Timeouts []Timeout
	// Dropped counts partial matches discarded because the run exceeded its
	// partial-match limit ([Run.SetMaxPartialMatches]).
	Dropped int

	// work is the working storage of the run calls given this Result:
	// one Result serves every run of one goroutine.
	work scratch
}

// scratch is the working storage of the run calls: per Result, not per
// run, so that a key's run holds only its state.
type scratch struct {
	ctx          Context
	spare        compQueue
	potential    compQueue
	next         []*computation
	retain       []*computation
	stack        []*state
	edges        []*transition
	releaseStack []releaseItem
	walk         []*node
	cands        []*edge // the compatible edges of an indexed node (edgeIndex)
	// extract's search and the paths it found (valid until the next
	// extract), pruningID's positions per stage.
	extractStack []extractItem
	trail        []trailEntry
	pathEntries  []pathEntry
	paths        []path
	stageFirst   []int32
	stageLast    []int32
	discard      []*computation // prune's
	// The free lists: computations no queue holds any more, edges their
	// node dropped, nodes that left a buffer and buffered events no node
	// holds, for reuse by the runs this Result serves. A node in the list
	// may still be named by stale references of the run it left (see
	// nodeRef): the runs of one Result must be used by one goroutine.
	freeComps  []*computation
	freeEdges  []*edge
	freeNodes  []*node
	freeEvents []*bufEvent
}

// newComp returns a computation set to c, reusing a freed one.
func (r *Run) newComp(c computation) *computation {
	x := reuse(&r.freeComps)
	*x = c
	return x
}

// freeComp takes back a computation that no queue holds any more: a
// partial match that moved on, was dropped or timed out, or a match
// emitted.
func (r *Run) freeComp(c *computation) {
	if c.freed {
		return
	}
	*c = computation{freed: true}
	keep(&r.freeComps, c)
}

// use points r at res's working storage for the call in progress.
func (r *Run) use(res *Result) { r.scratch = &res.work }

// Reset empties r, keeping its storage.
func (r *Result) Reset() {
	clear(r.Matches)
	clear(r.Timeouts)
	r.Matches, r.Timeouts, r.Dropped = r.Matches[:0], r.Timeouts[:0], 0
}

// computation is one partial match (Flink's ComputationState): the NFA state
// it waits in, its version and the buffer node of the last event it took.
type computation struct {
	state    *state
	version  dewey
	startTs  event.Time
	prevTs   event.Time
	prev     nodeRef
	startID  eventID
	hasStart bool
	// doneAt is, for a completed match, the event time it completed at:
	// the timestamp of the event that completed it, or the deadline that
	// released a pending (notFollowedBy at the end) match.
	doneAt event.Time
	freed  bool // in the free list (Run.freeComp)
}

func (c *computation) orderKey() (int64, int64) {
	if !c.hasStart {
		return math.MaxInt64, math.MaxInt32
	}
	return int64(c.startID.ts), int64(c.startID.id)
}

func (c *computation) isStart() bool { return c.state.typ == stStart }

// hash is a hash of c's fields that equal compares (equal computations,
// equal hashes).
func (c *computation) hash() uint64 {
	h := mixDigit(uint64(uintptr(unsafe.Pointer(c.state))), int32(c.startTs))
	h = mixDigit(h, int32(c.startTs>>32))
	h = mixDigit(h, int32(uintptr(unsafe.Pointer(c.prev.n))>>3))
	for _, d := range c.version.digits() {
		h = mixDigit(h, d)
	}
	return h
}

// pruneByHash is the number of discarded partial matches from which prune
// finds them in the queue by hash (a variable for the tests).
var pruneByHash = 16

func (c *computation) equal(o *computation) bool {
	return c.state == o.state && c.version.equal(&o.version) && c.startTs == o.startTs &&
		c.prevTs == o.prevTs && c.prev == o.prev && c.hasStart == o.hasStart && c.startID == o.startID
}

// Run is the matching state of one key: the partial matches, the completed
// matches held back by a skip strategy, and the shared buffer. A Run is not
// safe for concurrent use; the operator that owns a key owns its Run.
//
// After Process or AdvanceTime returns an error the Run is in an undefined
// state and must be discarded (Flink fails the job at that point).
type Run struct {
	nfa       *NFA
	partial   compQueue
	completed compQueue
	nodes     table[nodeKey, *node]
	events    table[uint64, *bufEvent]
	counts    table[event.Time, int32]
	countsMin event.Time // no key of counts is smaller (a lower bound)
	nextKey   uint64
	edgeIdx   map[*node]*edgeIndex // the indexes of the nodes of many edges (nil: none)

	// *scratch is the working storage of the call in progress: the
	// Result's, set by every call that takes one.
	*scratch

	maxPartial int32 // 0: unlimited

	// Cached by summarize after every change of partial.
	nonStart    int32
	hasDeadline bool
	deadline    event.Time
}

// Reset empties r so that it can be used again as if made by
// [NFA.NewRun], keeping its storage. The operator recycles the runs of keys
// that went idle this way instead of allocating one per key and event.
func (r *Run) Reset() {
	// The start computation is kept, at its first version: only the queue
	// refers to it (see computeNextStates).
	var start *computation
	for _, c := range r.partial.q {
		if c.isStart() {
			start = c
			break
		}
	}
	if start == nil {
		start = r.nfa.startComputation(startVersion)
	}
	start.version = startVersion
	r.partial.reset()
	r.completed.reset()
	r.nodes.reset()
	r.edgeIdx = nil
	r.events.reset()
	r.counts.reset()
	r.nextKey = 0
	r.partial.offer(start)
	r.summarize()
}

// summarize caches what the operator asks of a run after every call:
// the partial matches that are not the start computation, and the
// earliest deadline among them (see NextDeadline).
func (r *Run) summarize() {
	r.nonStart, r.deadline, r.hasDeadline = 0, event.MaxTime, false
	window := r.nfa.windowTime
	for _, c := range r.partial.q {
		if c.isStart() {
			continue
		}
		r.nonStart++
		// A deadline may be MaxTime (a window past the range of times,
		// Plus): the final watermark reaches it.
		if g := c.state.gap; g > 0 && (!r.hasDeadline || c.prevTs.Plus(g) < r.deadline) {
			r.deadline, r.hasDeadline = c.prevTs.Plus(g), true
		}
		if window > 0 && (!r.hasDeadline || c.startTs.Plus(window) < r.deadline) {
			r.deadline, r.hasDeadline = c.startTs.Plus(window), true
		}
	}
}

// SetMaxPartialMatches caps the partial matches the run may hold; 0 (the
// default) means unlimited. When a step leaves more, the partial matches
// that started latest are dropped and counted (see [Result.Dropped]). The
// limit is the run's configuration, not its state: it is not encoded, Reset
// keeps it, and the operator sets it on every run it makes or restores, so
// changing it needs no recompilation.
func (r *Run) SetMaxPartialMatches(n int) { r.maxPartial = int32(min(n, math.MaxInt32)) }

// NFA returns the automaton the run belongs to.
func (r *Run) NFA() *NFA { return r.nfa }

// PartialMatches returns the number of partial matches (the start
// computation excluded) and of completed matches held back by the skip
// strategy.
func (r *Run) PartialMatches() int { return r.completed.len() + int(r.nonStart) }

// BufferedEvents returns the number of distinct events the shared buffer
// holds.
func (r *Run) BufferedEvents() int { return r.events.len() }

// Empty reports whether the run holds nothing but its start computation, so
// that its state can be dropped and recreated with [NFA.NewRun].
func (r *Run) Empty() bool {
	return r.completed.len() == 0 && r.nodes.len() == 0 && r.events.len() == 0 && r.PartialMatches() == 0
}

// Touch reads the run's header and its first partial match, and returns a
// number that means nothing: a caller about to process several runs that
// may have left the processor's caches touches them all first, so that
// their cache misses overlap instead of stalling one after another.
func (r *Run) Touch() uintptr {
	if len(r.partial.q) == 0 {
		return 0
	}
	return uintptr(r.nonStart) + uintptr(r.partial.q[0].prevTs)
}

// Idle reports whether the run holds nothing but its start computation:
// no partial match and no completed match held back. An idle run's
// AdvanceTime releases nothing.
func (r *Run) Idle() bool {
	return r.nonStart == 0 && r.completed.len() == 0 && len(r.partial.q) == 1
}

// Inert reports whether Process(ev, ts) would change nothing and release
// nothing: the run is idle and, from its start state, no transition that
// takes ev or branches on it (through proceed transitions) accepts it. The
// start computation then stays as it is (Flink's version increase is 0
// without takes and branches), ev is not buffered and no limit applies.
// It evaluates the start state's conditions, as Process would, and nothing
// more; the operator uses it to skip what an idle run would only ignore.
func (r *Run) Inert(ev *event.Event, ts event.Time, res *Result) bool {
	if !r.Idle() {
		return false
	}
	r.use(res)
	cs := r.partial.q[0]
	r.ctx.reset(r, cs, ts)
	if t := r.nfa.startTake; t != nil && inertShortcut {
		// What decisionGraph would find: one take, if its condition holds.
		return t.cond != nil && !t.cond.Eval(ev, &r.ctx)
	}
	takes, ignores, err := r.decisionGraph(cs, ev, &r.ctx, false)
	return err == nil && takes == 0 && ignores == 0
}

// inertShortcut turns on Inert's shortcut for a start state whose one
// transition is a take (NFA.startTake); tests turn it off to compare.
var inertShortcut = true

// NextDeadline returns the earliest time at which AdvanceTime would time out
// or release a partial match; ok is false when no partial match has a window.
func (r *Run) NextDeadline() (t event.Time, ok bool) { return r.deadline, r.hasDeadline }

// Process feeds one event with timestamp ts (Flink's NFA.process) and
// appends the completed matches to res. Events must be fed in the order the
// pattern should see them; the run does not sort.
func (r *Run) Process(ev *event.Event, ts event.Time, res *Result) error {
	r.use(res)
	w := wrapped{ev: ev, ts: ts}
	newPartial := &r.spare
	newPartial.reset()
	potential := &r.potential
	potential.reset()
	var err error
	// The queue of partial matches is rebuilt (newPartial) once one
	// changes; until then, the computations that go on unchanged are only
	// counted (kept).
	kept, rebuilding := 0, false
	for _, cs := range r.partial.q {
		took := false // whether cs's state's first transition accepts ev, if waits
		if waitShortcut && cs.state.waits && (!cs.isStart() || cs.prev.isNil()) {
			// Most events fail the take of most partial matches, which
			// then go on unchanged: only that condition is evaluated.
			r.ctx.reset(r, cs, ts)
			if !cs.state.trans[0].cond.Eval(ev, &r.ctx) {
				if rebuilding {
					newPartial.offer(cs)
				} else {
					kept++
				}
				continue
			}
			took = true
		}
		if !rebuilding {
			rebuilding = true
			for _, c := range r.partial.q[:kept] {
				newPartial.offer(c)
			}
		}
		r.next, err = r.computeNextStates(cs, &w, r.next[:0], took)
		if err != nil {
			return err
		}
		carried := false // cs itself goes on (unchanged, or the start)
		discard := false
		r.retain = r.retain[:0]
		for _, nc := range r.next {
			carried = carried || nc == cs
			switch {
			case nc.state.isFinal():
				nc.doneAt = ts
				potential.offer(nc)
			case nc.state.isStop():
				discard = true
				r.releaseNode(nc.prev, &nc.version)
				r.freeComp(nc)
			default:
				r.retain = append(r.retain, nc)
			}
		}
		if discard {
			for _, nc := range r.retain {
				r.releaseNode(nc.prev, &nc.version)
				r.freeComp(nc)
			}
		} else {
			for _, nc := range r.retain {
				newPartial.offer(nc)
			}
		}
		if !carried {
			r.freeComp(cs)
		}
	}
	if !rebuilding {
		// Every partial match went on unchanged. Offering them again in
		// heap-array order would rebuild the same queue; and with no
		// completed match held back, processMatches would release
		// nothing, so summarize would find what it found last.
		if r.completed.len() == 0 {
			r.enforceLimit(res)
			return nil
		}
		for _, c := range r.partial.q {
			newPartial.offer(c)
		}
	}
	if err := r.processMatches(potential, newPartial, res); err != nil {
		return err
	}
	r.partial, r.spare = r.spare, r.partial
	if w.buf != nil {
		r.releaseEvent(w.buf)
	}
	r.summarize()
	r.enforceLimit(res)
	return nil
}

// AdvanceTime tells the run that no event before ts will come (Flink's
// NFA.advanceTime): partial matches whose window has passed are dropped
// (reported in res.Timeouts when the NFA was compiled [WithTimeouts]), and
// matches that were waiting on time (notFollowedBy at the end of a pattern)
// are released into res.Matches.
func (r *Run) AdvanceTime(ts event.Time, res *Result) error {
	if r.completed.len() == 0 && (!r.hasDeadline || r.deadline > ts) {
		// No partial match has reached its deadline (the cached earliest
		// one) and none is held back: the loop below would offer every
		// computation again in heap-array order, which rebuilds the same
		// heap, and release nothing. Only the event counters behind ts
		// go.
		r.forgetCounts(ts)
		return nil
	}
	r.use(res)
	newPartial := &r.spare
	newPartial.reset()
	potential := &r.potential
	potential.reset()
	window := r.nfa.windowTime
	for _, cs := range r.partial.q {
		if cs.isStart() {
			newPartial.offer(cs)
			continue
		}
		gap := cs.state.gap
		// Flink's ts - start >= window, as ts >= start + window, which
		// neither overflows near MinTime nor wraps near MaxTime (Plus).
		byPrev := gap > 0 && ts >= cs.prevTs.Plus(gap)
		byFirst := window > 0 && ts >= cs.startTs.Plus(window)
		if !byPrev && !byFirst {
			newPartial.offer(cs)
			continue
		}
		if cs.state.typ == stPending {
			cs.doneAt = cs.startTs.Plus(window)
			if byPrev {
				cs.doneAt = cs.prevTs.Plus(gap)
			}
			potential.offer(cs)
			continue
		}
		if r.nfa.handleTimeout {
			at := cs.startTs.Plus(window)
			if byPrev {
				at = cs.prevTs.Plus(gap)
			}
			res.Timeouts = append(res.Timeouts, Timeout{Match: r.materialize(r.extractOne(cs)), At: at})
		}
		r.releaseNode(cs.prev, &cs.version)
		r.freeComp(cs)
	}
	if err := r.processMatches(potential, newPartial, res); err != nil {
		return err
	}
	r.partial, r.spare = r.spare, r.partial
	r.summarize()
	r.forgetCounts(ts)
	return nil
}

// forgetCounts forgets the per-timestamp event counters behind ts (Flink's
// SharedBuffer.advanceTime); countsMin saves the scan when none is.
func (r *Run) forgetCounts(ts event.Time) {
	if r.counts.len() > 0 && r.countsMin < ts {
		r.countsMin = event.MaxTime
		r.counts.each(func(t event.Time, _ int32) {
			if t < ts {
				r.counts.del(t)
			} else if t < r.countsMin {
				r.countsMin = t
			}
		})
	}
}

type wrapped struct {
	ev  *event.Event
	ts  event.Time
	buf *bufEvent
}

func (r *Run) eventOf(w *wrapped) *bufEvent {
	if w.buf == nil {
		w.buf = r.registerEvent(w.ev, w.ts)
	}
	return w.buf
}

// accepts evaluates t, transition i of its state, for ev in ctx, and
// notes the result in took (the first len(took) transitions' results):
// an ignore that negates an earlier take reads that take's result instead
// of evaluating its condition again.
func (t *transition) accepts(i int, took *[16]bool, ev *event.Event, ctx *Context) bool {
	ok := true
	switch {
	case t.negOf > 0 && t.negOf <= len(took):
		ok = !took[t.negOf-1]
	case t.cond != nil:
		ok = t.cond.Eval(ev, ctx)
	}
	if i < len(took) {
		took[i] = ok
	}
	return ok
}

// errEpsilonCycle guards against patterns whose proceed edges form a cycle
// (Flink would loop forever on them).
var errEpsilonCycle = errors.New("nfa: pattern has a cycle of proceed transitions")

// waitShortcut turns on Process's shortcut for computations in a state
// that waits (state.waits); tests turn it off to compare.
var waitShortcut = true

// decisionGraph collects in r.edges the take and ignore transitions that
// accept ev from cs's state, through proceed transitions. took says that
// the first transition of cs's state is known to accept ev (Process
// evaluated it): its condition is not evaluated again.
func (r *Run) decisionGraph(cs *computation, ev *event.Event, ctx *Context, took bool) (takes, ignores int, err error) {
	r.edges = r.edges[:0]
	r.stack = append(r.stack[:0], cs.state)
	budget := 64 * (len(r.nfa.states) + 1)
	for len(r.stack) > 0 {
		if budget--; budget < 0 {
			return 0, 0, errEpsilonCycle
		}
		s := r.stack[len(r.stack)-1]
		r.stack = r.stack[:len(r.stack)-1]
		var results [16]bool // what each of the first transitions' conditions gave
		for i := range s.trans {
			t := &s.trans[i]
			if took {
				took = false // only cs's state, visited first, and its first transition
				results[0] = true
			} else if !t.accepts(i, &results, ev, ctx) {
				continue
			}
			switch t.act {
			case actProceed:
				r.stack = append(r.stack, t.dst)
			case actIgnore:
				r.edges = append(r.edges, t)
				if t.dst != cs.state {
					ignores++
				}
			case actTake:
				r.edges = append(r.edges, t)
				takes++
			}
		}
	}
	return takes, ignores, nil
}

func increaseSelf(ignores, takes int) int {
	if takes == 0 && ignores == 0 {
		return 0
	}
	return ignores + max(1, takes)
}

// computeNextStates appends to out what cs becomes on w (took: see
// decisionGraph).
func (r *Run) computeNextStates(cs *computation, w *wrapped, out []*computation, took bool) ([]*computation, error) {
	ctx := &r.ctx
	ctx.reset(r, cs, w.ts)
	takes, ignores, err := r.decisionGraph(cs, w.ev, ctx, took)
	if err != nil {
		return out, err
	}
	takeToVisit := max(0, takes-1)
	ignoreToVisit := ignores
	takeToSkip := max(0, takes-1)
	start := cs.isStart()
	reused := false
	// r.edges may be reused by findFinalAfterProceed's condition calls only
	// through r.stack, never r.edges, so iterating it here is safe.
	for _, t := range r.edges {
		switch t.act {
		case actIgnore:
			if start {
				continue
			}
			var v dewey
			if t.dst == cs.state {
				inc := increaseSelf(ignores, takes)
				if inc == 0 && !reused {
					// The computation stays as it is (a non-matching event
					// under relaxed contiguity): keep it and its buffer
					// locks instead of locking for a copy and releasing
					// the original, which nets to the same counts.
					reused = true
					out = append(out, cs)
					continue
				}
				v = cs.version.increase(inc)
			} else {
				v = cs.version.increase(takeToSkip + ignoreToVisit).addStage()
				ignoreToVisit--
			}
			out = r.addComputation(out, r.newComp(computation{
				state: t.dst, version: v, startTs: cs.startTs, prevTs: cs.prevTs,
				prev: cs.prev, startID: cs.startID, hasStart: cs.hasStart,
			}))
		case actTake:
			cur, next := cs.version.increaseAndStage(takeToVisit)
			takeToVisit--
			buf := r.eventOf(w)
			entry := r.put(t.src.stage, buf, cs.prev, &cur)
			startTs, startID := cs.startTs, cs.startID
			if start {
				startTs, startID = w.ts, buf.id
			}
			out = r.addComputation(out, r.newComp(computation{
				state: t.dst, version: next, startTs: startTs, prevTs: w.ts,
				prev: entry, startID: startID, hasStart: true,
			}))
			fin, err := r.findFinalAfterProceed(ctx, t.dst, w.ev)
			if err != nil {
				return out, err
			}
			if fin != nil {
				out = r.addComputation(out, r.newComp(computation{
					state: fin, version: next, startTs: startTs, prevTs: w.ts,
					prev: entry, startID: startID, hasStart: true,
				}))
			}
		}
	}
	if start {
		// Flink makes a new start computation with the increased
		// version; the old one is dropped, and nothing but the queue
		// being replaced refers to it, so it can take the new version.
		if inc := increaseSelf(ignores, takes); inc != 0 {
			cs.version = cs.version.increase(inc)
		}
		out = append(out, cs)
	}
	if !cs.prev.isNil() && !reused {
		r.releaseNode(cs.prev, &cs.version)
	}
	return out, nil
}

func (r *Run) addComputation(out []*computation, c *computation) []*computation {
	r.lockNode(c.prev, &c.version)
	return append(out, c)
}

func (r *Run) findFinalAfterProceed(ctx *Context, s *state, ev *event.Event) (*state, error) {
	stack := []*state{s}
	budget := 64 * (len(r.nfa.states) + 1)
	for len(stack) > 0 {
		if budget--; budget < 0 {
			return nil, errEpsilonCycle
		}
		cur := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for i := range cur.trans {
			t := &cur.trans[i]
			if t.act != actProceed || (t.cond != nil && !t.cond.Eval(ev, ctx)) {
				continue
			}
			if t.dst.isFinal() {
				return t.dst, nil
			}
			stack = append(stack, t.dst)
		}
	}
	return nil, nil
}

// processMatches emits completed matches in start order. With a skip
// strategy a match is held back while an earlier-starting partial match is
// still alive, since that one may still complete and prune it.
func (r *Run) processMatches(potential, partial *compQueue, res *Result) error {
	for _, c := range potential.q {
		r.completed.offer(c)
	}
	skip := r.nfa.skip.isSkip()
	for {
		earliest := r.completed.peek()
		if earliest == nil {
			break
		}
		if skip {
			if ep := partial.peek(); ep != nil && compLess(earliest, ep) > 0 {
				break
			}
		}
		r.completed.poll()
		paths := r.extract(earliest.prev, &earliest.version)
		if len(paths) == 0 {
			r.releaseNode(earliest.prev, &earliest.version)
			r.freeComp(earliest)
			continue
		}
		id, ok, err := r.pruningID(paths)
		if err != nil {
			return err
		}
		if ok {
			r.prune(partial, id)
			r.prune(&r.completed, id)
		}
		m := r.materialize(paths[0])
		m.At = earliest.doneAt
		res.Matches = append(res.Matches, m)
		r.releaseNode(earliest.prev, &earliest.version)
		r.freeComp(earliest)
	}
	return nil
}

func (r *Run) prune(q *compQueue, pruning eventID) {
	// The heap's root has the smallest start (computations without one
	// come last): when it is kept, so is every other. Without this,
	// every completed match scanned both queues (narrow seed 4407 case
	// 21460: 10,405 matches over 117,208 partial matches in one step).
	if first := q.peek(); first == nil || !first.hasStart || !r.shouldPrune(first.startID, pruning) {
		return
	}
	discard := r.discard[:0]
	for _, c := range q.q {
		if c.hasStart && r.shouldPrune(c.startID, pruning) {
			r.releaseNode(c.prev, &c.version)
			discard = append(discard, c)
		}
	}
	if len(discard) > 0 {
		// Hundreds of discarded partial matches among thousands (nested
		// loops): found by hash, not each against each.
		var byHash map[uint64][]*computation
		if len(discard) > pruneByHash {
			byHash = make(map[uint64][]*computation, len(discard))
			for _, d := range discard {
				h := d.hash()
				byHash[h] = append(byHash[h], d)
			}
		}
		q.removeIf(func(x *computation) bool {
			ds := discard
			if byHash != nil {
				ds = byHash[x.hash()]
			}
			for _, d := range ds {
				if x.equal(d) {
					return true
				}
			}
			return false
		})
		for _, d := range discard {
			r.freeComp(d)
		}
	}
	clear(discard)
	r.discard = discard[:0]
}

// extractOne returns the single path of a computation (empty if it has taken
// nothing).
func (r *Run) extractOne(c *computation) path {
	if c.prev.isNil() {
		return nil
	}
	paths := r.extract(c.prev, &c.version)
	if len(paths) == 0 {
		return nil
	}
	return paths[0]
}

// currentMatchInto is the events of c's partial match by stage, as
// materialize(extractOne(c)) gives them, in dst's storage. It walks the
// path extract would find first (the last compatible edge at each node)
// and falls back to extract where that walk ends before the start.
func (r *Run) currentMatchInto(dst [][]*event.Event, c *computation) [][]*event.Event {
	n := r.nfa.numStages()
	if cap(dst) < n {
		dst = make([][]*event.Event, n)
	}
	dst = dst[:n]
	for i := range dst {
		clear(dst[i])
		dst[i] = dst[i][:0]
	}
	if !c.prev.live() {
		return dst
	}
	walk := r.walk[:0]
	nd, v := c.prev.n, &c.version
	for nd != nil {
		walk = append(walk, nd)
		var next *edge
		edges := r.edgesFor(nd, v)
		for i := len(edges) - 1; i >= 0; i-- {
			e := edges[i]
			if v.compatible(&e.version) && !e.target.removed() {
				next = e
				break
			}
		}
		if next == nil {
			clear(walk)
			r.walk = walk[:0]
			for _, e := range r.extractOne(c) {
				dst[e.stage] = append(dst[e.stage], e.ev.ev)
			}
			return dst
		}
		nd, v = next.target.n, &next.version
	}
	for i := len(walk) - 1; i >= 0; i-- {
		x := walk[i]
		dst[x.stage] = append(dst[x.stage], x.ev.ev)
	}
	clear(walk)
	r.walk = walk[:0]
	return dst
}

// materialize returns p's events by stage in two allocations: the stage
// lists are capped windows of one slice, in stage order (a caller's append
// to one list copies it instead of overwriting the next), and a stage
// that took nothing holds nil.
func (r *Run) materialize(p path) Match {
	n := r.nfa.numStages()
	m := Match{Events: make([][]*event.Event, n)}
	if len(p) == 0 {
		return m
	}
	counts := r.stageFirst[:0]
	for range n {
		counts = append(counts, 0)
	}
	r.stageFirst = counts
	for _, e := range p {
		counts[e.stage]++
	}
	flat := make([]*event.Event, len(p))
	at := int32(0)
	for i, k := range counts {
		if k > 0 {
			m.Events[i] = flat[at : at : at+k]
			at += k
		}
	}
	for _, e := range p {
		m.Events[e.stage] = append(m.Events[e.stage], e.ev.ev)
	}
	return m
}

// enforceLimit drops the partial matches that started latest while the run
// holds more than its limit (see docs/decisions.md).
func (r *Run) enforceLimit(res *Result) {
	limit := int(r.maxPartial)
	if limit <= 0 {
		return
	}
	n := r.PartialMatches()
	if n <= limit {
		return
	}
	var cands []*computation
	for _, c := range r.partial.q {
		if !c.isStart() {
			cands = append(cands, c)
		}
	}
	sort.SliceStable(cands, func(i, j int) bool { return compLess(cands[i], cands[j]) > 0 })
	excess := n - limit
	if excess > len(cands) {
		excess = len(cands)
	}
	dead := make(map[*computation]bool, excess)
	for _, c := range cands[:excess] {
		dead[c] = true
		r.releaseNode(c.prev, &c.version)
	}
	r.partial.removeIf(func(c *computation) bool { return dead[c] })
	for c := range dead {
		r.freeComp(c)
	}
	r.summarize()
	res.Dropped += excess
}

// String describes the automaton, one state per line, for debugging and
// golden tests.
func (n *NFA) String() string {
	var s string
	for _, st := range n.states {
		kind := [...]string{"normal", "start", "final", "stop", "pending"}[st.typ]
		s += fmt.Sprintf("%s (%s", st.name, kind)
		if st.gap > 0 {
			s += fmt.Sprintf(", gap %dms", st.gap)
		}
		s += ")\n"
		for _, t := range st.trans {
			s += fmt.Sprintf("  %s -> %s\n", t.act, t.dst.name)
		}
	}
	return s
}
