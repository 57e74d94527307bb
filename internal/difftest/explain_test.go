package difftest

import (
	"bufio"
	"os"
	"slices"
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

// TestExplanationsAreNarrow checks that each explanation accepts the kind
// of disagreement it documents and not a plain wrong answer of the same
// shape.
func TestExplanationsAreNarrow(t *testing.T) {
	ts := func(v int64) *int64 { return &v }
	ev := func(seq uint64, id int64, t int64) conformance.EventSpec {
		return conformance.EventSpec{Seq: seq, ID: id, Name: "a", Price: 1, Ts: ts(t), Type: "Event"}
	}
	match := func(via string, seqs ...uint64) conformance.MatchResult {
		return conformance.MatchResult{Via: via, Stages: conformance.StageSeqs{{Stage: "s1", Seqs: seqs}}}
	}
	out := func(seqs ...uint64) conformance.OutputItem { return conformance.OutputItem{Match: seqs} }
	wm := func(w int64) conformance.OutputItem { return conformance.OutputItem{Watermark: &w} }
	oneStage := conformance.PatternSpec{Stages: []conformance.StageSpec{{Name: "s1", Contiguity: "begin"}}}

	// Two keys released by one watermark, in another order.
	twoKeys := &conformance.Input{Driver: conformance.DriverOperator, Pattern: oneStage,
		Events: []conformance.EventSpec{ev(1, 1, 1), ev(2, 2, 1)}}
	flink := &conformance.Result{Matches: []conformance.MatchResult{match("watermark", 2), match("watermark", 1)},
		Output: []conformance.OutputItem{out(2), out(1), wm(5)}}
	cepheus := &conformance.Result{Matches: []conformance.MatchResult{match("watermark", 1), match("watermark", 2)},
		Output: []conformance.OutputItem{out(1), out(2), wm(5)}}
	if got := Explain(twoKeys, flink, cepheus); got == nil || got.ID != "cross-key-timer-order" {
		t.Errorf("two keys swapped at one watermark: explained by %v, want cross-key-timer-order", got)
	}
	// The same keys, but one match moved past a watermark: not a timer
	// order.
	moved := &conformance.Result{Matches: cepheus.Matches, Output: []conformance.OutputItem{out(1), wm(5), out(2)}}
	flink2 := &conformance.Result{Matches: flink.Matches, Output: []conformance.OutputItem{out(2), out(1), wm(5)}}
	if got := Explain(twoKeys, flink2, moved); got != nil {
		t.Errorf("a match moved past a watermark: explained by %s", got.ID)
	}
	// One key: the order is the engine's, no explanation.
	oneKey := &conformance.Input{Driver: conformance.DriverOperator, Pattern: oneStage,
		Events: []conformance.EventSpec{ev(1, 1, 1), ev(2, 1, 1)}}
	if got := Explain(oneKey, flink, cepheus); got != nil {
		t.Errorf("one key, two matches swapped: explained by %s", got.ID)
	}

	// A timeout Flink never releases, with a gap window: window-timer;
	// without any window: nothing.
	gap := &conformance.Input{Driver: conformance.DriverOperator, Events: []conformance.EventSpec{ev(1, 1, 3)},
		Pattern: conformance.PatternSpec{Stages: oneStage.Stages, WithinMs: ts(5), WithinType: "PREVIOUS_AND_CURRENT"}}
	none := &conformance.Result{Output: []conformance.OutputItem{wm(9)}}
	timedOut := &conformance.Result{Output: []conformance.OutputItem{wm(9)},
		Timeouts: []conformance.TimeoutResult{{Stages: conformance.StageSeqs{{Stage: "s1", Seqs: []uint64{1}}}, Timestamp: 8}}}
	if got := Explain(gap, none, timedOut); got == nil || got.ID != "window-timer" {
		t.Errorf("gap-window timeout only in Cepheus: explained by %v, want window-timer", got)
	}
	noWindow := &conformance.Input{Driver: conformance.DriverOperator, Events: gap.Events, Pattern: oneStage}
	if got := Explain(noWindow, none, timedOut); got != nil {
		t.Errorf("timeout without a window: explained by %s", got.ID)
	}
	// A FIRST_AND_LAST window whose partial match starts after 0 in event
	// time has a Flink timer: not explained.
	within := &conformance.Input{Driver: conformance.DriverOperator, Events: gap.Events,
		Pattern: conformance.PatternSpec{Stages: oneStage.Stages, WithinMs: ts(5)}}
	if got := Explain(within, none, timedOut); got != nil {
		t.Errorf("within timeout with a Flink timer: explained by %s", got.ID)
	}

	// Colliding event ids: 2, 3, 2 in an nfa_harness case.
	coll := &conformance.Input{Driver: conformance.DriverNFA, Pattern: oneStage,
		Events: []conformance.EventSpec{ev(1, 1, 2), ev(2, 1, 3), ev(3, 1, 2)}}
	f3 := &conformance.Result{Matches: []conformance.MatchResult{match("event", 3, 2)}}
	c3 := &conformance.Result{Matches: []conformance.MatchResult{match("event", 1, 2)}}
	if got := Explain(coll, f3, c3); got == nil || got.ID != "event-id-collision" {
		t.Errorf("colliding ids: explained by %v, want event-id-collision", got)
	}
	noColl := &conformance.Input{Driver: conformance.DriverNFA, Pattern: oneStage,
		Events: []conformance.EventSpec{ev(1, 1, 2), ev(2, 1, 3), ev(3, 1, 4)}}
	if got := Explain(noColl, f3, c3); got != nil {
		t.Errorf("no colliding ids: explained by %s", got.ID)
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
