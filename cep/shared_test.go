package cep

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/nfa"
	"github.com/cepheus-cep/cepheus/runtime/state"
)

// The equivalence of SharedOperator with one Operator per rule is tested
// over generated cases by internal/difftest (TestSharedOperatorEqualsOperatorPerRule,
// TestSharedOperatorRuleChanges). These are its API's own cases.

// TestSharedRuleOrder: key 1's state is dropped for rule 0 (its match
// completed) and kept for rule 1 (a partial match); key 2 then gets
// state. When key 1 gets state again, rule 0 ranks it after key 2, rule 1
// before, as their own operators would: each rule's items follow its
// order.
func TestSharedRuleOrder(t *testing.T) {
	ab := mustCompile(t, nfa.Begin("a").Where(nameIs("a")).Next("b").Where(nameIs("b")))
	abc := seqPattern(t)
	events := mkEvents(
		tev{id: 1, name: "a", ts: 1}, tev{id: 1, name: "b", ts: 2}, // rule 0 matches; rule 1 holds a, b
		tev{id: 2, name: "a", ts: 4}, tev{id: 2, name: "b", ts: 4},
		tev{id: 1, name: "a", ts: 4}, tev{id: 1, name: "b", ts: 4},
	)
	op, err := NewSharedOperator(SharedConfig{Key: keyByID}, SharedRule{ID: 0, NFA: ab}, SharedRule{ID: 1, NFA: abc})
	if err != nil {
		t.Fatal(err)
	}
	var out Output
	for _, ev := range events[:2] {
		_ = op.ProcessElement(ev, ev.Time, &out)
	}
	_ = op.ProcessWatermark(3, &out)
	out.Reset()
	for _, ev := range events[2:] {
		_ = op.ProcessElement(ev, ev.Time, &out)
	}
	if err := op.ProcessWatermark(5, &out); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, it := range out.Items {
		if it.Kind == ItemMatch {
			got = append(got, string(rune('0'+it.Rule))+":"+string(it.Key))
		}
	}
	// Rule 1 (a, b, c) matches nothing; rule 0 ranks key 2 first.
	if want := []string{"0:2", "0:1"}; !slices.Equal(got, want) {
		t.Errorf("matches %q, want %q", got, want)
	}
	// Rule 0's own operator agrees.
	one, err := NewOperator(OperatorConfig{NFA: ab, Key: keyByID})
	if err != nil {
		t.Fatal(err)
	}
	var oneOut Output
	for _, ev := range events[:2] {
		_ = one.ProcessElement(ev, ev.Time, &oneOut)
	}
	_ = one.ProcessWatermark(3, &oneOut)
	oneOut.Reset()
	for _, ev := range events[2:] {
		_ = one.ProcessElement(ev, ev.Time, &oneOut)
	}
	_ = one.ProcessWatermark(5, &oneOut)
	var keys []string
	for _, it := range oneOut.Items {
		if it.Kind == ItemMatch {
			keys = append(keys, "0:"+string(it.Key))
		}
	}
	if !slices.Equal(keys, got) {
		t.Errorf("one operator of rule 0: %q, shared %q", keys, got)
	}
}

// TestSharedRuleFailsAlone: a rule whose skip strategy throws fails with a
// RuleError; the other rule goes on; Snapshot refuses until the failed
// rule is removed.
func TestSharedRuleFailsAlone(t *testing.T) {
	throw := mustCompile(t, nfa.Begin("a").Where(nameIs("a")).FollowedBy("b").Where(nameIs("b")).
		Skip(nfa.SkipToFirstOf("a").OrThrow()))
	ab := mustCompile(t, nfa.Begin("a").Where(nameIs("a")).FollowedBy("b").Where(nameIs("b")))
	op, err := NewSharedOperator(SharedConfig{Key: keyByID}, SharedRule{ID: 3, NFA: throw}, SharedRule{ID: 5, NFA: ab})
	if err != nil {
		t.Fatal(err)
	}
	var out Output
	for _, ev := range mkEvents(tev{id: 7, name: "a", ts: 1}, tev{id: 7, name: "b", ts: 2}) {
		_ = op.ProcessElement(ev, ev.Time, &out)
	}
	err = op.ProcessWatermark(5, &out)
	var re *RuleError
	if !errors.As(err, &re) || re.Rule != 3 || !errors.Is(err, nfa.ErrSkipMiss) {
		t.Fatalf("err = %v, want a RuleError of rule 3 wrapping nfa.ErrSkipMiss", err)
	}
	if n := len(out.Items); n != 2 || out.Items[0].Rule != 5 || out.Items[1].Kind != ItemWatermark {
		t.Errorf("output %+v, want rule 5's match and the watermark", out.Items)
	}
	if op.RuleErr(3) == nil || op.RuleErr(5) != nil {
		t.Errorf("RuleErr: %v, %v", op.RuleErr(3), op.RuleErr(5))
	}
	if _, err := op.Snapshot(); !errors.As(err, &re) {
		t.Errorf("snapshot with a failed rule: %v", err)
	}
	if err := op.RemoveRule(3); err != nil {
		t.Fatal(err)
	}
	if err := op.RemoveRule(3); !errors.Is(err, ErrUnknownRule) {
		t.Errorf("removing a removed rule: %v", err)
	}
	if _, err := op.Snapshot(); err != nil {
		t.Errorf("snapshot: %v", err)
	}
}

