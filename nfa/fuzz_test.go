package nfa

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cepheus-cep/cepheus/event"
)

// fuzzRunNFA is the NFA whose runs FuzzDecodeRun decodes: a looping,
// branching pattern with a window and timeouts, so that its runs hold
// shared buffer nodes, edges with versions, counts and both queues.
func fuzzRunNFA(t testing.TB) *NFA {
	p := Begin("a").Where(nameIs("a")).FollowedByAny("b").Where(nameIs("b")).OneOrMore().AllowCombinations().
		FollowedBy("c").Where(nameIs("c")).Within(20 * time.Millisecond)
	n, err := Compile(p, WithTimeouts())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// FuzzDecodeRun decodes arbitrary bytes as a run of fuzzRunNFA. The
// input either fails with ErrCorruptRun or decodes to a run whose
// encoding decodes again to the same encoding; an input that re-encodes
// to as many bytes re-encodes to the same bytes (no field takes a value
// its encoding cannot give back; longer inputs may spell varints with
// extra bytes). The run then takes events and time without panicking.
func FuzzDecodeRun(f *testing.F) {
	n := fuzzRunNFA(f)
	rng := rand.New(rand.NewPCG(1, 2))
	names := []string{"a", "b", "c", "x"}
	for trial := range 8 {
		r := n.NewRun()
		var res Result
		ts := event.Time(0)
		for i := range 4 + 4*trial {
			ts += event.Time(rng.IntN(3))
			e := ev(uint64(i+1), names[rng.IntN(len(names))], float64(i), ts)
			res.Reset()
			if err := r.AdvanceTime(ts, &res); err != nil {
				f.Fatal(err)
			}
			if err := r.Process(e, ts, &res); err != nil {
				f.Fatal(err)
			}
		}
		f.Add(r.AppendBinary(nil))
	}
	f.Add(n.NewRun().AppendBinary(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, rest, err := n.DecodeRun(b)
		if err != nil {
			if !errors.Is(err, ErrCorruptRun) {
				t.Fatalf("error %v does not wrap ErrCorruptRun", err)
			}
			return
		}
		if len(rest) > len(b) {
			t.Fatalf("rest of %d bytes from an input of %d", len(rest), len(b))
		}
		enc := r.AppendBinary(nil)
		if in := b[:len(b)-len(rest)]; len(enc) == len(in) && !bytes.Equal(enc, in) {
			t.Fatalf("the run %x decodes to a run that encodes as %x", in, enc)
		}
		r2, rest2, err := n.DecodeRun(enc)
		if err != nil || len(rest2) != 0 {
			t.Fatalf("re-encoding does not decode: %v (%d bytes left)", err, len(rest2))
		}
		if again := r2.AppendBinary(nil); !bytes.Equal(again, enc) {
			t.Fatalf("re-encoding is not stable:\n%x\n%x", enc, again)
		}
		var res Result
		ts := event.Time(0)
		for i, name := range []string{"a", "b", "c", "b", "c"} {
			ts += 5
			res.Reset()
			if err := r.AdvanceTime(ts, &res); err != nil {
				return
			}
			if err := r.Process(ev(uint64(100+i), name, 0, ts), ts, &res); err != nil {
				return
			}
		}
	})
}

// fuzzRun is a run of fuzzRunNFA after a few events, with shared nodes.
func fuzzRun(t *testing.T) (*NFA, *Run) {
	n := fuzzRunNFA(t)
	r := n.NewRun()
	var res Result
	for i, name := range []string{"a", "b", "a", "b", "b"} {
		if err := r.Process(ev(uint64(i+1), name, 0, event.Time(i)), event.Time(i), &res); err != nil {
			t.Fatal(err)
		}
	}
	return n, r
}

// TestDecodeRunRejectsBadGraph: the edges of the buffer's nodes lead to
// earlier events (a cycle would make the search for a match's events run
// forever), and the events, nodes and counts are each written once, in
// order. A decoder that took such a run would hand an inconsistent
// buffer to the run.
func TestDecodeRunRejectsBadGraph(t *testing.T) {
	for _, tc := range []struct {
		name  string
		spoil func(r *Run) bool
	}{
		{"an edge to its own node", func(r *Run) bool {
			done := false
			r.nodes.each(func(_ nodeKey, nd *node) {
				if !done && len(nd.edges) > 0 {
					nd.edges[0].target, done = nd.ref(), true
				}
			})
			return done
		}},
		{"an edge to a later event", func(r *Run) bool {
			var first, last *node
			r.nodes.each(func(_ nodeKey, nd *node) {
				if len(nd.edges) > 0 && (first == nil || nd.ev.key < first.ev.key) {
					first = nd
				}
				if last == nil || nd.ev.key > last.ev.key {
					last = nd
				}
			})
			if first == nil || first.ev.key >= last.ev.key {
				return false
			}
			first.edges[0].target = last.ref()
			return true
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, r := fuzzRun(t)
			if !tc.spoil(r) {
				t.Fatal("the run has no node to spoil")
			}
			if _, _, err := n.DecodeRun(r.AppendBinary(nil)); !errors.Is(err, ErrCorruptRun) {
				t.Fatalf("DecodeRun: %v, want ErrCorruptRun", err)
			}
		})
	}
}

// TestDecodeRunRejectsBadFlag: whether a computation has a start event is
// the byte 0 or 1; any other byte is corrupt, not "no start".
func TestDecodeRunRejectsBadFlag(t *testing.T) {
	n := fuzzRunNFA(t)
	enc := n.NewRun().AppendBinary(nil)
	// The run holds one computation, the start, with no start event: its
	// flag is the byte before the count of completed computations (0).
	if len(enc) < 2 || enc[len(enc)-2] != 0 || enc[len(enc)-1] != 0 {
		t.Fatalf("unexpected encoding %x", enc)
	}
	if _, _, err := n.DecodeRun(enc); err != nil {
		t.Fatal(err)
	}
	enc[len(enc)-2] = 2
	if _, _, err := n.DecodeRun(enc); !errors.Is(err, ErrCorruptRun) {
		t.Fatalf("a flag of 2: %v, want ErrCorruptRun", err)
	}
}

// TestDecodeRunRejectsBadHeap: a run's queues are taken in their encoded
// (array) order, so a record whose queue is no heap would mislead what
// trusts the root (prune's shortcut: when the root is kept, so is every
// other). Such a record is corrupt.
func TestDecodeRunRejectsBadHeap(t *testing.T) {
	n, r := fuzzRun(t)
	q := r.partial.q
	spoiled := false
	for i := 1; i < len(q) && !spoiled; i++ {
		if p := (i - 1) >> 1; compLess(q[i], q[p]) > 0 {
			q[i], q[p], spoiled = q[p], q[i], true
		}
	}
	if !spoiled {
		t.Fatalf("no partial match to swap with its parent among %d", len(q))
	}
	if _, _, err := n.DecodeRun(r.AppendBinary(nil)); !errors.Is(err, ErrCorruptRun) {
		t.Fatalf("DecodeRun: %v, want ErrCorruptRun", err)
	}
}
