// Package rulestest runs the tests written inside ruleset files (`test`
// blocks; see docs/rules.md): each test's events go through the keyed CEP
// operator of package cep, one operator per rule, as a backtest does, and
// the matches that come out are compared with the test's expectation.
//
// # Semantics
//
// A test is a bounded input: every event is given to the operator in file
// order with its event time, then one final watermark of [event.MaxTime]
// releases everything (docs/decisions.md, "Backtest semantics"). Each
// key's events therefore reach the NFA in timestamp order, ties in file
// order. Matches are compared as a multiset of (rule, timed out or not,
// key values, events of each stage); their order does not matter. A rule's
// timed-out partial matches are compared when it has a timeout block
// (they are its alerts then), and it is run without them otherwise.
//
// # Imports
//
// Package rulestest imports event, nfa, rules and cep.
package rulestest

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/cepheus-cep/cepheus/cep"
	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/nfa"
	"github.com/cepheus-cep/cepheus/rules"
)

// Result is the outcome of one test.
type Result struct {
	Test *rules.Test
	// Err is set when a rule could not be run to the end (for example a
	// skip strategy with orFail that missed); the test then fails.
	Err error
	// Got are the matches produced, Want those expected, each in the
	// notation of an expect line, sorted.
	Got, Want []string
	// Missing are expected matches not produced; Unexpected produced
	// matches not expected (with repeats, as multisets).
	Missing, Unexpected []string
	// CondErrors says, per rule whose conditions failed at run time in
	// the test (each failure counted as false), how many and the last.
	CondErrors []string
	// Events are the events the missing and unexpected matches hold, in
	// number order, each as "N  file:line:col: text": what a failure is
	// about, without looking its numbers up in the file.
	Events []string
	// Why says, for each missing match in order, why it was not produced:
	// a produced match of the same events whose emitted values differ, or
	// what [rules.Rule.Explain] finds (the first fault of its events
	// against the rule), or that it finds none.
	Why []string
}

// Pass reports whether the test passed.
func (r *Result) Pass() bool {
	return r.Err == nil && len(r.Missing) == 0 && len(r.Unexpected) == 0
}

// Diff describes a failure: the run error, or the missing and unexpected
// matches and everything that was produced. It is "" for a pass.
func (r *Result) Diff() string {
	if r.Pass() {
		return ""
	}
	var b strings.Builder
	if r.Err != nil {
		fmt.Fprintf(&b, "run failed: %v\n", r.Err)
	}
	list := func(title string, ms []string) {
		if len(ms) == 0 {
			return
		}
		b.WriteString(title + ":\n")
		for _, m := range ms {
			b.WriteString("  " + m + "\n")
		}
	}
	if len(r.Missing) > 0 {
		b.WriteString("missing (expected, not produced):\n")
		for i, m := range r.Missing {
			b.WriteString("  " + m + "\n")
			if i < len(r.Why) {
				b.WriteString("    why: " + r.Why[i] + "\n")
			}
		}
	}
	list("unexpected (produced, not expected)", r.Unexpected)
	if len(r.Got) == 0 {
		b.WriteString("produced: none\n")
	} else {
		list("produced", r.Got)
	}
	list("events of the missing and unexpected matches", r.Events)
	list("condition errors (each counted as false)", r.CondErrors)
	return b.String()
}

// RunAll runs every test of rs, in file order.
func RunAll(rs *rules.Ruleset) []*Result {
	out := make([]*Result, len(rs.Tests))
	for i, t := range rs.Tests {
		out[i] = Run(t)
	}
	return out
}

