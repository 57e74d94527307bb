package nfa

import (
	"fmt"
	"testing"
	"time"

	"github.com/cepheus-cep/cepheus/event"
)

type signed string

func (s signed) Eval(ev *event.Event, _ *Context) bool {
	n, _ := ev.Field(0).AsString()
	return n == string(s)
}

func (s signed) Signature() string { return string(s) }

func TestStartSignature(t *testing.T) {
	sig := func(p *Pattern) (string, bool) {
		t.Helper()
		n, err := Compile(p)
		if err != nil {
			t.Fatal(err)
		}
		return n.StartSignature()
	}
	a, ok := sig(Begin("a").Where(signed("x")).FollowedBy("b").Where(signed("y")).Within(time.Minute))
	if !ok {
		t.Fatal("a: no signature")
	}
	// Another continuation and window: the same start.
	b, ok := sig(Begin("a").Where(signed("x")).Next("c").Where(signed("z")).Next("d"))
	if !ok || a != b {
		t.Errorf("same start: %q (%v) and %q", b, ok, a)
	}
	// A looping start takes the same events (where the take leads is not
	// part of the signature: Inert does not depend on it).
	if c, ok := sig(Begin("a").Where(signed("x")).OneOrMore().FollowedBy("b").Where(signed("y"))); !ok || c != a {
		t.Errorf("looping start: %q (%v), want %q", c, ok, a)
	}
	// Another start condition, an optional start (whose closure reaches
	// the next stage): other signatures.
	for _, p := range []*Pattern{
		Begin("a").Where(signed("w")).FollowedBy("b").Where(signed("y")),
		Begin("a").Where(signed("x")).Optional().FollowedBy("b").Where(signed("y")),
	} {
		if c, ok := sig(p); ok && c == a {
			t.Errorf("%q: the signature of another start", c)
		}
	}
	// A condition without a signature: none.
	if c, ok := sig(Begin("a").Where(nameIs("x")).FollowedBy("b")); ok {
		t.Errorf("CondFunc start: signature %q", c)
	}
}

