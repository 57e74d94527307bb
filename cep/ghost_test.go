package cep

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/nfa"
)

// TestGhostsChangeNothing: an operator that holds inert elements aside as
// ghosts (ghost.go) and one that buffers them, given the same random
// streams (out of order, watermarks now and then, buffer limits, a rule
// added and one removed mid-stream, snapshots): the same items after
// every call, the same Stats and RuleStats, the same snapshots. The
// streams must make ghosts, and have them buffered again by a later
// element (one with an earlier timestamp among them) and forgotten.
func TestGhostsChangeNothing(t *testing.T) {
	rules := ghostTestRules(t)
	c, ms := nameIs("c"), time.Millisecond
	added := SharedRule{ID: 4, NFA: mustCompile(t, nfa.Begin("x").Where(nameIs("x")).FollowedBy("c").Where(c).Within(10*ms))}
	names := []string{"a", "b", "c", "x", "y", "y", "z", "z", "z"}
	var made, buffered, forgotten int
	for seed := range uint64(200) {
		rnd := rand.New(rand.NewPCG(seed, 7))
		cfg := SharedConfig{Key: keyByID, MaxBufferedEvents: []int{0, 0, 2, 3}[rnd.IntN(4)]}
		ghosts, plain := newGhostPair(t, cfg, rules)
		var gotOut, wantOut Output
		same := func(what string) {
			t.Helper()
			sameGhosts(t, seed, what, ghosts, plain, &gotOut, &wantOut)
		}
		n := 40 + rnd.IntN(80)
		var evs []tev
		base := event.Time(0)
		for range n {
			base += event.Time(rnd.IntN(3))
			evs = append(evs, tev{id: int64(1 + rnd.IntN(4)), name: names[rnd.IntN(len(names))], ts: base + event.Time(rnd.IntN(6))})
		}
		change, snap := rnd.IntN(n), rnd.IntN(n)
		var maxTs event.Time
		for i, ev := range mkEvents(evs...) {
			if i == change {
				for _, op := range []*SharedOperator{ghosts, plain} {
					if err := op.RemoveRule(1); err != nil {
						t.Fatal(err)
					}
					if err := op.AddRule(added); err != nil {
						t.Fatal(err)
					}
				}
				same("rule change")
			}
			if i == snap {
				g, gerr := ghosts.Snapshot()
				w, werr := plain.Snapshot()
				if gerr != nil || werr != nil || !slices.Equal(g, w) {
					t.Fatalf("seed %d: snapshots differ (%v, %v)", seed, gerr, werr)
				}
				same("snapshot")
			}
			before := len(ghosts.ghosts)
			_, had := ghosts.ghosts[keyByID(ev)]
			gerr := ghosts.ProcessElement(ev, ev.Time, &gotOut)
			werr := plain.ProcessElement(ev, ev.Time, &wantOut)
			if (gerr == nil) != (werr == nil) {
				t.Fatalf("seed %d: errors %v, %v", seed, gerr, werr)
			}
			switch {
			case len(ghosts.ghosts) > before:
				made++
			case had && ghosts.keys[keyByID(ev)] != nil:
				buffered++
			}
			same("element")
			maxTs = max(maxTs, ev.Time)
			if rnd.IntN(5) == 0 {
				w := maxTs - event.Time(rnd.IntN(4))
				before := len(ghosts.ghosts)
				gerr := ghosts.ProcessWatermark(w, &gotOut)
				werr := plain.ProcessWatermark(w, &wantOut)
				if (gerr == nil) != (werr == nil) {
					t.Fatalf("seed %d: errors %v, %v", seed, gerr, werr)
				}
				forgotten += before - len(ghosts.ghosts)
				same("watermark")
			}
		}
		if err, werr := ghosts.ProcessWatermark(event.MaxTime, &gotOut), plain.ProcessWatermark(event.MaxTime, &wantOut); (err == nil) != (werr == nil) {
			t.Fatalf("seed %d: errors %v, %v", seed, err, werr)
		}
		same("last watermark")
	}
	t.Logf("ghosts made %d, buffered again %d, forgotten %d", made, buffered, forgotten)
	if made < 100 || buffered < 20 || forgotten < 20 {
		t.Errorf("the streams made %d ghosts, buffered %d again and forgot %d: too few to test them", made, buffered, forgotten)
	}
}