// Run runs one test.
func Run(t *rules.Test) *Result {
	r := &Result{Test: t}
	rec := newRecord()
	expected := map[string]*rules.ExpectedMatch{}
	for i := range t.Expect {
		x := &t.Expect[i]
		s := expectedString(x)
		expected[s] = x
		rec.bare[s], rec.emitted[s] = bareString(x), x.Emits
		r.Want = append(r.Want, s)
		for _, st := range x.Stages {
			rec.seqs[s] = append(rec.seqs[s], st...)
		}
	}
	// The emit fields a test compares, by rule and kind (all expected
	// matches of a rule and kind give the same ones).
	emits := map[ruleKind][]string{}
	for _, x := range t.Expect {
		rk := ruleKind{x.Rule, x.TimedOut}
		if _, ok := emits[rk]; !ok {
			emits[rk] = []string{}
			for _, e := range x.Emits {
				emits[rk] = append(emits[rk], e.Name)
			}
		}
	}
	if err := cep.FillAggregates(t.Aggregates, t.Events); err != nil {
		r.Err = err
		return r
	}
	for _, rule := range t.Rules {
		before := rule.ConditionErrors()
		got, err := runRule(rule, t.Events, emits[ruleKind{rule, false}], emits[ruleKind{rule, true}], rec)
		if n := rule.ConditionErrors() - before; n > 0 {
			r.CondErrors = append(r.CondErrors, fmt.Sprintf("rule %s: %d, the last: %s", rule.Name, n, rule.LastConditionError()))
		}
		r.Got = append(r.Got, got...)
		if err != nil && r.Err == nil {
			r.Err = fmt.Errorf("rule %s: %w", rule.Name, err)
		}
	}
	slices.Sort(r.Got)
	slices.Sort(r.Want)
	r.Missing = surplus(r.Want, r.Got)
	r.Unexpected = surplus(r.Got, r.Want)
	for _, m := range r.Missing {
		w, named := why(t, expected[m], rec, r)
		r.Why = append(r.Why, w)
		for _, ev := range named {
			rec.seqs[m] = append(rec.seqs[m], int(ev.Seq))
		}
	}
	r.Events = eventLines(t, rec.seqs, r.Missing, r.Unexpected)
	return r
}

// why says why the expected match x was not produced: a produced match of
// its events (one of unexpected) whose emitted values differ, else what
// its rule's Explain finds over the test's events of its key, and the
// events outside the match the reason names.
func why(t *rules.Test, x *rules.ExpectedMatch, rec *record, r *Result) (string, []*event.Event) {
	if x == nil {
		return "(no expected match of this text: an internal error)", nil
	}
	s := expectedString(x)
	if got := count(r.Got, s); got > 0 {
		return fmt.Sprintf("it is expected %s and produced %s", times(count(r.Want, s)), times(got)), nil
	}
	for _, u := range r.Unexpected {
		if rec.bare[u] == rec.bare[expectedString(x)] {
			return "its events are a match, produced with other emitted values: " + emitDiff(x.Emits, rec.emitted[u]), nil
		}
	}
	stages := make([][]*event.Event, len(x.Stages))
	var first *event.Event
	for i, nums := range x.Stages {
		for _, n := range nums {
			if n < 1 || n > len(t.Events) {
				return fmt.Sprintf("event %d is not an event of the test", n), nil
			}
			ev := t.Events[n-1]
			stages[i] = append(stages[i], ev)
			if first == nil {
				first = ev
			}
		}
	}
	if first == nil {
		return "it holds no event", nil
	}
	if want, got := valuesText(x.Key), valuesText(x.Rule.KeyValues(first)); want != got {
		return fmt.Sprintf("its events are of key %s (event %d), not %s", got, first.Seq, want), nil
	}
	// The key's events in the order the operator gives them to the rule:
	// by time, ties in the test's order.
	key := x.Rule.Key(first)
	var stream []*event.Event
	for _, ev := range t.Events {
		if x.Rule.Key(ev) == key {
			stream = append(stream, ev)
		}
	}
	slices.SortStableFunc(stream, func(a, b *event.Event) int { return cmp.Compare(a.Time, b.Time) })
	if s, named := x.Rule.Explain(stages, stream, x.TimedOut); s != "" {
		return s, named
	}
	s = "no reason found by the checks test makes"
	if r.Err != nil {
		return s + "; the run failed (above): what the rules would have produced after the failure is missing", nil
	}
	un := x.Rule.Unchecked(x.TimedOut)
	// A skip strategy drops the partial matches that overlap a match:
	// named as the likely cause when a match produced of the rule and key
	// shares an event, else among what is not checked.
	skip := ""
	if d := x.Rule.SkipStrategy(); d != "" {
		un = append(un, "the after-match skip (skip "+d+")")
		var nums []int
		for _, st := range x.Stages {
			nums = append(nums, st...)
		}
		for _, g := range r.Got {
			if rec.rule[g] == x.Rule && rec.key[g] == valuesText(x.Key) && slices.ContainsFunc(rec.seqs[g], func(n int) bool { return slices.Contains(nums, n) }) {
				un = un[:len(un)-1]
				skip = "; the after-match skip (skip " + d + ") may have dropped it: the match produced " + g + " shares its events"
				break
			}
		}
	}
	if len(un) > 0 {
		s += "; not checked: " + strings.Join(un, ", ")
	}
	return s + skip, nil
}

