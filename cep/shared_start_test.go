package cep

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/nfa"
)

// sigIs is nameIs with a signature: rules beginning with sigIs of one name
// share their start checks and may start quietly.
type sigIs string

func (c sigIs) Eval(e *event.Event, _ *nfa.Context) bool { return name(e) == string(c) }
func (c sigIs) Signature() string                        { return "name == " + string(c) }

// TestSharedSameStarts: W4's shape at small scale. In the first set,
// rules 0 to 2 begin alike (one start group, deferrable starts, but two
// windows), rule 3 begins otherwise (quiet starts) and rule 4 like rule 0
// but without a window (not deferrable). In the second, the rules that
// begin alike have one window: their starts are quiet. Over a random
// stream with watermarks, snapshots and restores, each rule gives item for
// item what its own Operator gives, with the same stats (keys and
// buffered elements held).
func TestSharedSameStarts(t *testing.T) {
	w4 := func(second string, within time.Duration) *nfa.NFA {
		p := nfa.Begin("a").Where(sigIs("a")).FollowedBy("b").Where(sigIs(second)).FollowedBy("c").Where(sigIs("c"))
		if within > 0 {
			p = p.Within(within)
		}
		return mustCompile(t, p)
	}
	x := mustCompile(t, nfa.Begin("x").Where(sigIs("x")).FollowedBy("b").Where(sigIs("b")).Within(6*time.Millisecond))
	for _, nfas := range [][]*nfa.NFA{
		{w4("b", 10*time.Millisecond), w4("x", 10*time.Millisecond), w4("b", 4*time.Millisecond), x, w4("b", 0)},
		{w4("b", 10*time.Millisecond), w4("x", 10*time.Millisecond), w4("c", 10*time.Millisecond), x},
	} {
		sameStarts(t, nfas)
	}
}

func sameStarts(t *testing.T, nfas []*nfa.NFA) {
	quiet, matches := 0, 0
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 1))
		var rules []SharedRule
		ones := make([]*Operator, len(nfas))
		for i, n := range nfas {
			rules = append(rules, SharedRule{ID: i, NFA: n})
			var err error
			if ones[i], err = NewOperator(OperatorConfig{NFA: n, Key: keyByID}); err != nil {
				t.Fatal(err)
			}
		}
		cfg := SharedConfig{Key: keyByID}
		op, err := NewSharedOperator(cfg, rules...)
		if err != nil {
			t.Fatal(err)
		}
		var out Output
		want := make([]Output, len(nfas))
		got := make([][]string, len(nfas))
		ts := event.Time(0)
		names := []string{"a", "b", "c", "x", "y"}
		for step := range 300 {
			if r.IntN(4) == 0 {
				ts += event.Time(r.IntN(4))
				for i, one := range ones {
					_ = one.ProcessWatermark(ts, &want[i])
				}
				if err := op.ProcessWatermark(ts, &out); err != nil {
					t.Fatal(err)
				}
				quiet = max(quiet, op.quietKeys)
				for i, one := range ones {
					st, _ := op.RuleStats(i)
					if w := one.Stats(); st.Keys != w.Keys || st.BufferedEvents != w.BufferedEvents {
						t.Fatalf("seed %d step %d rule %d: %d keys, %d buffered; its operator %d, %d", seed, step, i, st.Keys, st.BufferedEvents, w.Keys, w.BufferedEvents)
					}
					c, _ := op.RuleCounts(i)
					if w := one.Stats(); c.Matches != w.Matches || c.Timeouts != w.Timeouts || c.DroppedPartialMatches != w.DroppedPartialMatches || c.Late != w.Late {
						t.Fatalf("seed %d step %d rule %d: counts %+v; its operator %+v", seed, step, i, c, w)
					}
					if st.Keys, st.BufferedEvents = 0, 0; c != st {
						t.Fatalf("seed %d step %d rule %d: RuleCounts %+v, RuleStats %+v", seed, step, i, c, st)
					}
				}
				if r.IntN(5) == 0 {
					snap, err := op.Snapshot()
					if err != nil {
						t.Fatal(err)
					}
					if op, err = RestoreSharedOperator(cfg, rules, snap); err != nil {
						t.Fatal(err)
					}
				}
				continue
			}
			ev := mkEvents(tev{id: int64(r.IntN(4)), name: names[r.IntN(len(names))], ts: ts + event.Time(r.IntN(3))})[0]
			ev.Seq = uint64(step + 1)
			for i, one := range ones {
				_ = one.ProcessElement(ev, ev.Time, &want[i])
			}
			if err := op.ProcessElement(ev, ev.Time, &out); err != nil {
				t.Fatal(err)
			}
		}
		for _, it := range out.Items {
			if it.Kind == ItemMatch {
				matches++
			}
			if it.Rule != AllRules {
				got[it.Rule] = append(got[it.Rule], itemString(&it))
			}
		}
		for i := range nfas {
			var w []string
			for _, it := range want[i].Items {
				if it.Kind == ItemMatch || it.Kind == ItemTimeout {
					w = append(w, itemString(&it))
				}
			}
			if fmt.Sprint(w) != fmt.Sprint(got[i]) {
				t.Errorf("seed %d rule %d:\nshared %v\nown    %v", seed, i, got[i], w)
			}
		}
	}
	if quiet == 0 || matches < 20 {
		t.Errorf("%d quiet starts at most at once, %d matches", quiet, matches)
	}
}

