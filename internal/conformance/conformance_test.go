package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestConformance runs every case of testdata in both modes (the pattern
// as rule text compiled by package rules, and built with the nfa builder),
// writes the results file, judges the file and holds the outcome to
// testdata/known-failing.txt.
func TestConformance(t *testing.T) {
	for _, mode := range []Mode{ModeText, ModeBuilder} {
		t.Run(string(mode), func(t *testing.T) { testConformance(t, mode) })
	}
}

func testConformance(t *testing.T, mode Mode) {
	cases, err := LoadDir("testdata")
	if err != nil {
		t.Fatal(err)
	}
	known, err := ReadKnownFailing(filepath.Join("testdata", "known-failing.txt"))
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "results.json")
	if err := ProduceMode(context.Background(), Inputs(cases), mode).WriteFile(out); err != nil {
		t.Fatal(err)
	}
	written, err := ReadResults(out)
	if err != nil {
		t.Fatal(err)
	}
	report := JudgeAll(cases, written)
	ids := map[string]bool{}
	for _, v := range report.Verdicts {
		ids[v.ID] = true
		_, listed := known[v.ID]
		switch {
		case !v.Pass && !listed:
			t.Errorf("case %s fails:\n  %s", v.ID, strings.ReplaceAll(v.Diff, "\n", "\n  "))
		case v.Pass && listed:
			t.Errorf("case %s now passes: remove it from known-failing.txt", v.ID)
		}
	}
	for id := range known {
		if !ids[id] {
			t.Errorf("known-failing.txt lists %s, which is not a case", id)
		}
	}
	passed, failed := report.Counts()
	t.Logf("conformance: %d passed, %d failed (%d known)", passed, failed, len(known))
}

// TestInputHasNoExpectations enforces that producing results cannot read
// what a case expects: no field of Input, at any depth, decodes an
// expected_*, compare_mode, comparison or notes key.
func TestInputHasNoExpectations(t *testing.T) {
	seen := map[reflect.Type]bool{}
	var walk func(reflect.Type, string)
	walk = func(ty reflect.Type, path string) {
		for ty.Kind() == reflect.Pointer || ty.Kind() == reflect.Slice || ty.Kind() == reflect.Map {
			ty = ty.Elem()
		}
		if ty.Kind() != reflect.Struct || seen[ty] {
			return
		}
		seen[ty] = true
		for f := range ty.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if strings.HasPrefix(name, "expected_") || slices.Contains([]string{"compare_mode", "comparison", "notes"}, name) {
				t.Errorf("%s.%s decodes %q, an expectation", path, f.Name, name)
			}
			walk(f.Type, path+"."+f.Name)
		}
	}
	walk(reflect.TypeFor[Input](), "Input")
}

// judgeCase is a small case for the judge tests: events 1..4 where 2 and 4
// are equal by value (same id, name and price).
func judgeCase(mode string) *Case {
	ts := int64(1)
	evs := []EventSpec{
		{Seq: 1, ID: 1, Name: "a", Price: 1, Ts: &ts, Type: "Event"},
		{Seq: 2, ID: 2, Name: "b", Price: 2, Ts: &ts, Type: "Event"},
		{Seq: 3, ID: 3, Name: "c", Price: 3, Ts: &ts, Type: "Event"},
		{Seq: 4, ID: 2, Name: "b", Price: 2, Ts: &ts, Type: "Event"},
	}
	return &Case{
		Input: Input{ID: "T.test", Events: evs, Pattern: PatternSpec{Stages: []StageSpec{
			{Name: "start", Contiguity: "begin"}, {Name: "end", Contiguity: "followedBy"},
		}}},
		Expect: Expectation{CompareMode: mode},
	}
}

func match(via string, stages ...StageEvents) MatchResult {
	return MatchResult{Via: via, Stages: stages}
}

func st(name string, seqs ...uint64) StageEvents { return StageEvents{Stage: name, Seqs: seqs} }

