package difftest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cepheus-cep/cepheus/internal/conformance"
)

// differencesDoc is the page of deliberate differences.
const differencesDoc = "../../docs/flink-differences.md"

// TestExplanationsDocumented holds the registry and the page to the same
// ids: every explanation has a row, and every row marked "checked by code:
// yes" has an explanation.
func TestExplanationsDocumented(t *testing.T) {
	f, err := os.Open(differencesDoc)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows := map[string]string{} // id -> checked-by-code cell
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		id := strings.Trim(strings.TrimSpace(cells[0]), "`")
		rows[id] = strings.TrimSpace(cells[len(cells)-1])
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 {
		t.Fatalf("%s: no table rows found", differencesDoc)
	}
	registered := map[string]bool{}
	for _, e := range Explanations {
		if registered[e.ID] {
			t.Errorf("explanation %s registered twice", e.ID)
		}
		registered[e.ID] = true
		if e.Reason == "" || e.Applies == nil {
			t.Errorf("explanation %s has no reason or no predicate", e.ID)
		}
		switch cell, ok := rows[e.ID]; {
		case !ok:
			t.Errorf("explanation %s has no row in %s", e.ID, differencesDoc)
		case cell != "yes":
			t.Errorf("%s: row %s says %q in its last column (checked by code), want yes", differencesDoc, e.ID, cell)
		}
	}
	for id, cell := range rows {
		switch cell {
		case "yes":
			if !registered[id] {
				t.Errorf("%s: row %s is checked by code but has no explanation in Explanations", differencesDoc, id)
			}
		case "no":
		default:
			t.Errorf("%s: row %s: last column (checked by code) is %q, want yes or no", differencesDoc, id, cell)
		}
	}
}