func itemString(it *Item) string {
	s := fmt.Sprintf("%d %s at %d wake %d:", it.Kind, it.Key, it.At, it.Wake)
	for _, evs := range it.Match.Events {
		for _, ev := range evs {
			s += fmt.Sprintf(" %d", ev.Seq)
		}
		s += " |"
	}
	return s
}

// TestSnapshotLeavesDeferredStarts: a snapshot writes each deferred start
// (a quiet key's, and a slot's) as the run it stands for without making
// that run or the key's slots: the operator holds as many quiet keys,
// noted starts and runs after it as before, a second snapshot is the same
// bytes, and the operator goes on as one restored from it does, item for
// item. Before, every snapshot made the runs and slots of every key it
// wrote (a live job with a million keys held most of its NFA runs for that
// alone).
func TestSnapshotLeavesDeferredStarts(t *testing.T) {
	w4 := func(second string, within time.Duration) *nfa.NFA {
		return mustCompile(t, nfa.Begin("a").Where(sigIs("a")).FollowedBy("b").Where(sigIs(second)).FollowedBy("c").Where(sigIs("c")).Within(within))
	}
	for _, set := range []struct {
		name string
		nfas []*nfa.NFA
	}{
		{"quiet keys", []*nfa.NFA{w4("b", 10*time.Millisecond), w4("x", 10*time.Millisecond)}},
		{"noted slots", []*nfa.NFA{w4("b", 10*time.Millisecond), w4("x", 4*time.Millisecond)}},
	} {
		t.Run(set.name, func(t *testing.T) {
			var rules []SharedRule
			for i, n := range set.nfas {
				rules = append(rules, SharedRule{ID: i, NFA: n})
			}
			cfg := SharedConfig{Key: keyByID}
			op, err := NewSharedOperator(cfg, rules...)
			if err != nil {
				t.Fatal(err)
			}
			var out Output
			for id := range int64(6) {
				if err := op.ProcessElement(mkEvents(tev{id: id, name: "a", ts: 1})[0], 1, &out); err != nil {
					t.Fatal(err)
				}
			}
			if err := op.ProcessWatermark(2, &out); err != nil {
				t.Fatal(err)
			}
			held := func() (quiet, noted, runs int) {
				for _, ks := range op.keys {
					if ks.quiet.group != nil {
						quiet++
					}
					for i := range ks.rules {
						if ks.rules[i].pend != nil {
							noted++
						}
						if ks.rules[i].run != nil {
							runs++
						}
					}
				}
				return
			}
			q0, n0, r0 := held()
			if q0+n0 == 0 {
				t.Fatalf("no deferred start to write (%d runs): the test's rules no longer defer them", r0)
			}
			snap, err := op.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			if q, n, r := held(); q != q0 || n != n0 || r != r0 {
				t.Errorf("after a snapshot: %d quiet keys, %d noted starts, %d runs; before %d, %d, %d", q, n, r, q0, n0, r0)
			}
			if again, err := op.Snapshot(); err != nil || !bytes.Equal(again, snap) {
				t.Errorf("a second snapshot differs from the first (%v)", err)
			}
			restored, err := RestoreSharedOperator(cfg, rules, snap)
			if err != nil {
				t.Fatal(err)
			}
			var got, want Output
			for i, ev := range mkEvents(tev{id: 0, name: "b", ts: 3}, tev{id: 1, name: "x", ts: 3}, tev{id: 0, name: "c", ts: 4}, tev{id: 1, name: "c", ts: 5}, tev{id: 2, name: "b", ts: 6}) {
				ev.Seq = uint64(100 + i)
				if err := op.ProcessElement(ev, ev.Time, &got); err != nil {
					t.Fatal(err)
				}
				if err := restored.ProcessElement(ev, ev.Time, &want); err != nil {
					t.Fatal(err)
				}
			}
			for _, o := range []*SharedOperator{op, restored} {
				out := &got
				if o == restored {
					out = &want
				}
				if err := o.ProcessWatermark(event.MaxTime, out); err != nil {
					t.Fatal(err)
				}
			}
			g, w := itemStrings(got.Items), itemStrings(want.Items)
			if len(w) == 0 || !slices.Equal(g, w) {
				t.Errorf("after the snapshot the operator gave\n%v\none restored from it\n%v", g, w)
			}
		})
	}
}

func itemStrings(items []Item) []string {
	var out []string
	for i := range items {
		out = append(out, itemString(&items[i]))
	}
	return out
}
