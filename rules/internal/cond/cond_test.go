package cond

import (
	"errors"
	"fmt"
	"reflect"
	"regexp/syntax"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/nfa"
)

// unitSchema is the schema of the unit tests: a declared kind per field,
// and one untyped field.
var unitSchema = event.MustSchema(
	event.Field{Name: "amount", Kind: event.KindFloat},
	event.Field{Name: "country", Kind: event.KindString},
	event.Field{Name: "n", Kind: event.KindInt},
	event.Field{Name: "flag", Kind: event.KindBool},
	event.Field{Name: "x"}, // untyped
)

var unitEnv = &Env{Schema: unitSchema, Declared: true}

// unitEvent builds an event of unitSchema from name=value pairs; the other
// fields are null.
func unitEvent(kv ...any) *event.Event {
	e := &event.Event{Fields: make([]event.Value, unitSchema.Len())}
	for i := 0; i < len(kv); i += 2 {
		slot, ok := unitSchema.Slot(kv[i].(string))
		if !ok {
			panic(kv[i])
		}
		v, ok := event.FromAny(kv[i+1])
		if !ok {
			panic(kv[i+1])
		}
		e.Fields[slot] = v
	}
	return e
}

// outcome runs b on e and names the result: "true", "false" or "error".
func outcome(b *BoolExpr, e *event.Event) string {
	before := b.Errors()
	v := b.Eval(e, nil)
	if b.Errors() != before {
		if v {
			return "true with an error"
		}
		return "error"
	}
	if v {
		return "true"
	}
	return "false"
}

func TestCondSemantics(t *testing.T) {
	tests := []struct {
		src  string
		ev   *event.Event
		want string // true, false or error
	}{
		// Null: == and != never fail, ordering and arithmetic do.
		{`country == "FR"`, unitEvent(), "false"},
		{`country != "FR"`, unitEvent(), "true"},
		{`country == nil`, unitEvent(), "true"},
		{`x == nil && n == nil`, unitEvent(), "true"},
		{`amount > 5000`, unitEvent(), "error"},
		{`5000 < amount`, unitEvent(), "error"},
		{`amount + 1 > 2`, unitEvent(), "error"},
		{`-amount < 0`, unitEvent(), "error"},
		{`(amount ?? 0) > 5000`, unitEvent(), "false"},
		{`country startsWith "F"`, unitEvent(), "false"},
		{`country matches "^F"`, unitEvent(), "false"},
		{`"F" in [country]`, unitEvent(), "false"},
		{`country in ["FR", nil]`, unitEvent(), "true"},
		{`len(country) > 0`, unitEvent(), "error"},
		{`lower(country) == "fr"`, unitEvent(), "error"},
		// A bool that is null: false at the top (expr's final cast), an
		// error where an operator needs a bool.
		{`flag`, unitEvent(), "false"},
		{`flag && true`, unitEvent(), "false"}, // folded to flag
		{`!flag`, unitEvent(), "error"},
		{`flag && amount > 1`, unitEvent(), "error"},
		{`amount > 1 || flag`, unitEvent("amount", 0.5), "false"},
		{`flag ? true : false`, unitEvent(), "error"},
		{`flag ?? true`, unitEvent(), "true"},
		// Literal folding decides before the operand is evaluated.
		{`false && amount > 1`, unitEvent(), "false"},
		{`amount > 1 && false`, unitEvent(), "false"},
		{`amount > 1 || true`, unitEvent(), "true"},
		{`true && amount > 1`, unitEvent(), "error"},
		// Numbers: int op int stays int, / makes a float, ints and floats
		// compare as numbers.
		{`n / 2 == 1.5`, unitEvent("n", 3), "true"},
		{`7 / 2 == 3.5`, unitEvent(), "true"},
		{`n % 2 == 1`, unitEvent("n", 3), "true"},
		{`n % (n - 3) == 0`, unitEvent("n", 3), "error"},
		{`n + 0.5 == 3.5`, unitEvent("n", 3), "true"},
		{`n == 3.0`, unitEvent("n", 3), "true"},
		{`amount > 5000`, unitEvent("amount", 6000), "true"}, // an int in a float field
		{`amount > 5000`, unitEvent("amount", 5000.5), "true"},
		{`n ** 2 == 9.0`, unitEvent("n", 3), "true"},
		{`abs(n - 5) == 2`, unitEvent("n", 3), "true"},
		{`int(amount) == 2`, unitEvent("amount", 2.9), "true"},
		{`float("1.5") + 1 == 2.5`, unitEvent(), "true"},
		{`int(country) > 0`, unitEvent("country", "FR"), "error"},
		{`round(amount) == 3 && ceil(amount) == 3 && floor(amount) == 2`, unitEvent("amount", 2.5), "true"},
		{`min(n, amount) == 3 && max(n, amount) == 4.5 && mean(n, amount) == 3.75`, unitEvent("n", 3, "amount", 4.5), "true"},
		{`sum([n, amount]) == 7.5`, unitEvent("n", 3, "amount", 4.5), "true"},
		{`n in [1, 2, 3.0]`, unitEvent("n", 3), "true"},
		// Strings.
		{`len("é") == 1`, unitEvent(), "true"},
		{`country in ["FR", "DE"]`, unitEvent("country", "DE"), "true"},
		{`country not in ["FR", "DE"]`, unitEvent("country", "US"), "true"},
		{`country endsWith "R" and country contains "F"`, unitEvent("country", "FR"), "true"},
		{`country matches "^[A-Z]{2}$"`, unitEvent("country", "FR"), "true"},
		{`upper(trim(country)) == "FR"`, unitEvent("country", " fr "), "true"},
		{`trimPrefix(country, "x") == "FR"`, unitEvent("country", "xFR"), "true"},
		{`string(amount) == "1.5" && string(n) == "3"`, unitEvent("amount", 1.5, "n", 3), "true"},
		{`country + "!" == "FR!"`, unitEvent("country", "FR"), "true"},
		{`country < "GB"`, unitEvent("country", "FR"), "true"},
		// Conditionals.
		{`(n > 2 ? "big" : "small") == "big"`, unitEvent("n", 3), "true"},
		{`if n > 2 { amount > 1 } else { false }`, unitEvent("n", 3, "amount", 2), "true"},
		// An untyped field may hold anything; a wrong kind is an error.
		{`x > 1`, unitEvent("x", 2), "true"},
		{`x > 1`, unitEvent("x", "a"), "error"},
		{`x == "a"`, unitEvent("x", 1), "false"},
		{`x startsWith "a"`, unitEvent("x", 1), "error"},
		{`x`, unitEvent("x", 1), "error"},
		{`x + 1 == 2.5`, unitEvent("x", 1.5), "true"},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			b, err := CompileBoolExpr(tt.src, unitEnv)
			if err != nil {
				t.Fatalf("CompileBoolExpr: %v", err)
			}
			if got := outcome(b, tt.ev); got != tt.want {
				t.Errorf("on %v: %s, want %s (last error: %v)", tt.ev.Fields, got, tt.want, b.LastError())
			}
			if !b.Fast() {
				t.Errorf("not compiled natively: %s", b.Fallback())
			}
			// The reference agrees, except where stage references or our
			// own functions are involved (none here).
			ref, err := CompileCondition(tt.src, unitSchema, nil)
			if err != nil {
				t.Fatalf("CompileCondition: %v", err)
			}
			refTest := func(fr frame) (bool, *Error) {
				before := ref.(*Cond).Errors()
				v := ref.Eval(fr.ev, nil)
				if ref.(*Cond).Errors() != before {
					return false, &Error{Msg: ref.(*Cond).LastError().Error()}
				}
				return v, nil
			}
			if got := outcome(&BoolExpr{test: refTest, prog: &compiledProgram{test: refTest}}, tt.ev); got != tt.want {
				t.Errorf("the reference says %s", got)
			}
		})
	}
}

