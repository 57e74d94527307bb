package cep

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cepheus-cep/cepheus/runtime/state"
)

// engineRules has two key specifications (card; country), so a run hosts
// two shared operators, and an absence rule whose matches wait for the
// watermark.
const engineRules = backtestRules + `
rule two_big_in_country {
  severity low
  key country
  pattern {
    begin a where amount > 400
    followedBy b where amount > 400
    within 5m
  }
}
`

// engineInput is n seeded events over a few cards and countries, with
// timestamps up to 40 s out of order (some late for a 10 s bound).
func engineInput(n int) string {
	var b strings.Builder
	x := uint64(42)
	next := func(m uint64) uint64 {
		x = x*6364136223846793005 + 1442695040888963407
		return (x >> 33) % m
	}
	base := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	types := []string{"auth", "auth", "capture"}
	countries := []string{"US", "FR", "DE"}
	for i := range n {
		ts := base.Add(time.Duration(i)*7*time.Second - time.Duration(next(40))*time.Second)
		fmt.Fprintf(&b, `{"ts":%q,"card":"c%d","type":%q,"amount":%d,"country":%q}`+"\n",
			ts.Format(time.RFC3339), next(6), types[next(3)], next(600), countries[next(3)])
		if i%97 == 0 {
			b.WriteString("not json\n") // a dead letter
		}
	}
	return b.String()
}

// engineRun is the outputs of one run.
type engineRun struct {
	sum         *Summary
	alerts      string
	late        string
	observed    []string // alert ids seen by an observer
	checkpoints int
}

// idObserver keeps the ids of the alerts it sees.
type idObserver struct{ ids *[]string }

func (o idObserver) OnAlert(a *Alert) { *o.ids = append(*o.ids, a.ID) }