func TestDeferrableStart(t *testing.T) {
	compile := func(p *Pattern, opts ...Option) *NFA {
		t.Helper()
		n, err := Compile(p, opts...)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	w4 := func() *Pattern {
		return Begin("a").Where(signed("x")).FollowedBy("b").Where(signed("y")).FollowedBy("c").Where(signed("z"))
	}
	n := compile(w4().Within(time.Second))
	if !n.DeferrableStart() {
		t.Fatalf("W4's shape is not deferrable:\n%s", n)
	}
	// What the doc promises, on a run that takes x at 100.
	var res Result
	r := n.NewRun()
	x := &event.Event{Time: 100, Seq: 1, Fields: []event.Value{event.String("x")}}
	if r.Inert(x, 100, &res) {
		t.Fatal("x is inert")
	}
	if err := r.Process(x, 100, &res); err != nil || len(res.Matches)+len(res.Timeouts)+res.Dropped > 0 {
		t.Fatalf("Process: %v, %+v", err, res)
	}
	if d, ok := r.NextDeadline(); !ok || d != 1100 || r.PartialMatches() != 1 {
		t.Fatalf("deadline %d %v, %d partial matches", d, ok, r.PartialMatches())
	}
	for _, at := range []event.Time{100, 1099, 1100} {
		if err := r.AdvanceTime(at, &res); err != nil || len(res.Matches)+len(res.Timeouts)+res.Dropped > 0 {
			t.Fatalf("AdvanceTime(%d): %v, %+v", at, err, res)
		}
	}
	if !r.Empty() {
		t.Fatal("not empty after the window")
	}
	// Without a window: no deadline, and the partial match stays.
	open := compile(w4())
	if !open.DeferrableStart() {
		t.Fatalf("W4's shape without a window is not deferrable:\n%s", open)
	}
	r = open.NewRun()
	if err := r.Process(x, 100, &res); err != nil || len(res.Matches)+len(res.Timeouts)+res.Dropped > 0 {
		t.Fatalf("no window: Process: %v, %+v", err, res)
	}
	if _, ok := r.NextDeadline(); ok || r.PartialMatches() != 1 {
		t.Fatalf("no window: a deadline, or %d partial matches", r.PartialMatches())
	}
	for _, at := range []event.Time{1100, 1 << 50, event.MaxTime} {
		if err := r.AdvanceTime(at, &res); err != nil || len(res.Matches)+len(res.Timeouts)+res.Dropped > 0 || r.PartialMatches() != 1 {
			t.Fatalf("no window: AdvanceTime(%d): %v, %+v, %d partial matches", at, err, res, r.PartialMatches())
		}
	}
	for name, p := range map[string]*NFA{
		"timeouts":        compile(w4().Within(time.Second), WithTimeouts()),
		"one stage":       compile(Begin("a").Where(signed("x")).Within(time.Second)),
		"looping start":   compile(Begin("a").Where(signed("x")).OneOrMore().FollowedBy("b").Where(signed("y")).Within(time.Second)),
		"optional second": compile(Begin("a").Where(signed("x")).FollowedBy("b").Where(signed("y")).Optional().FollowedBy("c").Where(signed("z")).Within(time.Second)),
		"gap":             compile(Begin("a").Where(signed("x")).FollowedBy("b").Where(signed("y")).WithinGap(time.Second).Within(time.Second)),
	} {
		if p.DeferrableStart() {
			t.Errorf("%s: deferrable", name)
		}
	}
}

func TestPendingIgnores(t *testing.T) {
	n, err := Compile(Begin("a").Where(signed("x")).FollowedBy("b").Where(signed("y")).FollowedBy("c").Where(signed("z")).Within(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	e := func(seq uint64, name string, ts event.Time) *event.Event {
		return &event.Event{Time: ts, Seq: seq, Fields: []event.Value{event.String(name)}}
	}
	var res Result
	probe := n.NewRun()
	x, w, y := e(1, "x", 100), e(2, "w", 110), e(3, "y", 115)
	if !probe.PendingIgnores(x, w, 110, &res) || probe.PendingIgnores(x, y, 115, &res) {
		t.Fatal("w is ignored and y taken after x")
	}
	// The run that took x, was advanced, ignored w and was advanced again
	// is the run that took x and was advanced once.
	full, short := n.NewRun(), n.NewRun()
	steps := []func() error{
		func() error { return full.Process(x, 100, &res) },
		func() error { return full.AdvanceTime(105, &res) },
		func() error { return full.AdvanceTime(110, &res) },
		func() error { return full.Process(w, 110, &res) },
		func() error { return full.AdvanceTime(112, &res) },
		func() error { return short.Process(x, 100, &res) },
		func() error { return short.AdvanceTime(112, &res) },
	}
	for i, step := range steps {
		if err := step(); err != nil || len(res.Matches)+len(res.Timeouts)+res.Dropped > 0 {
			t.Fatalf("step %d: %v, %+v", i, err, res)
		}
	}
	if a, b := full.AppendBinary(nil), short.AppendBinary(nil); string(a) != string(b) {
		t.Errorf("the runs differ:\n%x\n%x", a, b)
	}
	// Both go on alike: y, then z completes the match.
	z := e(4, "z", 120)
	for _, r := range []*Run{full, short} {
		if err := r.AdvanceTime(115, &res); err != nil {
			t.Fatal(err)
		}
		_ = r.Process(y, 115, &res)
		_ = r.Process(z, 120, &res)
	}
	if len(res.Matches) != 2 || fmt.Sprint(res.Matches[0].Events) != fmt.Sprint(res.Matches[1].Events) {
		t.Errorf("matches %v", res.Matches)
	}
	// Strict contiguity: a non-matching event ends the partial match.
	strict, err := Compile(Begin("a").Where(signed("x")).Next("b").Where(signed("y")).Within(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if strict.DeferrableStart() && strict.NewRun().PendingIgnores(x, w, 110, &res) {
		t.Error("next: w is ignored")
	}
}

// TestPendingDies checks PendingDies against the run it stands for: a run
// that took x, was advanced and was given an event its partial match does
// not survive goes on as an idle run given that event would.
func TestPendingDies(t *testing.T) {
	e := func(seq uint64, name string, ts event.Time) *event.Event {
		return &event.Event{Time: ts, Seq: seq, Fields: []event.Value{event.String(name)}}
	}
	strict := func() *Pattern { return Begin("a").Where(signed("x")).Next("b").Where(signed("y")) }
	for _, tc := range []struct {
		name string
		p    *Pattern
	}{
		{"next", strict()},
		{"next within", strict().Within(time.Second)},
	} {
		n, err := Compile(tc.p)
		if err != nil {
			t.Fatal(err)
		}
		if !n.DeferrableStart() {
			t.Fatalf("%s: not deferrable", tc.name)
		}
		var res Result
		probe := n.NewRun()
		x, w, x2, y := e(1, "x", 100), e(2, "w", 110), e(3, "x", 110), e(4, "y", 120)
		if !probe.PendingDies(x, w, 110, &res) || !probe.PendingDies(x, x2, 110, &res) || probe.PendingDies(x, y, 120, &res) {
			t.Fatalf("%s: w and x end the partial match of x, y does not", tc.name)
		}
		for _, next := range []*event.Event{w, x2} {
			full, short := n.NewRun(), n.NewRun()
			steps := []func() error{
				func() error { return full.Process(x, 100, &res) },
				func() error { return full.AdvanceTime(110, &res) },
				func() error { return full.Process(next, 110, &res) },
				func() error { return short.AdvanceTime(110, &res) },
				func() error { return short.Process(next, 110, &res) },
			}
			for i, step := range steps {
				if err := step(); err != nil || len(res.Matches)+len(res.Timeouts)+res.Dropped > 0 {
					t.Fatalf("%s, %s: step %d: %v, %+v", tc.name, next.Fields[0], i, err, res)
				}
			}
			if full.PartialMatches() != short.PartialMatches() {
				t.Fatalf("%s, %s: %d and %d partial matches", tc.name, next.Fields[0], full.PartialMatches(), short.PartialMatches())
			}
			// Both go on alike: y completes a match after x2, none after w.
			for _, r := range []*Run{full, short} {
				if err := r.AdvanceTime(120, &res); err != nil {
					t.Fatal(err)
				}
				if err := r.Process(y, 120, &res); err != nil {
					t.Fatal(err)
				}
			}
			want := 0
			if next == x2 {
				want = 2
			}
			if len(res.Matches) != want || want > 0 && fmt.Sprint(res.Matches[0].Events) != fmt.Sprint(res.Matches[1].Events) {
				t.Errorf("%s, %s: matches %v, want %d alike", tc.name, next.Fields[0], res.Matches, want)
			}
			res.Reset()
		}
	}
	// Relaxed contiguity: the partial match never dies.
	n, err := Compile(Begin("a").Where(signed("x")).FollowedBy("b").Where(signed("y")))
	if err != nil {
		t.Fatal(err)
	}
	var res Result
	if n.NewRun().PendingDies(e(1, "x", 100), e(2, "w", 110), 110, &res) {
		t.Error("followedBy: w ends the partial match")
	}
}