// TestSharedSnapshot: a restored operator snapshots to the same bytes,
// with the same stats; a snapshot does not restore with other rules nor
// into an Operator.
func TestSharedSnapshot(t *testing.T) {
	ab := mustCompile(t, nfa.Begin("a").Where(nameIs("a")).FollowedBy("b").Where(nameIs("b")).Within(10))
	abc := seqPattern(t)
	rules := []SharedRule{{ID: 0, NFA: ab}, {ID: 1, NFA: abc}}
	cfg := SharedConfig{Key: keyByID}
	op, err := NewSharedOperator(cfg, rules...)
	if err != nil {
		t.Fatal(err)
	}
	var out Output
	evs := mkEvents(tev{id: 1, name: "a", ts: 1}, tev{id: 2, name: "a", ts: 2}, tev{id: 1, name: "b", ts: 8})
	_ = op.ProcessElement(evs[0], 1, &out)
	_ = op.ProcessElement(evs[1], 2, &out)
	_ = op.ProcessWatermark(3, &out)
	// Added now, rule 2 never sees the element buffered before.
	if err := op.AddRule(SharedRule{ID: 2, NFA: ab}); err != nil {
		t.Fatal(err)
	}
	_ = op.ProcessElement(evs[2], 8, &out)
	rules = append(rules, SharedRule{ID: 2, NFA: ab})
	snap, err := op.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	re, err := RestoreSharedOperator(cfg, rules, snap)
	if err != nil {
		t.Fatal(err)
	}
	again, err := re.Snapshot()
	if err != nil || !slices.Equal(snap, again) {
		t.Fatalf("snapshot of the restored operator differs (%v)", err)
	}
	if re.Stats() != op.Stats() {
		t.Errorf("stats %+v, want %+v", re.Stats(), op.Stats())
	}
	if _, err := RestoreSharedOperator(cfg, rules[:2], snap); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("restore with other rules: %v", err)
	}
	if _, err := RestoreOperator(OperatorConfig{NFA: ab, Key: keyByID}, snap); !errors.Is(err, ErrCorruptSnapshot) {
		t.Errorf("restore into an Operator: %v", err)
	}
	if _, err := RestoreSharedOperator(cfg, rules, snap[:len(snap)-1]); !errors.Is(err, ErrCorruptSnapshot) {
		t.Errorf("truncated snapshot: %v", err)
	}
	out.Reset()
	if err := re.ProcessWatermark(event.MaxTime, &out); err != nil {
		t.Fatal(err)
	}
	var got []int
	for _, it := range out.Items {
		if it.Kind == ItemMatch {
			got = append(got, it.Rule)
		}
	}
	// Rule 0 matches key 1 (a at 1, b at 8); rule 2 saw only b.
	if !slices.Equal(got, []int{0}) {
		t.Errorf("matches of rules %v, want [0]", got)
	}
	if err := op.AddRule(SharedRule{ID: 2, NFA: ab}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("adding rule 2 twice: %v", err)
	}
}

// countingWriter records the keys a SnapshotTo puts and deletes, and
// passes them on.
type countingWriter struct {
	w          state.Writer
	put, del   []string
	headerPuts int
}

func (c *countingWriter) Put(k state.Key, v []byte) error {
	if k.KeyGroup == headerGroup {
		c.headerPuts++
	} else {
		c.put = append(c.put, string(k.Key))
	}
	return c.w.Put(k, v)
}

func (c *countingWriter) Delete(k state.Key) error {
	c.del = append(c.del, string(k.Key))
	return c.w.Delete(k)
}