// TestDynamicPattern: a matches whose pattern is an event's field
// compiles each pattern once (a cache of maxDynRegexps, emptied when
// full, across which the outcomes stay right), a bad pattern is an error,
// and a pattern over maxDynPattern bytes is an error without being
// compiled (an 80 KB pattern compiled at every event took 0.1 s each).
func TestDynamicPattern(t *testing.T) {
	b, err := CompileBoolExpr(`country matches x`, unitEnv)
	if err != nil {
		t.Fatal(err)
	}
	for round := range 2 {
		for i := range maxDynRegexps + 44 {
			p := fmt.Sprintf("^c%d$", i)
			if got := outcome(b, unitEvent("country", fmt.Sprintf("c%d", i), "x", p)); got != "true" {
				t.Fatalf("round %d: c%d matches %s: %s (%v)", round, i, p, got, b.LastError())
			}
			if got := outcome(b, unitEvent("country", fmt.Sprintf("c%d", i+1), "x", p)); got != "false" {
				t.Fatalf("round %d: c%d matches %s: %s (%v)", round, i+1, p, got, b.LastError())
			}
		}
	}
	if got := outcome(b, unitEvent("country", "FR", "x", "[")); got != "error" || !strings.Contains(b.LastError().Error(), "bad regular expression") {
		t.Errorf("a bad pattern: %s (%v), want an error", got, b.LastError())
	}
	// A pattern holding a newline: the error is one line all the same.
	if got := outcome(b, unitEvent("country", "FR", "x", "a\n(")); got != "error" || !strings.Contains(b.LastError().Error(), `a\n(`) || strings.Contains(b.LastError().Error(), "\n") {
		t.Errorf("a bad pattern with a newline: %s (%q), want an error of one line", got, b.LastError())
	}
	long := strings.Repeat("a", maxDynPattern+1)
	if got := outcome(b, unitEvent("country", long, "x", long)); got != "error" || !strings.Contains(b.LastError().Error(), "more than the 4096 a pattern from an event may have") {
		t.Errorf("a pattern of %d bytes: %s (%v), want an error", len(long), got, b.LastError())
	}
	if got := outcome(b, unitEvent("country", long[1:], "x", long[1:])); got != "true" {
		t.Errorf("a pattern of %d bytes: %s (%v), want it matched", len(long)-1, got, b.LastError())
	}
}

