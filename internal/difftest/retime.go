package difftest

import (
	"regexp"
	"time"

	"github.com/cepheus-cep/cepheus/internal/conformance"
)

// retimeCollisions is the counterfactual of event-id-collision-retimed:
// the same nfa harness case with every timestamp that goes back raised to
// the latest one before it, so that no event can take the Flink EventId
// of an earlier one (mayTakeID needs a later time between two events of
// one timestamp).
//
// It applies only where the timestamps change little else: the nfa
// harness (the feed order is the events' order), every event timed (an
// untimed record is fed at one time, which a timed one passes), no
// window of any kind (no timeouts, no pruning by time), no condition that
// reads a timestamp. What the new timestamps may still change is the
// order of the EventIds: the order of the matches a step releases, and
// what a skip strategy prunes (AfterMatchSkipStrategy compares EventIds).
// Without a skip strategy Cepheus's items stay the same
// (TestRetimeChangesNothingInCepheus); with one, the explanation checks
// it case by case.
func retimeCollisions(in *conformance.Input) (conformance.Input, []int, bool) {
	if in.Driver != conformance.DriverNFA || firstCollision(in.Events) < 0 || hasAnyWindow(in.Pattern) ||
		readsTimestamp(in.Pattern.Stages) {
		return conformance.Input{}, nil, false
	}
	for _, e := range in.Events {
		if e.Ts == nil {
			return conformance.Input{}, nil, false
		}
	}
	cf := *in
	cf.Events = make([]conformance.EventSpec, len(in.Events))
	latest := *in.Events[0].Ts
	for i, e := range in.Events {
		latest = max(latest, *e.Ts)
		e.Ts = ptr(latest)
		cf.Events[i] = e
	}
	return cf, identitySteps(len(in.Events)), true
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
// the same steps on the case as it is: the new timestamps changed nothing
// but the collisions (with a skip strategy, whose pruning compares
// EventIds, that is checked here, not assumed). Only the order of the
// items of one step may differ between Cepheus's two results: both
// engines order the matches a step releases by their EventIds, which the
// new timestamps change (TestRetimeChangesNothingInCepheus).
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