// TestSharedSnapshotTo: checkpoints into one store write the header and
// only the keys changed since the previous one (a deletion for a key
// whose state went), and what the store holds then restores to the
// operator's state (the same blob snapshot), across a rule change too.
func TestSharedSnapshotTo(t *testing.T) {
	ab := mustCompile(t, nfa.Begin("a").Where(nameIs("a")).FollowedBy("b").Where(nameIs("b")).Within(10))
	rules := []SharedRule{{ID: 0, NFA: ab}}
	cfg := SharedConfig{Key: keyByID, KeyGroups: 8}
	op, err := NewSharedOperator(cfg, rules...)
	if err != nil {
		t.Fatal(err)
	}
	store := state.NewMem()
	var out Output
	feed := func(evs ...tev) {
		t.Helper()
		for _, ev := range mkEvents(evs...) {
			if err := op.ProcessElement(ev, ev.Time, &out); err != nil {
				t.Fatal(err)
			}
		}
	}
	checkpoint := func(wantPut, wantDel []string) {
		t.Helper()
		cw := &countingWriter{w: store}
		if err := op.SnapshotTo(cw, "op"); err != nil {
			t.Fatal(err)
		}
		slices.Sort(cw.put)
		if !slices.Equal(cw.put, wantPut) || !slices.Equal(cw.del, wantDel) || cw.headerPuts != 1 {
			t.Errorf("put %q, deleted %q, %d headers; want put %q, deleted %q, 1 header", cw.put, cw.del, cw.headerPuts, wantPut, wantDel)
		}
		re, err := RestoreSharedOperatorFrom(cfg, rules, store.Snapshot(), "op")
		if err != nil {
			t.Fatal(err)
		}
		want, err1 := op.Snapshot()
		got, err2 := re.Snapshot()
		if err1 != nil || err2 != nil || !slices.Equal(got, want) {
			t.Errorf("the store restores another state (%v, %v)", err1, err2)
		}
	}
	feed(tev{id: 1, name: "a", ts: 1}, tev{id: 2, name: "a", ts: 2}, tev{id: 3, name: "x", ts: 2})
	checkpoint([]string{"1", "2", "3"}, nil) // the first writes every key
	_ = op.ProcessWatermark(2, &out)         // keys 1 and 2 hold a partial match, key 3 goes
	checkpoint([]string{"1", "2"}, []string{"3"})
	feed(tev{id: 1, name: "b", ts: 5}) // only key 1 changes
	checkpoint([]string{"1"}, nil)
	checkpoint(nil, nil)
	_ = op.ProcessWatermark(6, &out) // key 1 matches and goes
	checkpoint(nil, []string{"1"})
	if err := op.AddRule(SharedRule{ID: 1, NFA: ab}); err != nil {
		t.Fatal(err)
	}
	rules = append(rules, SharedRule{ID: 1, NFA: ab})
	checkpoint([]string{"2"}, nil) // every key again: their records hold every rule
	// A store written with other key groups does not restore (key 2 is in
	// another group among other's groups).
	other := 2
	for state.GroupOf("2", other) == state.GroupOf("2", 8) {
		other++
	}
	if _, err := RestoreSharedOperatorFrom(SharedConfig{Key: keyByID, KeyGroups: other}, rules, store.Snapshot(), "op"); !errors.Is(err, ErrCorruptSnapshot) {
		t.Errorf("restore with other key groups: %v", err)
	}
	if _, err := RestoreSharedOperatorFrom(cfg, rules, store.Snapshot(), "other"); !errors.Is(err, ErrCorruptSnapshot) {
		t.Errorf("restore of an operator without records: %v", err)
	}
	// The restored operator tracks its changes against the store it came from.
	re, err := RestoreSharedOperatorFrom(cfg, rules, store.Snapshot(), "op")
	if err != nil {
		t.Fatal(err)
	}
	op = re
	feed(tev{id: 4, name: "a", ts: 7})
	checkpoint([]string{"4"}, nil)
}

