package difftest

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cepheus-cep/cepheus/internal/conformance"
)

// TestMain lets the test binary serve as a Cepheus worker.
func TestMain(m *testing.M) {
	MaybeServeWorker()
	os.Exit(m.Run())
}

// TestCepheusWorker: the worker gives the in-process results, and a case
// that crashes it is reported as that case's error while the cases after
// it still run.
func TestCepheusWorker(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var inputs []conformance.Input
	var fcs []FileCase
	for i := range 30 {
		in := Generate(1, i)
		inputs = append(inputs, in)
		fcs = append(fcs, FileCase{Input: in})
	}
	dir := t.TempDir()
	if err := WriteCaseFile(filepath.Join(dir, "cases.json"), "worker test", fcs, false); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	want, err := Cepheus(ctx, inputs, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	got, err := CepheusWorker(ctx, exe, dir, inputs, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("the worker's results differ from the in-process ones")
	}

	crash := inputs[10].ID
	t.Setenv(workerCrashEnv, crash)
	got, err = CepheusWorker(ctx, exe, dir, inputs, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range inputs {
		r := got.Cases[in.ID]
		switch {
		case r == nil:
			t.Errorf("%s: no result", in.ID)
		case in.ID == crash:
			if r.Error == nil || !strings.HasPrefix(*r.Error, "cepheus crashed: ") {
				t.Errorf("%s: crashed the worker, result error %v", in.ID, errText(r))
			}
		case !reflect.DeepEqual(r, want.Cases[in.ID]):
			t.Errorf("%s: result after the crash differs from the in-process one", in.ID)
		}
	}
}

// TestRerunSlow drives rerunSlow with fake engines whose cases take a
// given time alone, twice that for Cepheus beside the Flink JVM: a case
// Cepheus did not finish beside the JVM runs again through Cepheus alone
// with the longer limit, before (never beside) Flink's rerun of the cases
// Flink did not finish, and is named; a case Cepheus does not finish
// alone either keeps its timeout, is not rerun through Flink, and is
// reported unexplained.
func TestRerunSlow(t *testing.T) {
	const limit = 10 * time.Second
	type cost struct{ cepheus, flink time.Duration } // alone
	costs := map[string]cost{
		"both":        {8 * time.Second, 30 * time.Second}, // narrow seed 4407 case 21460
		"slow-alone":  {150 * time.Second, 30 * time.Second},
		"flink-only":  {time.Second, 30 * time.Second},
		"both-finish": {time.Second, time.Second},
	}
	ids := slices.Sorted(maps.Keys(costs))
	var inputs []conformance.Input
	for i, id := range ids {
		in := Generate(1, i)
		in.ID = id
		inputs = append(inputs, in)
	}
	run := func(took, caseTimeout time.Duration) *conformance.Result {
		if took > caseTimeout {
			msg := fmt.Sprintf("timeout: case still running after %v", caseTimeout)
			return &conformance.Result{Error: &msg}
		}
		return &conformance.Result{Output: []conformance.OutputItem{}}
	}
	d, err := newDriver(Options{Work: t.TempDir(), CaseTimeout: limit})
	if err != nil {
		t.Fatal(err)
	}
	var calls []string
	flinkRunning := false
	caseIDs := func(dir string) []string {
		cs, err := conformance.LoadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, c := range cs {
			out = append(out, c.Input.ID)
		}
		return out
	}
	d.flink = func(_ context.Context, dir string, caseTimeout time.Duration) (*conformance.Results, error) {
		flinkRunning = true
		defer func() { flinkRunning = false }()
		rs := &conformance.Results{Cases: map[string]*conformance.Result{}}
		got := caseIDs(dir)
		for _, id := range got {
			rs.Cases[id] = run(costs[id].flink, caseTimeout)
		}
		calls = append(calls, fmt.Sprintf("flink %v %v", caseTimeout, got))
		return rs, nil
	}
	d.cepheus = func(_ context.Context, dir string, inputs []conformance.Input, caseTimeout time.Duration) (*conformance.Results, error) {
		rs := &conformance.Results{Cases: map[string]*conformance.Result{}}
		var got []string
		for _, in := range inputs {
			took := costs[in.ID].cepheus
			if flinkRunning {
				took *= 2
			}
			rs.Cases[in.ID] = run(took, caseTimeout)
			got = append(got, in.ID)
		}
		if !slices.Equal(got, caseIDs(dir)) {
			t.Errorf("cepheus got cases %v, its directory holds %v", got, caseIDs(dir))
		}
		calls = append(calls, fmt.Sprintf("cepheus %v %v", caseTimeout, got))
		return rs, nil
	}

	// The first run, both engines at once (the fake Cepheus as beside the JVM).
	flink := &conformance.Results{Cases: map[string]*conformance.Result{}}
	cepheus := &conformance.Results{Cases: map[string]*conformance.Result{}}
	for _, id := range ids {
		flink.Cases[id] = run(costs[id].flink, limit)
		cepheus.Cases[id] = run(2*costs[id].cepheus, limit)
	}
	slowCepheus, err := d.rerunSlow(context.Background(), inputs, flink, cepheus)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(slowCepheus, []string{"both"}) {
		t.Errorf("cases Cepheus finished only alone: %v, want [both]", slowCepheus)
	}
	want := []string{
		"cepheus 2m0s [both slow-alone]",
		"flink 2m0s [both flink-only]",
	}
	if !slices.Equal(calls, want) {
		t.Errorf("reruns:\n%s\nwant\n%s", strings.Join(calls, "\n"), strings.Join(want, "\n"))
	}
	for i, in := range inputs {
		f, c := flink.Cases[in.ID], cepheus.Cases[in.ID]
		diffs := Compare(f, c)
		if in.ID == "slow-alone" {
			if !timedOut(c) || !timedOut(f) || len(diffs) == 0 || ExplainCase(&inputs[i], f, c, nil) != nil {
				t.Errorf("%s: flink %s, cepheus %s, explained by %v: want both timed out, unexplained",
					in.ID, errText(f), errText(c), ExplainCase(&inputs[i], f, c, nil))
			}
			continue
		}
		if len(diffs) > 0 {
			t.Errorf("%s: after the reruns: %s", in.ID, diffSummary(diffs))
		}
	}
}

// TestSummaryLine: the line a campaign ends with names the cases Cepheus
// finished only when run again alone, and says nothing of them when
// there are none.
func TestSummaryLine(t *testing.T) {
	s := &Summary{Agreed: 7, Explained: 2, Unexplained: 1, Profile: "narrow", MaxEvents: 12, MaxKeys: 2, MaxRules: 1}
	if got, want := s.Line(), "diff-flink: 7 agreed, 2 explained, 1 unexplained (profile narrow, max 12 events, 2 keys, 1 rules)"; got != want {
		t.Errorf("Line() = %q, want %q", got, want)
	}
	s.SlowCepheus = []string{"s1-00003", "s1-00009"}
	if got, want := s.Line(), "diff-flink: 7 agreed, 2 explained, 1 unexplained, 2 slow (profile narrow, max 12 events, 2 keys, 1 rules)"; got != want {
		t.Errorf("Line() with two slow cases = %q, want %q", got, want)
	}
}