func TestJudge(t *testing.T) {
	wm := func(w int64) OutputItem { return OutputItem{Watermark: &w} }
	msg := "boom"
	tests := []struct {
		name    string
		mode    string
		expect  func(*Expectation)
		result  Result
		pass    bool
		diffHas string
	}{
		{
			name:   "multiset equal, order ignored",
			mode:   ModeMultiset,
			expect: func(x *Expectation) { x.MatchesSeq = [][]uint64{{1, 2}, {1, 3}} },
			result: Result{Matches: []MatchResult{match("event", st("start", 1), st("end", 3)), match("event", st("end", 2), st("start", 1))}},
			pass:   true,
		},
		{
			name:   "multiset by value",
			mode:   ModeMultiset,
			expect: func(x *Expectation) { x.MatchesSeq = [][]uint64{{1, 2}} },
			result: Result{Matches: []MatchResult{match("event", st("start", 1), st("end", 4))}},
			pass:   true,
		},
		{
			name:    "multiset missing match",
			mode:    ModeMultiset,
			expect:  func(x *Expectation) { x.MatchesSeq = [][]uint64{{1, 2}, {1, 3}} },
			result:  Result{Matches: []MatchResult{match("event", st("start", 1), st("end", 2))}},
			diffHas: "missing:    [1:a 3:c]",
		},
		{
			name:    "multiset counts duplicates",
			mode:    ModeMultiset,
			expect:  func(x *Expectation) { x.MatchesSeq = [][]uint64{{1, 2}} },
			result:  Result{Matches: []MatchResult{match("event", st("start", 1), st("end", 2)), match("event", st("start", 1), st("end", 4))}},
			diffHas: "expected 1, got 2",
		},
		{
			name:   "set of maps collapses duplicates",
			mode:   ModeSetOfMaps,
			expect: func(x *Expectation) { x.MatchesSeq = [][]uint64{{1, 2}} },
			result: Result{Matches: []MatchResult{match("event", st("start", 1), st("end", 2)), match("event", st("start", 1), st("end", 4))}},
			pass:   true,
		},
		{
			name:    "set of maps keeps order",
			mode:    ModeSetOfMaps,
			expect:  func(x *Expectation) { x.MatchesSeq = [][]uint64{{1, 2}} },
			result:  Result{Matches: []MatchResult{match("event", st("start", 2), st("end", 1))}},
			diffHas: "missing",
		},
		{
			name: "ordered output by value",
			mode: ModeOrdered,
			expect: func(x *Expectation) {
				w := int64(5)
				x.OutputSequence = []ExpectedItem{{Watermark: &w}, {MatchSeq: []uint64{1, 2}}}
			},
			result: Result{Output: []OutputItem{wm(5), {Match: []uint64{1, 4}}}},
			pass:   true,
		},
		{
			name: "ordered output wrong order",
			mode: ModeOrdered,
			expect: func(x *Expectation) {
				w := int64(5)
				x.OutputSequence = []ExpectedItem{{Watermark: &w}, {MatchSeq: []uint64{1, 2}}}
			},
			result:  Result{Output: []OutputItem{{Match: []uint64{1, 2}}, wm(5)}},
			diffHas: "output differs",
		},
		{
			name: "timeouts need their timestamps",
			mode: ModeCountTimeouts,
			expect: func(x *Expectation) {
				n := 0
				x.MatchCount = &n
				x.TimeoutsSeq = [][]uint64{{1}}
				x.TimeoutTimestamps = []int64{11}
			},
			result:  Result{Timeouts: []TimeoutResult{{Stages: StageSeqs{st("start", 1)}, Timestamp: 12}}},
			diffHas: "missing:    [1:a] @11",
		},
		{
			name:    "key order",
			mode:    ModeKeyOrder,
			expect:  func(x *Expectation) { x.MatchesSeq = [][]uint64{{1, 2}} },
			result:  Result{Matches: []MatchResult{match("event", st("end", 2), st("start", 1))}},
			diffHas: "not in pattern stage order",
		},
		{
			name:   "per stage",
			mode:   ModePerStageOrdered,
			expect: func(x *Expectation) { x.StageMapSeq = []map[string][]uint64{{"start": {1, 3}}} },
			result: Result{Matches: []MatchResult{match("event", st("start", 1, 3), st("end", 4))}},
			pass:   true,
		},
		{
			name:    "per stage order matters",
			mode:    ModePerStageOrdered,
			expect:  func(x *Expectation) { x.StageMapSeq = []map[string][]uint64{{"start": {1, 3}}} },
			result:  Result{Matches: []MatchResult{match("event", st("start", 3, 1))}},
			diffHas: "missing",
		},
		{
			name:    "late events in order",
			mode:    ModeLateEventsOnly,
			expect:  func(x *Expectation) { x.LateEventsSeq = []uint64{2, 3} },
			result:  Result{Late: []uint64{3, 2}},
			diffHas: "late events",
		},
		{
			name:   "expects error",
			mode:   ModeExpectsError,
			result: Result{Error: &msg},
			pass:   true,
		},
		{
			name:    "expects error, none",
			mode:    ModeExpectsError,
			diffHas: "expected an error",
		},
		{
			name:    "engine error",
			mode:    ModeMultiset,
			expect:  func(x *Expectation) { x.MatchesSeq = [][]uint64{} },
			result:  Result{Error: &msg},
			diffHas: "the engine failed: boom",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := judgeCase(tt.mode)
			if tt.expect != nil {
				tt.expect(&c.Expect)
			}
			v := Judge(c, &tt.result)
			if v.Pass != tt.pass {
				t.Fatalf("Pass = %v, want %v; diff:\n%s", v.Pass, tt.pass, v.Diff)
			}
			if !strings.Contains(v.Diff, tt.diffHas) {
				t.Errorf("diff does not contain %q:\n%s", tt.diffHas, v.Diff)
			}
		})
	}
	if v := Judge(judgeCase(ModeMultiset), nil); v.Pass {
		t.Errorf("a case without a result passed")
	}
}

