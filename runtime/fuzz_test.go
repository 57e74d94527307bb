package runtime

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/event/jsonev"
	"github.com/cepheus-cep/cepheus/runtime/state"
)

// fuzzAggSpecs are four named aggregates of aggSpecs' kinds, two with a
// small bound on a key's window.
func fuzzAggSpecs() []AggregateSpec {
	all := namedAggSpecs()
	specs := []AggregateSpec{all[0], all[7], all[21], all[18]} // count; sum, tumbling, filtered; distinct, filtered; max, tumbling
	specs[1].MaxPerKey, specs[2].MaxPerKey = 3, 4
	for i := range specs {
		specs[i].Slot = slotOut + i
	}
	return specs
}

// aggState is the aggregator's state in a canonical form (AppendBinary
// writes its keys in map order): the watermark, the events held, and per
// spec the dropped count and the sorted encodings of its keys' windows.
func aggState(a *Aggregator) string {
	var sb strings.Builder
	held := append(slices.Clone(a.kept), a.pending...)
	slices.SortFunc(held, comparePending)
	sb.WriteString(string(event.Int(int64(a.wm)).AppendBinary(nil)))
	for _, p := range held {
		sb.WriteString(string(p.ev.AppendBinary(nil)))
	}
	for si := range a.specs {
		var ws []string
		for k, w := range a.keys[si] {
			b := appendKey(nil, k)
			for _, e := range w.live() {
				b = event.Int(int64(e.t)).AppendBinary(b)
				b = e.v.AppendBinary(b)
			}
			ws = append(ws, string(b))
		}
		slices.Sort(ws)
		sb.WriteString("|" + event.Int(int64(a.dropped[si])).String() + ":" + strings.Join(ws, ","))
	}
	return sb.String()
}

// FuzzAggregatorRestore restores an aggregator from arbitrary bytes. The
// input fails, or restores a state whose encoding restores to the same
// state; the aggregator then takes events and a final watermark without
// panicking. The seeds are states of a random stream, taken midway.
func FuzzAggregatorRestore(f *testing.F) {
	specs := fuzzAggSpecs()
	rnd := rand.New(rand.NewPCG(3, 3))
	evs := randomAggEvents(rnd, 60, 5, 2000, len(specs))
	a, err := NewAggregator(specs)
	if err != nil {
		f.Fatal(err)
	}
	newest := event.MinTime
	for i, ev := range evs {
		a.Add(ev)
		newest = max(newest, ev.Time)
		if i%7 == 6 {
			if err := a.Advance(newest-2001, func(*event.Event) error { return nil }); err != nil {
				f.Fatal(err)
			}
			f.Add(a.AppendBinary(nil))
		}
	}
	f.Add(a.appendState(nil, 1))
	more := randomAggEvents(rand.New(rand.NewPCG(4, 4)), 8, 5, 2000, len(specs))
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := NewAggregator(specs)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Restore(b); err != nil {
			if !strings.HasPrefix(err.Error(), "runtime: ") && !errors.Is(err, state.ErrCheckpointVersion) {
				t.Fatalf("error %q does not say where it comes from", err)
			}
			if later := len(b) > 0 && b[0] > aggregatorFormat && b[0] < 0x80; later && !errors.Is(err, state.ErrCheckpointVersion) {
				t.Fatalf("format %d: error %v, want a later build's", b[0], err)
			}
			return
		}
		st := aggState(a)
		again, err := NewAggregator(specs)
		if err != nil {
			t.Fatal(err)
		}
		if err := again.Restore(a.AppendBinary(nil)); err != nil {
			t.Fatalf("the encoding of a restored state does not restore: %v", err)
		}
		if st2 := aggState(again); st2 != st {
			t.Fatalf("state not stable:\n%q\n%q", st, st2)
		}
		for _, ev := range more {
			a.Add(ev)
		}
		var out []*event.Event
		if err := a.Advance(event.MaxTime, func(ev *event.Event) error { out = append(out, ev); return nil }); err != nil {
			t.Fatal(err)
		}
		if a.Len() != 0 {
			t.Fatalf("%d events held after the final watermark", a.Len())
		}
	})
}