// count is the number of times s is in l.
func count(l []string, s string) int {
	n := 0
	for _, e := range l {
		if e == s {
			n++
		}
	}
	return n
}

// times writes a number of times: once, twice, 3 times.
func times(n int) string {
	switch n {
	case 1:
		return "once"
	case 2:
		return "twice"
	}
	return fmt.Sprintf("%d times", n)
}

// emitDiff names the emitted values of got that differ from want's, by
// their printed form: "total 6020, not 6021".
func emitDiff(want, got []rules.NamedValue) string {
	var out []string
	for _, w := range want {
		for _, g := range got {
			if g.Name == w.Name && g.Value.String() != w.Value.String() {
				out = append(out, g.Name+" "+g.Value.String()+", not "+w.Value.String())
			}
		}
	}
	return strings.Join(out, "; ")
}

// record is what a test's run keeps of each match, by its string: the
// numbers of its events (to list the events of the missing and unexpected
// ones), its string without emitted values, and its emitted values.
type record struct {
	seqs    map[string][]int
	bare    map[string]string
	emitted map[string][]rules.NamedValue
	// rule and key are a produced match's rule and key values (as
	// valuesText writes them).
	rule map[string]*rules.Rule
	key  map[string]string
}

func newRecord() *record {
	return &record{seqs: map[string][]int{}, bare: map[string]string{}, emitted: map[string][]rules.NamedValue{},
		rule: map[string]*rules.Rule{}, key: map[string]string{}}
}

// valuesText is vs as an expect line writes them.
func valuesText(vs []event.Value) string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.String()
	}
	return strings.Join(out, ", ")
}

// bareString is x's string without its emitted values.
func bareString(x *rules.ExpectedMatch) string {
	y := *x
	y.Emits = nil
	return y.String()
}

// eventLines returns the events that the matches ms hold (their numbers
// in seqs), in number order, each with its place in the file and its
// text, and the values at it of the velocity aggregates the test's rules
// read (not every aggregate of the ruleset).
func eventLines(t *rules.Test, seqs map[string][]int, ms ...[]string) []string {
	var read []*rules.Aggregate
	for _, a := range t.Aggregates {
		if slices.ContainsFunc(t.Rules, func(r *rules.Rule) bool { return slices.Contains(r.Aggregates, a.Name) }) {
			read = append(read, a)
		}
	}
	var nums []int
	for _, list := range ms {
		for _, m := range list {
			nums = append(nums, seqs[m]...)
		}
	}
	slices.Sort(nums)
	var out []string
	for _, n := range slices.Compact(nums) {
		if n < 1 || n > len(t.Sources) {
			continue
		}
		src := t.Sources[n-1]
		line := fmt.Sprintf("%d  %s: %s", n, src.Pos, src.Text)
		// The event's velocity aggregates, which its line does not hold
		// (the test computes them), as a condition reads them: the
		// current event counted in.
		if ev := t.Events[n-1]; len(read) > 0 {
			aggs := make([]string, len(read))
			for i, a := range read {
				aggs[i] = a.Name + " " + ev.Field(a.Slot).String()
			}
			line += "  (" + strings.Join(aggs, ", ") + ")"
		}
		out = append(out, line)
	}
	return out
}

// ruleKind is a rule and a kind of its output: matches, or timed-out
// partial matches.
type ruleKind struct {
	rule     *rules.Rule
	timedOut bool
}