// TestKeyTieBreak: keys due at the same time fire by the Seq of the
// element that created their state, then by key bytes, in an Operator and
// in a SharedOperator alike, whatever the order of arrival.
func TestKeyTieBreak(t *testing.T) {
	a := mustCompile(t, nfa.Begin("a").Where(nameIs("a")))
	evs := mkEvents(tev{id: 3, name: "a", ts: 1}, tev{id: 1, name: "a", ts: 1}, tev{id: 2, name: "a", ts: 1}, tev{id: 4, name: "a", ts: 1})
	evs[0].Seq, evs[1].Seq, evs[2].Seq, evs[3].Seq = 20, 30, 10, 20 // keys 3 and 4 tie on Seq
	want := []string{"2", "3", "4", "1"}
	matchKeys := func(out *Output) []string {
		var got []string
		for _, it := range out.Items {
			if it.Kind == ItemMatch {
				got = append(got, string(it.Key))
			}
		}
		return got
	}
	one, err := NewOperator(OperatorConfig{NFA: a, Key: keyByID})
	if err != nil {
		t.Fatal(err)
	}
	shared, err := NewSharedOperator(SharedConfig{Key: keyByID}, SharedRule{ID: 0, NFA: a})
	if err != nil {
		t.Fatal(err)
	}
	var out1, out2 Output
	for _, ev := range evs {
		_ = one.ProcessElement(ev, ev.Time, &out1)
		_ = shared.ProcessElement(ev, ev.Time, &out2)
	}
	_ = one.ProcessWatermark(5, &out1)
	_ = shared.ProcessWatermark(5, &out2)
	if got := matchKeys(&out1); !slices.Equal(got, want) {
		t.Errorf("Operator fires keys %q, want %q", got, want)
	}
	if got := matchKeys(&out2); !slices.Equal(got, want) {
		t.Errorf("SharedOperator fires keys %q, want %q", got, want)
	}
}

// TestSharedSnapshotToColdKeys: cold keys (kept as their records after a
// sweep) are part of the state: a checkpoint does not rewrite them unless
// they change, their deletion is written when their next element drops
// them, and what the store holds restores to the operator's state.
func TestSharedSnapshotToColdKeys(t *testing.T) {
	ab := mustCompile(t, nfa.Begin("a").Where(nameIs("a")).FollowedBy("b").Where(nameIs("b")))
	rules := []SharedRule{{ID: 0, NFA: ab}}
	cfg := SharedConfig{Key: keyByID, CompactEvery: 1}
	op, err := NewSharedOperator(cfg, rules...)
	if err != nil {
		t.Fatal(err)
	}
	store := state.NewMem()
	var out Output
	feed := func(w event.Time, evs ...tev) {
		t.Helper()
		for _, ev := range mkEvents(evs...) {
			if err := op.ProcessElement(ev, ev.Time, &out); err != nil {
				t.Fatal(err)
			}
		}
		if err := op.ProcessWatermark(w, &out); err != nil {
			t.Fatal(err)
		}
	}
	checkpoint := func(wantPut, wantDel []string, wantCold int) {
		t.Helper()
		if got := len(op.cold); got != wantCold {
			t.Errorf("%d cold keys, want %d", got, wantCold)
		}
		cw := &countingWriter{w: store}
		if err := op.SnapshotTo(cw, "op"); err != nil {
			t.Fatal(err)
		}
		slices.Sort(cw.put)
		if !slices.Equal(cw.put, wantPut) || !slices.Equal(cw.del, wantDel) {
			t.Errorf("put %q, deleted %q; want put %q, deleted %q", cw.put, cw.del, wantPut, wantDel)
		}
		re, err := RestoreSharedOperatorFrom(cfg, rules, store.Snapshot(), "op")
		if err != nil {
			t.Fatal(err)
		}
		want, err1 := op.Snapshot()
		got, err2 := re.Snapshot()
		if err1 != nil || err2 != nil || !slices.Equal(got, want) {
			t.Errorf("the store restores another state (%v, %v)", err1, err2)
		}
	}
	feed(3, tev{id: 1, name: "a", ts: 1}, tev{id: 2, name: "a", ts: 2})
	feed(6, tev{id: 3, name: "x", ts: 5})  // the sweep freezes keys 1 and 2; key 3 goes
	checkpoint([]string{"1", "2"}, nil, 2) // the first writes every key, cold ones too
	if st := op.Stats(); st.Keys != 2 {
		t.Errorf("Stats().Keys = %d, want 2 (cold keys count)", st.Keys)
	}
	if st, _ := op.RuleStats(0); st.Keys != 2 {
		t.Errorf("RuleStats(0).Keys = %d, want 2", st.Keys)
	}
	feed(9, tev{id: 1, name: "x", ts: 7}, tev{id: 4, name: "x", ts: 8}) // thaws key 1 (changed); key 4 only has a ghost
	feed(12, tev{id: 5, name: "x", ts: 10})                             // freezes key 1 again; key 5 only has a ghost
	// Key 1 changed while cold. Keys 4 and 5 never held state (their one
	// element, inert, was a ghost: ghost.go), so there is nothing to
	// delete; key 1 below goes and its record is deleted.
	checkpoint([]string{"1"}, nil, 2)
	out.Reset()
	feed(15, tev{id: 1, name: "b", ts: 13}) // thaws key 1, which matches and goes
	var matches int
	for _, it := range out.Items {
		if it.Kind == ItemMatch && it.Key == "1" {
			matches++
		}
	}
	if matches != 1 {
		t.Errorf("%d matches at the thawed key, want 1", matches)
	}
	checkpoint(nil, []string{"1"}, 1)
	if err := op.AddRule(SharedRule{ID: 1, NFA: ab}); err != nil { // thaws every key
		t.Fatal(err)
	}
	rules = append(rules, SharedRule{ID: 1, NFA: ab})
	checkpoint([]string{"2"}, nil, 0)
}

