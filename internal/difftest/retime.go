package difftest

import (
	"math"
	"regexp"
	"time"

	"github.com/cepheus-cep/cepheus/internal/conformance"
)

// retimeCollisions is the counterfactual of event-id-collision-retimed:
// the same nfa harness case with the timestamps spread apart so that no
// two events share one (spreadTimes), which no event can then take the
// EventId of an earlier one in (mayTakeID needs two events of one
// timestamp), and under which Cepheus emits the same items at the same
// steps as on the case itself: of the two spreads, the first that does.
//
// The EventIds order partial matches, hold a completed match back while
// an earlier one is partial, and decide what a skip strategy prunes. Both
// engines give the n-th event of a timestamp since time last went past it
// the id n, so an event that returns to a timestamp gets the id of an
// earlier event of it (in Flink that corrupts the buffer; Cepheus keeps
// the two apart, with equal EventIds). A spread keeps every order of two
// EventIds that differ and must break each tie of two equal ones one way
// or the other: the later event after the earlier one, or before it. A
// tie counts as neither (it neither holds a match back nor prunes), so
// which way keeps Cepheus's items depends on the case: narrow seed 4817
// case 15944 (skipToFirst) keeps them only with the later event before,
// seed 4811 case 9729 (skipToLast) only with it after. Raising each
// timestamp that goes back to the latest before it, as the counterfactual
// did until 2026-12-07, also changed the order of EventIds that differ:
// with a skip strategy Cepheus's own items then changed on about a third
// of the cases, which the explanation refused.
//
// It applies only where the timestamps change nothing else: the nfa
// harness (the feed order is the events' order), every event timed (an
// untimed record is fed at one time, which a timed one passes), no window
// of any kind (no timeouts, no pruning by time), no condition that reads
// a timestamp.
func retimeCollisions(in *conformance.Input) (conformance.Input, []int, bool) {
	if in.Driver != conformance.DriverNFA || firstCollision(in.Events) < 0 || hasAnyWindow(in.Pattern) ||
		readsTimestamp(in.Pattern.Stages) {
		return conformance.Input{}, nil, false
	}
	var mine *conformance.Result
	for _, before := range []bool{false, true} {
		cf, ok := spreadTimes(in, before)
		if !ok {
			return conformance.Input{}, nil, false
		}
		if mine == nil {
			mine = runWithTimeout(in, retimedLimit)
		}
		if sameItemsByStep(runWithTimeout(&cf, retimedLimit), mine) {
			return cf, identitySteps(len(in.Events)), true
		}
	}
	return conformance.Input{}, nil, false
}

// spreadTimes returns in with each event timed apart from every other, in
// the order of the EventIds the engines give them (see retimeCollisions):
// an event of timestamp t, the c-th of t since time last went past t (its
// id), and the e-th event with that timestamp and id, is timed
// t*k*k + c*k + e, k a power of ten above every c and e; before reverses
// the order of the events of one timestamp and id (k-1-e). So 1, 2, 1, 4
// becomes 100, 200, 101, 400, or 109, 209, 108, 409 before. It counts
// every event of a timestamp, where the engines count only those a
// partial match took (a Flink id is given when first needed), so the
// order of two ids that differ may still change where an event was not
// taken; retimeCollisions checks the items. ok is false when an event has
// no timestamp or the timestamps leave no room.
func spreadTimes(in *conformance.Input, before bool) (conformance.Input, bool) {
	type tsID struct{ t, c int64 }
	ids := make([]tsID, len(in.Events))
	nth := make([]int64, len(in.Events))
	counts := map[int64]int64{} // the events of each timestamp since time last went past it
	seen := map[tsID]int64{}
	latest, k := int64(math.MinInt64), int64(10)
	for i, e := range in.Events {
		if e.Ts == nil {
			return conformance.Input{}, false
		}
		t := *e.Ts
		if t > latest {
			for u := range counts {
				if u < t {
					delete(counts, u)
				}
			}
			latest = t
		}
		ids[i] = tsID{t, counts[t]}
		counts[t]++
		nth[i] = seen[ids[i]]
		seen[ids[i]]++
		for max(ids[i].c, nth[i]) >= k {
			k *= 10
		}
	}
	cf := *in
	cf.Events = make([]conformance.EventSpec, len(in.Events))
	for i, e := range in.Events {
		id := ids[i]
		if id.t > math.MaxInt64/(k*k)-1 || id.t < math.MinInt64/(k*k)+1 {
			return conformance.Input{}, false // no room to spread them
		}
		n := nth[i]
		if before {
			n = k - 1 - n
		}
		e.Ts = ptr(id.t*k*k + id.c*k + n)
		cf.Events[i] = e
	}
	return cf, true
}

// hasAnyWindow says whether the pattern, or any stage of it (in groups
// too), has a window: a within of either type, or a loop's gap window.
func hasAnyWindow(p conformance.PatternSpec) bool {
	if p.WithinMs != nil {
		return true
	}
	var walk func([]conformance.StageSpec) bool
	walk = func(stages []conformance.StageSpec) bool {
		for i := range stages {
			s := &stages[i]
			if s.WithinMs != nil || s.Quantifier.WindowMs != nil || s.Group != nil && walk(s.Group.Stages) {
				return true
			}
		}
		return false
	}
	return walk(p.Stages)
}

// tsRead matches a read of an event's timestamp in a condition: the field
// ts (ts, .ts, ctx("s")[0].ts).
var tsRead = regexp.MustCompile(`\bts\b`)

// readsTimestamp says whether a condition of the stages (where, chained,
// until, in groups too) reads a timestamp.
func readsTimestamp(stages []conformance.StageSpec) bool {
	reads := false
	eachCondition(stages, func(cond string) { reads = reads || tsRead.MatchString(cond) })
	return reads
}

// eventIDCollisionRetimed recognises what event-id-collision's rule
// cannot tell from the two results alone (a Flink item lost, or one
// holding a colliding event twice, with no Flink failure after it): Flink
// given the case without its collisions (retimeCollisions) emits exactly
// what Cepheus emits on that case, and Cepheus emits the same items at
// the same steps on the case as it is (retimeCollisions picked the spread
// by Cepheus's own run; the result given here is checked against it
// again). Only the order of the items of one step may differ between
// Cepheus's two results: both engines order the matches a step releases
// by their EventIds, whose ties the spread breaks.
func eventIDCollisionRetimed(c *Check) bool {
	cf, _, ok := retimeCollisions(c.In)
	if !ok {
		return false
	}
	mine := roundTrip(cf.ID, runWithTimeout(&cf, retimedLimit))
	if !agree(c.CF, mine) {
		return false
	}
	return sameItemsByStep(mine, c.Cepheus)
}

// retimedLimit bounds Cepheus's run of a retimed case (the case itself
// ran within the runner's limit).
const retimedLimit = 10 * time.Second

// sameItemsByStep says whether two results differ at most in the order of
// their items (each item's key names its step).
func sameItemsByStep(a, b *conformance.Result) bool {
	for _, d := range Compare(a, b) {
		if d.Aspect != AspectMatchOrder && d.Aspect != AspectTimeoutOrder {
			return false
		}
	}
	return true
}