// TestDynamicPatternSize: a pattern from an event whose program would
// cost more than maxDynCost (instructions, repetitions multiplying them,
// and the ranges of its classes) is an error, refused before it is
// compiled (4,095 bytes of a{1000} compiled into 585,000 instructions:
// 0.3 s and 27 MB each, 256 of them kept), and the cache keeps patterns
// of a cost of at most maxDynCached, however many patterns that is.
func TestDynamicPatternSize(t *testing.T) {
	b, err := CompileBoolExpr(`country matches x`, unitEnv)
	if err != nil {
		t.Fatal(err)
	}
	huge := strings.Repeat("a{1000}", maxDynPattern/7)
	if got := outcome(b, unitEvent("country", "FR", "x", huge)); got != "error" || !strings.Contains(b.LastError().Error(), "more than the 10000 a pattern from an event may have") {
		t.Errorf("a pattern of %d bytes and 585,000 instructions: %s (%v), want an error", len(huge), got, b.LastError())
	}
	// A class holds its ranges, each occurrence its own: 4 KB of \pL is
	// 1,365 instructions but 7 MB and 22 ms to compile.
	classes := strings.Repeat(`\pL`, maxDynPattern/3)
	if got := outcome(b, unitEvent("country", "FR", "x", classes)); got != "error" || !strings.Contains(b.LastError().Error(), "more than the 10000 a pattern from an event may have") {
		t.Errorf("a pattern of %d bytes of \\pL: %s (%v), want an error", len(classes), got, b.LastError())
	}
	// A class repeated shares its ranges.
	if got := outcome(b, unitEvent("country", strings.Repeat("é", 1000), "x", `^\pL{1000}$`)); got != "true" {
		t.Errorf(`\pL{1000}: %s (%v), want it matched`, got, b.LastError())
	}
	// A match takes up to a step per instruction and byte: 9,000
	// instructions against 100 KB took 19 s.
	steps := strings.Repeat(".{1000}", 9) + "x"
	if got := outcome(b, unitEvent("country", strings.Repeat("a", 1000), "x", steps)); got != "false" {
		t.Errorf("a pattern of 9,000 instructions against 1,000 bytes: %s (%v), want false", got, b.LastError())
	}
	if got := outcome(b, unitEvent("country", strings.Repeat("a", 3000), "x", steps)); got != "error" || !strings.Contains(b.LastError().Error(), "against 3000 bytes: more than the 25000000 steps (instructions times bytes) a match of a pattern from an event may take") {
		t.Errorf("a pattern of 9,000 instructions against 3,000 bytes: %s (%v), want an error", got, b.LastError())
	}
	// A literal string is searched for, whatever the steps.
	lit := strings.Repeat("ab", maxDynPattern/2)
	if got := outcome(b, unitEvent("country", strings.Repeat("x", 10_000)+lit, "x", lit)); got != "true" {
		t.Errorf("a literal pattern of %d bytes against %d: %s (%v), want it matched", len(lit), 10_000+len(lit), got, b.LastError())
	}
	// Just within the bound: a{1000} nine times over, then a few
	// patterns' worth more, to pass the cache's bound.
	big := strings.Repeat("a{1000}", 9)
	if got := outcome(b, unitEvent("country", strings.Repeat("a", 2000), "x", "^"+big+"$")); got != "false" {
		t.Errorf("a pattern of 9,000 instructions: %s (%v), want it compiled and run", got, b.LastError())
	}
	var c regexpCache
	for i := range 3 * maxDynCached / 9000 {
		p := fmt.Sprintf("^%s%d$", big, i)
		re, _, err := c.get(p)
		if err != nil || !re.MatchString(strings.Repeat("a", 9000)+fmt.Sprint(i)) {
			t.Fatalf("pattern %d: %v, want it matched", i, err)
		}
		if c.cost > maxDynCached || len(c.m) > maxDynRegexps {
			t.Fatalf("after pattern %d: the cache holds %d patterns of a cost of %d, want at most %d of %d", i, len(c.m), c.cost, maxDynRegexps, maxDynCached)
		}
		var sum int
		for p := range c.m {
			re, err := syntax.Parse(p, syntax.Perl)
			if err != nil {
				t.Fatal(err)
			}
			cost, _ := progCost(re)
			sum += cost
		}
		if sum != c.cost {
			t.Fatalf("after pattern %d: the cache counts a cost of %d, its patterns have %d", i, c.cost, sum)
		}
	}
}

// TestDynamicPatternVM: a matches whose pattern comes from an event, in an
// expression that runs on expr's VM (a closure of any, all, filter...),
// has the bounds and the cache of the native one: expr's VM compiled the
// pattern at every event, with no bound (4 KB of a{1000}: 0.3 s an
// event).
func TestDynamicPatternVM(t *testing.T) {
	for _, src := range []string{`any([country], {# matches x})`, `not all([country], {not (# matches x)})`} {
		b, err := CompileBoolExpr(src, unitEnv)
		if err != nil {
			t.Fatal(err)
		}
		if b.prog.vm == nil {
			t.Fatalf("%s: compiled natively, want it on expr's VM", src)
		}
		huge := strings.Repeat("a{1000}", maxDynPattern/7)
		if got := outcome(b, unitEvent("country", "FR", "x", huge)); got != "error" || !strings.Contains(b.LastError().Error(), "more than the 10000 a pattern from an event may have") {
			t.Errorf("%s, a pattern of 585,000 instructions: %s (%v), want an error", src, got, b.LastError())
		}
		long := strings.Repeat("a", maxDynPattern+1)
		if got := outcome(b, unitEvent("country", long, "x", long)); got != "error" || !strings.Contains(b.LastError().Error(), "more than the 4096 a pattern from an event may have") {
			t.Errorf("%s, a pattern of %d bytes: %s (%v), want an error", src, len(long), got, b.LastError())
		}
		if got := outcome(b, unitEvent("country", "FR", "x", "[")); got != "error" || !strings.Contains(b.LastError().Error(), "bad regular expression") {
			t.Errorf("%s, a bad pattern: %s (%v), want an error", src, got, b.LastError())
		}
		for _, c := range []struct{ country, pattern, want string }{{"FR", "^F", "true"}, {"US", "^F", "false"}, {"FR", "", "true"}} {
			if got := outcome(b, unitEvent("country", c.country, "x", c.pattern)); got != c.want {
				t.Errorf("%s, %s matches %q: %s (%v), want %s", src, c.country, c.pattern, got, b.LastError(), c.want)
			}
		}
		if got := outcome(b, unitEvent("country", "FR")); got != "false" {
			t.Errorf("%s, a null pattern: %s (%v), want false", src, got, b.LastError())
		}
	}
}

// stageMatch builds a match over the stages of stageEnv: a took prices 1, 2
// and 4 (names a1, a2, a3), "b*" took nothing, c took one event with no
// price.
func stageMatch() matchStages {
	mk := func(name string, price any) *event.Event { return unitEvent("country", name, "amount", price) }
	return matchStages{
		{mk("a1", 1), mk("a2", 2), mk("a3", 4)},
		nil,
		{mk("c1", nil)},
	}
}

var stageEnv = &Env{Schema: unitSchema, Declared: true, Stages: []string{"a", "b*", "c"}}