// TestSharedSnapshotLaterVersion: an operator snapshot, its header record
// or a key's record of a version above this build's (a later build's
// checkpoint: going back after an upgrade) is refused as such
// (state.ErrCheckpointVersion, naming the versions), as the engine's
// counters are (TestDecodeCountersLaterVersion), not as a corrupt one;
// an unknown version below this build's is still corrupt.
func TestSharedSnapshotLaterVersion(t *testing.T) {
	ab := mustCompile(t, nfa.Begin("a").Where(nameIs("a")).FollowedBy("b").Where(nameIs("b")).Within(10))
	rules := []SharedRule{{ID: 0, NFA: ab}}
	cfg := SharedConfig{Key: keyByID, KeyGroups: 8}
	op, err := NewSharedOperator(cfg, rules...)
	if err != nil {
		t.Fatal(err)
	}
	var out Output
	if err := op.ProcessElement(mkEvents(tev{id: 1, name: "a", ts: 1})[0], 1, &out); err != nil {
		t.Fatal(err)
	}
	later := func(what string, err error, v, newest byte) {
		t.Helper()
		want := fmt.Sprintf("of version %d, this build reads up to %d", v, newest)
		if !errors.Is(err, state.ErrCheckpointVersion) || errors.Is(err, ErrCorruptSnapshot) || err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s of version %d: %v, want a later build's record", what, v, err)
		}
	}
	snap, err := op.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	bumped := slices.Clone(snap)
	bumped[0] = sharedSnapshotVersion + 1
	_, err = RestoreSharedOperator(cfg, rules, bumped)
	later("the snapshot", err, sharedSnapshotVersion+1, sharedSnapshotVersion)
	bumped[0] = sharedSnapshotVersion - 1
	if _, err := RestoreSharedOperator(cfg, rules, bumped); !errors.Is(err, ErrCorruptSnapshot) {
		t.Errorf("the snapshot of version %d: %v, want ErrCorruptSnapshot", sharedSnapshotVersion-1, err)
	}
	// The records of a checkpoint: the header, then a key's.
	store := state.NewMem()
	if err := op.SnapshotTo(store, "op"); err != nil {
		t.Fatal(err)
	}
	bump := func(group state.KeyGroupRange, v byte) (restore func()) {
		t.Helper()
		var recs []state.Record
		for rec, err := range store.Snapshot().Records("op", group) {
			if err != nil {
				t.Fatal(err)
			}
			recs = append(recs, rec)
		}
		if len(recs) != 1 {
			t.Fatalf("%d records in key groups %v, want 1", len(recs), group)
		}
		b := slices.Clone(recs[0].Value)
		b[0] = v
		if err := store.Put(recs[0].Key, b); err != nil {
			t.Fatal(err)
		}
		return func() {
			if err := store.Put(recs[0].Key, recs[0].Value); err != nil {
				t.Fatal(err)
			}
		}
	}
	restore := bump(state.KeyGroupRange{First: headerGroup, Last: headerGroup}, sharedSnapshotVersion+1)
	_, err = RestoreSharedOperatorFrom(cfg, rules, store.Snapshot(), "op")
	later("the header record", err, sharedSnapshotVersion+1, sharedSnapshotVersion)
	restore()
	g := state.GroupOf("1", 8)
	bump(state.KeyGroupRange{First: g, Last: g}, keyRecordVersion+1)
	_, err = RestoreSharedOperatorFrom(cfg, rules, store.Snapshot(), "op")
	later("a key's record", err, keyRecordVersion+1, keyRecordVersion)
}