// runRule runs the events through one operator for rule and returns its
// matches, with the values of the emit fields named in emits, and its
// timed-out partial matches (a rule with a timeout block), with those of
// its timeout block named in timeoutEmits. It records each match in rec.
func runRule(rule *rules.Rule, events []*event.Event, emits, timeoutEmits []string, rec *record) ([]string, error) {
	if rule.NFA == nil {
		return nil, fmt.Errorf("not compiled")
	}
	// A rule with a timeout block steps its deadlines, as the engine's
	// runs do, so that what times out (and when) is what a backtest gives.
	op, err := cep.NewOperator(cep.OperatorConfig{NFA: rule.NFA, Key: rule.Key, StepDeadlines: rule.Timeout != nil})
	if err != nil {
		return nil, err
	}
	var out cep.Output
	var got []string
	collect := func() {
		for _, it := range out.Items {
			var s, bare string
			var values []rules.NamedValue
			switch {
			case it.Kind == cep.ItemMatch && rule.Timeout != nil && rule.Timeout.Only:
				continue // no alert: the rule's timeout block says only
			case it.Kind == cep.ItemMatch:
				s, values = matchString(rule, false, it.Match, rule.Emits, emits)
				bare, _ = matchString(rule, false, it.Match, nil, nil)
			case it.Kind == cep.ItemTimeout && rule.Timeout != nil:
				s, values = matchString(rule, true, it.Match, rule.Timeout.Emits, timeoutEmits)
				bare, _ = matchString(rule, true, it.Match, nil, nil)
			default:
				continue
			}
			got = append(got, s)
			if _, ok := rec.rule[s]; !ok {
				rec.rule[s] = rule
				for _, evs := range it.Match.Events {
					if len(evs) > 0 {
						rec.key[s] = valuesText(rule.KeyValues(evs[0]))
						break
					}
				}
			}
			if _, ok := rec.seqs[s]; !ok {
				rec.bare[s], rec.emitted[s] = bare, values
				for _, evs := range it.Match.Events {
					for _, ev := range evs {
						rec.seqs[s] = append(rec.seqs[s], int(ev.Seq))
					}
				}
			}
		}
		out.Reset()
	}
	for _, ev := range events {
		if err := op.ProcessElement(ev, ev.Time, &out); err != nil {
			return got, err
		}
		collect()
	}
	if err := op.ProcessWatermark(event.MaxTime, &out); err != nil {
		return got, err
	}
	collect()
	return got, nil
}

// surplus returns the elements of a (sorted) not matched by an element of
// b (sorted), counting repeats.
func surplus(a, b []string) []string {
	var out []string
	i, j := 0, 0
	for i < len(a) {
		switch {
		case j == len(b) || a[i] < b[j]:
			out = append(out, a[i])
			i++
		case a[i] > b[j]:
			j++
		default:
			i++
			j++
		}
	}
	return out
}

// matchString writes a match in the notation of an expect line:
// rule [timedOut] key v1, v2 { stage: [1, 2], ... } emit { f: v }, stages
// in pattern order, stages without events left out, and the fields of
// fields named in emits (an emit that fails is written as the string
// "error: ..."); and those emitted values.
func matchString(rule *rules.Rule, timedOut bool, m nfa.Match, fields []rules.Emit, emits []string) (string, []rules.NamedValue) {
	var key []event.Value
	stages := make([][]int, len(m.Events))
	for i, evs := range m.Events {
		for _, ev := range evs {
			if key == nil {
				key = rule.KeyValues(ev)
			}
			stages[i] = append(stages[i], int(ev.Seq))
		}
	}
	var values []rules.NamedValue
	for _, name := range emits {
		for _, e := range fields {
			if e.Name != name {
				continue
			}
			v, err := e.Expr.Eval(m.Events)
			if err != nil {
				v = event.String("error: " + rules.ExprErrorMessage(err))
			}
			values = append(values, rules.NamedValue{Name: name, Value: v})
		}
	}
	return rules.FormatMatch(rule, timedOut, key, stages, values), values
}

func expectedString(x *rules.ExpectedMatch) string { return x.String() }