// ghostTestRules are the rules of the tests that compare an operator
// with ghosts and one without.
func ghostTestRules(t *testing.T) []SharedRule {
	a, b, c := nameIs("a"), nameIs("b"), nameIs("c")
	ms := time.Millisecond
	return []SharedRule{
		{ID: 0, NFA: mustCompile(t, nfa.Begin("a").Where(a).FollowedBy("b").Where(b).Within(20*ms))},
		{ID: 1, NFA: mustCompile(t, nfa.Begin("a").Where(a).Next("b").Where(b))},
		{ID: 2, NFA: mustCompile(t, nfa.Begin("c").Where(c).NotFollowedBy("x").Where(nameIs("x")).FollowedBy("b").Where(b).Within(15*ms))},
		{ID: 3, NFA: mustCompile(t, nfa.Begin("b").Where(b).OneOrMore().FollowedBy("c").Where(c).Within(30*ms))},
	}
}

// newGhostPair returns an operator of rules with ghosts and one without.
func newGhostPair(t *testing.T, cfg SharedConfig, rules []SharedRule) (ghosts, plain *SharedOperator) {
	t.Helper()
	ghosts, err := NewSharedOperator(cfg, rules...)
	if err != nil {
		t.Fatal(err)
	}
	plain, err = NewSharedOperator(cfg, rules...)
	if err != nil {
		t.Fatal(err)
	}
	plain.noGhosts = true
	return ghosts, plain
}

// sameGhosts fails t unless ghosts (with ghosts) and plain (without)
// emitted the same items, got and want, and have the same Stats and
// RuleStats; then it resets got and want.
func sameGhosts(t *testing.T, seed uint64, what string, ghosts, plain *SharedOperator, got, want *Output) {
	t.Helper()
	if !reflect.DeepEqual(got.Items, want.Items) {
		t.Fatalf("seed %d, %s: items\n%+v\nwant\n%+v", seed, what, got.Items, want.Items)
	}
	if g, w := ghosts.Stats(), plain.Stats(); g != w {
		t.Fatalf("seed %d, %s: Stats %+v, want %+v", seed, what, g, w)
	}
	for _, id := range plain.Rules() {
		g, _ := ghosts.RuleStats(id)
		w, _ := plain.RuleStats(id)
		if g != w {
			t.Fatalf("seed %d, %s: RuleStats(%d) %+v, want %+v", seed, what, id, g, w)
		}
	}
	got.Reset()
	want.Reset()
}

