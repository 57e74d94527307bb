package nfa

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cepheus-cep/cepheus/event"
)

// counted is a condition on the name field that counts its evaluations.
// A pointer is comparable, so the compiler sees that an ignore negates a
// take of the same condition (markNegations), as with compiled rules;
// it cannot see that of functions (nameIs).
type counted struct {
	name  string
	evals *int
}

func (c *counted) Eval(e *event.Event, _ *Context) bool {
	*c.evals++
	s, _ := e.Field(0).AsString()
	return s == c.name
}

// above is a condition that counts its evaluations: the name field is b
// and the price above that of the event stage a took.
type above struct{ evals *int }

func (c *above) Eval(e *event.Event, ctx *Context) bool {
	*c.evals++
	s, _ := e.Field(0).AsString()
	a := ctx.Events("a")
	if s != "b" || len(a) == 0 {
		return false
	}
	p, _ := e.Field(1).AsFloat()
	pa, _ := a[0].Field(1).AsFloat()
	return p > pa
}

func TestWaits(t *testing.T) {
	var evals int
	a, b := &counted{"a", &evals}, &counted{"b", &evals}
	tests := []struct {
		name string
		p    *Pattern
		want string // the states that wait, by name
	}{
		{"followedBy", Begin("a").Where(a).FollowedBy("b").Where(b), "a b"},
		{"next", Begin("a").Where(a).Next("b").Where(b), "a"},
		{"followedByAny", Begin("a").Where(a).FollowedByAny("b").Where(b), "a"},
		{"functions", Begin("a").Where(nameIs("a")).FollowedBy("b").Where(nameIs("b")), "a"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, s := range mustCompile(t, tc.p).states {
				if s.waits {
					got = append(got, s.name)
				}
			}
			slices.Sort(got)
			if strings.Join(got, " ") != tc.want {
				t.Errorf("waiting states %q, want %q", got, tc.want)
			}
		})
	}
}

// TestWaitShortcut drives random events through patterns with and without
// Process's shortcut for waiting computations: the matches, the timeouts,
// the encoded runs and the number of condition evaluations must be the
// same.
func TestWaitShortcut(t *testing.T) {
	seed := envSeed()
	rng := rand.New(rand.NewPCG(seed, 12))
	evals := 0
	is := func(n string) Condition { return &counted{n, &evals} }
	patterns := map[string]*Pattern{
		"chain": Begin("a").Where(is("a")).FollowedBy("b").Where(is("b")).FollowedBy("c").Where(is("c")).
			Within(20 * time.Millisecond).Skip(SkipPastLast()),
		"strict": Begin("a").Where(is("a")).Next("b").Where(is("b")).FollowedBy("c").Where(is("c")),
		"any": Begin("a").Where(is("a")).FollowedByAny("b").Where(is("b")).FollowedBy("c").Where(is("c")).
			Within(10 * time.Millisecond),
		"loop": Begin("a").Where(is("a")).FollowedBy("b").Where(is("b")).OneOrMore().
			FollowedBy("c").Where(is("c")).Within(15 * time.Millisecond),
		"notAtEnd": Begin("a").Where(is("a")).FollowedBy("b").Where(is("b")).
			NotFollowedBy("c").Where(is("c")).Within(7 * time.Millisecond),
		// A later partial match completes (its b above its a) while an
		// earlier one still waits at b: skip holds the match back.
		"heldBack": Begin("a").Where(is("a")).FollowedBy("b").Where(&above{&evals}).
			FollowedBy("c").Where(is("c")).Skip(SkipPastLast()),
		"optional": Begin("a").Where(is("a")).FollowedBy("b").Where(is("b")).Optional().
			FollowedBy("c").Where(is("c")),
	}
	names := []string{"a", "b", "c", "x"}
	defer func() { waitShortcut = true }()
	for pname, p := range patterns {
		n := mustCompile(t, p, WithTimeouts())
		t.Run(pname, func(t *testing.T) {
			for trial := range 10 {
				fast, slow := n.NewRun(), n.NewRun()
				var fastRes, slowRes Result
				step := func(r *Run, e *event.Event, res *Result) (string, int) {
					evals = 0
					return stepOutput(t, n, r, e, res), evals
				}
				ts := event.Time(0)
				for i := range 300 {
					ts += event.Time(rng.IntN(3))
					e := ev(uint64(i+1), names[rng.IntN(len(names))], float64(rng.IntN(10)), ts)
					waitShortcut = true
					got, gotEvals := step(fast, e, &fastRes)
					waitShortcut = false
					want, wantEvals := step(slow, e, &slowRes)
					if got != want || gotEvals != wantEvals {
						t.Fatalf("seed %d trial %d event %d: %q after %d evaluations, without the shortcut %q after %d",
							seed, trial, i+1, got, gotEvals, want, wantEvals)
					}
					if string(fast.AppendBinary(nil)) != string(slow.AppendBinary(nil)) {
						t.Fatalf("seed %d trial %d event %d: the encodings differ", seed, trial, i+1)
					}
				}
			}
		})
	}
}