func TestCondStageRefs(t *testing.T) {
	tests := []struct {
		src  string
		want any // a Go value; error for a run-time error
	}{
		{`a.amount`, 4},
		{`a.country`, "a3"},
		{`c.amount`, nil},
		{`stage("b*").amount`, nil},
		{`count(a)`, 3},
		{`len(a)`, 3},
		{`count(stage("b*"))`, 0},
		{`len(ctx("b*"))`, 0},
		{`sum(a.amount)`, 7},
		{`avg(a.amount)`, 7.0 / 3},
		{`avg(stage("b*").amount)`, 0.0},
		{`min(a.amount)`, 1},
		{`max(a.amount)`, 4},
		{`min(stage("b*").amount)`, nil},
		{`first(a.country)`, "a1"},
		{`last(a.country)`, "a3"},
		{`first(stage("b*").country)`, nil},
		{`sum(c.amount)`, errors.New("null")},
		{`a[0].country`, "a1"},
		{`a[-1].country`, "a3"},
		{`a[3].country`, errors.New("out of range")},
		{`first(a).country`, "a1"},
		{`last(ctx("a")).amount`, 4},
		{`first(stage("b*"))?.country`, nil},
		{`first(stage("b*")).country`, errors.New("no event")},
		{`sum(map(a, .amount * 2))`, 14},
		{`sum(map(stage("a"), #.amount))`, 7},
		{`map(a, .country)[1]`, "a2"},
		{`any(a, .amount > 3)`, true},
		{`all(a, .amount > 3)`, false},
		{`none(a, .amount > 5)`, true},
		{`one(a, .amount > 3)`, true},
		{`count(a, .amount > 1)`, 2},
		{`sum(a, .amount)`, 7},
		{`count(a, .amount > 1) >= 2`, true},
		{`a.amount + c.amount`, errors.New("null")},
		{`count(c, .amount > 1)`, errors.New("null")},
		{`len(stage("a")) + len(c) == 4`, true},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			for _, force := range []bool{false, true} {
				p, err := compileCond(tt.src, stageEnv, true, force)
				if err != nil {
					t.Fatalf("compile (VM %v): %v", force, err)
				}
				if !force && p.vm != nil {
					t.Errorf("not compiled natively: %s", p.fallback)
				}
				got, gotErr := p.evalValue(frame{ev: &noEvent, stages: stageMatch()})
				if want, isErr := tt.want.(error); isErr {
					if gotErr == nil || !strings.Contains(gotErr.Msg, want.Error()) && !force {
						t.Errorf("VM %v: = %v, %v; want an error with %q", force, got, gotErr, want)
					}
					continue
				}
				want, _ := event.FromAny(tt.want)
				if gotErr != nil || !equal(got, want) || got.IsNull() != want.IsNull() {
					t.Errorf("VM %v: = %v, %v; want %v", force, got, gotErr, want)
				}
			}
		})
	}
}

// TestCondStageRefsInRun runs conditions with stage references through the
// nfa, whose Context gives the events of the partial match.
func TestCondStageRefsInRun(t *testing.T) {
	env := &Env{Schema: testSchema, Declared: true, Stages: []string{"start", "middle", "end"}}
	cond := func(src string) nfa.Condition {
		b, err := CompileBoolExpr(src, env)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if !b.Fast() {
			t.Fatalf("%s: not compiled natively: %s", src, b.Fallback())
		}
		return b.Condition()
	}
	t.Run("running sum", func(t *testing.T) {
		// The loop takes a middle event while the running total stays below
		// 5; m3 would bring it to 6 and is skipped.
		p := nfa.Begin("start").Where(cond(`name == "start"`)).
			FollowedBy("middle").OneOrMore().
			Where(cond(`name startsWith "m" && sum(middle.price) + price < 5.0`)).
			FollowedBy("end").Where(cond(`name == "end" && count(middle) >= 1 && middle.price < 3 && start.id == 1`))
		evs := []*event.Event{ev(1, "start", 0, -1), ev(2, "m1", 1, -1), ev(3, "m2", 2, -1), ev(4, "m3", 3, -1), ev(5, "end", 0, -1)}
		got := matchSeqs(t, p, evs)
		// {1, 2, 3, 5} ends with middle.price 2; {1, 2, 5} with 1.
		if want := [][]uint64{{1, 2, 3, 5}, {1, 2, 5}}; !equalSeqs(sortedSeqs(got), want) {
			t.Errorf("matches = %v, want %v", got, want)
		}
	})
	t.Run("ctx alias and quoted names", func(t *testing.T) {
		env := &Env{Schema: testSchema, Declared: true, Stages: []string{"a b", "c"}}
		b, err := CompileBoolExpr(`name == "c" && ctx("a b")[0].price == price && len(stage("a b")) == 1`, env)
		if err != nil {
			t.Fatal(err)
		}
		a, _ := CompileBoolExpr(`name == "a"`, env)
		p := nfa.Begin("a b").Where(a.Condition()).FollowedBy("c").Where(b.Condition())
		got := matchSeqs(t, p, []*event.Event{ev(1, "a", 1, -1), ev(2, "c", 2, -1), ev(3, "c", 1, -1)})
		if want := [][]uint64{{1, 3}}; !equalSeqs(got, want) {
			t.Errorf("matches = %v, want %v", got, want)
		}
	})
}