// TestCrossKeyTimerOrderIsNarrow checks that cross-key-timer-order
// accepts a reorder of keys woken by timers of equal time, or by a stale
// window timer, and rejects one that Flink's timer heap never produces.
func TestCrossKeyTimerOrderIsNarrow(t *testing.T) {
	ts := func(v int64) *int64 { return &v }
	ev := func(seq uint64, id int64, t int64) conformance.EventSpec {
		return conformance.EventSpec{Seq: seq, ID: id, Name: "a", Price: 1, Ts: ts(t), Type: "Event"}
	}
	step := func(s int) *int { return &s }
	match := func(seq uint64, wake int64) conformance.MatchResult {
		return conformance.MatchResult{Via: "watermark", Stages: conformance.StageSeqs{{Stage: "s1", Seqs: []uint64{seq}}},
			Step: step(2), Timestamp: ts(10), Wake: ts(wake)}
	}
	out := func(seqs ...uint64) conformance.OutputItem { return conformance.OutputItem{Match: seqs} }
	wm := func(w int64) conformance.OutputItem { return conformance.OutputItem{Watermark: &w} }
	in := &conformance.Input{Driver: conformance.DriverOperator,
		Pattern:       conformance.PatternSpec{Stages: []conformance.StageSpec{{Name: "s1", Contiguity: "begin"}}, WithinMs: ts(3)},
		Events:        []conformance.EventSpec{ev(1, 1, 7), ev(2, 2, 7)},
		OperatorSteps: []conformance.Step{{Event: ptr(uint64(1))}, {Event: ptr(uint64(2))}, {Watermark: ts(10)}}}
	result := func(a, b conformance.MatchResult) *conformance.Result {
		return &conformance.Result{Matches: []conformance.MatchResult{a, b},
			Output: []conformance.OutputItem{out(a.Stages.Flat()...), out(b.Stages.Flat()...), wm(10)}}
	}
	for _, tc := range []struct {
		name           string
		flink, cepheus *conformance.Result
		want           bool
	}{
		{"equal timers, other order", result(match(2, 7), match(1, 7)), result(match(1, 7), match(2, 7)), true},
		{"same order", result(match(1, 7), match(2, 7)), result(match(1, 7), match(2, 7)), false},
		{"due 7 before due 10 reversed in Flink", result(match(2, 10), match(1, 7)), result(match(1, 7), match(2, 10)), false},
		{"due 7 before due 10 reversed in Cepheus", result(match(1, 7), match(2, 10)), result(match(2, 10), match(1, 7)), false},
		// Key 2's Flink timer at 4 is no start + within of its element (7 + 3).
		{"Flink earlier, not a window timer", result(match(2, 4), match(1, 7)), result(match(1, 7), match(2, 9)), false},
		// Key 2 woken in Flink at 10 = 7 + 3, a stale start + within timer,
		// though Cepheus's due time for it is 12.
		{"stale window timer", result(match(2, 10), match(1, 11)), result(match(1, 11), match(2, 12)), true},
	} {
		if got := crossKeyTimerOrder(in, tc.flink, tc.cepheus); got != tc.want {
			t.Errorf("%s: crossKeyTimerOrder = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestEpsilonCycleIsNarrow: the cycle error, with Flink hung, and nothing
// released by Cepheus.
func TestEpsilonCycleIsNarrow(t *testing.T) {
	cycle, hung := "process event 1: nfa: pattern has a cycle of proceed transitions", "timeout: case still running after 10s"
	in := &conformance.Input{Driver: conformance.DriverNFA}
	ok := &Check{In: in, Flink: &conformance.Result{Error: &hung}, Cepheus: &conformance.Result{Error: &cycle}}
	if !epsilonCycle(ok) {
		t.Errorf("epsilon-cycle does not apply to its own difference")
	}
	fabricated := &Check{In: in, Flink: ok.Flink, Cepheus: &conformance.Result{Error: &cycle,
		Matches: []conformance.MatchResult{{Via: "event", Stages: conformance.StageSeqs{{Stage: "s1", Seqs: []uint64{1}}}}}}}
	if epsilonCycle(fabricated) {
		t.Errorf("epsilon-cycle accepts a match released before the cycle error")
	}
	other := "process event 1: boom"
	if epsilonCycle(&Check{In: in, Flink: ok.Flink, Cepheus: &conformance.Result{Error: &other}}) {
		t.Errorf("epsilon-cycle accepts another error")
	}
}

func TestCollidingSeqs(t *testing.T) {
	ts := func(vs ...int64) []conformance.EventSpec {
		var out []conformance.EventSpec
		for i, v := range vs {
			out = append(out, conformance.EventSpec{Seq: uint64(i + 1), Ts: &v})
		}
		return out
	}
	for _, tc := range []struct {
		ts   []int64
		want []uint64
	}{
		{[]int64{1, 2, 3}, nil},
		{[]int64{2, 2, 3}, nil},
		{[]int64{3, 1, 2}, nil},
		{[]int64{2, 3, 2}, []uint64{1, 3}},
		{[]int64{2, 2, 5, 2}, []uint64{1, 2, 4}},
	} {
		got := collidingSeqs(ts(tc.ts...))
		var seqs []uint64
		for s := range got {
			seqs = append(seqs, s)
		}
		slices.Sort(seqs)
		if !slices.Equal(seqs, tc.want) {
			t.Errorf("collidingSeqs(%v) = %v, want %v", tc.ts, seqs, tc.want)
		}
		var seen []int64
		collide := false
		for _, v := range tc.ts {
			collide = collide || collides(seen, v)
			seen = append(seen, v)
		}
		if collide != (len(tc.want) > 0) {
			t.Errorf("collides over %v = %v, want %v", tc.ts, collide, len(tc.want) > 0)
		}
	}
}

// TestCollapsesTo: Flink's events of a stage are Cepheus's, but where
// both may have collided, and two colliding events in a row at one
// timestamp may be one (their shared node); nothing else may differ.
func TestCollapsesTo(t *testing.T) {
	coll := map[uint64]bool{1: true, 3: true, 4: true, 6: true}
	tsOf := map[uint64]int64{1: 1, 2: 2, 3: 1, 4: 5, 5: 5, 6: 1}
	for _, tc := range []struct {
		flink, cepheus []uint64
		want           bool
	}{
		{[]uint64{2}, []uint64{2}, true},
		{[]uint64{3}, []uint64{1}, true},    // replaced
		{[]uint64{3}, []uint64{1, 3}, true}, // merged into one node
		{[]uint64{3, 2}, []uint64{1, 3, 2}, true},
		{[]uint64{1}, []uint64{1, 3, 6}, true}, // three of one timestamp
		{[]uint64{3}, []uint64{1, 2, 3}, false},
		{[]uint64{1}, []uint64{1, 4}, false}, // 4 collides, but at another time than 1
		{[]uint64{2}, []uint64{2, 5}, false}, // 5 does not collide
		{[]uint64{1, 3}, []uint64{1}, false}, // Flink holds more
		{[]uint64{2}, []uint64{5}, false},
		{nil, []uint64{1}, false},
	} {
		if got := collapsesTo(tc.flink, tc.cepheus, coll, tsOf); got != tc.want {
			t.Errorf("collapsesTo(flink %v, cepheus %v) = %v, want %v", tc.flink, tc.cepheus, got, tc.want)
		}
	}
	// A long run of events that may share a node (a wide case) is
	// searched in time: each (Flink, Cepheus) position once.
	long := map[uint64]bool{}
	longTs := map[uint64]int64{}
	var y []uint64
	for s := uint64(10); s < 2010; s++ {
		long[s], longTs[s] = true, 7
		y = append(y, s)
	}
	y = append(y, 5) // no collision: no way through
	if collapsesTo([]uint64{10, 11, 12}, y, long, longTs) {
		t.Errorf("collapsesTo over 2,000 colliding events and one that does not collide: true, want false")
	}
}

// TestSharesNode: an item holds two events of one stage that may have
// collided with each other (both colliding, at one timestamp).
func TestSharesNode(t *testing.T) {
	coll := map[uint64]bool{1: true, 4: true, 6: true}
	tsOf := map[uint64]int64{1: 4, 2: 3, 4: 4, 5: 5, 6: 5}
	st := func(name string, seqs ...uint64) conformance.StageEvents {
		return conformance.StageEvents{Stage: name, Seqs: seqs}
	}
	for _, tc := range []struct {
		item conformance.StageSeqs
		want bool
	}{
		{conformance.StageSeqs{st("s1", 1, 2, 4)}, true},
		{conformance.StageSeqs{st("s1", 1, 2), st("s2", 4)}, false}, // other stages: other nodes
		{conformance.StageSeqs{st("s1", 1, 6)}, false},              // other times
		{conformance.StageSeqs{st("s1", 2, 5)}, false},
		{conformance.StageSeqs{st("s1", 1)}, false},
	} {
		if got := sharesNode(tc.item, coll, tsOf); got != tc.want {
			t.Errorf("sharesNode(%v) = %v, want %v", tc.item, got, tc.want)
		}
	}
}

// TestOperatorCollisions: in the operator, an element of a key collides
// with the earlier ones of its key at its time only when that key's NFA
// advanced past the time in between, which a watermark going back makes
// possible; elements behind the watermark are late and fed to no NFA.
func TestOperatorCollisions(t *testing.T) {
	ev := func(seq uint64, id, ts int64) conformance.EventSpec {
		return conformance.EventSpec{Seq: seq, ID: id, Ts: &ts}
	}
	e := func(seq uint64) conformance.Step { return conformance.Step{Event: &seq} }
	w := func(t int64) conformance.Step { return conformance.Step{Watermark: &t} }
	events := []conformance.EventSpec{ev(1, 1, 5), ev(2, 1, 5), ev(3, 2, 5), ev(4, 1, 6)}
	for _, tc := range []struct {
		name      string
		steps     []conformance.Step
		want      []uint64
		wantFirst int
	}{
		{"in order", []conformance.Step{e(1), e(2), w(6), e(4), w(9)}, nil, -1},
		{"late behind the watermark", []conformance.Step{e(1), w(6), e(2), w(9)}, nil, -1},
		{"back, then fed", []conformance.Step{e(1), w(6), w(4), e(2), w(9)}, []uint64{1, 2}, 4},
		{"back, another key", []conformance.Step{e(1), w(6), w(4), e(3), w(9)}, nil, -1},
		{"back, but not advanced past 5", []conformance.Step{e(1), w(5), w(4), e(2), w(9)}, nil, -1},
		{"advanced past 5 by a later element", []conformance.Step{e(1), w(5), e(4), w(6), w(4), e(2), w(9)}, []uint64{1, 2}, 6},
	} {
		in := &conformance.Input{Driver: conformance.DriverOperator, KeyBy: "id", Events: events, OperatorSteps: tc.steps}
		coll, first := operatorCollisions(in)
		var got []uint64
		for s := range coll {
			got = append(got, s)
		}
		slices.Sort(got)
		if !slices.Equal(got, tc.want) || first != tc.wantFirst {
			t.Errorf("%s: collisions %v from step %d, want %v from step %d", tc.name, got, first, tc.want, tc.wantFirst)
		}
	}
}

// TestFailedAfter: a Cepheus failure leaves a comparison up to Flink's
// failing step valid only when it is a run error at a later step.
func TestFailedAfter(t *testing.T) {
	msg := "boom"
	step := func(n int) *int { return &n }
	for _, tc := range []struct {
		r    conformance.Result
		want bool
	}{
		{conformance.Result{}, true},
		{conformance.Result{Error: &msg, ErrorClass: conformance.ErrorRun, ErrorStep: step(4)}, true},
		{conformance.Result{Error: &msg, ErrorClass: conformance.ErrorRun, ErrorStep: step(3)}, false},
		{conformance.Result{Error: &msg, ErrorClass: conformance.ErrorRun, ErrorStep: step(1)}, false},
		{conformance.Result{Error: &msg, ErrorClass: conformance.ErrorRun}, false},
		{conformance.Result{Error: &msg, ErrorClass: conformance.ErrorCompile}, false},
	} {
		if got := failedAfter(&tc.r, 3); got != tc.want {
			t.Errorf("failedAfter(%+v, 3) = %v, want %v", tc.r, got, tc.want)
		}
	}
}

// TestResidualChecksAreTheExplanationsWithoutCounterfactual keeps the list
// that residual uses equal to the registry's.
func TestResidualChecksAreTheExplanationsWithoutCounterfactual(t *testing.T) {
	var want, got []string
	for _, e := range Explanations {
		if e.Counterfactual == nil {
			want = append(want, e.ID)
		}
	}
	for _, e := range residualChecks {
		got = append(got, e.id)
	}
	if !slices.Equal(got, want) {
		t.Errorf("residualChecks = %v, want the explanations without a counterfactual %v", got, want)
	}
}

// TestRepeatsCollided: an item holding one colliding event twice is what
// a collision makes; one holding a non-colliding event twice, or colliding
// events once each, is not. Limited to the stages a condition reads
// through ctx, the event's first place must be in one.
func TestRepeatsCollided(t *testing.T) {
	coll := map[uint64]bool{3: true, 9: true}
	st := func(name string, seqs ...uint64) conformance.StageEvents {
		return conformance.StageEvents{Stage: name, Seqs: seqs}
	}
	anywhere := func(string) bool { return true }
	s1 := func(stage string) bool { return stage == "s1" }
	for _, tc := range []struct {
		item  conformance.StageSeqs
		first func(string) bool
		want  bool
	}{
		{conformance.StageSeqs{st("s1", 3), st("s2", 2), st("s3", 3)}, anywhere, true},
		{conformance.StageSeqs{st("s1", 9, 7), st("s2", 8), st("s3", 9)}, anywhere, true},
		{conformance.StageSeqs{st("s1", 3, 9), st("s2", 2)}, anywhere, false},
		{conformance.StageSeqs{st("s1", 2), st("s2", 2)}, anywhere, false}, // 2 cannot have collided
		{conformance.StageSeqs{st("s1", 1), st("s2", 2)}, anywhere, false},
		{conformance.StageSeqs{st("s1", 3), st("s3", 3)}, s1, true},
		{conformance.StageSeqs{st("s1", 1), st("s2", 3), st("s3", 3)}, s1, false}, // first in s2
		{conformance.StageSeqs{st("s1", 1), st("s3", 3, 3)}, s1, false},
	} {
		if got := repeatsCollided(tc.item, coll, tc.first); got != tc.want {
			t.Errorf("repeatsCollided(%v) = %v, want %v", tc.item, got, tc.want)
		}
	}
}

// TestContextStages: the stages a condition reads through ctx, in where,
// until and chained conditions and inside groups.
func TestContextStages(t *testing.T) {
	str := func(s string) *string { return &s }
	stages := []conformance.StageSpec{
		{Name: "s1", Condition: str("true")},
		{Name: "s2", Condition: str(`len(ctx("s1")) == 0 || last(ctx( "s1" )).price <= price`)},
		{Name: "g", Group: &conformance.GroupSpec{Stages: []conformance.StageSpec{
			{Name: "s3", Condition: str("true"), Until: str(`all(ctx("s2"), .name != name)`)},
			{Name: "s4", Chain: []conformance.ChainedCondition{{Expr: `ctx("a \"b\"")[0].price == price`}}},
		}}},
	}
	got := contextStages(stages)
	want := map[string]bool{"s1": true, "s2": true, `a "b"`: true}
	if !maps.Equal(got, want) {
		t.Errorf("contextStages = %v, want %v", got, want)
	}
	if got := contextStages(stages[:1]); len(got) != 0 {
		t.Errorf("contextStages(no ctx) = %v, want none", got)
	}
}

// TestLostPosition: a match one event short in a stage, holding an event
// that may have taken the id of an earlier one it skips, is what a
// collision makes (narrow seed 1307 case 3389: times(3) matched by [1, 5],
// 5 having taken 2's id); a match with every position, or short of an
// event that took no id, or whose missing event it holds, is not.
func TestLostPosition(t *testing.T) {
	ts := []int64{2, 0, 1, 1, 0, 1} // 5 may take 2's id: 3 went past 0
	evs := make([]conformance.EventSpec, len(ts))
	for i := range ts {
		evs[i] = conformance.EventSpec{Seq: uint64(i + 1), Ts: &ts[i]}
	}
	item := func(seqs ...uint64) conformance.StageSeqs {
		return conformance.StageSeqs{{Stage: "s1", Seqs: seqs}}
	}
	three := map[string]int{"s1": 3}
	for _, tc := range []struct {
		name  string
		item  conformance.StageSeqs
		least map[string]int
		want  bool
	}{
		{"as run", item(1, 5), three, true},
		{"every position", item(3, 4, 5), three, false},
		{"the missing event held", item(2, 5), three, false},
		{"short of an event that took no id", item(1, 4), three, false},
		{"two short", item(5), three, false},
		{"not short", item(1, 5), map[string]int{"s1": 2}, false},
		{"a stage of no known minimum", item(1, 5), nil, false},
	} {
		if got := lostPosition(tc.item, tc.least, evs); got != tc.want {
			t.Errorf("%s: lostPosition(%v) = %v, want %v", tc.name, tc.item, got, tc.want)
		}
	}
}

// firstExplained returns the first case of an explained corpus, Flink's
// result on it and Cepheus's as it is now.
func firstExplained(t *testing.T, dir string) (*conformance.Input, *conformance.Result, *conformance.Result) {
	t.Helper()
	cases, flink, _, err := ReadExplained(dir)
	if err != nil {
		t.Fatal(err)
	}
	in := &cases[0]
	return in, flink.Cases[in.ID], roundTrip(in.ID, conformance.RunCase(in))
}

// TestEventIDCollisionLostPosition: event-id-collision accepts Flink's
// match [1, 5] of times(3) on narrow seed 1307 case 3389 only with the
// SharedBuffer.getEvent failure that shows the misread, and only as a
// match that lost a position at a colliding event.
func TestEventIDCollisionLostPosition(t *testing.T) {
	in, f, c := firstExplained(t, "testdata/explained/picked-narrow-1307")
	with := func(edit func(r *conformance.Result)) *conformance.Result {
		r := *f
		r.Matches = slices.Clone(f.Matches)
		edit(&r)
		return &r
	}
	item := func(seqs ...uint64) func(r *conformance.Result) {
		return func(r *conformance.Result) {
			r.Matches[1].Stages = conformance.StageSeqs{{Stage: "s1", Seqs: seqs}}
		}
	}
	str := func(s string) *string { return &s }
	for _, tc := range []struct {
		name  string
		flink *conformance.Result
		want  bool
	}{
		{"as run", f, true},
		{"no getEvent failure", with(func(r *conformance.Result) {
			r.Error = str("java.lang.IllegalStateException: Referring to non existent event")
		}), false},
		{"no failure", with(func(r *conformance.Result) { r.Error, r.ErrorClass, r.ErrorStep = nil, "", nil }), false},
		{"every position", with(item(1, 2, 5)), false},
		{"short of an event that took no id", with(item(1, 4)), false},
	} {
		if got := eventIDCollision(&Check{In: in, Flink: tc.flink, Cepheus: c}); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestEventIDCollisionTwoPaths: on narrow seed 4405 case 4204 the c at 6
// (event 7) takes the buffer id of the c at 6 before it (event 5), the
// partial match that began at event 5 reads s1's price through that id,
// finds event 7's (4 <= 4) and Flink emits {s1:[7] s3:[7]}, then fails on
// the checkState of NFA.extractCurrentMatches. event-id-collision accepts
// that item only with that failure (or getEvent's), only while s3's
// condition reads s1 through ctx, and no Cepheus item after the collision
// may be missing.
func TestEventIDCollisionTwoPaths(t *testing.T) {
	in, f, c := firstExplained(t, "testdata/explained/picked-narrow-4405")
	str := func(s string) *string { return &s }
	failing := func(msg string) *conformance.Result {
		r := *f
		r.Error = str(msg)
		return &r
	}
	noCtx := *in
	noCtx.Pattern.Stages = slices.Clone(in.Pattern.Stages)
	noCtx.Pattern.Stages[2].Condition = str(`len(ctx("s2")) == 0 || last(ctx("s2")).price <= price`)
	type variant struct {
		name    string
		in      *conformance.Input
		flink   *conformance.Result
		cepheus *conformance.Result
		want    bool
	}
	variants := []variant{
		{"as run", in, f, c, true},
		{"a getEvent failure", in, failing(`java.lang.NullPointerException: Cannot invoke "org.apache.flink.cep.nfa.sharedbuffer.Lockable.getElement()" because the return value of "org.apache.flink.cep.nfa.sharedbuffer.SharedBuffer.getEvent(org.apache.flink.cep.nfa.sharedbuffer.EventId)" is null`), c, true},
		{"another NullPointerException", in, failing("org.apache.flink.util.WrappingRuntimeException: java.lang.NullPointerException (cause: java.lang.NullPointerException: null)"), c, false},
		{"an IllegalStateException outside a condition", in, failing("java.lang.IllegalStateException: null"), c, false},
		{"non existent event", in, failing("java.lang.IllegalStateException: Referring to non existent event with id EventId{id=0, timestamp=6}"), c, false},
		{"no condition reads s1", &noCtx, f, c, false},
	}
	first := firstCollision(in.Events)
	for i, m := range c.Matches {
		if m.Step != nil && *m.Step >= first && *m.Step < *f.ErrorStep {
			r := *c
			r.Matches = slices.Delete(slices.Clone(c.Matches), i, i+1)
			variants = append(variants, variant{fmt.Sprintf("Cepheus without %v", m.Stages), in, f, &r, false})
		}
	}
	if len(variants) < 8 {
		t.Fatalf("Cepheus emitted %d matches between the collision and Flink's failure, want at least 2", len(variants)-6)
	}
	for _, tc := range variants {
		if got := eventIDCollision(&Check{In: tc.in, Flink: tc.flink, Cepheus: tc.cepheus}); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestKeyOrderAtFailure: with both engines failing at one step, the keys
// one side fired there before the failing key and the other did not are
// accepted only when a stale window timer accounts for the order (the two
// minimal cases of docs/flink-differences.md, with their real results);
// anything else in that step, or before it, is not.
func TestKeyOrderAtFailure(t *testing.T) {
	load := func(name string) *conformance.Input {
		cs, err := conformance.LoadFile("testdata/minimal/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return &cs[0].Input
	}
	str := func(s string) *string { return &s }
	num := func(n int) *int { return &n }
	wake := func(w int64) *int64 { return &w }
	wm := func(w int64) conformance.OutputItem { return conformance.OutputItem{Watermark: &w} }
	timeout := func(ts, w int64, step int, seqs ...uint64) conformance.TimeoutResult {
		return conformance.TimeoutResult{
			Stages:    conformance.StageSeqs{{Stage: "s1", Seqs: seqs}},
			Timestamp: ts, Step: num(step), Wake: wake(w),
		}
	}
	const base = 1708031102000
	skipErr := func(ts ...int64) *string {
		var ids []string
		for _, x := range ts {
			ids = append(ids, "EventId{id=0, timestamp="+strconv.FormatInt(base+x, 10)+"}")
		}
		return str("org.apache.flink.util.FlinkRuntimeException: Could not skip to s2. No such element in the found match {s1=[" + strings.Join(ids, ", ") + "]}")
	}
	result := func(err *string, step int, ts ...conformance.TimeoutResult) *conformance.Result {
		return &conformance.Result{Timeouts: ts, Output: []conformance.OutputItem{wm(base + 650)},
			Error: err, ErrorClass: conformance.ErrorRun, ErrorStep: num(step)}
	}
	cepErr := func(step int, key string) *string {
		return str("step " + strconv.Itoa(step) + ": cep: key " + strconv.Quote("\x00"+key) +
			`: nfa: after-match skip target missing: could not skip to "s2": no such element in the found match`)
	}

	// Flink first: Flink fires key 17 through the stale timer 577 + 83 =
	// 660 and emits its timeout before key 3 fails.
	in := load("cross-key-failure-flink-first.json")
	flink := result(skipErr(593), 5, timeout(base+676, base+660, 5, 3))
	for _, tc := range []struct {
		name    string
		flink   *conformance.Result
		cepheus *conformance.Result
		want    bool
	}{
		{"as run", flink, result(cepErr(5, "3"), 5), true},
		{"cepheus fails later", flink, result(cepErr(6, "3"), 6), false},
		{"no stale timer", result(skipErr(593), 5, timeout(base+676, base+661, 5, 3)), result(cepErr(5, "3"), 5), false},
		{"another timeout of key 17", flink, result(cepErr(5, "3"), 5, timeout(base+677, base+660, 5, 3)), false},
		{"the same timeout", flink, result(cepErr(5, "3"), 5, timeout(base+676, base+660, 5, 3)), false},
		{"the timeout a step earlier", flink, result(cepErr(5, "3"), 5, timeout(base+676, base+660, 4, 3)), false},
	} {
		if got := crossKeyTimerOrder(in, tc.flink, tc.cepheus); got != tc.want {
			t.Errorf("flink first, %s: %v, want %v", tc.name, got, tc.want)
		}
	}

	// Flink's skip error names no elements: Cepheus's must be the same
	// miss. Cepheus fires key 1 first at its per-loop deadline (Flink has
	// no timer there); Flink fires key 6 at a stale window timer before key
	// 1's window timer.
	in = load("cross-key-failure-gap-window.json")
	const gap = 1765012000000
	first := timeout(gap+998048+185000, gap+998048, 5, 1)
	gapResult := func(err string, ts ...conformance.TimeoutResult) *conformance.Result {
		return &conformance.Result{Timeouts: append([]conformance.TimeoutResult{first}, ts...),
			Output: []conformance.OutputItem{wm(gap + 1449778)}, Error: str(err),
			ErrorClass: conformance.ErrorRun, ErrorStep: num(6)}
	}
	flinkGap := gapResult("org.apache.flink.util.FlinkRuntimeException: Could not skip to first element of a match.")
	key1 := []conformance.TimeoutResult{
		timeout(gap+1801148, gap+1456148, 6, 2), timeout(gap+1456148, gap+1456148, 6, 2), timeout(gap+1939716, gap+1456148, 6, 4),
	}
	miss := `: nfa: after-match skip target missing: could not skip to first element of a match (stage "s2")`
	for _, tc := range []struct {
		name    string
		cepheus *conformance.Result
		want    bool
	}{
		{"as run", gapResult("step 6: cep: key "+strconv.Quote("\x006")+miss, key1...), true},
		{"another miss", gapResult("step 6: cep: key "+strconv.Quote("\x006")+`: nfa: could not skip to "s2"`, key1...), false},
		{"cepheus names key 1", gapResult("step 6: cep: key "+strconv.Quote("\x001")+miss, key1...), false},
	} {
		if got := crossKeyTimerOrder(in, flinkGap, tc.cepheus); got != tc.want {
			t.Errorf("gap window, %s: %v, want %v", tc.name, got, tc.want)
		}
	}

	// A tie at the failing step, in processing time with a comparator: keys
	// 24 and 38 got an element at one clock (timers at that clock + 1);
	// Flink's heap fires key 24 first, Cepheus key 38, which fails.
	in = load("cross-key-failure-tie.json")
	const tie = 1730380000000
	noElements := "java.lang.RuntimeException: org.apache.flink.util.FlinkRuntimeException: Could not skip to first element of a match."
	tieResult := func(err string, ts ...conformance.TimeoutResult) *conformance.Result {
		return &conformance.Result{Timeouts: ts, Error: str(err), ErrorClass: conformance.ErrorRun, ErrorStep: num(5)}
	}
	miss38 := "step 5: cep: key " + strconv.Quote("\x0038") + miss
	for _, tc := range []struct {
		name  string
		flink *conformance.Result
		cep   string
		want  bool
	}{
		{"as run", tieResult(noElements, timeout(tie+187705, tie+165706, 5, 2)), miss38, true},
		{"no tie", tieResult(noElements, timeout(tie+187705, tie+165707, 5, 2)), miss38, false},
		{"cepheus names key 24", tieResult(noElements, timeout(tie+187705, tie+165706, 5, 2)), "step 5: cep: key " + strconv.Quote("\x0024") + miss, false},
	} {
		if got := crossKeyTimerOrder(in, tc.flink, tieResult(tc.cep)); got != tc.want {
			t.Errorf("tie, %s: %v, want %v", tc.name, got, tc.want)
		}
	}

	// A tie at the failing step in processing time without a comparator,
	// Cepheus first (wide seed 3034 case 1183, shrunk): keys 12 and 2 got
	// an element at clock 733, so Flink has a window timer for both at
	// 733 + 57 + 1 = 791 and its heap fires key 12 first, which fails;
	// Cepheus fires key 2 first (both due 790, key 2's state is older) and
	// emits its timeout before key 12 fails.
	in = load("cross-key-failure-tie-cepheus-first.json")
	const pt = 1739918773000
	ptRun := func(err string, step int, ts ...conformance.TimeoutResult) *conformance.Result {
		return &conformance.Result{Timeouts: ts, Error: str(err), ErrorClass: conformance.ErrorRun, ErrorStep: num(step)}
	}
	ptFlink := func(before, step int) *conformance.Result {
		return ptRun("org.apache.flink.util.FlinkRuntimeException: Could not skip to s3. No such element in the found match "+
			"{s1=[EventId{id=0, timestamp=1739918773733}, EventId{id=0, timestamp=1739918773786}]}", step,
			timeout(pt+767, pt+768, before, 1, 5), timeout(pt+767, pt+768, before, 2), timeout(pt+777, pt+778, before, 3))
	}
	ptCepheus := func(key string, before, step int, last ...conformance.TimeoutResult) *conformance.Result {
		return ptRun("step "+strconv.Itoa(step)+": cep: key "+strconv.Quote("\x00"+key)+
			`: nfa: after-match skip target missing: could not skip to "s3": no such element in the found match`, step,
			append([]conformance.TimeoutResult{timeout(pt+767, pt+767, before, 1, 5), timeout(pt+767, pt+767, before, 2),
				timeout(pt+777, pt+777, before, 3)}, last...)...)
	}
	// Key 2's element at clock 730 instead: its timer (788) fires before
	// key 12's (791), so Flink would have emitted its timeout before key 12
	// failed. (The clock step moves the clock steps 786 and 791 to 9 and 12.)
	earlier := *in
	earlier.OperatorSteps = slices.Clone(in.OperatorSteps)
	clock730 := int64(pt + 730)
	earlier.OperatorSteps = slices.Insert(earlier.OperatorSteps, 5, conformance.Step{ProcessingTime: &clock730}, in.OperatorSteps[7])
	earlier.OperatorSteps = slices.Delete(earlier.OperatorSteps, 9, 10) // the element's old place
	for _, tc := range []struct {
		name    string
		in      *conformance.Input
		flink   *conformance.Result
		cepheus *conformance.Result
		want    bool
	}{
		{"as run", in, ptFlink(8, 11), ptCepheus("12", 8, 11, timeout(pt+790, pt+790, 11, 5)), true},
		{"cepheus names key 2", in, ptFlink(8, 11), ptCepheus("2", 8, 11, timeout(pt+790, pt+790, 11, 5)), false},
		{"woken at no deadline of key 2", in, ptFlink(8, 11), ptCepheus("12", 8, 11, timeout(pt+790, pt+789, 11, 5)), false},
		{"woken at the last clock", in, ptFlink(8, 11), ptCepheus("12", 8, 11, timeout(pt+786, pt+786, 11, 5)), false},
		{"key 2's timer first", &earlier, ptFlink(9, 12), ptCepheus("12", 9, 12, timeout(pt+787, pt+787, 12, 5)), false},
	} {
		if got := crossKeyTimerOrder(tc.in, tc.flink, tc.cepheus); got != tc.want {
			t.Errorf("processing-time tie, %s: %v, want %v", tc.name, got, tc.want)
		}
	}

	// A tie with the failing key's element timer, Cepheus first (narrow
	// seed 4407 case 7266, shrunk): at watermark 21 keys 1 and 2 both have
	// an element buffered at 5. Flink's heap fires key 2 first, whose match
	// misses its skip target; Cepheus fires key 1 first (its state is
	// older), emits its timeouts, then fails on key 2.
	in = load("cross-key-failure-element-tie.json")
	etFlink := &conformance.Result{Output: []conformance.OutputItem{wm(3)}, ErrorClass: conformance.ErrorRun, ErrorStep: num(5),
		Error: str("org.apache.flink.util.FlinkRuntimeException: Could not skip to s3. No such element in the found match " +
			"{s1=[EventId{id=0, timestamp=1}], s2=[EventId{id=0, timestamp=5}]}")}
	etCepheus := func(key string, w int64) *conformance.Result {
		return &conformance.Result{Output: []conformance.OutputItem{wm(3)}, ErrorClass: conformance.ErrorRun, ErrorStep: num(5),
			Error: str("step 5: cep: key " + strconv.Quote("\x00"+key) +
				`: nfa: after-match skip target missing: could not skip to "s3": no such element in the found match`),
			Timeouts: []conformance.TimeoutResult{timeout(10, w, 5, 1), timeout(12, w, 5, 4)}}
	}
	// Key 1's element at 6 instead: key 2's element timer (5) comes first
	// on both sides, so Cepheus firing key 1 first (at 6) is no tie.
	later := *in
	later.Events = slices.Clone(in.Events)
	ts6 := int64(6)
	later.Events[3].Ts = &ts6
	for _, tc := range []struct {
		name    string
		in      *conformance.Input
		cepheus *conformance.Result
		want    bool
	}{
		{"as run", in, etCepheus("2", 5), true},
		{"cepheus names key 1", in, etCepheus("1", 5), false},
		{"woken after the tie", in, etCepheus("2", 6), false},
		{"key 1's element at 6", &later, etCepheus("2", 6), false},
	} {
		if got := crossKeyTimerOrder(tc.in, etFlink, tc.cepheus); got != tc.want {
			t.Errorf("element timer tie, %s: %v, want %v", tc.name, got, tc.want)
		}
	}

	// Keys tied at an earlier watermark come out in another order, then
	// both fail at the same step (wide seed 777 case 140, in processing
	// time).
	ts5 := int64(5)
	seq1, seq2 := uint64(1), uint64(2)
	w10, w20 := int64(10), int64(20)
	within := int64(3)
	tied := &conformance.Input{Driver: conformance.DriverOperator, KeyBy: "id",
		Pattern:       conformance.PatternSpec{WithinMs: &within},
		Events:        []conformance.EventSpec{{Seq: 1, ID: 1, Ts: &ts5}, {Seq: 2, ID: 2, Ts: &ts5}},
		OperatorSteps: []conformance.Step{{Event: &seq1}, {Event: &seq2}, {Watermark: &w10}, {Watermark: &w20}}}
	failAt := func(step int, ts ...conformance.TimeoutResult) *conformance.Result {
		return &conformance.Result{Timeouts: ts, Output: []conformance.OutputItem{wm(10)},
			Error: str("failed"), ErrorClass: conformance.ErrorRun, ErrorStep: num(step)}
	}
	t1, t2 := timeout(8, 8, 2, 1), timeout(8, 8, 2, 2)
	for _, tc := range []struct {
		name    string
		flink   *conformance.Result
		cepheus *conformance.Result
		want    bool
	}{
		{"tie reordered", failAt(3, t1, t2), failAt(3, t2, t1), true},
		{"not a tie", failAt(3, t1, t2), failAt(3, timeout(8, 9, 2, 2), t1), false},
		{"another failing step", failAt(3, t1, t2), failAt(2, t2, t1), false},
		{"the same order", failAt(3, t1, t2), failAt(3, t1, t2), false},
	} {
		if got := crossKeyTimerOrder(tied, tc.flink, tc.cepheus); got != tc.want {
			t.Errorf("tied keys, %s: %v, want %v", tc.name, got, tc.want)
		}
	}

	// Cepheus first: Cepheus fires key 24 (its element at 664) and emits its
	// timeout before key 17 fails; Flink fired key 17 first through a stale
	// timer (568 + 83 = 651 or 577 + 83 = 660) and failed on it.
	in = load("cross-key-failure-cepheus-first.json")
	cepheus := result(cepErr(14, "17"), 14, timeout(base+747, base+664, 14, 15))
	for _, tc := range []struct {
		name    string
		flink   *conformance.Result
		cepheus *conformance.Result
		want    bool
	}{
		{"as run", result(skipErr(593, 625), 14), cepheus, true},
		{"flink's match is key 24's", result(skipErr(664), 14), cepheus, false},
		{"cepheus names key 24", result(skipErr(593, 625), 14), result(cepErr(14, "24"), 14, timeout(base+747, base+664, 14, 15)), false},
		{"woken at the last watermark", result(skipErr(593, 625), 14), result(cepErr(14, "17"), 14, timeout(base+747, base+650, 14, 15)), false},
		{"another error", result(str("java.lang.NullPointerException"), 14), cepheus, false},
	} {
		if got := crossKeyTimerOrder(in, tc.flink, tc.cepheus); got != tc.want {
			t.Errorf("cepheus first, %s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestGreedyUntilAfterNot: the loop Flink gives a null target follows a
// notFollowedBy directly (the run-time failure) or through optional
// stages only (the compiler's failure), at any group level.
func TestGreedyUntilAfterNot(t *testing.T) {
	stage := func(name, contiguity string, optional bool) conformance.StageSpec {
		return conformance.StageSpec{Name: name, Contiguity: contiguity,
			Quantifier: conformance.QuantifierSpec{Kind: "one", Optional: optional}}
	}
	until := "name == \"c\""
	loop := conformance.StageSpec{Name: "l", Contiguity: "followedBy", Until: &until,
		Quantifier: conformance.QuantifierSpec{Kind: "oneOrMore", Min: 1, Optional: true, Greedy: true}}
	begin, not := stage("a", "begin", false), stage("n", "notFollowedBy", false)
	opt, req := stage("o", "followedBy", true), stage("r", "followedBy", false)
	notGreedy := loop
	notGreedy.Quantifier.Greedy = false
	for _, tc := range []struct {
		name            string
		stages          []conformance.StageSpec
		direct, between bool
	}{
		{"right after the NOT", []conformance.StageSpec{begin, not, loop}, true, false},
		{"one optional between", []conformance.StageSpec{begin, not, opt, loop}, false, true},
		{"two optionals between", []conformance.StageSpec{begin, not, opt, opt, loop}, false, true},
		{"a required stage between", []conformance.StageSpec{begin, not, opt, req, loop}, false, false},
		{"no NOT", []conformance.StageSpec{begin, opt, loop}, false, false},
		{"not greedy", []conformance.StageSpec{begin, not, opt, notGreedy}, false, false},
		{"in a group", []conformance.StageSpec{begin, {Name: "g", Contiguity: "followedBy",
			Group: &conformance.GroupSpec{Stages: []conformance.StageSpec{begin, not, opt, loop}}}}, false, true},
	} {
		if got := greedyUntilAfterNot(tc.stages, false); got != tc.direct {
			t.Errorf("%s, directly: %v, want %v", tc.name, got, tc.direct)
		}
		if got := greedyUntilAfterNot(tc.stages, true); got != tc.between {
			t.Errorf("%s, through optional stages: %v, want %v", tc.name, got, tc.between)
		}
	}
}

// TestGreedyUntilCopied: Flink's compiler fails on the null target when a
// greedy loop with an until condition comes right before the
// notFollowedBy (its sink state, the optional loop's first state, is
// copied), at any group level; not for a loop without until, nor a
// reluctant one (checked against Flink 2.3: they compile). The shrunk
// wide seed 4824 case 2928 is explained so (Flink emitted nothing: what
// Cepheus emits has no Flink answer, so no fault can be told apart, and
// the case is not in the fault-injection corpus).
func TestGreedyUntilCopied(t *testing.T) {
	until := "name == \"c\""
	loop := func(name string, optional, greedy, withUntil bool) conformance.StageSpec {
		s := conformance.StageSpec{Name: name, Contiguity: "followedBy",
			Quantifier: conformance.QuantifierSpec{Kind: "oneOrMore", Min: 1, Optional: optional, Greedy: greedy}}
		if withUntil {
			s.Until = &until
		}
		return s
	}
	begin := conformance.StageSpec{Name: "a", Contiguity: "begin", Quantifier: conformance.QuantifierSpec{Kind: "one"}}
	not := conformance.StageSpec{Name: "n", Contiguity: "notFollowedBy", Quantifier: conformance.QuantifierSpec{Kind: "one"}}
	last := loop("l", true, true, true)
	for _, tc := range []struct {
		name   string
		stages []conformance.StageSpec
		want   bool
	}{
		{"greedy until before the NOT", []conformance.StageSpec{begin, loop("g", false, true, true), not, last}, true},
		{"no until before", []conformance.StageSpec{begin, loop("g", false, true, false), not, last}, false},
		{"reluctant before", []conformance.StageSpec{begin, loop("g", false, false, true), not, last}, false},
		{"a stage between the NOT and the loop", []conformance.StageSpec{begin, loop("g", false, true, true), not, begin, last}, false},
		{"the loop after not optional", []conformance.StageSpec{begin, loop("g", false, true, true), not, loop("l", false, true, true)}, false},
		{"in a group", []conformance.StageSpec{begin, {Name: "grp", Contiguity: "followedBy",
			Group: &conformance.GroupSpec{Stages: []conformance.StageSpec{loop("g", false, true, true), not, last}}}}, true},
	} {
		if got := greedyUntilCopied(tc.stages); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	cs, err := conformance.LoadFile("testdata/minimal/greedy-until-copied-sink.json")
	if err != nil {
		t.Fatal(err)
	}
	in := &cs[0].Input
	msg := `java.lang.NullPointerException: Cannot invoke "org.apache.flink.cep.nfa.State.equals(Object)" because the return value of "org.apache.flink.cep.nfa.StateTransition.getTargetState()" is null`
	flink := &conformance.Result{Error: &msg, ErrorClass: conformance.ErrorCompile}
	cepheus := conformance.RunCase(in)
	if cepheus.Error != nil || !greedyUntilNullTarget(&Check{In: in, Flink: flink, Cepheus: cepheus}) {
		t.Errorf("the shrunk case 2928: Cepheus's error %v; not explained by greedy-until-null-target", cepheus.Error)
	}
	other := "java.lang.NullPointerException: something else"
	if greedyUntilNullTarget(&Check{In: in, Flink: &conformance.Result{Error: &other, ErrorClass: conformance.ErrorCompile}, Cepheus: cepheus}) {
		t.Error("another compile error of Flink is explained by greedy-until-null-target")
	}
}

// TestFlinkTimeout: a case Flink did not finish is explained only when
// Cepheus finished it and emitted everything Flink had emitted before it
// stopped, in order; what Cepheus emits from Flink's last step on is not
// compared.
func TestFlinkTimeout(t *testing.T) {
	in := &conformance.Input{ID: "t", Driver: conformance.DriverNFA}
	str := func(s string) *string { return &s }
	num := func(n int) *int { return &n }
	m := func(step int, seqs ...uint64) conformance.MatchResult {
		return conformance.MatchResult{Via: "event", Stages: conformance.StageSeqs{{Stage: "s1", Seqs: seqs}}, Step: num(step)}
	}
	flink := &conformance.Result{
		Matches:    []conformance.MatchResult{m(1, 1, 2), m(2, 1, 3), m(2, 2, 3)},
		Error:      str("timeout: case still running after 120000 ms"),
		ErrorClass: conformance.ErrorRun,
		ErrorStep:  num(3),
	}
	same := []conformance.MatchResult{m(1, 1, 2), m(2, 1, 3), m(2, 2, 3)}
	for _, tc := range []struct {
		name    string
		flink   *conformance.Result
		cepheus *conformance.Result
		want    bool
	}{
		{"the same, then more", flink, &conformance.Result{Matches: append(slices.Clone(same), m(3, 4), m(5, 1, 5))}, true},
		{"the same", flink, &conformance.Result{Matches: slices.Clone(same)}, true},
		{"one dropped", flink, &conformance.Result{Matches: same[:2]}, false},
		{"another order", flink, &conformance.Result{Matches: []conformance.MatchResult{m(1, 1, 2), m(2, 2, 3), m(2, 1, 3)}}, false},
		{"one more before", flink, &conformance.Result{Matches: append([]conformance.MatchResult{m(0, 1)}, same...)}, false},
		{"cepheus timed out", flink, &conformance.Result{Matches: same, Error: str("timeout: case still running after 10s"), ErrorClass: conformance.ErrorRun, ErrorStep: num(4)}, false},
		{"flink failed otherwise", &conformance.Result{Matches: flink.Matches, Error: str("java.lang.IllegalStateException"), ErrorClass: conformance.ErrorRun, ErrorStep: num(3)},
			&conformance.Result{Matches: same}, false},
	} {
		if got := flinkTimeout(&Check{In: in, Flink: tc.flink, Cepheus: tc.cepheus}); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestClockRestoredStandsForNextElement: the clock step that
// restored-processing-clock's counterfactual inserts after a restore
// stands for the first element after it, where Cepheus (and Flink without
// the restore) advance the run's time to the clock (the documented minimal
// case: its timeout comes at that element; with the step standing for the
// restore, the case was unexplained).
func TestClockRestoredStandsForNextElement(t *testing.T) {
	cs, err := conformance.LoadFile("testdata/minimal/restored-processing-clock-next-element.json")
	if err != nil {
		t.Fatal(err)
	}
	in := &cs[0].Input
	cf, steps, ok := withClockRestored(in)
	if !ok {
		t.Fatal("no counterfactual")
	}
	restore, next := -1, -1
	for i, st := range in.OperatorSteps {
		if st.SnapshotRestore != nil && *st.SnapshotRestore {
			restore = i
		} else if restore >= 0 && next < 0 && st.Event != nil {
			next = i
		}
	}
	if restore < 0 || next < 0 || len(cf.OperatorSteps) != len(in.OperatorSteps)+1 || len(steps) != len(cf.OperatorSteps) {
		t.Fatalf("restore at %d, next element at %d; counterfactual steps %v", restore, next, steps)
	}
	inserted := cf.OperatorSteps[restore+1]
	if inserted.ProcessingTime == nil || steps[restore+1] != next || steps[restore] != restore || steps[restore+2] != next {
		t.Errorf("inserted step %+v stands for step %d; want a clock step standing for %d (steps %v)", inserted, steps[restore+1], next, steps)
	}
}

// TestStaleTimerStartAfterZero: in processing time Flink's harness clock
// starts at 0, and at 0 again after a restore, and a partial match that
// starts at 0 gets no window timer (NFA.doProcess flags a new start only
// after 0): an element that arrives at clock 0, or after a restore before
// the next clock step, makes no stale timer; one that arrives at clock 5
// makes one at 5 + within + 1.
func TestStaleTimerStartAfterZero(t *testing.T) {
	const src = `{"id": "stale", "driver": "operator_harness", "time_characteristic": "processing_time",
	 "pattern": {"stages": [{"name": "s1", "contiguity": "begin", "condition": "true", "quantifier": {"kind": "one"}}], "within_ms": 7},
	 "events": [{"seq": 1, "id": 1, "name": "a", "price": 1, "ts": 0, "type": "Event"},
	            {"seq": 2, "id": 1, "name": "a", "price": 1, "ts": 0, "type": "Event"},
	            {"seq": 3, "id": 2, "name": "a", "price": 1, "ts": 0, "type": "Event"}],
	 "operator_steps": [{"processing_time": 0}, {"event": 1}, {"processing_time": 5}, {"event": 2},
	                    {"snapshot_restore": true}, {"event": 3}, {"processing_time": 30}]}`
	var in conformance.Input
	if err := json.Unmarshal([]byte(src), &in); err != nil {
		t.Fatal(err)
	}
	end := len(in.OperatorSteps)
	for _, c := range []struct {
		key, w int64
		want   bool
	}{
		{1, 8, false},  // element 1 at clock 0: a start at 0 sets no timer
		{1, 13, true},  // element 2 at clock 5
		{2, 13, false}, // element 3 after the restore, at clock 0 again
		{2, 8, false},
	} {
		if got := staleTimer(&in, c.key, c.w, end); got != c.want {
			t.Errorf("staleTimer(key %d, %d) = %v, want %v", c.key, c.w, got, c.want)
		}
	}
}
