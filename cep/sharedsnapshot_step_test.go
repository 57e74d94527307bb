package cep

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/nfa"
	"github.com/cepheus-cep/cepheus/runtime/state"
)

// storeRecords lists the records of op in r as "key=value" strings.
func storeRecords(t *testing.T, r state.Reader, op state.OperatorID) []string {
	t.Helper()
	var out []string
	for rec, err := range r.Records(op, state.AllKeyGroups) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%v=%x", rec.Key, rec.Value))
	}
	return out
}

// TestSharedSnapshotSteps runs two operators in lockstep over random
// elements and watermarks (with a cold-key sweep after every few
// elements): at each checkpoint one writes its snapshot at once
// (SnapshotTo), the other begins an incremental one and writes a key
// after each later element or watermark. Once its steps are done, the
// second store holds exactly what the first held at the checkpoint, over
// many checkpoints into the same stores, and the two operators emit the
// same items throughout.
func TestSharedSnapshotSteps(t *testing.T) {
	ab := mustCompile(t, nfa.Begin("a").Where(nameIs("a")).FollowedBy("b").Where(nameIs("b")).Within(10))
	abb := mustCompile(t, nfa.Begin("a").Where(nameIs("a")).FollowedByAny("b").Where(nameIs("b")).OneOrMore().Within(30))
	rules := []SharedRule{{ID: 0, NFA: ab}, {ID: 1, NFA: abb}}
	for seed := range uint64(20) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 7))
			cfg := SharedConfig{Key: keyByID, KeyGroups: 16, CompactEvery: 1 + r.IntN(5)}
			a, err := NewSharedOperator(cfg, rules...)
			if err != nil {
				t.Fatal(err)
			}
			b, err := NewSharedOperator(cfg, rules...)
			if err != nil {
				t.Fatal(err)
			}
			storeA, storeB := state.NewMem(), state.NewMem()
			var outA, outB Output
			var want []string // storeA's records at the checkpoint in progress in b
			check := func(where string) {
				t.Helper()
				if _, err := b.SnapshotStep(-1); err != nil {
					t.Fatal(err)
				}
				if got := storeRecords(t, storeB, "op"); want != nil && !slices.Equal(got, want) {
					t.Fatalf("%s: the incremental snapshot wrote %d records, the snapshot at once %d (or they differ)", where, len(got), len(want))
				}
			}
			var names = []string{"a", "b", "x"}
			ts := event.Time(0)
			var evs []tev
			for range 400 {
				ts += event.Time(r.IntN(3))
				evs = append(evs, tev{id: int64(1 + r.IntN(12)), name: names[r.IntN(3)], ts: ts})
			}
			wm := event.Time(-1)
			for i, ev := range mkEvents(evs...) {
				if ev.Time > wm {
					if err := a.ProcessElement(ev, ev.Time, &outA); err != nil {
						t.Fatal(err)
					}
					if err := b.ProcessElement(ev, ev.Time, &outB); err != nil {
						t.Fatal(err)
					}
				}
				if r.IntN(4) == 0 {
					wm = ev.Time - event.Time(r.IntN(4))
					if err := a.ProcessWatermark(wm, &outA); err != nil {
						t.Fatal(err)
					}
					if err := b.ProcessWatermark(wm, &outB); err != nil {
						t.Fatal(err)
					}
				}
				if _, err := b.SnapshotStep(1); err != nil {
					t.Fatal(err)
				}
				if r.IntN(25) == 0 {
					check(fmt.Sprintf("checkpoint before element %d", i))
					if err := a.SnapshotTo(storeA, "op"); err != nil {
						t.Fatal(err)
					}
					want = storeRecords(t, storeA, "op")
					if err := b.SnapshotBegin(storeB, "op"); err != nil {
						t.Fatal(err)
					}
				}
				if !slices.EqualFunc(outA.Items, outB.Items, sameItem) {
					t.Fatalf("element %d: the operators emitted different items:\n%s\nvs\n%s", i, dumpItems(outA.Items), dumpItems(outB.Items))
				}
				outA.Reset()
				outB.Reset()
			}
			check("the end")
			if want == nil {
				t.Fatal("no checkpoint taken")
			}
		})
	}
}

// sameItem compares items by their events' Seq (a thawed cold key
// decodes its events into new objects).
func sameItem(x, y Item) bool {
	seqs := func(it Item) string {
		s := ""
		if it.Event != nil {
			s = fmt.Sprint(it.Event.Seq)
		}
		for _, evs := range it.Match.Events {
			s += "|"
			for _, e := range evs {
				s += fmt.Sprint(" ", e.Seq)
			}
		}
		return s
	}
	return x.Kind == y.Kind && x.Rule == y.Rule && x.Key == y.Key && x.At == y.At && x.Watermark == y.Watermark &&
		seqs(x) == seqs(y)
}

func dumpItems(its []Item) string {
	s := ""
	for _, it := range its {
		s += fmt.Sprintf("{%v r%d k%q at%d w%d}\n", it.Kind, it.Rule, it.Key, it.At, it.Watermark)
	}
	return s
}