// TestWaitsForeverSkip checks WaitsForever's answer under each skip
// strategy, and the claim behind it: where no stage is reported, a run
// fed many events of one key holds at most a few partial matches; where
// one is, some input makes them grow without bound.
func TestWaitsForeverSkip(t *testing.T) {
	is := func(n string) Condition { return nameIs(n) }
	// Each a below the price of the previous a of the loop: a partial
	// match at the loop outlives an a that fails this, so toLast a waits.
	falling := CondFunc(func(e *event.Event, ctx *Context) bool {
		s, _ := e.Field(0).AsString()
		a := ctx.Events("a")
		if s != "a" || len(a) == 0 {
			return s == "a"
		}
		p, _ := e.Field(1).AsFloat()
		pa, _ := a[len(a)-1].Field(1).AsFloat()
		return p < pa
	})
	loop := func() *Pattern { return Begin("a").Where(is("a")).OneOrMore() }
	tests := []struct {
		name string
		p    *Pattern
		skip SkipStrategy
		want string // the stage reported, "" for none
	}{
		{"loop noSkip", loop(), NoSkip(), "a"},
		{"loop toNext", loop(), SkipToNextEvent(), ""},
		{"loop pastLastEvent", loop(), SkipPastLast(), ""},
		{"loop toFirst", loop(), SkipToFirstOf("a"), "a"},
		{"falling loop pastLastEvent", Begin("a").Where(falling).OneOrMore(), SkipPastLast(), ""},
		{"falling loop toLast", Begin("a").Where(falling).OneOrMore(), SkipToLastOf("a"), "a"},
		{"loop until pastLastEvent", loop().Until(is("c")), SkipPastLast(), ""},
		{"loop combinations toNext", loop().AllowCombinations(), SkipToNextEvent(), ""},
		{"followedBy noSkip", Begin("a").Where(is("a")).FollowedBy("b").Where(is("b")), NoSkip(), "b"},
		{"followedBy pastLastEvent", Begin("a").Where(is("a")).FollowedBy("b").Where(is("b")), SkipPastLast(), "b"},
		{"followedBy toNext", Begin("a").Where(is("a")).FollowedBy("b").Where(is("b")), SkipToNextEvent(), "b"},
		{"followedBy optional pastLastEvent", Begin("a").Where(is("a")).FollowedBy("b").Where(is("b")).Optional(), SkipPastLast(), ""},
		{"loop then followedBy pastLastEvent", loop().FollowedBy("b").Where(is("b")), SkipPastLast(), "a"},
		{"next loop pastLastEvent", Begin("a").Where(is("a")).Next("b").Where(is("b")).OneOrMore(), SkipPastLast(), ""},
		{"next loop then followedBy toNext", Begin("a").Where(is("a")).Next("b").Where(is("b")).OneOrMore().
			FollowedBy("c").Where(is("c")), SkipToNextEvent(), "b"},
		{"group loop toNext", BeginGroup(Begin("a").Where(is("a")).Next("b").Where(is("b"))).OneOrMore(), SkipToNextEvent(), ""},
	}
	// Inputs of one key; together they feed every wait above what keeps
	// it: a's without b's, b's without c's, rising prices.
	inputs := []func(i int) (string, float64){
		func(i int) (string, float64) { return "a", float64(i) },
		func(i int) (string, float64) { return []string{"a", "x"}[i%2], float64(i) },
		func(i int) (string, float64) { return []string{"a", "b", "x"}[i%3], float64(i) },
		func(i int) (string, float64) { return []string{"a", "b", "b", "x"}[i%4], float64(i) },
	}
	const events, bound = 300, 2
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := mustCompile(t, tc.p.Skip(tc.skip))
			got, _ := n.WaitsForever()
			if got != tc.want {
				t.Fatalf("WaitsForever() = %q, want %q", got, tc.want)
			}
			most := 0
			for _, in := range inputs {
				r := n.NewRun()
				var res Result
				for i := range events {
					name, price := in(i)
					res.Reset()
					if err := r.Process(ev(uint64(i+1), name, price, event.Time(i)), event.Time(i), &res); err != nil {
						t.Fatal(err)
					}
					most = max(most, r.PartialMatches())
					if most >= events/4 {
						break // grown enough; noSkip's matches grow as its square
					}
				}
			}
			if tc.want == "" && most > bound {
				t.Errorf("no stage reported, but %d partial matches held at once", most)
			}
			if tc.want != "" && most < events/4 {
				t.Errorf("stage %s reported, but at most %d partial matches held at once: these inputs do not show the growth", tc.want, most)
			}
		})
	}
}