func sortedSeqs(s [][]uint64) [][]uint64 {
	out := append([][]uint64(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if reflect.DeepEqual(out[j], out[i]) || lessSeq(out[j], out[i]) {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

func lessSeq(a, b []uint64) bool {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return len(a) < len(b)
}

func TestCondEmit(t *testing.T) {
	m := [][]*event.Event(stageMatch())
	tests := []struct {
		src  string
		want event.Value
		fast bool
	}{
		{`a.amount + first(a.amount)`, event.Int(5), true},
		{`count(a) > 2 ? "many" : "few"`, event.String("many"), true},
		{`a.country + "/" + c.country`, event.String("a3/c1"), true},
		{`avg(a.amount)`, event.Float(7.0 / 3), true},
		{`stage("b*").amount`, event.Null, true},
		{`join(map(a, .country), ",")`, event.String("a1,a2,a3"), false},
	}
	for _, tt := range tests {
		v, err := CompileValueExpr(tt.src, stageEnv)
		if err != nil {
			t.Fatalf("%s: %v", tt.src, err)
		}
		if v.Fast() != tt.fast {
			t.Errorf("%s: Fast() = %v (%s), want %v", tt.src, v.Fast(), v.Fallback(), tt.fast)
		}
		got, err := v.Eval(m)
		if err != nil || !got.Equal(tt.want) {
			t.Errorf("%s = %v, %v; want %v", tt.src, got, err, tt.want)
		}
	}
	v, err := CompileValueExpr(`sum(c.amount)`, stageEnv)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Eval(m); err == nil || v.Errors() != 1 || v.LastError() == nil {
		t.Errorf("sum over a null: err %v, Errors() %d", err, v.Errors())
	}
	var ee *Error
	if _, err := v.Eval(m); !errors.As(err, &ee) || ee.Offset != 0 {
		t.Errorf("run-time error %#v, want an *Error at offset 0", err)
	}
	// A builtin on expr's VM that meets a null (join of a list that holds
	// one) says so with the expression, not in Go's words ("interface
	// conversion: interface {} is nil, not string").
	v, err = CompileValueExpr(`join(map(c, .x), ",")`, stageEnv)
	if err != nil {
		t.Fatal(err)
	}
	const want = `a value is null where a string is needed (in join(map(c, .x), ","))`
	if _, err := v.Eval(m); !errors.As(err, &ee) || ee.Msg != want {
		t.Errorf("join over a null: %v, want the message %q", err, want)
	}
	// A float that JSON cannot hold (±Inf, NaN) is an error of the
	// field, counted, not a value its alert would write as null.
	for src, shown := range map[string]string{
		`a.amount / 0.0`:                           "+Inf",
		`-1.0 * a.amount / 0`:                      "-Inf",
		`(a.amount - a.amount) / 0.0`:              "NaN",
		`first(a.amount) / float(len(c) - len(c))`: "+Inf",
	} {
		v, err := CompileValueExpr(src, stageEnv)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		want := "the value is " + shown + ", which an alert cannot hold (a division by zero?)"
		if got, err := v.Eval(m); !errors.As(err, &ee) || ee.Msg != want || !got.IsNull() || v.Errors() != 1 {
			t.Errorf("%s = %v, %v (%d errors); want null and the error %q, counted", src, got, err, v.Errors(), want)
		}
	}
}

func TestCondErrors(t *testing.T) {
	tests := []struct {
		src      string
		env      *Env
		emit     bool
		off, end int
		msg      string
	}{
		{src: `amout > 5000`, off: 0, end: 5, msg: "unknown field amout (did you mean amount?)"},
		{src: `amount > 5 && countyr == "FR"`, off: 14, end: 21, msg: "did you mean country?"},
		{src: `country > 5000.0`, off: 8, end: 9, msg: "cannot compare string with float"},
		{src: `country == 1`, off: 8, end: 10, msg: "cannot compare string with int"},
		{src: `amount + "a" > 1`, off: 7, end: 8, msg: "cannot apply + to float and string"},
		{src: `amount % 2 == 1`, off: 7, end: 8, msg: "% needs integers"},
		{src: `!country`, off: 0, msg: "! needs a bool"},
		{src: `amount`, off: 0, end: 6, msg: "a condition must be a bool, not a float"},
		{src: `now() > 5`, off: 0, end: 3, msg: "now() is not allowed: it reads the wall clock and breaks replay"},
		{src: `date("2024-01-01") != nil`, off: 0, msg: "date() is not allowed"},
		{src: `duration("1h") != nil`, off: 0, msg: "duration() is not allowed"},
		{src: `"é€" + country == amout`, off: 21, end: 26, msg: "unknown field amout"},
		{src: `amount >`, off: 7, msg: "unexpected token"},
		{src: `5 % 0 == 1`, off: 2, msg: "integer divide by zero"},
		{src: `x in "abc"`, off: 5, msg: "in needs a list on its right, got string"},
		{src: `$env.amount > 5`, off: 0, end: 4, msg: "$env (expr's environment) is not read here: a condition reads a field by its name, an identifier: write amount"},
		{src: `$env[country] == "FR"`, off: 0, end: 4, msg: "$env (expr's environment) is not read here: a condition reads a field by its name, an identifier"},
		{src: `$env["merchant-country"] == "FR"`, off: 0, end: 4, msg: "$env (expr's environment) is not read here: a condition reads a field by its name, an identifier, so a field named merchant-country is renamed upstream (to merchant_country)"},
		{src: `country matches "["`, off: 16, msg: "bad regular expression"},
		{src: `lenn(country) > 1`, off: 0, end: 4, msg: "unknown function lenn (did you mean len?)"},
		{src: `amount(1) > 1`, off: 0, msg: "amount is a field, not a function"},
		{src: `len(stage("d")) > 0`, env: stageEnv, off: 10, end: 13, msg: `unknown stage "d"`},
		{src: `len(stage(country)) > 0`, env: stageEnv, off: 10, msg: "must be a string literal"},
		{src: `a > 1`, env: stageEnv, off: 0, msg: "a is the list of events of a stage"},
		{src: `a.amout > 1`, env: stageEnv, off: 2, msg: "unknown field amout (did you mean amount?)"},
		{src: `sum(a) > 1`, env: stageEnv, off: 4, msg: "sum needs values, not events: write sum(a.field)"},
		{src: `country == "x"`, env: &Env{Schema: unitSchema, Declared: true, Stages: []string{"country"}}, off: 0, end: 7,
			msg: "country is both a field and a stage: rename one"},
		{src: `amount + a.amount`, env: stageEnv, emit: true, off: 0, end: 6,
			msg: "amount is a field of one event, but an emit expression reads the whole match: read it from a stage (a.amount)"},
		{src: `map(a, .amount)`, env: stageEnv, emit: true, off: 0, msg: "is a list, not a single value"},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			env := tt.env
			if env == nil {
				env = unitEnv
			}
			var err error
			if tt.emit {
				_, err = CompileValueExpr(tt.src, env)
			} else {
				_, err = CompileBoolExpr(tt.src, env)
			}
			var ee *Error
			if !errors.As(err, &ee) {
				t.Fatalf("error %v (%T), want an *Error", err, err)
			}
			if ee.Offset != tt.off || tt.end != 0 && ee.End != tt.end || !strings.Contains(ee.Msg, tt.msg) {
				t.Errorf("error at %d..%d %q, want at %d..%d %q", ee.Offset, ee.End, ee.Msg, tt.off, tt.end, tt.msg)
			}
		})
	}
}

// TestCondUndeclared compiles without a declared schema: no type checks,
// so mismatches surface at run time.
func TestCondUndeclared(t *testing.T) {
	env := &Env{Schema: unitSchema}
	b, err := CompileBoolExpr(`country > 5000`, env)
	if err != nil {
		t.Fatal(err)
	}
	if got := outcome(b, unitEvent("country", "FR")); got != "error" {
		t.Errorf("country > 5000 on a string: %s, want error", got)
	}
	if got := outcome(b, unitEvent("country", 6000)); got != "true" {
		t.Errorf("country > 5000 on 6000: %s, want true", got)
	}
	if _, err := CompileBoolExpr(`amout > 1`, env); err == nil || !strings.Contains(err.Error(), "unknown name amout (did you mean amount?)") {
		t.Errorf("unknown name: %v", err)
	}
	// A field's values are scalars: reading a field of one reads nothing,
	// ever (most often a misspelt stage), and is refused (it failed at
	// run time on every event).
	staged := &Env{Schema: unitSchema, Stages: []string{"large", "other"}}
	for src, want := range map[string]string{
		`country != x.country`: "x is a field, whose values have no fields: x.country reads nothing (the stages: large, other); events are flat JSON objects (a nested object is a dead letter): a nested field is a field of its own, flattened upstream (x_country), and a lookup's fields are read so once the ruleset declares lookup x { ... }",
		`x.a > 1`:              "x is a field, whose values have no fields: x.a reads nothing (the stages: large, other); events are flat JSON objects (a nested object is a dead letter): a nested field is a field of its own, flattened upstream (x_a), and a lookup's fields are read so once the ruleset declares lookup x { ... }",
	} {
		if _, err := CompileBoolExpr(src, staged); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", src, err, want)
		}
	}
	if _, err := CompileBoolExpr(`country != large.country`, staged); err != nil {
		t.Errorf("a stage's field: %v", err)
	}
}

// TestCondFallback lists the constructs that run on expr's VM, and checks
// they still work.
func TestCondFallback(t *testing.T) {
	tests := []struct {
		src, why string
		ev       *event.Event
		want     string
	}{
		{`split(country, "-")[0] == "FR"`, "builtin split", unitEvent("country", "FR-75"), "true"},
		{`let y = n * 2; y > 5`, "let", unitEvent("n", 3), "true"},
		{`country[0:1] == "F"`, "slicing", unitEvent("country", "FR"), "true"},
		{`{"a": n}.a == 3`, "a map literal", unitEvent("n", 3), "true"},
		{`n in 1..5`, "range ..", unitEvent("n", 3), "true"},
		{`any([n, 5], # > 4)`, "any over a list", unitEvent("n", 3), "true"},
		{`filter([1, n], # > 2)[0] == 3`, "builtin filter", unitEvent("n", 3), "true"},
		{`reduce([1, 2, n], #acc + #) == 6`, "builtin reduce", unitEvent("n", 3), "true"},
		{`indexOf(country, "R") == 1`, "builtin indexOf", unitEvent("country", "FR"), "true"},
		{`"a" in x`, "unknown type", unitEvent(), "false"},
		{`amount > 5000 && len(split(country, "-")) == 2`, "builtin split", unitEvent("amount", 6000, "country", "a-b"), "true"},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			b, err := CompileBoolExpr(tt.src, unitEnv)
			if err != nil {
				t.Fatal(err)
			}
			if b.Fast() || !strings.Contains(b.Fallback(), tt.why) {
				t.Errorf("Fast() = %v, Fallback() = %q, want a fallback for %q", b.Fast(), b.Fallback(), tt.why)
			}
			if got := outcome(b, tt.ev); got != tt.want {
				t.Errorf("= %s, want %s (%v)", got, tt.want, b.LastError())
			}
		})
	}
	// Stage references are rewritten for the VM.
	b, err := CompileBoolExpr(`len(split(a.country, "3")) == 2 && sum(a.amount) == 7 && count(a) == 3 && avg(map(a, .amount)) > 2`, stageEnv)
	if err != nil {
		t.Fatal(err)
	}
	if b.Fast() {
		t.Fatal("compiled natively")
	}
	if ok, err := b.prog.evalBool(frame{ev: &noEvent, stages: stageMatch()}); !ok || err != nil {
		t.Errorf("stage references on the VM: %v, %v", ok, err)
	}
}

