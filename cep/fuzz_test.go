package cep

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/nfa"
	"github.com/cepheus-cep/cepheus/runtime/state"
)

// FuzzRestoreOperator restores an operator from arbitrary bytes
// (checkRestored says what must hold). The seeds are snapshots of an
// operator fed a random scenario, taken along the way.
func FuzzRestoreOperator(f *testing.F) {
	cfg := randomConfigs(f)["flink comparator"]
	rng := rand.New(rand.NewPCG(7, 7))
	events, steps := randomScenario(rng, EventTime)
	s := newScript(f, cfg, events)
	for i, st := range steps {
		s.run(st)
		if i%16 == 0 {
			snap, err := s.op.Snapshot()
			if err != nil {
				f.Fatal(err)
			}
			f.Add(snap)
		}
	}
	more := mkEvents(
		tev{id: 1, name: "start", ts: 40}, tev{id: 2, name: "foo", volume: 10, ts: 41},
		tev{id: 1, name: "end", ts: 42}, tev{id: 3, name: "b", price: 1, ts: 39},
	)
	f.Fuzz(func(t *testing.T, b []byte) {
		checkRestored(t, b, func(b []byte) (*Operator, error) { return RestoreOperator(cfg, b) }, more, true)
	})
}

// FuzzRestoreSharedOperator is FuzzRestoreOperator for the operator that
// hosts several rules: its seeds are snapshots of three rules (one with
// a cap on partial matches, one stepping its deadlines) over key groups.
func FuzzRestoreSharedOperator(f *testing.F) {
	cfg, rules := fuzzSharedConfig(f)
	fuzzSharedScenario(f, cfg, rules, func(i int, op *SharedOperator) bool {
		if i%16 == 0 {
			snap, err := op.Snapshot()
			if err != nil {
				f.Fatal(err)
			}
			f.Add(snap)
		}
		return true
	})
	more := mkEvents(
		tev{id: 1, name: "a", ts: 40}, tev{id: 2, name: "foo", volume: 10, ts: 41},
		tev{id: 1, name: "b", ts: 42}, tev{id: 3, name: "end", price: 1, ts: 39},
	)
	f.Fuzz(func(t *testing.T, b []byte) {
		// Not canonical: a restore settles each key, as the live
		// operator does, and a rule's slot that holds nothing (no run,
		// no buffered element) goes.
		checkRestored(t, b, func(b []byte) (*SharedOperator, error) { return RestoreSharedOperator(cfg, rules, b) }, more, false)
	})
}

// restorable is what the fuzz targets ask of a restored operator.
type restorable interface {
	Snapshot() ([]byte, error)
	ProcessElement(ev *event.Event, ts event.Time, out *Output) error
	ProcessWatermark(w event.Time, out *Output) error
}

// checkRestored restores an operator from b. It must fail with
// ErrCorruptSnapshot (or a later build's version, or rules that do not
// match), or restore an operator whose snapshot restores again to the
// same snapshot, and, canonical, is b itself if as long: no field takes
// a value its encoding cannot give back (a longer b may spell varints
// with extra bytes). The operator then takes more and a last watermark
// without panicking.
func checkRestored[O restorable](t *testing.T, b []byte, restore func([]byte) (O, error), more []*event.Event, canonical bool) {
	op, err := restore(b)
	if err != nil {
		if !errors.Is(err, ErrCorruptSnapshot) && !errors.Is(err, state.ErrCheckpointVersion) && !errors.Is(err, ErrInvalidConfig) {
			t.Fatalf("error %v is not ErrCorruptSnapshot, ErrCheckpointVersion or ErrInvalidConfig", err)
		}
		return
	}
	snap, err := op.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if canonical && len(snap) == len(b) && !bytes.Equal(snap, b) {
		t.Fatalf("the snapshot %x restores an operator whose snapshot is %x", b, snap)
	}
	again, err := restore(snap)
	if err != nil {
		t.Fatalf("the snapshot of a restored operator does not restore: %v", err)
	}
	if snap2, err := again.Snapshot(); err != nil || !bytes.Equal(snap, snap2) {
		t.Fatalf("snapshot not stable (%v):\n%x\n%x", err, snap, snap2)
	}
	var out Output
	for _, ev := range more {
		if op.ProcessElement(ev, ev.Time, &out) != nil {
			return
		}
	}
	_ = op.ProcessWatermark(event.MaxTime, &out)
}

// fuzzSharedConfig is the operator of FuzzRestoreSharedOperator: three
// rules, one with a cap on partial matches, one stepping its deadlines,
// one whose runs start deferred (nfa.NFA.DeferrableStart), over key
// groups.
func fuzzSharedConfig(t testing.TB) (SharedConfig, []SharedRule) {
	cfgs := randomConfigs(t)
	return SharedConfig{Key: keyByID, KeyGroups: 8, Less: byPrice, MaxBufferedEvents: 8}, []SharedRule{
		{ID: 0, NFA: cfgs["flink"].NFA, MaxPartialMatches: 6},
		{ID: 3, NFA: cfgs["loop skip"].NFA, StepDeadlines: true},
		{ID: 4, NFA: mustCompile(t, nfa.Begin("a").Where(nameIs("a")).FollowedBy("b").Where(nameIs("b")).Within(10))},
	}
}

// fuzzSharedScenario feeds a random scenario to a new operator of cfg and
// rules, calling after(i, op) after step i until it returns false.
func fuzzSharedScenario(t testing.TB, cfg SharedConfig, rules []SharedRule, after func(i int, op *SharedOperator) bool) {
	op, err := NewSharedOperator(cfg, rules...)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(8, 8))
	events, steps := randomScenario(rng, EventTime)
	var out Output
	for i, st := range steps {
		switch st[0] {
		case 'e':
			ev := events[parseTime(st[1:])-1]
			err = op.ProcessElement(ev, ev.Time, &out)
		case 'w':
			err = op.ProcessWatermark(parseTime(st[1:]), &out)
		}
		if err != nil {
			t.Fatal(err)
		}
		if !after(i, op) {
			return
		}
	}
}
