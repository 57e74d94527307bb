package cond

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/expr-lang/expr/file"

	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/nfa"
)

// testSchema is the schema of the Flink conformance events.
var testSchema = event.MustSchema(
	event.Field{Name: "id", Kind: event.KindInt},
	event.Field{Name: "name", Kind: event.KindString},
	event.Field{Name: "price", Kind: event.KindFloat},
	event.Field{Name: "ts", Kind: event.KindInt},
	event.Field{Name: "type", Kind: event.KindString},
	event.Field{Name: "volume", Kind: event.KindFloat},
)

// ev builds an event of testSchema; volume < 0 means null (a plain Event).
func ev(seq uint64, name string, price, volume float64) *event.Event {
	vol, typ := event.Null, "Event"
	if volume >= 0 {
		vol, typ = event.Float(volume), "SubEvent"
	}
	return &event.Event{Time: event.Time(seq), Seq: seq, Fields: []event.Value{
		event.Int(int64(seq)), event.String(name), event.Float(price), event.Int(int64(seq)), event.String(typ), vol,
	}}
}

func mustCompile(t testing.TB, src string, stages ...string) *Cond {
	t.Helper()
	c, err := CompileCondition(src, testSchema, stages)
	if err != nil {
		t.Fatalf("CompileCondition(%q): %v", src, err)
	}
	return c.(*Cond)
}

func TestCompileConditionSimple(t *testing.T) {
	tests := []struct {
		src  string
		ev   *event.Event
		want bool
	}{
		{`name == "a"`, ev(1, "a", 1, -1), true},
		{`name == "a"`, ev(1, "b", 1, -1), false},
		{`price > 3.0`, ev(1, "a", 3.5, -1), true},
		{`price > 3`, ev(1, "a", 2, -1), false},
		{`id == 7 && ts == 7`, ev(7, "a", 2, -1), true},
		{`name startsWith "foo"`, ev(1, "foo1", 1, -1), true},
		{`name contains "b"`, ev(1, "abc", 1, -1), true},
		{`true`, ev(1, "x", 1, -1), true},
		{`type == "SubEvent" && volume > 5.0`, ev(1, "x", 1, 10), true},
		{`type == "SubEvent" && volume > 5.0`, ev(1, "x", 1, -1), false},
		{`volume == nil`, ev(1, "x", 1, -1), true},
		{`(volume ?? 0.0) < 1`, ev(1, "x", 1, -1), true},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			c := mustCompile(t, tt.src)
			if got := c.Eval(tt.ev, nil); got != tt.want {
				t.Errorf("Eval = %v, want %v", got, tt.want)
			}
			if n := c.Errors(); n != 0 {
				t.Errorf("Errors() = %d, want 0 (last: %v)", n, c.LastError())
			}
		})
	}
}

// TestCompileConditionNullIsNil checks that a null field behaves as expr's
// nil, also where the declared kind would select a typed instruction.
func TestCompileConditionNullIsNil(t *testing.T) {
	e := &event.Event{Fields: make([]event.Value, testSchema.Len())} // all null
	for _, src := range []string{`name == "a"`, `id == 1`, `price == 1.0`} {
		c := mustCompile(t, src)
		if c.Eval(e, nil) {
			t.Errorf("%s on null = true, want false", src)
		}
		if n := c.Errors(); n != 0 {
			t.Errorf("%s on null: %d errors (last: %v), want 0", src, n, c.LastError())
		}
	}
	if c := mustCompile(t, `name == nil && id == nil`); !c.Eval(e, nil) {
		t.Errorf("name == nil && id == nil on null = false, want true")
	}
}

func TestCompileConditionRuntimeErrorIsFalse(t *testing.T) {
	tests := []struct {
		src string
		ev  *event.Event
	}{
		{`volume > 5.0`, ev(1, "x", 1, -1)},        // nil > float
		{`id % (id - id) == 0`, ev(3, "x", 1, -1)}, // integer division by zero
		{`int(name) > 0`, ev(1, "x", 1, -1)},       // "x" is not a number
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			c := mustCompile(t, tt.src)
			for i := 1; i <= 3; i++ {
				if c.Eval(tt.ev, nil) {
					t.Fatalf("Eval = true, want false")
				}
				if n := c.Errors(); n != uint64(i) {
					t.Fatalf("after %d evaluations Errors() = %d, want %d", i, n, i)
				}
			}
			if c.LastError() == nil {
				t.Errorf("LastError() = nil after a failure")
			}
		})
	}
}

func TestCompileConditionErrors(t *testing.T) {
	tests := []struct {
		src    string
		stages []string
		want   string // substring of the error
		noPos  bool   // the error has no position (no *file.Error)
	}{
		{`foo == 1`, nil, "unknown name foo", false},
		{`name == "a" && pricee > 1`, nil, "unknown name pricee", false},
		{`name > 3`, nil, "mismatched types", false},
		{`price`, nil, "expected bool", true},
		{`now() > date("2024-01-01")`, nil, "unknown name now", false},
		{`date("2024-01-01") != nil`, nil, "unknown name date", false},
		{`duration("1h") != nil`, nil, "unknown name duration", false},
		{`len(ctx("a")) == 1`, nil, `unknown stage "a"`, false},
		{`len(ctx("b")) == 1`, []string{"a"}, `unknown stage "b"`, false},
		{`len(ctx(name)) == 1`, []string{"a"}, "string literal", false},
		{`len(ctx("a", "b")) == 1`, []string{"a", "b"}, "one argument", false},
		{`name ==`, nil, "unexpected token", false},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			_, err := CompileCondition(tt.src, testSchema, tt.stages)
			if err == nil {
				t.Fatalf("CompileCondition succeeded, want an error containing %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not contain %q", err, tt.want)
			}
			var fe *file.Error
			if !tt.noPos && !errors.As(err, &fe) {
				t.Errorf("error %v does not wrap a *file.Error", err)
			}
		})
	}
	if _, err := CompileCondition(`true`, nil, nil); err == nil {
		t.Errorf("CompileCondition with a nil schema succeeded")
	}
	s := event.MustSchema(event.Field{Name: "ctx"})
	if _, err := CompileCondition(`true`, s, nil); err == nil {
		t.Errorf("CompileCondition with a field named ctx succeeded")
	}
}