// TestCondKnownDivergences pins the few places where the compiled
// closures and the reference (expr's optimised VM program, fields typed
// any) disagree, both because of expr: the closures follow expr's
// documented semantics (== and in compare values) where its optimiser or
// checker deviate. If an expr upgrade changes these, revisit them.
func TestCondKnownDivergences(t *testing.T) {
	tests := []struct {
		src           string
		ev            *event.Event
		ours, theirs  string
		theirsErrText string
	}{
		// expr turns a list of string literals into a Go map: a null needle
		// is looked up as "", and a needle that is not a string fails.
		{`country in ["", "FR"]`, unitEvent(), "false", "true", ""},
		{`x in ["a", "b"]`, unitEvent("x", 1), "false", "error", "MapIndex"},
		// The same with ints, when expr's checker believes the needle is an
		// int (see below): null is looked up as 0.
		{`(flag ? 1 : first([x])) in [0, 2]`, unitEvent("flag", false), "false", "true", ""},
		// expr's checker types c ? 1 : f(x) as an int when f returns an
		// interface, and compiles == for two ints, which fails when f(x) is
		// a float.
		{`(flag ? 1 : mean([x, 2.5])) == 2`, unitEvent("flag", false, "x", 1.5), "true", "error", "interface conversion"},
		// The same for min, max and mean, typed by their first argument.
		{`mean(len(country), 3) == 2`, unitEvent("country", "F"), "true", "error", "interface conversion"},
		// count without a predicate: ours counts the elements, expr the
		// true elements.
		{`count([true, false, false]) == 3`, unitEvent(), "true", "false", ""},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			b, err := CompileBoolExpr(tt.src, unitEnv)
			if err != nil {
				t.Fatal(err)
			}
			if got := outcome(b, tt.ev); got != tt.ours {
				t.Errorf("compiled: %s, want %s", got, tt.ours)
			}
			ref, err := CompileCondition(tt.src, unitSchema, nil)
			if err != nil {
				t.Fatal(err)
			}
			rc := ref.(*Cond)
			before := rc.Errors()
			got := "false"
			if rc.Eval(tt.ev, nil) {
				got = "true"
			}
			if rc.Errors() != before {
				got = "error"
				if !strings.Contains(rc.LastError().Error(), tt.theirsErrText) {
					t.Errorf("reference error %v, want one with %q", rc.LastError(), tt.theirsErrText)
				}
			}
			if got != tt.theirs {
				t.Errorf("reference: %s, want %s", got, tt.theirs)
			}
		})
	}
}

