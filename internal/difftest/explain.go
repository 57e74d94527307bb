package difftest

import (
	"cmp"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/cepheus-cep/cepheus/internal/conformance"
)

// Explanation is a deliberate difference between Cepheus and Flink
// (docs/flink-differences.md) together with the code that recognises it.
// A disagreement counts as explained only when an explanation applies.
//
// An explanation is as narrow as the difference allows. Where the case can
// be changed so that the difference cannot arise (a counterfactual: the
// restored-late elements removed, every key woken at every time advance),
// Flink is run again on the changed case and Cepheus's result must equal
// that exactly. Where no counterfactual exists, Cepheus's result must equal
// Flink's up to the first step at which the difference can act, and the
// rest must be what the documented rule predicts.
type Explanation struct {
	// ID is the id of the entry in docs/flink-differences.md.
	ID string
	// Reason says why Cepheus differs, in one line.
	Reason string
	// Counterfactual, when set, returns the case changed so that the
	// difference cannot arise, and for each step of the changed case (an
	// operator step, or an event of an nfa_harness case) the step of in it
	// stands for. ok is false when in cannot show the difference; the
	// explanation then does not apply.
	Counterfactual func(in *conformance.Input) (cf conformance.Input, steps []int, ok bool)
	// Applies says whether the difference accounts for every way in which
	// the results of c differ. It must not accept anything else: an
	// explanation that applies too widely hides bugs.
	Applies func(c *Check) bool
}

// Check is what an explanation looks at.
type Check struct {
	In             *conformance.Input
	Flink, Cepheus *conformance.Result
	// CF is Flink's result on the explanation's counterfactual case, its
	// steps translated to those of In; nil when the explanation has none.
	CF *conformance.Result
}

// Explanations are the registered explanations. Every id has a row in
// docs/flink-differences.md marked as checked by code, and every such row
// an entry here (TestExplanationsDocumented).
var Explanations = []Explanation{
	{
		ID:      "epsilon-cycle",
		Reason:  "Flink loops forever on a cycle of proceed transitions; Cepheus reports an error",
		Applies: epsilonCycle,
	},
	{
		ID: "event-id-collision",
		Reason: "Flink gives an event whose timestamp returns to one already passed the buffer id of an " +
			"earlier event (a Flink bug, reachable only by feeding one NFA out of order)",
		Applies: eventIDCollision,
	},
	{
		ID: "event-id-collision-retimed",
		Reason: "as event-id-collision, where its rule cannot tell from the two results alone: Flink given the " +
			"same case with its timestamps spread apart in the order of the EventIds (no collision) emits what Cepheus emits",
		Counterfactual: retimeCollisions,
		Applies:        eventIDCollisionRetimed,
	},
	{
		ID: "cross-key-timer-order",
		Reason: "keys that fire in one time advance come out in the order of their earliest timers; Flink " +
			"breaks ties in heap order and also fires stale window timers, Cepheus fires keys by (due time, key creation)",
		Applies: func(c *Check) bool { return crossKeyTimerOrder(c.In, c.Flink, c.Cepheus) },
	},
	{
		ID: "window-timer",
		Reason: "Flink wakes a key only at its buffered elements' timers and at the within timer of a " +
			"partial match that started after time 0; Cepheus wakes it at every deadline",
		Counterfactual: wakeEveryKey,
		Applies:        windowTimer,
	},
	{
		ID: "restored-watermark",
		Reason: "a restored Cepheus operator keeps its watermark (checkpoints persist watermarks); a restored " +
			"Flink CepOperator starts again at Long.MIN_VALUE, so elements at or behind the old watermark are not late there",
		Counterfactual: withoutRestoredLate,
		Applies:        restoredWatermark,
	},
	{
		ID: "restored-processing-clock",
		Reason: "a restored Cepheus operator keeps its processing clock; Flink's test harness restores into a new " +
			"harness whose clock starts again at 0, so an element arriving before the next clock advance gets no window timer",
		Counterfactual: withClockRestored,
		Applies:        restoredProcessingClock,
	},
	{
		ID: "greedy-until-null-target",
		Reason: "Flink's NFACompiler gives an optional greedy loop with until after a notFollowedBy a transition " +
			"to a null state (NullPointerException when the until condition holds, or in the compiler with optional stages " +
			"between); Cepheus leaves that transition out",
		Applies: greedyUntilNullTarget,
	},
	{
		ID: "stop-without-entry",
		Reason: "Flink 2.x fails with a NullPointerException when a NOT stage is reached before any " +
			"event was taken (releaseNode(null)); Cepheus drops the branch as Flink 1.x did",
		Applies: stopWithoutEntry,
	},
	{
		ID: "flink-timeout",
		Reason: "Flink does not finish the case within the runner's longer limit (nested loops: its shared buffer " +
			"scans every edge of a node, tens of thousands); Cepheus, which indexes them, does, and emitted what Flink did before it stopped",
		Applies: flinkTimeout,
	},
}

// Explain returns the first explanation that applies to a disagreement of
// a one-rule case, or nil. cfs holds Flink's results on the counterfactual
// cases, by explanation id (see [Counterfactuals]); an explanation with a
// counterfactual whose result is missing does not apply.
func Explain(in *conformance.Input, flink, cepheus *conformance.Result, cfs map[string]*conformance.Result) *Explanation {
	for i := range Explanations {
		e := &Explanations[i]
		c := &Check{In: in, Flink: flink, Cepheus: cepheus}
		if e.Counterfactual != nil {
			if c.CF = cfs[e.ID]; c.CF == nil {
				continue
			}
		}
		if e.Applies(c) {
			return e
		}
	}
	return nil
}

// combinedID is the counterfactual id of several explanations at once.
const combinedID = "combined"

// explainOne explains a disagreement of a one-rule case: the ids of the
// explanation that applies, or of the counterfactual explanations that
// together account for it (their counterfactuals applied at once), or nil.
func explainOne(in *conformance.Input, flink, cepheus *conformance.Result, cfs map[string]*conformance.Result) []string {
	if e := Explain(in, flink, cepheus, cfs); e != nil {
		ids := []string{e.ID}
		if e.Counterfactual != nil {
			// Name what accounts for the rest, when the counterfactual
			// did not remove every difference.
			cf := cfs[e.ID]
			if e.ID == "restored-watermark" {
				fixed := *cf
				fixed.Late, _ = restoredLateList(in, cf.Late)
				cf = &fixed
			}
			if r := residual(in, cf, cepheus); r != "" && r != "=" && r != e.ID {
				ids = append(ids, r)
			}
		}
		return ids
	}
	cf := cfs[combinedID]
	if cf == nil {
		return nil
	}
	_, _, ids := combine(in)
	fixed := *cf
	if slices.Contains(ids, "restored-watermark") {
		late, ok := restoredLateList(in, cf.Late)
		if !ok {
			return nil
		}
		fixed.Late = late
	}
	if _, ok := keyOrderOnly(in, &fixed, cepheus); ok && slices.Contains(ids, "window-timer") {
		return ids
	}
	switch r := residual(in, &fixed, cepheus); r {
	case "":
		return nil
	case "=":
		return ids
	default:
		return append(ids, r)
	}
}

// combine applies every counterfactual that can apply to in, one after
// the other, and returns the changed case, its step map and the ids of the
// explanations whose counterfactuals it applied.
func combine(in *conformance.Input) (conformance.Input, []int, []string) {
	cur, steps := *in, identitySteps(stepCount(in))
	var ids []string
	for _, e := range Explanations {
		if e.Counterfactual == nil {
			continue
		}
		cf, st, ok := e.Counterfactual(&cur)
		if !ok {
			continue
		}
		next := make([]int, len(st))
		for j, s := range st {
			next[j] = steps[s]
		}
		cur, steps = cf, next
		ids = append(ids, e.ID)
	}
	return cur, steps, ids
}

// stepCount is the number of steps of a case: operator steps, or events.
func stepCount(in *conformance.Input) int {
	if in.Driver == conformance.DriverOperator {
		return len(in.OperatorSteps)
	}
	return len(in.Events)
}