// TestResultsKeyOrder checks that stage objects keep pattern stage order
// through the file, and the file's framing.
func TestResultsKeyOrder(t *testing.T) {
	stages := StageSeqs{st("z", 1), st("a", 2, 3), st("m", 4), st("x\"y", 5)}
	rs := &Results{Cases: map[string]*Result{
		"B.case": {Matches: []MatchResult{match(ViaEvent, stages...)}, Timeouts: []TimeoutResult{{Stages: stages, Timestamp: 7}}},
		"A.case": {},
	}}
	var buf bytes.Buffer
	if _, err := rs.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	raw := buf.String()
	if want := `{"z":[1],"a":[2,3],"m":[4],"x\"y":[5]}`; strings.Count(raw, want) != 2 {
		t.Errorf("stage objects not written in order %s:\n%s", want, raw)
	}
	if want := `"A.case": {"matches":[],"timeouts":[],"output":[],"late":[],"error":null}`; !strings.Contains(raw, want) {
		t.Errorf("empty result not written as %s:\n%s", want, raw)
	}
	if !json.Valid(buf.Bytes()) {
		t.Fatalf("results file is not valid JSON:\n%s", raw)
	}
	back, err := DecodeResults(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	got := back.Cases["B.case"]
	if !reflect.DeepEqual(got.Matches[0].Stages, stages) || !reflect.DeepEqual(got.Timeouts[0].Stages, stages) {
		t.Errorf("round trip: got %v and %v, want %v", got.Matches[0].Stages, got.Timeouts[0].Stages, stages)
	}
	if _, err := DecodeResults([]byte(`{"format": "other/v1", "results": {}}`)); err == nil {
		t.Errorf("DecodeResults accepted another format")
	}
}

func TestOutputItemJSON(t *testing.T) {
	w := int64(-9223372036854775808)
	items := []OutputItem{{Watermark: &w}, {Match: []uint64{4, 2, 8}}}
	b, err := json.Marshal(items)
	if err != nil {
		t.Fatal(err)
	}
	if want := `[{"watermark":-9223372036854775808},{"match":[4,2,8]}]`; string(b) != want {
		t.Errorf("Marshal = %s, want %s", b, want)
	}
	var back []OutputItem
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, items) {
		t.Errorf("round trip = %v, want %v", back, items)
	}
}

func TestParseKnownFailing(t *testing.T) {
	k, err := ParseKnownFailing(strings.NewReader("# header\n\nA.b  # nfa: wrong order\nC.d\n"))
	if err != nil {
		t.Fatal(err)
	}
	if want := (KnownFailing{"A.b": "nfa: wrong order", "C.d": ""}); !reflect.DeepEqual(k, want) {
		t.Errorf("got %v, want %v", k, want)
	}
	for _, bad := range []string{"A.b C.d\n", "A.b\nA.b\n"} {
		if _, err := ParseKnownFailing(strings.NewReader(bad)); err == nil {
			t.Errorf("ParseKnownFailing(%q) succeeded", bad)
		}
	}
}

// TestRunCaseBuildError checks that a case that cannot be built gets its
// error set instead of failing the run, in both modes.
func TestRunCaseBuildError(t *testing.T) {
	for _, mode := range []Mode{ModeText, ModeBuilder} {
		in := judgeCase(ModeMultiset).Input
		in.Driver = DriverNFA
		bad := "name =="
		in.Pattern.Stages[1].Condition = &bad
		r := RunCaseMode(&in, mode)
		if r.Error == nil || !strings.Contains(*r.Error, "build") {
			t.Errorf("%s: Error = %v, want a build error", mode, r.Error)
		}
		in.Pattern.Stages[1].Condition = nil
		in.Driver = "nope"
		if r := RunCaseMode(&in, mode); r.Error == nil {
			t.Errorf("%s: unknown driver: no error", mode)
		}
	}
	if _, err := ParseMode("both"); err == nil {
		t.Errorf("ParseMode accepted an unknown mode")
	}
}