// FuzzSubtaskState decodes arbitrary bytes as a subtask's checkpoint
// record (with a far-ahead guard). The input fails, or decodes to a
// state whose record decodes again to the same record; a record of this
// version that re-encodes to as many bytes re-encodes to the same bytes
// (no field takes a value its encoding cannot give back).
func FuzzSubtaskState(f *testing.F) {
	newSub := func(t testing.TB, input string) *Subtask[string] {
		src, _ := NewFileSource(strings.NewReader(input), "test", SourceConfig{})
		dec, _ := jsonev.NewDecoder(jsonev.Config{Schema: subtaskSchema, TimeField: "ts"})
		wm, _ := NewWatermarkGenerator(0, 2)
		st, err := NewSubtask(SubtaskConfig[string]{Source: src, Decoder: dec, Watermarks: wm, MaxAhead: time.Hour,
			Operators: []KeyedOperator[string]{&recorder{name: "op", log: new([]string)}}})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	ran := newSub(f, `{"card":"a","ts":1}`+"\nnot json\n"+`{"card":"a","ts":2}`+"\n"+`{"card":"b","ts":5}`)
	if err := ran.Run(context.Background()); err != nil {
		f.Fatal(err)
	}
	f.Add(ran.appendState(nil))
	f.Add(newSub(f, "").appendState(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		s := newSub(t, "")
		if err := s.decodeState(b); err != nil {
			return
		}
		enc := s.appendState(nil)
		again := newSub(t, "")
		if err := again.decodeState(enc); err != nil {
			t.Fatalf("the record of a decoded state does not decode: %v", err)
		}
		if enc2 := again.appendState(nil); !bytes.Equal(enc, enc2) {
			t.Fatalf("record not stable:\n%x\n%x", enc, enc2)
		}
		if b[0] == subtaskStateVersion && len(enc) == len(b) && !bytes.Equal(enc, b) {
			t.Fatalf("the record %x decodes to a state that encodes as %x", b, enc)
		}
	})
}

// FuzzDecodePosition: arbitrary bytes fail or decode to a position whose
// encoding decodes again to it, with the rest of the input after it.
func FuzzDecodePosition(f *testing.F) {
	for _, p := range []Position{{}, {File: "events-2026-01-01.jsonl.gz", Offset: 1 << 40, Line: 1 << 30}, {File: "stdin", Offset: 7, Line: 7}} {
		b, err := p.AppendBinary(nil)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(append(b, b...))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, rest, err := DecodePosition(b)
		if err != nil {
			return
		}
		if len(rest) > len(b) || !bytes.Equal(rest, b[len(b)-len(rest):]) {
			t.Fatalf("rest %x is not a suffix of the input %x", rest, b)
		}
		enc, err := p.AppendBinary(nil)
		if err != nil {
			t.Fatalf("a decoded position %v does not encode: %v", p, err)
		}
		if p2, rest2, err := DecodePosition(enc); err != nil || p2 != p || len(rest2) != 0 {
			t.Fatalf("%v encodes as %x, which decodes to %v (%v, rest %x)", p, enc, p2, err, rest2)
		}
	})
}

// FuzzPendingState: arbitrary bytes fail or decode to a valid pending
// state whose encoding decodes again to it.
func FuzzPendingState(f *testing.F) {
	for _, p := range []PendingState{{}, {Subtask: 3, Checkpoint: 9, Parts: []int64{1, 4, 9}}, {Subtask: 1 << 20, Checkpoint: 1 << 50, Parts: []int64{1 << 49}}} {
		b, err := p.MarshalBinary()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var p PendingState
		if err := p.UnmarshalBinary(b); err != nil {
			return
		}
		enc, err := p.MarshalBinary()
		if err != nil {
			t.Fatalf("a decoded state %+v does not encode: %v", p, err)
		}
		var p2 PendingState
		if err := p2.UnmarshalBinary(enc); err != nil || p2.Subtask != p.Subtask || p2.Checkpoint != p.Checkpoint || !slices.Equal(p2.Parts, p.Parts) {
			t.Fatalf("%+v encodes as %x, which decodes to %+v (%v)", p, enc, p2, err)
		}
	})
}

// FuzzWatermarkState: arbitrary bytes fail or decode to partition
// watermarks whose encoding decodes again to them.
func FuzzWatermarkState(f *testing.F) {
	for _, s := range []WatermarkState{
		{Emitted: event.Watermark(event.MinTime)},
		{Emitted: 1000, Max: map[string]event.Time{"cards-0": 1200, "cards-1": 999, "": -5}},
	} {
		b, err := s.AppendBinary(nil)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := DecodeWatermarkState(b)
		if err != nil {
			return
		}
		enc, err := s.AppendBinary(nil)
		if err != nil {
			t.Fatal(err)
		}
		s2, err := DecodeWatermarkState(enc)
		if err != nil || s2.Emitted != s.Emitted || !maps.Equal(s2.Max, s.Max) {
			t.Fatalf("%+v encodes as %x, which decodes to %+v (%v)", s, enc, s2, err)
		}
	})
}

// FuzzSinkPartName: a file sink takes a name of its directory as one of
// its part files only if it is the name it would give that part (so that
// the sinks of other subtasks or prefixes, and other files, are left
// alone).
func FuzzSinkPartName(f *testing.F) {
	s, err := NewFileSink(f.TempDir(), "alerts", 1)
	if err != nil {
		f.Fatal(err)
	}
	for _, n := range []string{s.inProgressName(), s.pendingName(7), s.CommittedName(1 << 40), "alerts-11-3.jsonl", ".alerts-1-03.pending", "alerts-1-.jsonl"} {
		f.Add(n)
	}
	f.Fuzz(func(t *testing.T, name string) {
		var want string
		switch kind, c := s.parseName(name); kind {
		case partNone:
			return
		case partInProgress:
			want = s.inProgressName()
		case partPending:
			want = s.pendingName(c)
		case partCommitted:
			want = s.CommittedName(c)
		}
		if want != name {
			t.Fatalf("%q parses as the part file %q", name, want)
		}
	})
}
