package nfa

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cepheus-cep/cepheus/event"
)

// TestInertShortcut drives random events through patterns and asks Inert
// before each, with and without its shortcut for a start state whose one
// transition is a take: the answers and the number of condition
// evaluations must be the same.
func TestInertShortcut(t *testing.T) {
	seed := envSeed()
	rng := rand.New(rand.NewPCG(seed, 13))
	evals := 0
	is := func(n string) Condition { return &counted{n, &evals} }
	patterns := []struct {
		name     string
		p        *Pattern
		shortcut bool // whether the start state is one take
	}{
		{"followedBy", Begin("a").Where(is("a")).FollowedBy("b").Where(is("b")).Within(10 * time.Millisecond), true},
		{"next", Begin("a").Where(is("a")).Next("b").Where(is("b")), true},
		{"timesOrMore", Begin("a").Where(is("a")).TimesOrMore(3).FollowedBy("b").Where(is("b")), true},
		{"oneOrMore", Begin("a").Where(is("a")).OneOrMore().Within(5 * time.Millisecond), true},
		{"or", Begin("a").Where(is("a")).Or(is("b")).FollowedBy("c").Where(is("c")), true},
		{"noCondition", Begin("a").FollowedBy("b").Where(is("b")), true},
		{"optional", Begin("a").Where(is("a")).Optional().FollowedBy("b").Where(is("b")), false},
		{"timesRange", Begin("a").Where(is("a")).TimesRange(0, 2).FollowedBy("b").Where(is("b")), false},
	}
	names := []string{"a", "b", "c", "x"}
	defer func() { inertShortcut = true }()
	for _, tc := range patterns {
		t.Run(tc.name, func(t *testing.T) {
			n := mustCompile(t, tc.p)
			if got := n.startTake != nil; got != tc.shortcut {
				t.Fatalf("start state one take: %v, want %v\n%s", got, tc.shortcut, n)
			}
			r := n.NewRun()
			var res Result
			ts := event.Time(0)
			idle := 0
			for i := range 400 {
				ts += event.Time(rng.IntN(3))
				e := ev(uint64(i+1), names[rng.IntN(len(names))], float64(rng.IntN(10)), ts)
				inertShortcut, evals = true, 0
				got, gotEvals := r.Inert(e, ts, &res), evals
				inertShortcut, evals = false, 0
				want, wantEvals := r.Inert(e, ts, &res), evals
				if got != want || gotEvals != wantEvals {
					t.Fatalf("seed %d event %d: Inert %v after %d evaluations, without the shortcut %v after %d",
						seed, i+1, got, gotEvals, want, wantEvals)
				}
				if r.Idle() {
					idle++
				}
				res.Reset()
				if err := r.Process(e, ts, &res); err != nil {
					t.Fatal(err)
				}
				res.Reset()
				if rng.IntN(20) == 0 {
					r.AdvanceTime(ts+20, &res)
					res.Reset()
				}
			}
			if idle == 0 {
				t.Errorf("seed %d: the run was never idle: Inert was not exercised", seed)
			}
		})
	}
}