// TestGhostsChangeNothingManyKeys is TestGhostsChangeNothing over many
// keys (so that ghosts are forgotten both one by one and rebuilt in one
// pass), with cold keys, watermarks that go back, and the operators
// restored from their snapshots mid-stream.
func TestGhostsChangeNothingManyKeys(t *testing.T) {
	rules := ghostTestRules(t)
	names := []string{"a", "b", "c", "x", "y", "y", "z", "z", "z", "z", "z", "z"}
	var rebuilt int
	for seed := range uint64(300) {
		rnd := rand.New(rand.NewPCG(seed, 11))
		cfg := SharedConfig{Key: keyByID, MaxBufferedEvents: []int{0, 0, 3}[rnd.IntN(3)], CompactEvery: []int{0, 1, 5}[rnd.IntN(3)]}
		ghosts, plain := newGhostPair(t, cfg, rules)
		var gotOut, wantOut Output
		same := func(what string) {
			t.Helper()
			sameGhosts(t, seed, what, ghosts, plain, &gotOut, &wantOut)
		}
		keys := 5 + rnd.IntN(60)
		n := 100 + rnd.IntN(400)
		var evs []tev
		base := event.Time(0)
		for range n {
			base += event.Time(rnd.IntN(2))
			evs = append(evs, tev{id: int64(1 + rnd.IntN(keys)), name: names[rnd.IntN(len(names))], ts: base + event.Time(rnd.IntN(8))})
		}
		var maxTs event.Time
		for i, ev := range mkEvents(evs...) {
			if rnd.IntN(60) == 0 {
				g, gerr := ghosts.Snapshot()
				w, werr := plain.Snapshot()
				if gerr != nil || werr != nil || !slices.Equal(g, w) {
					t.Fatalf("seed %d, element %d: snapshots differ (%v, %v)", seed, i, gerr, werr)
				}
				same("snapshot")
				var err error
				if ghosts, err = RestoreSharedOperator(cfg, rules, g); err != nil {
					t.Fatal(err)
				}
				if plain, err = RestoreSharedOperator(cfg, rules, w); err != nil {
					t.Fatal(err)
				}
				plain.noGhosts = true
			}
			gerr := ghosts.ProcessElement(ev, ev.Time, &gotOut)
			werr := plain.ProcessElement(ev, ev.Time, &wantOut)
			if (gerr == nil) != (werr == nil) {
				t.Fatalf("seed %d: errors %v, %v", seed, gerr, werr)
			}
			same("element")
			maxTs = max(maxTs, ev.Time)
			if rnd.IntN(4) == 0 {
				w := maxTs - event.Time(rnd.IntN(6))
				if rnd.IntN(10) == 0 {
					w -= 10 // behind the last: the ghosts are buffered
				}
				before := len(ghosts.ghosts)
				spare := ghosts.ghostSpare
				gerr := ghosts.ProcessWatermark(w, &gotOut)
				werr := plain.ProcessWatermark(w, &wantOut)
				if (gerr == nil) != (werr == nil) {
					t.Fatalf("seed %d: errors %v, %v", seed, gerr, werr)
				}
				if before > 0 && spare == nil && ghosts.ghostSpare != nil {
					rebuilt++
				}
				same("watermark")
			}
		}
		if err, werr := ghosts.ProcessWatermark(event.MaxTime, &gotOut), plain.ProcessWatermark(event.MaxTime, &wantOut); (err == nil) != (werr == nil) {
			t.Fatalf("seed %d: errors %v, %v", seed, err, werr)
		}
		same("last watermark")
	}
	if rebuilt < 20 {
		t.Errorf("the ghosts were rebuilt %d times: too few to test it", rebuilt)
	}
}

// TestGhostKeepsRank: a key whose first element is held as a ghost and
// fired (forgotten) while a later one is still held keeps that first
// element's rank when it is buffered, as it would have kept its state: it
// fires before a key created in between.
func TestGhostKeepsRank(t *testing.T) {
	ab := mustCompile(t, nfa.Begin("a").Where(nameIs("a")).FollowedBy("b").Where(nameIs("b")))
	events := mkEvents(
		tev{id: 1, name: "z", ts: 1}, // seq 1: key 1's ghost
		tev{id: 1, name: "z", ts: 9}, // seq 2: key 1's second ghost element
		tev{id: 2, name: "a", ts: 5}, // seq 3: key 2, state
		tev{id: 2, name: "b", ts: 9}, // seq 4
		tev{id: 1, name: "a", ts: 3}, // seq 5: buffers key 1's ghost (ts 9) first, ranked 1
		tev{id: 1, name: "b", ts: 9}, // seq 6
	)
	for _, off := range []bool{false, true} {
		op, err := NewSharedOperator(SharedConfig{Key: keyByID}, SharedRule{ID: 0, NFA: ab})
		if err != nil {
			t.Fatal(err)
		}
		op.noGhosts = off
		var out Output
		for i, ev := range events {
			if err := op.ProcessElement(ev, ev.Time, &out); err != nil {
				t.Fatal(err)
			}
			if i == 1 {
				if err := op.ProcessWatermark(2, &out); err != nil { // passes key 1's first element
					t.Fatal(err)
				}
			}
		}
		if !off && len(op.ghosts) != 0 {
			t.Errorf("%d ghosts left after key 1 got state", len(op.ghosts))
		}
		if err := op.ProcessWatermark(10, &out); err != nil {
			t.Fatal(err)
		}
		var got []event.Key
		for _, it := range out.Items {
			if it.Kind == ItemMatch {
				got = append(got, it.Key)
			}
		}
		// Both keys match at 9; key 1 ranks first (seq 1, its state
		// never dropped), key 2 second (seq 3).
		if want := []event.Key{"1", "2"}; !slices.Equal(got, want) {
			t.Errorf("ghosts off %v: matches at keys %q, want %q", off, got, want)
		}
	}
}