func runEngine(t *testing.T, input string, opts ...Option) (engineRun, error) {
	t.Helper()
	src, err := NewEventSource(strings.NewReader(input), "input")
	if err != nil {
		t.Fatal(err)
	}
	var r engineRun
	var alerts, late bytes.Buffer
	e, err := New(append([]Option{WithRuleset(loadRules(t, engineRules)), WithOutOfOrderness(10 * time.Second),
		WithWatermarkEvery(3), WithAlerts(&alerts), WithLate(&late), WithObservers(idObserver{&r.observed})}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	r.sum, err = e.Run(context.Background(), src)
	r.alerts, r.late = alerts.String(), late.String()
	return r, err
}

var errCrash = errors.New("crash after the checkpoint")

// TestEngineSnapshotRestore runs part of an input, snapshots the engine's
// state through the operator hooks into the in-memory store, "crashes",
// restores a fresh engine from the store and runs the rest: the outputs
// written up to the checkpoint plus those of the restored run are byte for
// byte those of an uninterrupted run, and so is the summary.
func TestEngineSnapshotRestore(t *testing.T) {
	input := engineInput(600)
	whole, err := runEngine(t, input)
	if err != nil {
		t.Fatal(err)
	}
	if whole.sum.Alerts < 20 || whole.sum.Late == 0 || whole.sum.Dead == 0 {
		t.Fatalf("the input should give alerts, late events and dead letters: %+v", whole.sum)
	}
	if got := strings.Count(whole.alerts, "\n"); got != len(whole.observed) || int64(got) != whole.sum.Alerts {
		t.Fatalf("%d alert lines, %d observed, summary %d", got, len(whole.observed), whole.sum.Alerts)
	}
	for _, at := range []int64{1, 50, 97, 98, 299, 500, 606} {
		t.Run(fmt.Sprint("after=", at), func(t *testing.T) {
			// Checkpoints go into one store in turn, each writing what
			// changed since the one before; the run crashes after the
			// third (the first when the input holds fewer).
			store := state.NewMem()
			var snap *state.MemSnapshot
			var cut engineRun
			crashAt, taken := 3, 0
			if 3*at > 600 {
				crashAt = 1
			}
			src, _ := NewEventSource(strings.NewReader(input), "input")
			var alerts, late bytes.Buffer
			var ids []string
			e, err := New(WithRuleset(loadRules(t, engineRules)), WithOutOfOrderness(10*time.Second),
				WithWatermarkEvery(3), WithAlerts(&alerts), WithLate(&late), WithObservers(idObserver{&ids}),
				withCheckpoints(at, func(snapshot func(state.Writer) error) error {
					if err := snapshot(store); err != nil {
						return err
					}
					snap = store.Snapshot()
					// The outputs were flushed before the snapshot: what
					// is written now is what the checkpoint covers.
					cut = engineRun{alerts: alerts.String(), late: late.String(), observed: slices.Clone(ids)}
					if taken++; taken < crashAt {
						return nil
					}
					return errCrash
				}))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := e.Run(context.Background(), src); !errors.Is(err, errCrash) {
				t.Fatalf("first run: %v", err)
			}
			// The subtask's record, the counters, and per shared operator a
			// header and one record per key holding state, in its group.
			headers, keyed := 0, 0
			for _, spec := range e.specs {
				for rec, err := range snap.Records(spec.id, state.AllKeyGroups) {
					if err != nil {
						t.Fatal(err)
					}
					switch g := rec.Key.KeyGroup; {
					case g == headerGroup && rec.Key.Key == "":
						headers++
					case g == state.GroupOf(rec.Key.Key, state.DefaultKeyGroups):
						keyed++
					default:
						t.Errorf("record %v in the wrong key group", rec.Key)
					}
				}
			}
			if headers != 2 || keyed == 0 || snap.Len() != 2+headers+keyed {
				t.Errorf("%d records: %d headers, %d keys; want 2 headers, keys, the subtask and the counters", snap.Len(), headers, keyed)
			}
			rest, err := runEngine(t, input, withRestore(snap))
			if err != nil {
				t.Fatalf("restored run: %v", err)
			}
			if got := cut.alerts + rest.alerts; got != whole.alerts {
				t.Errorf("alerts differ from the uninterrupted run:\n got %s\nwant %s", got, whole.alerts)
			}
			if got := cut.late + rest.late; got != whole.late {
				t.Errorf("late events differ:\n got %s\nwant %s", got, whole.late)
			}
			if got := append(cut.observed, rest.observed...); !reflect.DeepEqual(got, whole.observed) {
				t.Errorf("observed ids differ")
			}
			if !reflect.DeepEqual(rest.sum, whole.sum) {
				t.Errorf("summary:\n got %+v\nwant %+v", rest.sum, whole.sum)
			}
		})
	}
}

func TestEngineRestoreErrors(t *testing.T) {
	// A store without the operators' records.
	m := state.NewMem()
	// A subtask record of version 2 (with the first dead letter's file),
	// every count 0.
	m.Put(state.Key{Operator: "runtime.subtask"}, []byte{2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	src, _ := NewEventSource(strings.NewReader(""), "input")
	e, err := New(WithRuleset(loadRules(t, engineRules)), withRestore(m))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Run(context.Background(), src); !errors.Is(err, ErrCorruptSnapshot) {
		t.Errorf("Run from an incomplete checkpoint = %v, want ErrCorruptSnapshot", err)
	}
}

// TestDecodeCountersLaterVersion: the engine's counter record of a
// version above this build's (a later build's checkpoint) is refused as
// such (state.ErrCheckpointVersion, naming the versions), not as a
// corrupt snapshot; one of this version with a rule too many is corrupt.
func TestDecodeCountersLaterVersion(t *testing.T) {
	// alerts 0, late 0, no rule, late by 0, no retired rule.
	if c, err := decodeCounters([]byte{counterStateVersion, 0, 0, 0, 0, 0}, 0); err != nil || len(c.rules) != 0 {
		t.Fatalf("decodeCounters(version %d) = %v, %v", counterStateVersion, c, err)
	}
	_, err := decodeCounters([]byte{counterStateVersion + 1, 0, 0, 0, 0, 0}, 0)
	want := fmt.Sprintf("the engine's counters of version %d, this build reads up to %d", counterStateVersion+1, counterStateVersion)
	if !errors.Is(err, state.ErrCheckpointVersion) || errors.Is(err, ErrCorruptSnapshot) || !strings.Contains(err.Error(), want) {
		t.Errorf("decodeCounters(version %d) = %v, want a later build's record", counterStateVersion+1, err)
	}
	if _, err := decodeCounters([]byte{counterStateVersion, 0, 0, 0, 0, 0}, 1); !errors.Is(err, ErrCorruptSnapshot) {
		t.Errorf("decodeCounters of 0 rules for 1 = %v, want ErrCorruptSnapshot", err)
	}
}

// TestEngineGCPercent: WithGCPercent holds during Run and is restored.
func TestEngineGCPercent(t *testing.T) {
	before := debug.SetGCPercent(100)
	defer debug.SetGCPercent(before)
	var during int
	src, _ := NewEventSource(strings.NewReader(engineInput(3)), "input")
	e, err := New(WithRuleset(loadRules(t, engineRules)), WithGCPercent(345),
		WithProgress(1, func(Progress) {
			during = debug.SetGCPercent(-1)
			debug.SetGCPercent(during)
		}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Run(context.Background(), src); err != nil {
		t.Fatal(err)
	}
	if after := debug.SetGCPercent(100); during != 345 || after != 100 {
		t.Errorf("GC percent %d during the run, %d after; want 345 and 100", during, after)
	}
}

// TestEngineMemoryLimit: WithMemoryLimit holds during Run and is restored.
func TestEngineMemoryLimit(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	var during int64
	src, _ := NewEventSource(strings.NewReader(engineInput(3)), "input")
	e, err := New(WithRuleset(loadRules(t, engineRules)), WithMemoryLimit(300<<20),
		WithProgress(1, func(Progress) { during = debug.SetMemoryLimit(-1) }))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Run(context.Background(), src); err != nil {
		t.Fatal(err)
	}
	if after := debug.SetMemoryLimit(-1); during != 300<<20 || after != before {
		t.Errorf("memory limit %d during the run, %d after; want %d and %d", during, after, 300<<20, before)
	}
}

// TestEngineRunsTwice: each Run starts from empty state.
func TestEngineRunsTwice(t *testing.T) {
	input := engineInput(200)
	e, err := New(WithRuleset(loadRules(t, engineRules)), WithOutOfOrderness(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var sums []*Summary
	for range 2 {
		src, _ := NewEventSource(strings.NewReader(input), "input")
		sum, err := e.Run(context.Background(), src)
		if err != nil {
			t.Fatal(err)
		}
		sums = append(sums, sum)
	}
	if !reflect.DeepEqual(sums[0], sums[1]) || sums[0].Alerts == 0 {
		t.Errorf("runs differ:\n%+v\n%+v", sums[0], sums[1])
	}
}
