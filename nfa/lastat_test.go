package nfa

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cepheus-cep/cepheus/event"
)

// lastChecker is a condition on the name field that, at each evaluation,
// compares Context.LastAt of every stage, with and without its shortcut,
// with the last of EventsAt.
type lastChecker struct {
	name   string
	t      *testing.T
	stages int
	fast   *int // evaluations where the shortcut answered
}

func (c *lastChecker) Eval(e *event.Event, ctx *Context) bool {
	for s := range c.stages {
		ctx.ready = false
		if p := ctx.comp.prev; p.live() && int(p.n.stage) == s {
			*c.fast++
		}
		fast := ctx.LastAt(s)
		ctx.ready = false
		lastAtShortcut = false
		slow := ctx.LastAt(s)
		lastAtShortcut = true
		evs := ctx.EventsAt(s)
		var want *event.Event
		if len(evs) > 0 {
			want = evs[len(evs)-1]
		}
		if fast != want || slow != want {
			c.t.Fatalf("stage %d: LastAt %v, without the shortcut %v, last of EventsAt %v", s, fast, slow, want)
		}
	}
	n, _ := e.Field(0).AsString()
	return n == c.name
}

// TestLastAt drives random events through patterns whose conditions check
// LastAt against EventsAt for every stage at every evaluation.
func TestLastAt(t *testing.T) {
	seed := envSeed()
	rng := rand.New(rand.NewPCG(seed, 14))
	fast := 0
	patterns := map[string]func(is func(string) Condition) *Pattern{
		"chain": func(is func(string) Condition) *Pattern {
			return Begin("a").Where(is("a")).FollowedBy("b").Where(is("b")).FollowedBy("c").Where(is("c")).
				Within(20 * time.Millisecond)
		},
		"loop": func(is func(string) Condition) *Pattern {
			return Begin("a").Where(is("a")).OneOrMore().FollowedBy("b").Where(is("b")).OneOrMore().
				FollowedBy("c").Where(is("c")).Within(15 * time.Millisecond)
		},
		"any": func(is func(string) Condition) *Pattern {
			return Begin("a").Where(is("a")).Times(2).FollowedByAny("b").Where(is("b")).
				FollowedBy("c").Where(is("c")).Within(10 * time.Millisecond)
		},
		"optional": func(is func(string) Condition) *Pattern {
			return Begin("a").Where(is("a")).FollowedBy("b").Where(is("b")).Optional().
				FollowedBy("c").Where(is("c")).Within(10 * time.Millisecond)
		},
		"next": func(is func(string) Condition) *Pattern {
			return Begin("a").Where(is("a")).OneOrMore().Consecutive().Next("b").Where(is("b")).
				FollowedBy("c").Where(is("c"))
		},
	}
	names := []string{"a", "b", "c", "x"}
	for pname, mk := range patterns {
		t.Run(pname, func(t *testing.T) {
			is := func(n string) Condition { return &lastChecker{name: n, t: t, stages: 3, fast: &fast} }
			n := mustCompile(t, mk(is))
			if len(n.Stages()) != 3 {
				t.Fatalf("stages %v", n.Stages())
			}
			r := n.NewRun()
			var res Result
			ts := event.Time(0)
			for i := range 600 {
				ts += event.Time(rng.IntN(3))
				e := ev(uint64(i+1), names[rng.IntN(len(names))], float64(rng.IntN(10)), ts)
				res.Reset()
				if err := r.Process(e, ts, &res); err != nil {
					t.Fatal(err)
				}
				if rng.IntN(30) == 0 {
					res.Reset()
					r.AdvanceTime(ts+10, &res)
				}
			}
		})
	}
	if fast == 0 {
		t.Errorf("seed %d: LastAt's shortcut never applied", seed)
	}
	t.Logf("seed %d: the shortcut applied in %d checks", seed, fast)
}