func TestCondErrorsCounted(t *testing.T) {
	b, err := CompileBoolExpr(`amount > 5000`, unitEnv)
	if err != nil {
		t.Fatal(err)
	}
	e := unitEvent()
	for i := 1; i <= 3; i++ {
		if b.Eval(e, nil) {
			t.Fatal("Eval = true")
		}
		if b.Errors() != uint64(i) {
			t.Fatalf("after %d failures Errors() = %d", i, b.Errors())
		}
	}
	var ee *Error
	if !errors.As(b.LastError(), &ee) || ee.Offset != 0 || ee.End != 6 || ee.Msg != "amount is null (in amount > 5000)" {
		t.Errorf("LastError() = %#v", b.LastError())
	}
	if !b.Eval(unitEvent("amount", 6000.0), nil) || b.Errors() != 3 {
		t.Errorf("a good event: Errors() = %d", b.Errors())
	}
	// A nil event has every field null.
	if b.Eval(nil, nil) || b.Errors() != 4 {
		t.Errorf("nil event: Errors() = %d", b.Errors())
	}
}

// TestCondNoAllocs checks that natively compiled conditions do not
// allocate, also when they fail with a fixed message.
func TestCondNoAllocs(t *testing.T) {
	for _, tt := range []struct {
		src string
		ev  *event.Event
	}{
		{`amount > 5000`, unitEvent("amount", 6000.0)},
		{`amount > 5000`, unitEvent()}, // an error
		// (lower allocates only when the string has upper-case letters.)
		{`amount > 5000 && country != "US" && (lower(country) == "fr" || n * 2 < 10) && flag`, unitEvent("amount", 6000.0, "country", "fr", "n", 1, "flag", true)},
		{`amount > 5000 && country != "US" && (lower(country) == "de" || n * 2 < 10) && flag`, unitEvent("amount", 6000.0, "country", "fr", "n", 1, "flag", true)},
		{`country in ["FR", "DE", "IT"] && x ?? true`, unitEvent("country", "IT")},
	} {
		b, err := CompileBoolExpr(tt.src, unitEnv)
		if err != nil {
			t.Fatal(err)
		}
		if n := testing.AllocsPerRun(100, func() { b.Eval(tt.ev, nil) }); n != 0 {
			t.Errorf("%s: %v allocations per evaluation", tt.src, n)
		}
	}
	s, err := CompileBoolExpr(`sum(a.amount) > 5 && any(a, .amount > 3) && count(a) == 3 && a[-1].amount == 4`, stageEnv)
	if err != nil {
		t.Fatal(err)
	}
	fr := frame{ev: unitEvent(), stages: stageMatch()}
	if n := testing.AllocsPerRun(100, func() {
		if ok, err := s.prog.evalBool(fr); !ok || err != nil {
			t.Fatal(ok, err)
		}
	}); n != 0 {
		t.Errorf("stage references: %v allocations per evaluation", n)
	}
}

// TestBoolExprConcurrent evaluates a native and a VM condition from several
// goroutines (run with -race).
func TestBoolExprConcurrent(t *testing.T) {
	fast, err := CompileBoolExpr(`amount > 1.0 && country == "FR"`, unitEnv)
	if err != nil {
		t.Fatal(err)
	}
	slow, err := CompileBoolExpr(`amount > 1.0 && split(country, "R")[0] == "F"`, unitEnv)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				amount := float64((g + i) % 3)
				e := unitEvent("amount", amount, "country", "FR")
				for _, b := range []*BoolExpr{fast, slow} {
					if got, want := b.Eval(e, nil), amount > 1; got != want {
						t.Errorf("%s on %v = %v, want %v", b.Source(), amount, got, want)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	if fast.Errors()+slow.Errors() != 0 {
		t.Errorf("errors: %v, %v", fast.LastError(), slow.LastError())
	}
}

func TestExprNames(t *testing.T) {
	ids, err := Identifiers(`let y = amount; y > 5 && len(ctx("a")) == 2 && sum(map(xs, .price)) < amount && count(stage("b*")) > 0 && avg(b.f) > 1 && now() > 0`)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"amount", "b", "xs"}; !reflect.DeepEqual(ids, want) {
		t.Errorf("Identifiers = %q, want %q", ids, want)
	}
	members, err := MemberNames(`a.amount > 1 && sum(map(xs, .price)) < 3 && first(b)?.country == "x" && x[0].n > 1`)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"amount", "country", "n", "price"}; !reflect.DeepEqual(members, want) {
		t.Errorf("MemberNames = %q, want %q", members, want)
	}
	var ee *Error
	if _, err := Identifiers(`"é" + amount >`); !errors.As(err, &ee) || ee.Offset != 14 {
		t.Errorf("parse error %#v, want an *Error at byte 14 (the end)", err)
	}
}

