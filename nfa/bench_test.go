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