// matchSeqs runs p over evs (time = seq) and returns every match flattened
// to sequence numbers.
func matchSeqs(t *testing.T, p *nfa.Pattern, evs []*event.Event) [][]uint64 {
	t.Helper()
	n, err := nfa.Compile(p)
	if err != nil {
		t.Fatalf("nfa.Compile: %v", err)
	}
	run := n.NewRun()
	var res nfa.Result
	var out [][]uint64
	for _, e := range evs {
		res.Reset()
		if err := run.Process(e, e.Time, &res); err != nil {
			t.Fatalf("Process: %v", err)
		}
		for _, m := range res.Matches {
			var seqs []uint64
			for _, stage := range m.Events {
				for _, x := range stage {
					seqs = append(seqs, x.Seq)
				}
			}
			out = append(out, seqs)
		}
	}
	return out
}

func TestCompileConditionCtx(t *testing.T) {
	t.Run("index", func(t *testing.T) {
		// b takes an event priced as the a of its partial match.
		p := nfa.Begin("a").Where(mustCompile(t, `name == "a"`)).
			FollowedBy("b").Where(mustCompile(t, `name == "b" && ctx("a")[0].price == price`, "a", "b"))
		got := matchSeqs(t, p, []*event.Event{ev(1, "a", 1, -1), ev(2, "b", 2, -1), ev(3, "b", 1, -1)})
		if want := [][]uint64{{1, 3}}; !equalSeqs(got, want) {
			t.Errorf("matches = %v, want %v", got, want)
		}
	})
	t.Run("sum", func(t *testing.T) {
		// The loop takes a middle event only while the running total stays
		// below 5; m3 would bring it to 6 and is skipped.
		p := nfa.Begin("start").Where(mustCompile(t, `name == "start"`)).
			FollowedBy("middle").OneOrMore().
			Where(mustCompile(t, `name startsWith "m" && sum(map(ctx("middle"), .price)) + price < 5.0`, "start", "middle")).
			FollowedBy("end").Where(mustCompile(t, `name == "end"`))
		evs := []*event.Event{ev(1, "start", 0, -1), ev(2, "m1", 1, -1), ev(3, "m2", 2, -1), ev(4, "m3", 3, -1), ev(5, "end", 0, -1)}
		got := matchSeqs(t, p, evs)
		slices.SortFunc(got, slices.Compare)
		if want := [][]uint64{{1, 2, 3, 5}, {1, 2, 5}}; !equalSeqs(got, want) {
			t.Errorf("matches = %v, want %v", got, want)
		}
	})
	t.Run("len", func(t *testing.T) {
		p := nfa.Begin("d").Where(mustCompile(t, `name == "d"`)).OneOrMore().Consecutive().
			Next("e").Where(mustCompile(t, `name == "e" && len(ctx("d")) == 2`, "d", "e"))
		evs := []*event.Event{ev(1, "d", 0, -1), ev(2, "d", 0, -1), ev(3, "e", 0, -1)}
		got := matchSeqs(t, p, evs)
		if want := [][]uint64{{1, 2, 3}}; !equalSeqs(got, want) {
			t.Errorf("matches = %v, want %v", got, want)
		}
	})
	t.Run("nil context", func(t *testing.T) {
		c := mustCompile(t, `len(ctx("a")) == 0`, "a")
		if !c.Eval(ev(1, "a", 1, -1), nil) {
			t.Errorf("len(ctx(\"a\")) == 0 with a nil context = false")
		}
	})
}

func equalSeqs(a, b [][]uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if len(a[i]) != len(b[i]) {
			return false
		}
		for j := range a[i] {
			if a[i][j] != b[i][j] {
				return false
			}
		}
	}
	return true
}

// TestCondConcurrent evaluates one condition from several goroutines (run
// with -race).
func TestCondConcurrent(t *testing.T) {
	c := mustCompile(t, `name == "a" && price > 1.0 && len(ctx("a")) == 0`, "a")
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				price := float64((g + i) % 3)
				if got, want := c.Eval(ev(uint64(i), "a", price, -1), nil), price > 1; got != want {
					t.Errorf("Eval(price %v) = %v, want %v", price, got, want)
					return
				}
			}
		})
	}
	wg.Wait()
	if n := c.Errors(); n != 0 {
		t.Errorf("Errors() = %d (last: %v)", n, c.LastError())
	}
}

func BenchmarkCondEval(b *testing.B) {
	c := mustCompile(b, `type == "SubEvent" && volume > 5.0 && name startsWith "foo"`)
	e := ev(1, "foo", 1, 10)
	b.ReportAllocs()
	for b.Loop() {
		if !c.Eval(e, nil) {
			b.Fatal("Eval = false")
		}
	}
}
