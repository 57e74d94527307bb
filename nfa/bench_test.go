package nfa

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cepheus-cep/cepheus/event"
)

// BenchmarkProcess measures one AdvanceTime+Process step of a three-stage
// followedBy chain with a window, over a fixed-seed stream where most events
// match no stage (the common case in fraud rules).
func BenchmarkProcess(b *testing.B) {
	p := Begin("a").Where(nameIs("a")).FollowedBy("b").Where(nameIs("b")).
		FollowedBy("c").Where(nameIs("c")).Within(50 * time.Millisecond)
	n, err := Compile(p)
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	names := []string{"a", "b", "c", "x", "x", "x", "x", "x", "x", "x"}
	events := make([]*event.Event, 4096)
	for i := range events {
		events[i] = ev(uint64(i), names[rng.IntN(len(names))], 0, event.Time(i))
	}
	r := n.NewRun()
	var res Result
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		e := events[i%len(events)]
		ts := event.Time(i)
		res.Reset()
		if err := r.AdvanceTime(ts, &res); err != nil {
			b.Fatal(err)
		}
		if err := r.Process(e, ts, &res); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkDecodeRun measures decoding a run of fuzzRunNFA holding a few
// hundred partial matches (a restore, or a cold key's next element).
func BenchmarkDecodeRun(b *testing.B) {
	n := fuzzRunNFA(b)
	r := n.NewRun()
	var res Result
	for i, name := range []string{"a", "b", "a", "b", "b", "a", "b", "b", "b", "a", "b"} {
		if err := r.Process(ev(uint64(i+1), name, 0, event.Time(i)), event.Time(i), &res); err != nil {
			b.Fatal(err)
		}
	}
	enc := r.AppendBinary(nil)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := n.DecodeRun(enc); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(r.PartialMatches()), "partials")
}