// FuzzCondCompile compiles arbitrary expressions as conditions, natively
// and on expr's VM (through the rewrite of stage references, as
// TestCondStageDifferential does), and evaluates both over events and
// partial matches: what both accept must give the same outcome (false,
// true or a run-time error), apart from expr's mistyped operands
// (diffMistypedMsg); only the compiler may refuse more (it types stage
// references, the VM does not). A compile error must be an *Error at an
// offset in the source with a one-line message. Nothing may panic.
func FuzzCondCompile(f *testing.F) {
	for _, src := range []string{
		`amount > 5000`, `country in ["FR", nil] && !flag`, `sum(a.amount) > 1 ? a[0].country : "x"`,
		`any(a, .amount > 3) || count(c, .n > 1) >= 2`, `x ?? n % 2 == 1`, `lower(country) matches "^f"`,
		`first(stage("b*"))?.amount == nil`, `max(a.amount) + min(1, 2.5) / 0 > 1`, `split(country, "")[1] == "R"`,
		`let y = a.amount; y > 1`, `map(a, .country)[-1] endsWith "3"`, `mean(map(ctx("c"), .amount))`,
	} {
		f.Add(src)
	}
	events := []*event.Event{unitEvent(), unitEvent("amount", 6000.0, "country", "FR", "n", 3, "flag", true, "x", "s"), unitEvent("x", 1.5, "n", -1)}
	matches := []stageSource{stageMatch(), matchStages{nil, nil, nil}}
	checkErr := func(t *testing.T, src string, err error) {
		t.Helper()
		var ce *Error
		if !errors.As(err, &ce) {
			t.Fatalf("%q: compile error %T (%v), want an *Error", src, err, err)
		}
		if ce.Offset < 0 || ce.Offset > len(src) || strings.Contains(ce.Msg, "\n") {
			t.Fatalf("%q: compile error at offset %d (source of %d bytes), message %q", src, ce.Offset, len(src), ce.Msg)
		}
	}
	f.Fuzz(func(t *testing.T, src string) {
		native, errN := compileCond(src, stageEnv, false, false)
		slow, errS := compileCond(src, stageEnv, false, true)
		if errN != nil && errS == nil {
			// The compiler types stage references and the fields of stage
			// events from the schema; the VM sees them as any and finds
			// the fault only when it evaluates it (never, over an empty
			// stage). Refusing more at compile time is by design; the
			// other way round is a bug.
			checkErr(t, src, errN)
			return
		}
		if (errN == nil) != (errS == nil) {
			t.Fatalf("%q: compile error %v, on the VM %v", src, errN, errS)
		}
		if errN != nil {
			checkErr(t, src, errN)
			return
		}
		for _, e := range events {
			for _, m := range matches {
				fr := frame{ev: e, stages: m}
				a, errA := native.evalBool(fr)
				b, errB := slow.evalBool(fr)
				if errB != nil && errA == nil && diffMistypedMsg(errB.Msg) {
					continue
				}
				if (errA != nil) != (errB != nil) || errA == nil && a != b {
					t.Fatalf("%q on %v, stages %v: compiled %v (%v; fast %v), VM %v (%v)",
						src, e.Fields, m, a, errA, native.vm == nil, b, errB)
				}
			}
		}
		if v, err := CompileValueExpr(src, stageEnv); err == nil {
			v.Eval(stageMatch())
			v.Eval(nil)
		} else {
			checkErr(t, src, err)
		}
	})
}

func TestLookupFields(t *testing.T) {
	schema := event.MustSchema(
		event.Field{Name: "country", Kind: event.KindString},
		event.Field{Name: "customer.home_country", Kind: event.KindString},
		event.Field{Name: "customer.tier", Kind: event.KindInt},
	)
	env := &Env{Schema: schema, Declared: true, Stages: []string{"first", "second"}, Lookups: []string{"customer"}}
	ev := &event.Event{Fields: []event.Value{event.String("FR"), event.String("US"), event.Int(2)}}
	for _, c := range []struct {
		src  string
		want bool
	}{
		{`country != customer.home_country`, true},
		{`customer.home_country == "US" && customer.tier > 1`, true},
		{`customer.tier > 2`, false},
		{`upper(customer.home_country) == "US" && split(country, "")[0] == "F"`, true}, // the VM too
	} {
		b, err := CompileBoolExpr(c.src, env)
		if err != nil {
			t.Fatalf("%s: %v", c.src, err)
		}
		if got := b.Eval(ev, nil); got != c.want {
			t.Errorf("%s = %v, want %v", c.src, got, c.want)
		}
	}
	v, err := CompileValueExpr(`first.customer.home_country + "/" + string(second.customer.tier)`, env)
	if err != nil {
		t.Fatal(err)
	}
	got, err := v.Eval([][]*event.Event{{ev}, {ev}})
	if err != nil || !got.Equal(event.String("US/2")) {
		t.Errorf("emit = %v, %v; want US/2", got, err)
	}
	_, err = CompileBoolExpr(`customer.home_contry == "x"`, env)
	var ee *Error
	if !errors.As(err, &ee) || ee.Offset != 0 || !strings.Contains(ee.Msg, "customer.home_country") {
		t.Errorf("unknown lookup field: %v, want an error at 0 suggesting customer.home_country", err)
	}
	ids, err := Identifiers(`customer.home_country != country && first.customer.tier > 1`, "customer")
	if err != nil || !slices.Equal(ids, []string{"country", "customer.home_country", "first"}) {
		t.Errorf("Identifiers = %q, %v", ids, err)
	}
	members, err := MemberNames(`first.customer.tier > 1 && any(first, .customer.home_country == "x")`, "customer")
	if err != nil || !slices.Equal(members, []string{"customer.home_country", "customer.tier"}) {
		t.Errorf("MemberNames = %q, %v", members, err)
	}
}

// TestSuggestShortForms: a name too far from any candidate for a slip is
// suggested the one candidate it is a short form of (its letters in order,
// the first the same); none when several fit, unless it is the first word
// of some and one of those is the shortest, or when it is too short.
func TestSuggestShortForms(t *testing.T) {
	for _, c := range []struct {
		name  string
		cands []string
		want  string
	}{
		{"rnd", []string{"round", "abs", "len"}, " (did you mean round?)"},
		{"amt", []string{"amount", "ts"}, " (did you mean amount?)"},
		{"Amt", []string{"amount", "ts"}, " (did you mean amount?)"},
		{"cnt", []string{"count", "country"}, ""},                                           // two fit
		{"card", []string{"card_country", "card_id", "amount"}, " (did you mean card_id?)"}, // the first word of two: the shorter
		{"card", []string{"card_id", "card_no"}, ""},                                        // as short as each other
		{"mt", []string{"merchant"}, ""},                                                    // too short
		{"rnd", []string{"random_number_generator_x"}, ""},                                  // too long a name for it
		{"dnr", []string{"round"}, ""},                                                      // not its first letter
		{"amout", []string{"amount"}, " (did you mean amount?)"},                            // a slip still wins
		{"rulse", []string{"rule", "rules"}, " (did you mean rules?)"},                      // at a tie, a swap: as long
		{"rulse", []string{"rules", "rule"}, " (did you mean rules?)"},
		{"rule", []string{"rules", "rue"}, " (did you mean rules?)"}, // no candidate as long: the first
	} {
		if got := suggest(c.name, c.cands); got != c.want {
			t.Errorf("suggest(%q, %q) = %q, want %q", c.name, c.cands, got, c.want)
		}
	}
}