// ExplainCase explains a disagreement of any case: for a case with several
// rules, every rule that disagrees must be explained. It returns the ids of
// the explanations used (one per disagreeing rule, without repeats), or
// nil when some difference is unexplained. cfs is keyed by the
// counterfactual case ids of [Counterfactuals].
func ExplainCase(in *conformance.Input, flink, cepheus *conformance.Result, cfs map[string]*conformance.Result) []string {
	if len(in.Rules) == 0 {
		return explainOne(in, flink, cepheus, cfsOf(in.ID, cfs))
	}
	if flink.Error != nil || cepheus.Error != nil || len(flink.Rules) != len(in.Rules) || len(cepheus.Rules) != len(in.Rules) {
		return nil
	}
	var ids []string
	for k := range in.Rules {
		f, c := flink.Rules[k], cepheus.Rules[k]
		if len(Compare(f, c)) == 0 {
			continue
		}
		sub := in.Rule(k)
		got := explainOne(&sub, f, c, cfsOf(sub.ID, cfs))
		if got == nil {
			return nil
		}
		for _, id := range got {
			if !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
	}
	return ids
}

// cfID is the id of the counterfactual case of explanation expl for the
// (one-rule) case id.
func cfID(id, expl string) string { return id + "~" + expl }

// cfsOf picks the counterfactual results of case id, by explanation id.
func cfsOf(id string, cfs map[string]*conformance.Result) map[string]*conformance.Result {
	out := map[string]*conformance.Result{}
	for _, e := range append(Explanations, Explanation{ID: combinedID}) {
		if r := cfs[cfID(id, e.ID)]; r != nil {
			out[e.ID] = r
		}
	}
	return out
}

// Counterfactual is a counterfactual case to run through Flink: the case,
// and the step of the original case each of its steps stands for.
type Counterfactual struct {
	Input conformance.Input
	Steps []int
}

// Counterfactuals returns the counterfactual cases of every explanation
// that has one and can apply to in (for a case with several rules, to each
// rule), by id (see cfID).
func Counterfactuals(in *conformance.Input) map[string]Counterfactual {
	out := map[string]Counterfactual{}
	add := func(one *conformance.Input) {
		for _, e := range Explanations {
			if e.Counterfactual == nil {
				continue
			}
			if cf, steps, ok := e.Counterfactual(one); ok {
				cf.ID = cfID(one.ID, e.ID)
				out[cf.ID] = Counterfactual{Input: cf, Steps: steps}
			}
		}
		// Several differences can act in one case: their counterfactuals
		// applied at once.
		if cf, steps, ids := combine(one); len(ids) > 1 {
			cf.ID = cfID(one.ID, combinedID)
			out[cf.ID] = Counterfactual{Input: cf, Steps: steps}
		}
	}
	if len(in.Rules) == 0 {
		add(in)
		return out
	}
	for k := range in.Rules {
		sub := in.Rule(k)
		add(&sub)
	}
	return out
}

// TranslateSteps rewrites the steps of r, a result of a counterfactual
// case, to the steps of the original case (steps[i] for step i). A step
// out of range is left as it is: it then cannot match.
func TranslateSteps(r *conformance.Result, steps []int) {
	tr := func(p *int) *int {
		if p == nil || *p < 0 || *p >= len(steps) {
			return p
		}
		v := steps[*p]
		return &v
	}
	for i := range r.Matches {
		r.Matches[i].Step = tr(r.Matches[i].Step)
	}
	for i := range r.Timeouts {
		r.Timeouts[i].Step = tr(r.Timeouts[i].Step)
	}
	r.ErrorStep = tr(r.ErrorStep)
}

// identitySteps returns 0, 1, ..., n-1.
func identitySteps(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

// agree says whether two results agree exactly (Compare finds nothing).
func agree(a, b *conformance.Result) bool { return len(Compare(a, b)) == 0 }

// epsilonCycle: Cepheus reports the cycle and released nothing, Flink hit
// the runner's per-case timeout.
func epsilonCycle(c *Check) bool {
	flink, cepheus := c.Flink, c.Cepheus
	return cepheus.Error != nil && strings.Contains(*cepheus.Error, "cycle of proceed transitions") &&
		len(cepheus.Matches)+len(cepheus.Timeouts) == 0 &&
		timedOut(flink)
}

// eventIDCollision recognises the consequences of Flink's EventId reuse.
//
// Flink's SharedBuffer names an event by (timestamp, n), n counting the
// events registered with that timestamp, and advanceTime(t) drops the
// counters of the timestamps below t. When an nfa_harness stream goes back
// to a timestamp it has already passed (2, 3, 2), the later event gets the
// id of the earlier one: it replaces the earlier event in the buffer and
// shares its nodes, so Flink's matches show it in the earlier event's place
// (even twice in one match), and reference counts go wrong until a lookup
// fails (NullPointerException on Lockable.getElement, "Referring to non
// existent event") or an extraction loops. Cepheus keeps the ids for
// ordering but stores every event under its own key. The operator feeds
// each key's NFA in timestamp order, and reaches this only after a
// watermark went back (operatorCollisions).
//
// No counterfactual exists (Flink cannot be fed the same stream without
// the collision), so it applies when: both results are equal up to the
// first event that collides (every item of an earlier step, in order);
// from there on, every item found on one side only involves an event that
// may have collided, each of Flink's pairs with a Cepheus item of the same
// step and shape that differs only where colliding events are, and
// Cepheus's others come out at such a step; and when Flink failed, it failed at or after that
// event with a symptom of a corrupt buffer, or with a skip strategy's
// error on a match the collision changed. What Cepheus emits from the
// step at which Flink failed has no Flink answer to compare with; Cepheus
// may fail only there or later, or not at all.
func eventIDCollision(c *Check) bool {
	in, flink, cepheus := c.In, c.Flink, c.Cepheus
	var coll map[uint64]bool
	var first int
	switch in.Driver {
	case conformance.DriverNFA:
		coll, first = collidingSeqs(in.Events), firstCollision(in.Events)
	case conformance.DriverOperator:
		// A watermark that goes back lets a key's NFA take an event
		// behind the time it advanced to; the rest of the operator's
		// output (watermarks, late elements) is not touched.
		coll, first = operatorCollisions(in)
		wf, wc := watermarkItems(flink.Output), watermarkItems(cepheus.Output)
		// Flink, failed at step e, saw no element after it: the late
		// elements compared are those that arrived up to e.
		late := cepheus.Late
		if flink.Error != nil && flink.ErrorStep != nil {
			late = lateBefore(in, cepheus.Late, *flink.ErrorStep+1)
		}
		if !slices.Equal(flink.Late, late) || !isPrefix(wf, wc) || flink.Error == nil && len(wf) != len(wc) {
			return false
		}
	default:
		return false
	}
	if len(coll) == 0 || first < 0 {
		return false
	}
	end := math.MaxInt // the first step without a Flink answer
	if flink.Error != nil {
		if !bufferCorruption(*flink.Error) && !strings.Contains(*flink.Error, "Could not skip to") {
			return false
		}
		if flink.ErrorStep != nil {
			end = *flink.ErrorStep
		}
		if end < first {
			return false
		}
	}
	if cepheus.Error != nil && (flink.Error == nil || !failedAfter(cepheus, end)) {
		return false
	}
	// The prefix before the first collision: equal, in order.
	fm, cm := stepRange(flink.Matches, 0, first), stepRange(cepheus.Matches, 0, first)
	ft, ct := stepRangeT(flink.Timeouts, 0, first), stepRangeT(cepheus.Timeouts, 0, first)
	if !slices.Equal(matchKeys(fm), matchKeys(cm)) || !slices.Equal(timeoutKeys(ft), timeoutKeys(ct)) {
		return false
	}
	involves := func(ms [][]uint64) bool {
		for _, m := range ms {
			if !slices.ContainsFunc(m, func(s uint64) bool { return coll[s] }) {
				return false
			}
		}
		return true
	}
	fm, cm = stepRange(flink.Matches, first, end), stepRange(cepheus.Matches, first, end)
	ft, ct = stepRangeT(flink.Timeouts, first, end), stepRangeT(cepheus.Timeouts, first, end)
	onlyF, onlyC := differing(matchKeys(fm), matchSeqs(fm), matchKeys(cm), matchSeqs(cm))
	onlyFT, onlyCT := differing(timeoutKeys(ft), timeoutSeqs(ft), timeoutKeys(ct), timeoutSeqs(ct))
	// A collision changes which events an item holds, never when an item
	// with the same events comes out: the same events released at another
	// step (or via another release) on the other side is no collision.
	if moved(onlyF, onlyC) || moved(onlyFT, onlyCT) {
		return false
	}
	if !involves(onlyF) || !involves(onlyC) || !involves(onlyFT) || !involves(onlyCT) {
		return false
	}
	// Each item Flink got wrong stands for one Cepheus item of the same
	// step and shape, which differs only where a colliding event is.
	tsOf := map[uint64]int64{}
	for _, e := range in.Events {
		if e.Ts != nil {
			tsOf[e.Seq] = *e.Ts
		}
	}
	// When Flink then failed on its corrupt buffer, it may also have lost
	// an item whose path runs through a node two of its events share.
	lost := flink.Error != nil && bufferCorruption(*flink.Error)
	// When it then failed to find an event of its buffer by its id, its
	// table of events by id was what the collision corrupted: a condition
	// that read an event through that id may have read the other event
	// and let an item through.
	misread := lost && strings.Contains(*flink.Error, "SharedBuffer.getEvent")
	// Such a match may also have taken two events through one node, of
	// which its path then shows one (lostPosition; the nfa harness only,
	// whose feed order is the order of the events).
	// And a condition that read, through ctx, an event whose id a later
	// event of the same match had taken found the later event there and
	// may have rejected it: Flink lost the match (readsReplaced).
	var short, rejected func(conformance.StageSeqs) bool
	if misread && in.Driver == conformance.DriverNFA {
		least := leastTaken(in.Pattern)
		short = func(st conformance.StageSeqs) bool { return lostPosition(st, least, in.Events) }
		if len(contextStages(in.Pattern.Stages)) > 0 {
			rejected = func(st conformance.StageSeqs) bool { return readsReplaced(st, in.Events) }
		}
	}
	// A Flink item holding one colliding event twice stands for no
	// Cepheus item: a condition read, through the id the later event
	// took, the later event in the earlier one's place. With the getEvent
	// failure as the proof, the item is accepted whatever the stage. The
	// failure of a condition whose ctx found two paths back from its
	// partial match's node (twoPaths: the later event had gone into the
	// node of the earlier one, which a partial match still held, so it had
	// taken the earlier one's place in the table of events too) is a proof
	// only where the event's first place in the item is a stage that a
	// condition reads through ctx, the stage of the read (narrow seed 4405
	// case 4204; in any stage, Flink's {s1:[3] s3:[4,7,6,7]} there would
	// excuse a Cepheus result without its {s1:[3] s3:[4,5,6,7]}).
	var repeats func(conformance.StageSeqs) bool
	switch {
	case misread:
		repeats = func(st conformance.StageSeqs) bool {
			return repeatsCollided(st, coll, func(string) bool { return true })
		}
	case lost && twoPaths(*flink.Error):
		read := contextStages(in.Pattern.Stages)
		repeats = func(st conformance.StageSeqs) bool {
			return repeatsCollided(st, coll, func(stage string) bool { return read[stage] })
		}
	}
	return pairsByCollision(collidedMatches(fm), collidedMatches(cm), coll, tsOf, lost, repeats, short, rejected) &&
		pairsByCollision(collidedTimeouts(ft), collidedTimeouts(ct), coll, tsOf, lost, repeats, nil, nil)
}

// collided is a match or timeout as pairsByCollision sees it: its key,
// its step, what else must agree (via, or a timeout's timestamp) and its
// events.
type collided struct {
	key    string
	step   *int
	tag    string
	stages conformance.StageSeqs
}

func collidedMatches(ms []conformance.MatchResult) []collided {
	keys := matchKeys(ms)
	out := make([]collided, len(ms))
	for i, m := range ms {
		out[i] = collided{keys[i], m.Step, m.Via, m.Stages}
	}
	return out
}

func collidedTimeouts(ts []conformance.TimeoutResult) []collided {
	keys := timeoutKeys(ts)
	out := make([]collided, len(ts))
	for i, t := range ts {
		out[i] = collided{keys[i], t.Step, strconv.FormatInt(t.Timestamp, 10), t.Stages}
	}
	return out
}

// pairsByCollision says whether each item found in Flink's result only
// (by key) pairs with its own Cepheus-only item of the same step and tag
// (via or timestamp) that it can be through collisions (collisionVariant)
// or holds a colliding event twice where a condition may have read the
// replaced node and let it through (repeats, nil unless Flink's failure
// later shows such a read) or, when Flink failed later to find an event by
// its id, is a match that lost a position at such a node (short, nil for
// timeouts and otherwise), and whether every Cepheus-only
// item left over comes out at such a step
// (a collision can also merge two of Cepheus's matches into one of
// Flink's, the later event taking the earlier one's place) or, when Flink
// failed on its buffer later (lost), holds two events that share a node,
// or is a match that a condition which read a replaced event rejected
// (rejected: nil for timeouts, and unless misread).
func pairsByCollision(f, c []collided, coll map[uint64]bool, tsOf map[uint64]int64, lost bool, repeats, short, rejected func(conformance.StageSeqs) bool) bool {
	keys := func(xs []collided) []string {
		out := make([]string, len(xs))
		for i, x := range xs {
			out[i] = x.key
		}
		return out
	}
	fk, ck := keys(f), keys(c)
	onlyF, onlyC := onlyItems(fk, ck), onlyItems(ck, fk)
	used := make([]bool, len(onlyC))
	steps := map[int]bool{}
	for _, i := range onlyF {
		found := false
		for j, cj := range onlyC {
			if !used[j] && f[i].tag == c[cj].tag && sameStep(f[i].step, c[cj].step) &&
				collisionVariant(f[i].stages, c[cj].stages, coll, tsOf) {
				used[j], found = true, true
				steps[*f[i].step] = true
				break
			}
		}
		if !found && !(repeats != nil && repeats(f[i].stages)) && !(short != nil && short(f[i].stages)) {
			return false
		}
	}
	for k, j := range onlyC {
		if st := c[j].step; !used[k] && (st == nil || !steps[*st]) && !(lost && sharesNode(c[j].stages, coll, tsOf)) &&
			!(rejected != nil && rejected(c[j].stages)) {
			return false
		}
	}
	return true
}

// repeatsCollided says whether an item holds one event that may have
// collided twice, the first time in a stage that first accepts: no path of
// a sound buffer takes an event twice, so the colliding event's id stands
// there for the event whose id it took, whose node it replaced (a
// condition that read that node read the other event).
func repeatsCollided(stages conformance.StageSeqs, coll map[uint64]bool, first func(stage string) bool) bool {
	seen := map[uint64]string{} // event -> the stage it is first in
	for _, st := range stages {
		for _, x := range st.Seqs {
			at, ok := seen[x]
			if ok && coll[x] && first(at) {
				return true
			}
			if !ok {
				seen[x] = st.Stage
			}
		}
	}
	return false
}

// lostPosition says whether a match holds, in a top-level stage, one event
// fewer than the stage's quantifier lets a match hold (least), and among
// them an event x that may have taken the id of an earlier event y that
// the match does not hold and that comes between x and the match's event
// before x (mayTakeID). No sound NFA completes a stage with fewer events
// than its minimum: the partial match took y, and then x (its condition
// read y through y's id, which x had taken, and found x), and x's node,
// named by that id and the stage, is y's, so the path through the two
// positions passes the node once. Flink's extraction shows x there, once.
func lostPosition(stages conformance.StageSeqs, least map[string]int, evs []conformance.EventSpec) bool {
	idx := make(map[uint64]int, len(evs))
	for i, e := range evs {
		idx[e.Seq] = i
	}
	flat := stages.Flat()
	at := 0 // the position in flat of the stage's first event
	for _, st := range stages {
		if n, ok := least[st.Stage]; ok && len(st.Seqs) == n-1 {
			for k, x := range st.Seqs {
				j, ok := idx[x]
				if !ok {
					continue
				}
				prev := -1 // the event before x in the match
				if at+k > 0 {
					prev = idx[flat[at+k-1]]
				}
				for i := prev + 1; i < j; i++ {
					if mayTakeID(evs, i, j) && !slices.Contains(flat, evs[i].Seq) {
						return true
					}
				}
			}
		}
		at += len(st.Seqs)
	}
	return false
}

// readsReplaced says whether a match holds an event y that may have taken
// the id of an event x fed before it (mayTakeID; the nfa harness, whose
// feed order is the order of the events) that the match also holds, in an
// earlier position. Once another partial match took y, the id named y in
// Flink's table of events, so a condition that read x through ctx while
// deciding on y (or on an event after it) found y's fields in x's place
// and could reject the match: Flink loses it, and a later lookup by that
// id fails (SharedBuffer.getEvent). Narrow seed 3032 case 9960: s3 where
// all(ctx("s1"), .name != name), fed b at 3, b at 4, b at 2, d at 3, a at
// 4; the partial match [3] takes the d first, which gets the first b's id,
// so s3 then reads d != d for the partial match [1], and Flink loses
// {s1:[1] s3:[4]}.
func readsReplaced(stages conformance.StageSeqs, evs []conformance.EventSpec) bool {
	idx := make(map[uint64]int, len(evs))
	for i, e := range evs {
		idx[e.Seq] = i
	}
	flat := stages.Flat()
	for b, y := range flat {
		j, ok := idx[y]
		if !ok {
			continue
		}
		for _, x := range flat[:b] {
			if i, ok := idx[x]; ok && i < j && mayTakeID(evs, i, j) {
				return true
			}
		}
	}
	return false
}

// ctxCall is a call of ctx on a stage name, as the cases write it.
var ctxCall = regexp.MustCompile(`\bctx\(\s*("(?:[^"\\]|\\.)*")\s*\)`)

// contextStages returns the stages whose events a condition of the stages
// (where, chained, until, in groups too) reads through ctx("name").
func contextStages(stages []conformance.StageSpec) map[string]bool {
	out := map[string]bool{}
	eachCondition(stages, func(cond string) {
		for _, m := range ctxCall.FindAllStringSubmatch(cond, -1) {
			if name, err := strconv.Unquote(m[1]); err == nil {
				out[name] = true
			}
		}
	})
	return out
}

// eachCondition calls f with the text of every condition of the stages:
// where, chained, until, in groups too.
func eachCondition(stages []conformance.StageSpec, f func(cond string)) {
	for i := range stages {
		s := &stages[i]
		if s.Condition != nil {
			f(*s.Condition)
		}
		if s.Until != nil {
			f(*s.Until)
		}
		for _, c := range s.Chain {
			f(c.Expr)
		}
		if s.Group != nil {
			eachCondition(s.Group.Stages, f)
		}
	}
}

// leastTaken returns the fewest events a match holds in each top-level
// stage that is no group and no NOT stage: its quantifier's minimum, 0
// when optional.
func leastTaken(p conformance.PatternSpec) map[string]int {
	out := map[string]int{}
	for _, s := range p.Stages {
		if s.Group != nil || s.Contiguity == "notNext" || s.Contiguity == "notFollowedBy" {
			continue
		}
		q := s.Quantifier
		switch {
		case q.Optional:
			out[s.Name] = 0
		case q.Kind == "times" || q.Kind == "timesOrMore":
			out[s.Name] = q.Min
		default: // one, oneOrMore
			out[s.Name] = 1
		}
	}
	return out
}

// sharesNode says whether two events of one stage of an item may have
// collided with each other (both colliding, at one timestamp): Flink's
// buffer then has one node for both, whose edge leads back into the path,
// and the item's extraction is lost or fails.
func sharesNode(stages conformance.StageSeqs, coll map[uint64]bool, tsOf map[uint64]int64) bool {
	for _, st := range stages {
		for i, x := range st.Seqs {
			for _, y := range st.Seqs[i+1:] {
				if x != y && coll[x] && coll[y] && tsOf[x] == tsOf[y] {
					return true
				}
			}
		}
	}
	return false
}

// onlyItems returns the indices of the items of a not matched by an item
// of b (by key, as multisets).
func onlyItems(a, b []string) []int {
	left := map[string]int{}
	for _, k := range b {
		left[k]++
	}
	var out []int
	for i, k := range a {
		if left[k] > 0 {
			left[k]--
			continue
		}
		out = append(out, i)
	}
	return out
}

func sameStep(a, b *int) bool { return a != nil && b != nil && *a == *b }

// collisionVariant says whether Flink's match a can be Cepheus's match b
// as colliding buffer ids show it: the same stages, each with the same
// events but where both may have collided (coll); and two events in a row
// of one stage that may have collided, at one timestamp (tsOf), can be a
// single event in a. Flink's shared buffer keys a node by the event's id
// and the stage, so the later of two such events overwrites the earlier's
// node, whose edge then leads to the node itself, and the path Flink
// extracts holds the stage's event once (times(2) matched by [3] where
// Cepheus gives [1, 3]).
func collisionVariant(a, b conformance.StageSeqs, coll map[uint64]bool, tsOf map[uint64]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Stage != b[i].Stage || !collapsesTo(a[i].Seqs, b[i].Seqs, coll, tsOf) {
			return false
		}
	}
	return true
}

// collapsesTo says whether the events x of a stage in a Flink item are the
// events y of the same stage in a Cepheus item as collisionVariant allows.
func collapsesTo(x, y []uint64, coll map[uint64]bool, tsOf map[uint64]int64) bool {
	failed := map[[2]int]bool{} // (i, j) already found not to work out
	var walk func(i, j int) bool
	walk = func(i, j int) bool {
		if j == len(y) {
			return i == len(x)
		}
		if failed[[2]int{i, j}] {
			return false
		}
		ok := i < len(x) && (x[i] == y[j] || coll[x[i]] && coll[y[j]] && tsOf[x[i]] == tsOf[y[j]]) && walk(i+1, j+1) ||
			// y[j] went into the node of y[j-1].
			j > 0 && coll[y[j]] && coll[y[j-1]] && tsOf[y[j]] == tsOf[y[j-1]] && walk(i, j+1)
		if !ok {
			failed[[2]int{i, j}] = true
		}
		return ok
	}
	return walk(0, 0)
}

// moved says whether an item of a, by its events, is also an item of b.
func moved(a, b [][]uint64) bool {
	for _, x := range a {
		if slices.ContainsFunc(b, func(y []uint64) bool { return slices.Equal(x, y) }) {
			return true
		}
	}
	return false
}

// stepRange returns the matches released at steps [from, to).
func stepRange(ms []conformance.MatchResult, from, to int) []conformance.MatchResult {
	var out []conformance.MatchResult
	for _, m := range ms {
		if m.Step != nil && *m.Step >= from && *m.Step < to {
			out = append(out, m)
		}
	}
	return out
}

// stepRangeT returns the timeouts emitted at steps [from, to).
func stepRangeT(ts []conformance.TimeoutResult, from, to int) []conformance.TimeoutResult {
	var out []conformance.TimeoutResult
	for _, t := range ts {
		if t.Step != nil && *t.Step >= from && *t.Step < to {
			out = append(out, t)
		}
	}
	return out
}

// twoPaths says whether a Flink error is the checkState of
// NFA.extractCurrentMatches, which a condition meets when it reads ctx and
// its partial match's node has two paths back compatible with its version
// (two events of one stage shared the node): the only IllegalStateException
// without a message that Flink CEP throws from a filter function.
func twoPaths(msg string) bool {
	return strings.Contains(msg, "Failure happened in filter function.") &&
		strings.HasSuffix(msg, "(cause: java.lang.IllegalStateException: null)")
}

// bufferCorruption says whether a Flink error is a symptom of an
// inconsistent shared buffer; a node whose edges lead back to itself also
// makes Flink's extraction loop until the runner's timeout, or until the
// JVM runs out of memory.
func bufferCorruption(msg string) bool {
	return strings.HasPrefix(msg, "timeout:") ||
		// An extraction that loops while it collects events.
		strings.Contains(msg, "OutOfMemoryError") ||
		strings.Contains(msg, "NullPointerException") ||
		// "Referring to non existent event"; the checkState of
		// NFA.extractCurrentMatches when a condition reads ctx.
		strings.Contains(msg, "IllegalStateException") ||
		strings.Contains(msg, "IndexOutOfBoundsException")
}

// collidingSeqs returns the events that may share a Flink EventId: an
// event whose timestamp equals that of an earlier event after a later
// event went past it, and that earlier event. Flink registers only the
// events some partial match takes, so this is the most that can collide.
func collidingSeqs(evs []conformance.EventSpec) map[uint64]bool {
	out := map[uint64]bool{}
	for j := range evs {
		if i := collidesWith(evs, j); i >= 0 {
			out[evs[j].Seq] = true
			for i := range j {
				if evs[i].Ts != nil && *evs[i].Ts == *evs[j].Ts {
					out[evs[i].Seq] = true
				}
			}
		}
	}
	return out
}

// operatorCollisions is collidingSeqs and firstCollision for an operator
// case in event time: the events that may share a Flink EventId with
// another event of their key, and the first step at which the operator
// feeds such an event to its key's NFA (-1: none). CepOperator feeds a
// key's elements at a watermark's timers, timestamp by timestamp, each
// after advancing the key's NFA to it, and then advances the NFA to the
// watermark; an advance to T drops the buffer's event counts of the
// times before T. An element behind a time its key has advanced past is
// late, unless the watermark went back in between (the harness allows
// it): then it is fed to the NFA with a count that starts again at 0, the
// id of the first event its key took at that time. A restore keeps the
// keyed state (buffered elements, the NFA and its buffer's event counts)
// and starts the watermark again at Long.MIN_VALUE; the elements that are
// late for Cepheus only because of that (restoredLate) are left out: they
// make the late elements differ, so the check can hold only for Flink's
// result on the restored-watermark counterfactual, which lacks them.
// An EventComparator orders the elements of one timestamp, which changes
// no count a collision depends on (an advance drops only the counts of
// earlier times), so it needs no model (narrow seed 3037 case 8261).
// Processing time and keys other than the id field are not modelled: none
// collides there.
func operatorCollisions(in *conformance.Input) (coll map[uint64]bool, first int) {
	first = -1
	if tc := in.TimeCharacteristic; tc != "" && tc != "event_time" || in.KeyBy != "" && in.KeyBy != "id" {
		return nil, -1
	}
	bySeq := map[uint64]*conformance.EventSpec{}
	for i := range in.Events {
		bySeq[in.Events[i].Seq] = &in.Events[i]
	}
	type registered struct {
		seqs    []uint64
		dropped int // how many of seqs were registered before the latest drop
	}
	regs := map[int64]map[int64]*registered{} // key -> time -> its events
	pending := map[int64][]*conformance.EventSpec{}
	advance := func(key, to int64) {
		for t, r := range regs[key] {
			if t < to {
				r.dropped = len(r.seqs)
			}
		}
	}
	coll = map[uint64]bool{}
	wm := int64(math.MinInt64)
	skip := restoredLate(in)
	for step, st := range in.OperatorSteps {
		if _, ok := skip[step]; ok {
			continue
		}
		switch {
		case st.ProcessingTime != nil:
			return nil, -1
		case st.SnapshotRestore != nil:
			if *st.SnapshotRestore {
				wm = math.MinInt64
			}
		case st.Event != nil:
			e := bySeq[*st.Event]
			if e == nil || e.Ts == nil {
				return nil, -1
			}
			if *e.Ts > wm {
				key := int64(0)
				if in.KeyBy != "" {
					key = e.ID
				}
				pending[key] = append(pending[key], e)
			}
		case st.Watermark != nil:
			wm = *st.Watermark
			for key, evs := range pending {
				var due, rest []*conformance.EventSpec
				for _, e := range evs {
					if *e.Ts <= wm {
						due = append(due, e)
					} else {
						rest = append(rest, e)
					}
				}
				if len(due) == 0 {
					continue
				}
				pending[key] = rest
				slices.SortStableFunc(due, func(a, b *conformance.EventSpec) int { return cmp.Compare(*a.Ts, *b.Ts) })
				if regs[key] == nil {
					regs[key] = map[int64]*registered{}
				}
				for _, e := range due {
					t := *e.Ts
					advance(key, t)
					r := regs[key][t]
					if r == nil {
						r = &registered{}
						regs[key][t] = r
					}
					if r.dropped > 0 {
						coll[e.Seq] = true
						for _, s := range r.seqs[:r.dropped] {
							coll[s] = true
						}
						if first < 0 {
							first = step
						}
					}
					r.seqs = append(r.seqs, e.Seq)
				}
				advance(key, wm)
			}
		}
	}
	return coll, first
}

// firstCollision returns the index of the first event that may get the id
// of an earlier one, or -1.
func firstCollision(evs []conformance.EventSpec) int {
	for j := range evs {
		if collidesWith(evs, j) >= 0 {
			return j
		}
	}
	return -1
}

// collidesWith returns the index of an earlier event whose Flink EventId
// event j may get (same timestamp, and a later event went past it before
// j), or -1.
func collidesWith(evs []conformance.EventSpec, j int) int {
	for i := range j {
		if mayTakeID(evs, i, j) {
			return i
		}
	}
	return -1
}

// mayTakeID says whether event j, fed after event i, may get i's Flink
// EventId: both have one timestamp, and a later event went past it in
// between (advancing time dropped the count of i's timestamp).
func mayTakeID(evs []conformance.EventSpec, i, j int) bool {
	if evs[i].Ts == nil || evs[j].Ts == nil || *evs[i].Ts != *evs[j].Ts {
		return false
	}
	t := *evs[j].Ts
	return slices.ContainsFunc(evs[i+1:j], func(e conformance.EventSpec) bool { return e.Ts != nil && *e.Ts > t })
}

// stopWithoutEntry recognises Flink 2.x's NullPointerException when a
// branch reaches the stop state of a NOT stage before it took any event.
//
// Flink rejects an optional stage right before notNext/notFollowedBy, but
// not a group that can be skipped entirely (its inner stages optional).
// When such a NOT stage matches the first event, NFA.doProcess releases
// the stop state's previous buffer entry, which is null, and Flink 2.x's
// SharedBuffer.getEntry passes it to its Guava cache, which throws. Flink
// 1.x looked the null key up in a map, found nothing and dropped the
// branch; Cepheus does the same. The job fails in Flink, so its results
// stop there and no counterfactual exists: Cepheus must have emitted
// exactly what Flink did at every step before the failing one, and at the
// failing step what Flink emitted before it threw.
func stopWithoutEntry(c *Check) bool {
	in, flink, cepheus := c.In, c.Flink, c.Cepheus
	if flink.Error == nil || !strings.Contains(*flink.Error, "NullPointerException") ||
		flink.ErrorClass != conformance.ErrorRun || flink.ErrorStep == nil {
		return false
	}
	if !notReachableEmpty(in.Pattern.Stages, true) {
		return false
	}
	return sameUntilFlinkFailed(in, flink, cepheus)
}

// flinkTimeout: Flink did not finish the case (the runner's timeout, after
// the rerun with a longer limit), Cepheus did, and emitted what Flink had
// emitted before it stopped at its last step (sameUntilFlinkFailed). What
// Cepheus emits from that step on has no Flink answer.
func flinkTimeout(c *Check) bool {
	return timedOut(c.Flink) && !crashed(c.Cepheus) && sameUntilFlinkFailed(c.In, c.Flink, c.Cepheus)
}

// sameUntilFlinkFailed says whether Cepheus, which did not fail before
// Flink (failedAfter), emitted what Flink did before Flink failed at run
// time at step e: at the steps
// before e the same matches and timeouts (exactly, or up to the order of
// keys within a step as cross-key-timer-order accepts it); at step e, for
// each key, Flink's items as a prefix of Cepheus's (Flink stopped part way
// through the keys that step fired); nothing of Flink's after e; Flink's
// forwarded watermarks as a prefix of Cepheus's; and the same late
// elements among those that arrived up to e. What Cepheus emits from e on
// has no Flink answer.
func sameUntilFlinkFailed(in *conformance.Input, flink, cepheus *conformance.Result) bool {
	if flink.Error == nil || flink.ErrorClass != conformance.ErrorRun || flink.ErrorStep == nil {
		return false
	}
	e := *flink.ErrorStep
	if !failedAfter(cepheus, e) {
		return false
	}
	if len(stepRange(flink.Matches, e+1, math.MaxInt))+len(stepRangeT(flink.Timeouts, e+1, math.MaxInt)) > 0 {
		return false
	}
	// Before e.
	before := func(r *conformance.Result) *conformance.Result {
		return &conformance.Result{Matches: stepRange(r.Matches, 0, e), Timeouts: stepRangeT(r.Timeouts, 0, e),
			Output: matchOutput(stepRange(r.Matches, 0, e)), Late: lateBefore(in, r.Late, e)}
	}
	fb, cb := before(flink), before(cepheus)
	if !agree(fb, cb) && !(in.Driver == conformance.DriverOperator && crossKeyTimerOrder(in, fb, cb)) {
		return false
	}
	// At e, per key.
	if !prefixPerKey(in, matchKeys(stepRange(flink.Matches, e, e+1)), matchSeqs(stepRange(flink.Matches, e, e+1)),
		matchKeys(stepRange(cepheus.Matches, e, e+1)), matchSeqs(stepRange(cepheus.Matches, e, e+1))) ||
		!prefixPerKey(in, timeoutKeys(stepRangeT(flink.Timeouts, e, e+1)), timeoutSeqs(stepRangeT(flink.Timeouts, e, e+1)),
			timeoutKeys(stepRangeT(cepheus.Timeouts, e, e+1)), timeoutSeqs(stepRangeT(cepheus.Timeouts, e, e+1))) {
		return false
	}
	late := flink.Late
	if in.Driver == conformance.DriverOperator {
		late = lateBefore(in, cepheus.Late, e+1)
	}
	return isPrefix(watermarkItems(flink.Output), watermarkItems(cepheus.Output)) && slices.Equal(flink.Late, late)
}

// failedAfter says whether r, a Cepheus result, has no error, or a run
// error at a step after step e: a failure that the steps Flink answered
// before it failed at e cannot show (a skip target missing from a later
// match, say, as Flink would have found it had it got there).
func failedAfter(r *conformance.Result, e int) bool {
	return r.Error == nil || r.ErrorClass == conformance.ErrorRun && r.ErrorStep != nil && *r.ErrorStep > e
}

// matchOutput is the main output that the matches ms make, without
// watermarks (for comparing parts of operator results).
func matchOutput(ms []conformance.MatchResult) []conformance.OutputItem {
	out := make([]conformance.OutputItem, len(ms))
	for i, m := range ms {
		out[i] = conformance.OutputItem{Match: m.Stages.Flat()}
	}
	return out
}

// prefixPerKey says whether, for every key, the items of f (keys and their
// seqs) are a prefix of those of c; an nfa_harness case has one key.
func prefixPerKey(in *conformance.Input, fKeys []string, fSeqs [][]uint64, cKeys []string, cSeqs [][]uint64) bool {
	ids := map[uint64]int64{}
	if in.Driver == conformance.DriverOperator {
		for _, e := range in.Events {
			ids[e.Seq] = e.ID
		}
	}
	group := func(keys []string, seqs [][]uint64) map[int64][]string {
		out := map[int64][]string{}
		for i, k := range keys {
			var id int64
			if len(seqs[i]) > 0 {
				id = ids[seqs[i][0]]
			}
			out[id] = append(out[id], k)
		}
		return out
	}
	gc := group(cKeys, cSeqs)
	for id, fs := range group(fKeys, fSeqs) {
		if !isPrefix(fs, gc[id]) {
			return false
		}
	}
	return true
}

// greedyUntilNullTarget recognises a bug of Flink's NFACompiler: an
// optional greedy loop with an until condition right after a
// notFollowedBy stage. createSingletonState adds, for the loop's optional
// first state, a proceed transition (taken when the until condition holds)
// to originalStateMap.get(proceedState.getName()), the copy of the loop's
// sink state that createLooping registered; after a notFollowedBy the
// proceed state is the NOT stage's pending state, which has no copy, so
// the transition's target is null and Flink fails with a
// NullPointerException (StateTransition.getTargetState() is null) the
// first time the until condition holds there. Cepheus's compiler leaves
// that transition out. Flink's job fails, so no counterfactual exists:
// Cepheus must have emitted exactly what Flink did before it failed
// (sameUntilFlinkFailed).
func greedyUntilNullTarget(c *Check) bool {
	in, flink, cepheus := c.In, c.Flink, c.Cepheus
	// With optional stages between the notFollowedBy and the loop, Flink's
	// compiler already fails: it copies their states without the NOT's
	// transitions (copyWithoutTransitiveNots) and, following proceed
	// transitions, reaches the null target ("targetState" is null). Flink
	// then emits nothing to compare with.
	if flink.Error != nil && flink.ErrorClass == conformance.ErrorCompile &&
		strings.Contains(*flink.Error, "\"targetState\" is null") {
		return cepheus.ErrorClass != conformance.ErrorCompile && greedyUntilAfterNot(in.Pattern.Stages, true)
	}
	// With a greedy loop with an until condition right before the
	// notFollowedBy, the compiler fails too: that loop's createLooping
	// copies its sink state, the optional loop's first state (a NOT stage
	// makes no state of its own), transition by transition, and reaches
	// the null target (getTargetState() is null, in copy). Wide seed 4824
	// case 2928.
	if flink.Error != nil && flink.ErrorClass == conformance.ErrorCompile &&
		strings.Contains(*flink.Error, "getTargetState()\" is null") {
		return cepheus.ErrorClass != conformance.ErrorCompile && greedyUntilCopied(in.Pattern.Stages)
	}
	// The null target fails where a transition is followed
	// (getTargetState() is null), or later, where a partial match that
	// took it is stepped ("currentState" is null).
	if flink.Error == nil || !strings.Contains(*flink.Error, "getTargetState()\" is null") &&
		!strings.Contains(*flink.Error, "\"currentState\" is null") || !greedyUntilAfterNot(in.Pattern.Stages, false) {
		return false
	}
	return sameUntilFlinkFailed(in, flink, cepheus)
}

// greedyUntilAfterNot says whether some optional greedy loop with an until
// condition follows a notFollowedBy stage, at any group level: directly
// (between false), or through one or more optional stages, none a group
// (between true).
func greedyUntilAfterNot(stages []conformance.StageSpec, between bool) bool {
	for i := range stages {
		s := &stages[i]
		if s.Group != nil && greedyUntilAfterNot(s.Group.Stages, between) {
			return true
		}
		q := &s.Quantifier
		loop := q.Kind == "oneOrMore" || q.Kind == "timesOrMore" || q.Kind == "times" && (q.Max == nil || *q.Max != q.Min)
		if s.Group != nil || !loop || !q.Optional || !q.Greedy || s.Until == nil {
			continue
		}
		j := i - 1
		for between && j > 0 && stages[j].Group == nil && stages[j].Quantifier.Optional && stages[j].Contiguity != "notFollowedBy" {
			j--
		}
		if j >= 0 && stages[j].Contiguity == "notFollowedBy" && (j == i-1) != between {
			return true
		}
	}
	return false
}

// greedyUntilCopied says whether, at some group level, a notFollowedBy
// stage lies between a greedy loop with an until condition (no group)
// and an optional greedy loop with an until condition (greedyUntilAfterNot's
// loop, right after it): the first loop's compilation copies the second's
// first state, null target included.
func greedyUntilCopied(stages []conformance.StageSpec) bool {
	for i := range stages {
		s := &stages[i]
		if s.Group != nil && greedyUntilCopied(s.Group.Stages) {
			return true
		}
		if i == 0 || i+1 >= len(stages) || s.Contiguity != "notFollowedBy" {
			continue
		}
		before := &stages[i-1]
		if before.Group == nil && before.Quantifier.Greedy && before.Until != nil && greedyUntilAfterNot(stages[i:i+2], false) {
			return true
		}
	}
	return false
}

// lateBefore returns the late elements of late that arrived at operator
// steps before step end.
func lateBefore(in *conformance.Input, late []uint64, end int) []uint64 {
	arrived := arrivedBefore(in, end)
	var out []uint64
	for _, s := range late {
		if arrived[s] {
			out = append(out, s)
		}
	}
	return out
}

// arrivedBefore returns the seqs of the elements that arrived at operator
// steps before step end.
func arrivedBefore(in *conformance.Input, end int) map[uint64]bool {
	arrived := map[uint64]bool{}
	for i, st := range in.OperatorSteps {
		if i < end && st.Event != nil {
			arrived[*st.Event] = true
		}
	}
	return arrived
}

// notReachableEmpty says whether some NOT stage of stages can be reached
// before any event was taken, given that the start of stages can be
// (reachable).
func notReachableEmpty(stages []conformance.StageSpec, reachable bool) bool {
	for i := range stages {
		if !reachable {
			return false
		}
		s := &stages[i]
		if i > 0 && strings.HasPrefix(s.Contiguity, "not") {
			return true
		}
		if s.Group != nil && notReachableEmpty(s.Group.Stages, true) {
			return true
		}
		reachable = nullable(s)
	}
	return false
}

// nullable says whether a stage can match without taking an event.
func nullable(s *conformance.StageSpec) bool {
	q := &s.Quantifier
	if q.Optional || q.Kind == "times" && q.Min == 0 {
		return true
	}
	if s.Group != nil {
		for i := range s.Group.Stages {
			if !nullable(&s.Group.Stages[i]) {
				return false
			}
		}
		return true
	}
	return false
}

func isPrefix[T comparable](p, s []T) bool {
	return len(p) <= len(s) && slices.Equal(p, s[:len(p)])
}

func matchSeqs(ms []conformance.MatchResult) [][]uint64 {
	out := make([][]uint64, len(ms))
	for i, m := range ms {
		out[i] = m.Stages.Flat()
	}
	return out
}

func timeoutSeqs(ts []conformance.TimeoutResult) [][]uint64 {
	out := make([][]uint64, len(ts))
	for i, t := range ts {
		out[i] = t.Stages.Flat()
	}
	return out
}

// differing compares two lists of items by key, as multisets, and returns
// the seqs of the items found only in the first list and only in the
// second.
func differing(fKeys []string, fSeqs [][]uint64, cKeys []string, cSeqs [][]uint64) (onlyF, onlyC [][]uint64) {
	for _, i := range onlyItems(fKeys, cKeys) {
		onlyF = append(onlyF, fSeqs[i])
	}
	for _, i := range onlyItems(cKeys, fKeys) {
		onlyC = append(onlyC, cSeqs[i])
	}
	return onlyF, onlyC
}

// fired is one item of an operator result, for the key-order checks: the
// key it belongs to, the step that emitted it, the timer that woke the key
// (or none), and its comparison key.
type fired struct {
	key   int64
	step  int
	wake  int64
	woken bool
	item  string
}

// firedItems returns the matches (and, apart, the timeouts) of r with
// their keys; ok is false when an item has no step or no known key.
func firedItems(in *conformance.Input, r *conformance.Result) (matches, timeouts []fired, ok bool) {
	ids := map[uint64]int64{}
	for _, e := range in.Events {
		ids[e.Seq] = e.ID
	}
	mk := func(seqs []uint64, step *int, wake *int64, item string) (fired, bool) {
		if len(seqs) == 0 || step == nil {
			return fired{}, false
		}
		id, ok := ids[seqs[0]]
		f := fired{key: id, step: *step, item: item}
		if wake != nil {
			f.wake, f.woken = *wake, true
		}
		return f, ok
	}
	mks, tks := matchKeys(r.Matches), timeoutKeys(r.Timeouts)
	for i, m := range r.Matches {
		f, ok := mk(m.Stages.Flat(), m.Step, m.Wake, mks[i])
		if !ok {
			return nil, nil, false
		}
		matches = append(matches, f)
	}
	for i, t := range r.Timeouts {
		f, ok := mk(t.Stages.Flat(), t.Step, t.Wake, tks[i])
		if !ok {
			return nil, nil, false
		}
		timeouts = append(timeouts, f)
	}
	return matches, timeouts, true
}

// keyOrder is what keyOrderOnly found: per step, each side's keys in the
// order they fired, and each key's wake time on each side.
type keyOrder struct {
	steps map[int]*stepOrder
}

type stepOrder struct {
	flink, cepheus []int64         // keys in firing order, each once
	wakeF, wakeC   map[int64]int64 // the timer that woke each key
}

// keyOrderOnly says whether flink and cepheus, results of an operator
// case, differ at most in the order in which different keys came out
// within one step, as timers fire: no errors and the same late elements;
// per key, the same matches and the same timeouts in the same order (with
// via, step and timestamp); per step, the same items; in each step, each
// key's items together (a key fires once per time advance) and, on each
// side, the keys in the order of the timers that woke them; the same
// watermarks, with the same match items between two of them. It returns
// the keys' order per step for further checks.
func keyOrderOnly(in *conformance.Input, flink, cepheus *conformance.Result) (*keyOrder, bool) {
	if in.Driver != conformance.DriverOperator || flink.Error != nil || cepheus.Error != nil ||
		!slices.Equal(flink.Late, cepheus.Late) {
		return nil, false
	}
	fm, ft, okF := firedItems(in, flink)
	cm, ct, okC := firedItems(in, cepheus)
	if !okF || !okC || len(fm)+len(ft) == 0 {
		return nil, false
	}
	for _, pair := range [][2][]fired{{fm, cm}, {ft, ct}} {
		if !sameByKey(pair[0], pair[1]) || !sameByStep(pair[0], pair[1]) {
			return nil, false
		}
	}
	if !slices.Equal(watermarkItems(flink.Output), watermarkItems(cepheus.Output)) {
		return nil, false
	}
	fs, cs := outputSegments(flink.Output), outputSegments(cepheus.Output)
	if len(fs) != len(cs) {
		return nil, false
	}
	for i := range fs {
		if len(multisetMinus(fs[i], cs[i])) > 0 || len(multisetMinus(cs[i], fs[i])) > 0 {
			return nil, false
		}
	}
	ko := &keyOrder{steps: map[int]*stepOrder{}}
	for side, lists := range [2][2][]fired{{fm, ft}, {cm, ct}} {
		for _, items := range lists {
			if !ko.add(items, side == 0) {
				return nil, false
			}
		}
	}
	return ko, true
}

// add records the firing order of items (one side's matches or timeouts)
// and checks it: per step each key's items together, keys in the order of
// their wake times, one wake time per key and step.
func (ko *keyOrder) add(items []fired, flink bool) bool {
	byStep := map[int][]fired{}
	for _, f := range items {
		byStep[f.step] = append(byStep[f.step], f)
	}
	for step, fs := range byStep {
		so := ko.steps[step]
		if so == nil {
			so = &stepOrder{wakeF: map[int64]int64{}, wakeC: map[int64]int64{}}
			ko.steps[step] = so
		}
		order, wakes := &so.cepheus, so.wakeC
		if flink {
			order, wakes = &so.flink, so.wakeF
		}
		var keys []int64
		for i, f := range fs {
			if i > 0 && f.key == fs[i-1].key {
				continue
			}
			if slices.Contains(keys, f.key) {
				return false // a key's items are split by another key's
			}
			keys = append(keys, f.key)
		}
		for _, f := range fs {
			if !f.woken {
				if len(keys) > 1 {
					return false // an element releases one key's items only
				}
				continue
			}
			if w, ok := wakes[f.key]; ok && w != f.wake {
				return false
			}
			wakes[f.key] = f.wake
		}
		for i := 1; i < len(keys); i++ {
			if wakes[keys[i]] < wakes[keys[i-1]] {
				return false // timers fire in time order
			}
		}
		// Matches and timeouts of one step must agree on the key order.
		if len(*order) == 0 {
			*order = keys
		} else if !sameRelativeOrder(*order, keys) {
			return false
		}
	}
	return true
}

// sameRelativeOrder says whether the keys common to a and b come in the
// same order in both.
func sameRelativeOrder(a, b []int64) bool {
	var ab, ba []int64
	for _, k := range a {
		if slices.Contains(b, k) {
			ab = append(ab, k)
		}
	}
	for _, k := range b {
		if slices.Contains(a, k) {
			ba = append(ba, k)
		}
	}
	return slices.Equal(ab, ba)
}

// sameByKey says whether both lists hold, per key, the same items in the
// same order.
func sameByKey(f, c []fired) bool {
	group := func(fs []fired) map[int64][]string {
		out := map[int64][]string{}
		for _, x := range fs {
			out[x.key] = append(out[x.key], x.item)
		}
		return out
	}
	gf, gc := group(f), group(c)
	if len(gf) != len(gc) {
		return false
	}
	for k, v := range gf {
		if !slices.Equal(v, gc[k]) {
			return false
		}
	}
	return true
}

// sameByStep says whether both lists hold, per step, the same multiset of
// items.
func sameByStep(f, c []fired) bool {
	group := func(fs []fired) map[int][]string {
		out := map[int][]string{}
		for _, x := range fs {
			out[x.step] = append(out[x.step], x.item)
		}
		return out
	}
	gf, gc := group(f), group(c)
	if len(gf) != len(gc) {
		return false
	}
	for s, v := range gf {
		if len(multisetMinus(v, gc[s])) > 0 || len(multisetMinus(gc[s], v)) > 0 {
			return false
		}
	}
	return true
}

func watermarkItems(out []conformance.OutputItem) []int64 {
	var ws []int64
	for _, it := range out {
		if it.Watermark != nil {
			ws = append(ws, *it.Watermark)
		}
	}
	return ws
}

// outputSegments splits an output at its watermark items.
func outputSegments(out []conformance.OutputItem) [][]string {
	segs := [][]string{nil}
	for i, it := range out {
		if it.Watermark != nil {
			segs = append(segs, nil)
			continue
		}
		segs[len(segs)-1] = append(segs[len(segs)-1], outputKeys(out[i : i+1])[0])
	}
	return segs
}

// crossKeyTimerOrder recognises outputs that differ only in the order in
// which different keys come out in one time advance.
//
// Both engines fire the keys due in a watermark (or a processing-time
// advance) in the order of their earliest timers, and a fired key releases
// everything it holds up to that time, so each key's items come out
// together. Flink keeps one timer per (key, timestamp) in a binary heap:
// timers of equal time fire in heap order, which depends on the history of
// insertions and removals, where Cepheus fires keys by (due time, the order
// in which their state was created). Flink also fires stale timers: the
// start + within timer of a partial match that has already died still
// wakes its key, earlier than that key's next real deadline, which Cepheus
// fires it at.
//
// It applies when the results differ only in key order within a step
// (keyOrderOnly), and every pair of keys whose order differs is a tie on
// both sides (equal wake times in Flink and in Cepheus) or involves a key
// that Flink woke through a stale window timer: a Flink wake time earlier
// than Cepheus's for that key that is the start + within timer (in
// processing time, start + within + 1) of one of that key's elements that
// arrived before the step.
func crossKeyTimerOrder(in *conformance.Input, flink, cepheus *conformance.Result) bool {
	if flink.Error != nil || cepheus.Error != nil {
		return keyOrderAtFailure(in, flink, cepheus, func(f, c *conformance.Result) bool {
			return crossKeyTimerOrder(in, f, c)
		})
	}
	ko, ok := keyOrderOnly(in, flink, cepheus)
	if !ok {
		return false
	}
	differs := false
	for step, so := range ko.steps {
		if slices.Equal(so.flink, so.cepheus) {
			continue
		}
		differs = true
		stale := func(k int64) bool {
			wf, okF := so.wakeF[k]
			wc, okC := so.wakeC[k]
			return okF && okC && wf < wc && staleTimer(in, k, wf, step)
		}
		for i, a := range so.flink {
			for _, b := range so.flink[i+1:] {
				if !inverted(so.cepheus, a, b) {
					continue
				}
				tie := so.wakeF[a] == so.wakeF[b] && so.wakeC[a] == so.wakeC[b]
				if !tie && !stale(a) && !stale(b) {
					return false
				}
			}
		}
	}
	return differs
}

// keyOrderAtFailure is a key order check (cross-key-timer-order's, or
// window-timer's up to key order) when both engines fail at run time in
// the same step e: some key fails there, after each side emitted the items
// of the keys it fired before that one, in its own order. Before e the
// results must be equal or differ as reorder accepts; in e, per key, Cepheus's items must be
// Flink's, and a key whose items only Flink emitted must be one that Flink
// woke through a stale window timer (which fired it before the failing
// key, where Cepheus, firing it at its real deadline, would fire it after:
// never, as the failure ends the run) or one tied there with the failing
// key's element timer (elementTimer: Flink's heap order fired it first,
// Cepheus's order of keys the failing key), and a key whose items only Cepheus
// emitted must be one that Flink fired after the failing key (through a
// stale timer of the failing key, with no timer at Cepheus's deadline, or
// in a tie with a window or element timer of the failing key that Flink's
// heap broke the other way: flinkFiresFirst; the failing key found by
// failingKey).
// Keys must be reordered before e, or be on one side only in e.
func keyOrderAtFailure(in *conformance.Input, flink, cepheus *conformance.Result, reorder func(f, c *conformance.Result) bool) bool {
	if in.Driver != conformance.DriverOperator || flink.Error == nil || cepheus.Error == nil ||
		flink.ErrorClass != conformance.ErrorRun || cepheus.ErrorClass != conformance.ErrorRun ||
		!sameStep(flink.ErrorStep, cepheus.ErrorStep) || !slices.Equal(flink.Late, cepheus.Late) {
		return false
	}
	e := *flink.ErrorStep
	beforeF, atF, okF := splitAtStep(in, flink, e)
	beforeC, atC, okC := splitAtStep(in, cepheus, e)
	if !okF || !okC {
		return false
	}
	reordered := !agree(beforeF, beforeC)
	if reordered && !reorder(beforeF, beforeC) {
		return false
	}
	byKey := func(fs []fired) map[int64][]fired {
		out := map[int64][]fired{}
		for _, f := range fs {
			out[f.key] = append(out[f.key], f)
		}
		return out
	}
	items := func(fs []fired) []string {
		var out []string
		for _, f := range fs {
			out = append(out, f.item)
		}
		return out
	}
	gF, gC := byKey(atF), byKey(atC)
	for k, cs := range gC {
		if fs, ok := gF[k]; ok && !slices.Equal(items(fs), items(cs)) {
			return false
		}
	}
	failing, ok := failingKey(in, flink, cepheus, e)
	extra := false
	for k, fs := range gF {
		if _, ok := gC[k]; ok {
			continue
		}
		for _, f := range fs {
			if !f.woken || !staleTimer(in, k, f.wake, e) && !(ok && failing != k && elementTimer(in, failing, f.wake, e)) {
				return false
			}
		}
		extra = true
	}
	for k, cs := range gC {
		if _, ok := gF[k]; ok {
			continue
		}
		if !ok {
			return false
		}
		for _, c := range cs {
			if !c.woken || !flinkFiresFirst(in, failing, k, c.wake, e) {
				return false
			}
		}
		extra = true
	}
	return extra || reordered
}

// elementTimer says whether Flink holds, at step e, a timer at w for an
// element of key j that arrived before e and has not been fed yet: its
// timestamp (event time) or the clock at its arrival + 1 (processing time
// with a comparator, which buffers elements; Flink's clock is 0 after a
// restore until a step sets it), not reached before e. A key Flink woke at
// w then tied with j in Flink's timer heap.
func elementTimer(in *conformance.Input, j, w int64, e int) bool {
	procTime := in.TimeCharacteristic == "processing_time"
	if procTime && len(in.EventComparator) == 0 {
		return false
	}
	// Flink's harness clock starts at 0 (AbstractStreamOperatorTestHarness),
	// as after a restore. last: the time reached before e.
	clock, last := int64(0), int64(math.MinInt64)
	var timers []int64
	for _, st := range in.OperatorSteps[:min(e, len(in.OperatorSteps))] {
		switch {
		case st.SnapshotRestore != nil && *st.SnapshotRestore:
			clock = 0 // a restored harness's clock starts at 0; its timers are kept
		case st.ProcessingTime != nil:
			clock = *st.ProcessingTime
			last = max(last, clock)
		case st.Watermark != nil:
			last = max(last, *st.Watermark)
		case st.Event != nil:
			for _, ev := range in.Events {
				if ev.Seq != *st.Event || ev.ID != j {
					continue
				}
				if procTime {
					timers = append(timers, clock+1)
				} else if ev.Ts != nil {
					timers = append(timers, *ev.Ts)
				}
			}
		}
	}
	return w > last && slices.Contains(timers, w)
}

// failingKey returns the key both engines failed at in step e: the key
// Cepheus's error names, when Flink's error is a skip's miss whose match
// holds only elements with the timestamps of that key's elements that
// arrived before e, or, when Flink's error names no elements, the same
// miss (ok false otherwise).
func failingKey(in *conformance.Input, flink, cepheus *conformance.Result, e int) (int64, bool) {
	_, rest, ok := strings.Cut(*cepheus.Error, "cep: key ")
	if !ok {
		return 0, false
	}
	q, err := strconv.QuotedPrefix(rest)
	if err != nil {
		return 0, false
	}
	k, _ := strconv.Unquote(q)
	id, err := strconv.ParseInt(strings.TrimPrefix(k, "\x00"), 10, 64)
	if err != nil || !strings.HasPrefix(k, "\x00") {
		return 0, false
	}
	_, found, ok := strings.Cut(*flink.Error, "Could not skip to ")
	if !ok {
		return 0, false
	}
	ts := map[int64]bool{}
	arrived := arrivedBefore(in, e)
	for _, ev := range in.Events {
		if arrived[ev.Seq] && ev.ID == id && ev.Ts != nil {
			ts[*ev.Ts] = true
		}
	}
	n := 0
	for _, part := range strings.Split(found, "timestamp=")[1:] {
		end := strings.IndexFunc(part, func(r rune) bool { return r < '0' || r > '9' })
		t, err := strconv.ParseInt(part[:max(end, 0)], 10, 64)
		if end <= 0 || err != nil || !ts[t] {
			return 0, false
		}
		n++
	}
	if n == 0 {
		// Flink names no events when the skip's target stage is missing
		// ("Could not skip to first element of a match."): the same miss
		// in Cepheus's error is all there is to go by.
		const miss = "first element of a match"
		return id, strings.HasPrefix(found, miss) && strings.Contains(*cepheus.Error, "could not skip to "+miss)
	}
	return id, true
}

// flinkFiresFirst says whether Flink, in step e (an event-time
// watermark, or a processing-time clock step past every earlier clock),
// can have fired key j before key k, which Cepheus fired there at wake:
// wake is after the time reached before e, and a window timer of j (start
// + within of one of its elements that arrived before e; processing time:
// the clock at its arrival + within + 1) or, in event time, the timer of
// one of j's buffered elements (its timestamp, after the time reached
// before e: elementTimer; at or after wake, as Cepheus is due to fire j at
// that element too) falls in the step no later than Flink's earliest
// timer of k (its buffered elements' timers and its own window timers;
// none: Flink does not fire k in e at all). Either that window timer is
// stale (its partial match died, and Cepheus, firing j at its real
// deadline, fired k first), or Cepheus woke k at a deadline Flink has no
// timer for (window-timer), or the two timers are equal and Flink's heap
// fired j first where Cepheus fired k first (its state is older; narrow
// seed 4407 case 7266: both keys' element timers at one time).
func flinkFiresFirst(in *conformance.Input, j, k, wake int64, e int) bool {
	within, ok := firstLastWindow(in.Pattern)
	if !ok || e >= len(in.OperatorSteps) {
		return false
	}
	if in.TimeCharacteristic == "processing_time" {
		return flinkFiresFirstByClock(in, j, k, wake, within, e)
	}
	if in.OperatorSteps[e].Watermark == nil {
		return false
	}
	last, now := int64(math.MinInt64), *in.OperatorSteps[e].Watermark
	for _, st := range in.OperatorSteps[:e] {
		if st.Watermark != nil {
			last = *st.Watermark
		}
	}
	if wake <= last || j == k {
		return false
	}
	arrived := arrivedBefore(in, e)
	firstJ, firstK := int64(math.MaxInt64), int64(math.MaxInt64)
	for _, ev := range in.Events {
		if !arrived[ev.Seq] || ev.Ts == nil {
			continue
		}
		ts := *ev.Ts
		switch {
		case ev.ID == j:
			if ts > last && ts <= now && ts >= wake {
				// elementTimer; Cepheus fires j by that element too, so
				// only one at or after wake leaves k first there.
				firstJ = min(firstJ, ts)
			}
			if ts > 0 && ts+within > last && ts+within <= now {
				firstJ = min(firstJ, ts+within)
			}
		case ev.ID == k:
			if ts > last {
				firstK = min(firstK, ts)
			}
			if ts > 0 && ts+within > last {
				firstK = min(firstK, ts+within)
			}
		}
	}
	return firstJ != math.MaxInt64 && firstJ <= firstK
}

// flinkFiresFirstByClock is flinkFiresFirst in processing time. Flink's
// timers there are set at the clock in force: a partial match that starts
// with an element arriving at clock c (> 0: after a restore the harness's
// clock is 0 until a step sets it, and a start at 0 sets no timer) gets a
// window timer at c + within + 1, and with a comparator an element is
// buffered with a timer at c + 1. Step e must set the clock past every
// clock reached before it (timers up to those have fired), and wake must
// be a deadline of k's: c + within of one of its elements (Cepheus wakes a
// key at start + within, Flink's timer is that + 1).
func flinkFiresFirstByClock(in *conformance.Input, j, k, wake, within int64, e int) bool {
	if in.OperatorSteps[e].ProcessingTime == nil || j == k {
		return false
	}
	now := *in.OperatorSteps[e].ProcessingTime
	byseq := map[uint64]*conformance.EventSpec{}
	for i := range in.Events {
		byseq[in.Events[i].Seq] = &in.Events[i]
	}
	clock, last := int64(0), int64(math.MinInt64) // the harness's clock starts at 0
	var timersJ, timersK []int64
	deadline := false // wake is start + within of an element of k
	for _, st := range in.OperatorSteps[:e] {
		switch {
		case st.SnapshotRestore != nil && *st.SnapshotRestore:
			clock = 0
		case st.ProcessingTime != nil:
			clock = *st.ProcessingTime
			last = max(last, clock)
		case st.Event != nil:
			ev := byseq[*st.Event]
			if ev == nil || ev.ID != j && ev.ID != k {
				continue
			}
			var ts []int64
			if clock > 0 {
				ts = append(ts, clock+within+1)
				deadline = deadline || ev.ID == k && clock+within == wake
			}
			if ev.ID == j {
				timersJ = append(timersJ, ts...)
				continue
			}
			if len(in.EventComparator) > 0 {
				ts = append(ts, clock+1)
			}
			timersK = append(timersK, ts...)
		}
	}
	if now <= last || wake <= last || !deadline {
		return false
	}
	firstJ, firstK := int64(math.MaxInt64), int64(math.MaxInt64)
	for _, t := range timersJ {
		if t > last && t <= now {
			firstJ = min(firstJ, t)
		}
	}
	for _, t := range timersK {
		if t > last {
			firstK = min(firstK, t)
		}
	}
	return firstJ != math.MaxInt64 && firstJ <= firstK
}

// splitAtStep splits r, a result whose run failed at step e, into what
// came out before e (a result without error) and the items of step e
// (matches and timeouts with their keys, the matches first); ok is false
// when an item has no step, no known key or a step after e, or when the
// output does not end with step e's matches.
func splitAtStep(in *conformance.Input, r *conformance.Result, e int) (before *conformance.Result, at []fired, ok bool) {
	ms, ts, ok := firedItems(in, r)
	if !ok {
		return nil, nil, false
	}
	// split appends the items of step e to at, tagged, and returns the
	// positions of the earlier ones.
	split := func(fs []fired, tag string) (earlier []int, ok bool) {
		for i, f := range fs {
			switch {
			case f.step > e:
				return nil, false
			case f.step == e:
				f.item = tag + f.item
				at = append(at, f)
			default:
				earlier = append(earlier, i)
			}
		}
		return earlier, true
	}
	mi, okM := split(ms, "match ")
	n := len(at) // the output's last n items are step e's matches
	ti, okT := split(ts, "timeout ")
	if !okM || !okT || n > len(r.Output) || slices.ContainsFunc(r.Output[len(r.Output)-n:],
		func(it conformance.OutputItem) bool { return it.Watermark != nil }) {
		return nil, nil, false
	}
	b := *r
	b.Error, b.ErrorClass, b.ErrorStep = nil, "", nil
	b.Matches, b.Timeouts = nil, nil
	for _, i := range mi {
		b.Matches = append(b.Matches, r.Matches[i])
	}
	for _, i := range ti {
		b.Timeouts = append(b.Timeouts, r.Timeouts[i])
	}
	b.Output = r.Output[:len(r.Output)-n]
	return &b, at, true
}

// inverted says whether b comes before a in order (a, b both in it).
func inverted(order []int64, a, b int64) bool {
	ia, ib := slices.Index(order, a), slices.Index(order, b)
	return ia >= 0 && ib >= 0 && ib < ia
}

// staleTimer says whether w can be a window timer of key k set before
// step: a FIRST_AND_LAST window, and an element of k that arrived before
// step whose start + within (event time: its timestamp, when > 0;
// processing time: the clock when it arrived, when > 0, + 1) is w.
// Flink's harness clock starts at 0, and again after a restore.
func staleTimer(in *conformance.Input, k, w int64, step int) bool {
	within, ok := firstLastWindow(in.Pattern)
	if !ok {
		return false
	}
	byseq := map[uint64]*conformance.EventSpec{}
	for i := range in.Events {
		byseq[in.Events[i].Seq] = &in.Events[i]
	}
	procTime := in.TimeCharacteristic == "processing_time"
	clock := int64(0)
	for i, st := range in.OperatorSteps {
		if i >= step {
			break
		}
		switch {
		case st.SnapshotRestore != nil && *st.SnapshotRestore:
			clock = 0
		case st.ProcessingTime != nil:
			clock = *st.ProcessingTime
		case st.Event != nil:
			e := byseq[*st.Event]
			if e == nil || e.ID != k {
				continue
			}
			if procTime && clock > 0 && clock+within+1 == w {
				return true
			}
			if !procTime && e.Ts != nil && *e.Ts > 0 && *e.Ts+within == w {
				return true
			}
		}
	}
	return false
}

// wakeEveryKey is the counterfactual of window-timer: the same case, with
// Flink told to set a timer for every key it has seen at every watermark
// (in processing time, at every clock step past all earlier clocks, the
// harness's clock starting at 0, and, without a comparator, at every step
// to the latest clock again), so that every key is woken whenever time
// advances, as Cepheus wakes a key at each of its deadlines.
// Only operator cases whose pattern has a window can show the difference.
func wakeEveryKey(in *conformance.Input) (conformance.Input, []int, bool) {
	if in.Driver != conformance.DriverOperator || !hasWindow(in.Pattern) {
		return conformance.Input{}, nil, false
	}
	cf := *in
	cf.WakeEveryKey = true
	return cf, identitySteps(len(in.OperatorSteps)), true
}

// hasWindow says whether the pattern has a window of any kind.
func hasWindow(p conformance.PatternSpec) bool {
	_, ok := firstLastWindow(p)
	return ok || hasGapWindow(p)
}

// firstLastWindow returns the FIRST_AND_LAST window of a pattern: the
// smallest of the pattern's and its top-level stages' (Flink keeps the
// smallest).
func firstLastWindow(p conformance.PatternSpec) (int64, bool) {
	w, ok := int64(math.MaxInt64), false
	if p.WithinMs != nil && p.WithinType != "PREVIOUS_AND_CURRENT" {
		w, ok = *p.WithinMs, true
	}
	for _, s := range p.Stages {
		if s.WithinMs != nil && s.WithinType != "PREVIOUS_AND_CURRENT" {
			w, ok = min(w, *s.WithinMs), true
		}
	}
	return w, ok
}

// windowTimer recognises outputs where Flink releases time-driven items
// later than Cepheus, or never.
//
// Flink 2.3's CepOperator wakes a key only through timers: one per
// buffered element timestamp, and one at start + within when a partial
// match starts (NFA.doProcess sets the new-start flag only when the start
// timestamp is > 0; in processing time the timer is set 1 ms later).
// Gap windows (PREVIOUS_AND_CURRENT, per-loop windows) get no timer, and
// there is no timer at the watermark any more. What a deadline releases
// (timeouts, pending notFollowedBy matches, matches held back behind an
// earlier partial match) therefore comes out only when the key is woken
// by a later element or timer, or never. Cepheus wakes a key at its next
// deadline. Released in another batch, the content can differ too: two
// pending matches whose tie a skip strategy breaks come out the other way.
//
// The counterfactual (wakeEveryKey) makes Flink wake every key at every
// time advance: Cepheus's result must then equal Flink's exactly, or up to
// the order of keys within a step, each side firing its keys in the order
// of their wake times (keyOrderOnly), or differ only as another
// explanation without a counterfactual accounts for (see residual).
func windowTimer(c *Check) bool {
	upToKeyOrder := func(f, cep *conformance.Result) bool {
		_, ok := keyOrderOnly(c.In, f, cep)
		return ok
	}
	if upToKeyOrder(c.CF, c.Cepheus) || keyOrderAtFailure(c.In, c.CF, c.Cepheus, upToKeyOrder) {
		return true
	}
	return residual(c.In, c.CF, c.Cepheus) != ""
}

// residual explains what remains of a disagreement once a counterfactual
// has removed one difference: it returns "=" when Cepheus's result equals
// cf (Flink's result on the counterfactual case) exactly, the id of an
// explanation without a counterfactual that accounts for every remaining
// difference between them (cross-key-timer-order, stop-without-entry, ...),
// or "" when neither holds.
func residual(in *conformance.Input, cf, cepheus *conformance.Result) string {
	if agree(cf, cepheus) {
		return "="
	}
	c := &Check{In: in, Flink: cf, Cepheus: cepheus}
	for _, e := range residualChecks {
		if e.applies(c) {
			return e.id
		}
	}
	return ""
}

// residualChecks are the explanations without a counterfactual, in the
// order of Explanations (listed apart: Explanations refers to residual).
var residualChecks = []struct {
	id      string
	applies func(*Check) bool
}{
	{"epsilon-cycle", epsilonCycle},
	{"event-id-collision", eventIDCollision},
	{"cross-key-timer-order", func(c *Check) bool { return crossKeyTimerOrder(c.In, c.Flink, c.Cepheus) }},
	{"greedy-until-null-target", greedyUntilNullTarget},
	{"stop-without-entry", stopWithoutEntry},
	{"flink-timeout", flinkTimeout},
}

// hasGapWindow says whether the pattern has a PREVIOUS_AND_CURRENT window
// (on the pattern or on a stage) or a per-loop window.
func hasGapWindow(p conformance.PatternSpec) bool {
	if p.WithinMs != nil && p.WithinType == "PREVIOUS_AND_CURRENT" {
		return true
	}
	var walk func([]conformance.StageSpec) bool
	walk = func(stages []conformance.StageSpec) bool {
		for i := range stages {
			if stages[i].Quantifier.WindowMs != nil || stages[i].WithinMs != nil && stages[i].WithinType == "PREVIOUS_AND_CURRENT" {
				return true
			}
			if g := stages[i].Group; g != nil && walk(g.Stages) {
				return true
			}
		}
		return false
	}
	return walk(p.Stages)
}

// restoredLate returns the elements of an event-time operator case that
// are late for Cepheus only because it keeps its watermark across a
// restore: an element that arrives after a snapshot_restore, before the
// next watermark step, with a timestamp at or behind the watermark in
// force before the restore. They are returned by step index.
func restoredLate(in *conformance.Input) map[int]uint64 {
	if in.Driver != conformance.DriverOperator || in.TimeCharacteristic == "processing_time" {
		return nil
	}
	ts := map[uint64]*int64{}
	for _, e := range in.Events {
		ts[e.Seq] = e.Ts
	}
	out := map[int]uint64{}
	wm := int64(math.MinInt64)
	restored := false
	for i, st := range in.OperatorSteps {
		switch {
		case st.Watermark != nil:
			wm = *st.Watermark
			restored = false
		case st.SnapshotRestore != nil && *st.SnapshotRestore:
			restored = true
		case st.Event != nil && restored:
			if t := ts[*st.Event]; t != nil && *t <= wm {
				out[i] = *st.Event
			}
		}
	}
	return out
}

// withoutRestoredLate is the counterfactual of restored-watermark: the case
// without the elements restoredLate finds, which Cepheus only reports as
// late. The other steps keep their original step numbers.
func withoutRestoredLate(in *conformance.Input) (conformance.Input, []int, bool) {
	extra := restoredLate(in)
	if len(extra) == 0 {
		return conformance.Input{}, nil, false
	}
	cf := *in
	cf.OperatorSteps = nil
	var steps []int
	for i, st := range in.OperatorSteps {
		if _, drop := extra[i]; drop {
			continue
		}
		cf.OperatorSteps = append(cf.OperatorSteps, st)
		steps = append(steps, i)
	}
	return cf, steps, true
}

// restoredWatermark recognises the consequences of Flink not restoring the
// operator's watermark. After a snapshot_restore, until the next watermark
// step, an element at or behind the watermark in force before the restore
// is late for Cepheus (whose snapshot keeps the watermark) but buffered by
// Flink, whose timer service starts again at Long.MIN_VALUE. Flink then
// feeds it to the NFA behind time it already passed, which changes what
// follows or breaks it (NullPointerException, timeouts).
//
// The counterfactual (withoutRestoredLate) removes those elements: Flink's
// result on it, with them added to its late elements, must equal
// Cepheus's exactly, or differ only as another explanation without a
// counterfactual accounts for (see residual).
func restoredWatermark(c *Check) bool {
	late, ok := restoredLateList(c.In, c.CF.Late)
	if !ok {
		return false
	}
	if c.CF.Error != nil && c.CF.ErrorStep != nil {
		// Flink failed at step e on the counterfactual: the elements
		// after e never arrived, the restored-late ones among them too
		// (narrow seed 4815 case 9346: a second restore after the
		// failure's step).
		late = lateBefore(c.In, late, *c.CF.ErrorStep+1)
	}
	cf := *c.CF
	cf.Late = late
	return residual(c.In, &cf, c.Cepheus) != ""
}

// restoredLateList returns the late elements Cepheus should report, in
// arrival order: cfLate, the late elements of the counterfactual without
// the restored-late elements, and those. ok is false when cfLate holds an
// element that did not arrive.
func restoredLateList(in *conformance.Input, cfLate []uint64) ([]uint64, bool) {
	extra := restoredLate(in)
	inCF := map[uint64]bool{}
	for _, s := range cfLate {
		inCF[s] = true
	}
	var late []uint64
	for i, st := range in.OperatorSteps {
		if st.Event == nil {
			continue
		}
		if _, ok := extra[i]; ok || inCF[*st.Event] {
			late = append(late, *st.Event)
			delete(inCF, *st.Event)
		}
	}
	return late, len(inCF) == 0
}

// clockLost returns, for a processing-time operator case, the
// snapshot_restore steps after which an element arrives before the next
// clock advance, with the clock in force before each.
func clockLost(in *conformance.Input) map[int]int64 {
	if in.Driver != conformance.DriverOperator || in.TimeCharacteristic != "processing_time" {
		return nil
	}
	out := map[int]int64{}
	clock, restoredAt := int64(0), -1
	for i, st := range in.OperatorSteps {
		switch {
		case st.ProcessingTime != nil:
			clock, restoredAt = *st.ProcessingTime, -1
		case st.SnapshotRestore != nil && *st.SnapshotRestore:
			restoredAt = i
		case st.Event != nil && restoredAt >= 0:
			out[restoredAt] = clock
		}
	}
	return out
}

// withClockRestored is the counterfactual of restored-processing-clock:
// after each restore that clockLost finds, a processing_time step sets
// Flink's new harness clock back to where it was. The inserted step stands
// for the first element after the restore: what Flink emits there (the
// timers due at that clock, and in window-timer's counterfactual the wake
// of a step to the latest clock again) is what Flink without the restore,
// and Cepheus, emit when that element advances the run's time to the
// clock it arrives at (narrow seed 3039 case 6604).
func withClockRestored(in *conformance.Input) (conformance.Input, []int, bool) {
	lost := clockLost(in)
	if len(lost) == 0 {
		return conformance.Input{}, nil, false
	}
	cf := *in
	cf.OperatorSteps = nil
	var steps []int
	for i, st := range in.OperatorSteps {
		cf.OperatorSteps = append(cf.OperatorSteps, st)
		steps = append(steps, i)
		if clock, ok := lost[i]; ok {
			cf.OperatorSteps = append(cf.OperatorSteps, conformance.Step{ProcessingTime: ptr(clock)})
			steps = append(steps, nextEvent(in.OperatorSteps, i))
		}
	}
	return cf, steps, true
}

// nextEvent returns the index of the first event step after step i (i
// when there is none).
func nextEvent(steps []conformance.Step, i int) int {
	for j := i + 1; j < len(steps); j++ {
		if steps[j].Event != nil {
			return j
		}
	}
	return i
}

// restoredProcessingClock recognises the consequences of Flink's harness
// restarting its processing clock at a restore: an element that arrives
// before the next clock advance is processed at time 0 (or buffered under
// it), gets no window timer that will fire in time, and never times out,
// where Cepheus, whose snapshot keeps the clock, times it out. The
// counterfactual (withClockRestored) sets the clock back right after the
// restore: Flink's result on it must equal Cepheus's exactly, or differ
// only as another explanation without a counterfactual accounts for (see
// residual).
func restoredProcessingClock(c *Check) bool {
	return residual(c.In, c.CF, c.Cepheus) != ""
}

// explainedBy formats the ids of ExplainCase for messages.
func explainedBy(ids []string) string { return strings.Join(ids, "+") }
