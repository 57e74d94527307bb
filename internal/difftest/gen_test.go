package difftest

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/cepheus-cep/cepheus/internal/conformance"
)

// testSeeds returns the fixed seeds, or the one in CEPHEUS_SEED.
func testSeeds(t *testing.T) []uint64 {
	if s := os.Getenv("CEPHEUS_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("CEPHEUS_SEED: %v", err)
		}
		return []uint64{seed}
	}
	return []uint64{1, 2, 3}
}

// TestGenerateDeterministic: a case depends only on (seed, i).
func TestGenerateDeterministic(t *testing.T) {
	for _, seed := range testSeeds(t) {
		t.Logf("seed %d (CEPHEUS_SEED=%d)", seed, seed)
		for i := range 200 {
			a, b := Generate(seed, i), Generate(seed, i)
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("seed %d (CEPHEUS_SEED=%d): case %d differs between two calls", seed, seed, i)
			}
			if a.ID != CaseID(seed, i) {
				t.Fatalf("case id %q, want %q", a.ID, CaseID(seed, i))
			}
		}
	}
}

// TestCaseFileRoundTrip: a written case file reads back to the same
// inputs, although null, false and "" members are left out.
func TestCaseFileRoundTrip(t *testing.T) {
	for _, seed := range testSeeds(t) {
		var fcs []FileCase
		for i := range 300 {
			fcs = append(fcs, FileCase{Input: Generate(seed, i), Source: caseSource})
		}
		path := filepath.Join(t.TempDir(), "cases.json")
		if err := WriteCaseFile(path, "round trip", fcs, false); err != nil {
			t.Fatal(err)
		}
		cases, err := conformance.LoadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if len(cases) != len(fcs) {
			t.Fatalf("read %d cases, wrote %d", len(cases), len(fcs))
		}
		for i := range cases {
			want, got := canonical(t, &fcs[i].Input), canonical(t, &cases[i].Input)
			if want != got {
				t.Errorf("seed %d (CEPHEUS_SEED=%d), case %d:\nwrote %s\nread  %s", seed, seed, i, want, got)
			}
		}
	}
}

func canonical(t *testing.T, in *conformance.Input) string {
	t.Helper()
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	c, err := compactJSON(b)
	if err != nil {
		t.Fatal(err)
	}
	// The comparator is raw JSON: compact it too.
	var v any
	if err := json.Unmarshal(c, &v); err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(v)
	return string(out)
}

// TestConditionsCompile: every condition the generator can draw compiles
// in Cepheus (the Flink runner's interpreter is checked by the runs: a
// condition it cannot read fails the case on the Flink side only).
func TestConditionsCompile(t *testing.T) {
	for _, seed := range testSeeds(t) {
		g := &generator{r: rand.New(rand.NewPCG(seed, 0))}
		seen := map[string]bool{}
		for range 2000 {
			for _, c := range []string{g.simple(), g.iterative("s1"), g.untilCondition()} {
				seen[c] = true
			}
		}
		for c := range seen {
			cond := c
			in := conformance.Input{
				ID: "cond", Driver: conformance.DriverNFA,
				Pattern: conformance.PatternSpec{Skip: "noSkip", Stages: []conformance.StageSpec{
					{Name: "s1", Contiguity: "begin", Quantifier: conformance.QuantifierSpec{Kind: "oneOrMore", Min: 1}},
					{Name: "s2", Contiguity: "followedBy", Condition: &cond, Quantifier: conformance.QuantifierSpec{Kind: "one"}},
				}},
				Events: []conformance.EventSpec{
					{Seq: 1, ID: 1, Name: "a", Price: 1, Ts: ptr(int64(1)), Type: "Event"},
					{Seq: 2, ID: 1, Name: "b", Price: 3, Ts: ptr(int64(2)), Type: "SubEvent", Volume: ptr(2.0)},
				},
			}
			if r := conformance.RunCase(&in); r.Error != nil {
				t.Errorf("seed %d (CEPHEUS_SEED=%d): condition %q: %s", seed, seed, c, *r.Error)
			}
		}
		if !strings.Contains(strings.Join(keys(seen), "\n"), "ctx(") {
			t.Errorf("no iterative condition drawn")
		}
	}
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestGeneratedFeatures: the generator reaches the whole feature space.
func TestGeneratedFeatures(t *testing.T) {
	seen := map[string]int{}
	for i := range 3000 {
		in := Generate(1, i)
		seen["driver "+in.Driver]++
		if in.TimeCharacteristic != "" {
			seen["time "+in.TimeCharacteristic]++
		}
		if len(in.EventComparator) > 0 {
			seen["comparator"]++
		}
		if in.Pattern.WithinMs != nil {
			seen["within "+in.Pattern.WithinType]++
		}
		kind, _, _ := strings.Cut(in.Pattern.Skip, ":")
		seen["skip "+kind]++
		if in.Pattern.SkipThrowOnMiss {
			seen["throw"]++
		}
		if in.TimeoutHandling {
			seen["timeouts"]++
		}
		for _, st := range in.OperatorSteps {
			switch {
			case st.SnapshotRestore != nil:
				seen["snapshot_restore"]++
			case st.ProcessingTime != nil:
				seen["processing_time step"]++
			}
		}
		var walk func([]conformance.StageSpec, int)
		walk = func(stages []conformance.StageSpec, depth int) {
			for _, s := range stages {
				seen["contiguity "+s.Contiguity]++
				q := s.Quantifier
				seen["quantifier "+q.Kind]++
				if q.Kind == "times" && q.Min == 0 {
					seen["times min 0"]++
				}
				for name, on := range map[string]bool{"optional": q.Optional, "greedy": q.Greedy,
					"inner " + q.Inner: q.Inner != "", "window_ms": q.WindowMs != nil, "until": s.Until != nil,
					"ctx": s.Condition != nil && strings.Contains(*s.Condition, "ctx(")} {
					if on {
						seen[name]++
					}
				}
				if s.Group != nil {
					seen["group depth "+strconv.Itoa(depth+1)]++
					walk(s.Group.Stages, depth+1)
				}
			}
		}
		walk(in.Pattern.Stages, 0)
	}
	for _, want := range []string{
		"driver nfa_harness", "driver operator_harness", "time processing_time", "comparator",
		"within ", "within PREVIOUS_AND_CURRENT", "skip noSkip", "skip skipToNext", "skip skipPastLastEvent",
		"skip skipToFirst", "skip skipToLast", "throw", "timeouts", "snapshot_restore", "processing_time step",
		"contiguity begin", "contiguity next", "contiguity followedBy", "contiguity followedByAny",
		"contiguity notNext", "contiguity notFollowedBy", "quantifier one", "quantifier times",
		"quantifier timesOrMore", "quantifier oneOrMore", "times min 0", "optional", "greedy",
		"inner consecutive", "inner allowCombinations", "window_ms", "until", "ctx", "group depth 1", "group depth 2",
	} {
		if seen[want] == 0 {
			t.Errorf("3000 generated cases have no %q", want)
		}
	}
}
