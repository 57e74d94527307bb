package difftest

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"testing"

	"github.com/cepheus-cep/cepheus/internal/conformance"
)

// The acceptance test of cep.SharedOperator (one keyed operator for all
// the rules of a key): for every rule of a case with several rules, what
// the shared operator gives must be, item for item and in order, what one
// cep.Operator per rule gives (the path of Flink's one CepOperator per
// rule): matches with their via, step, timestamp and waking timer,
// timeouts, the main output, the late elements and the errors.

// sharedCases returns the cases with several rules of the test: the
// operator cases with rules of the wide profile, and narrow operator
// cases given the patterns of the next few narrow cases as more rules.
func sharedCases(t *testing.T, nWide, nNarrow int) []conformance.Input {
	var out []conformance.Input
	for _, seed := range testSeeds(t) {
		for i := range nWide {
			if in := GenerateWide(seed, i); len(in.Rules) > 0 && in.Driver == conformance.DriverOperator {
				out = append(out, in)
			}
		}
		for i := range nNarrow {
			in := Generate(seed, i)
			if in.Driver != conformance.DriverOperator {
				continue
			}
			in.Rules = []conformance.PatternSpec{in.Pattern}
			for j := 1; j <= 1+i%4; j++ {
				in.Rules = append(in.Rules, Generate(seed, i+j).Pattern)
			}
			same := sameStart(in, Generate(seed, i+1).Pattern)
			in.Pattern = conformance.PatternSpec{}
			in.ID += "+rules"
			out = append(out, in, same)
		}
	}
	return out
}

// sameStart is a narrow operator case given rules that all begin as its
// pattern does, as W4's do (cep.SharedOperator evaluates the start of such
// rules once per element for all of them, and may note their starts once
// per key): the pattern itself, a copy, copies with another window,
// another skip strategy and the last stage without its condition, and
// other, a pattern that most likely starts otherwise.
func sameStart(in conformance.Input, other conformance.PatternSpec) conformance.Input {
	copyOf := func() conformance.PatternSpec {
		b, err := json.Marshal(in.Pattern)
		if err != nil {
			panic(err)
		}
		var p conformance.PatternSpec
		if err := json.Unmarshal(b, &p); err != nil {
			panic(err)
		}
		return p
	}
	window := copyOf()
	if window.WithinMs == nil {
		ms := int64(7)
		window.WithinMs = &ms
	} else {
		window.WithinMs = nil
	}
	skip := copyOf()
	if skip.Skip == "" || skip.Skip == "noSkip" {
		skip.Skip = "skipPastLastEvent"
	} else {
		skip.Skip = "noSkip"
	}
	last := copyOf()
	if n := len(last.Stages); n > 1 {
		last.Stages[n-1].Condition, last.Stages[n-1].Chain = nil, nil
	}
	in.Rules = []conformance.PatternSpec{in.Pattern, copyOf(), window, skip, last, other}
	in.Pattern = conformance.PatternSpec{}
	in.ID += "+same-start"
	return in
}

// perRule is today's path: one operator per rule (RunCaseMode of each
// rule's own input).
func perRule(in *conformance.Input, mode conformance.Mode) []*conformance.Result {
	var rs []*conformance.Result
	for k := range in.Rules {
		sub := in.Rule(k)
		rs = append(rs, conformance.RunCaseMode(&sub, mode))
	}
	return rs
}

// wakes lists the waking timer of every match and timeout.
func wakes(r *conformance.Result) []string {
	var out []string
	w := func(p *int64) string {
		if p == nil {
			return "-"
		}
		return strconv.FormatInt(*p, 10)
	}
	for _, m := range r.Matches {
		out = append(out, "match "+w(m.Wake))
	}
	for _, to := range r.Timeouts {
		out = append(out, "timeout "+w(to.Wake))
	}
	return out
}

// sameRule reports how rule k's shared result differs from its reference.
func sameRule(want, got *conformance.Result) []string {
	var diffs []string
	for _, d := range Compare(want, got) {
		diffs = append(diffs, d.String())
	}
	if w, g := wakes(want), wakes(got); !slices.Equal(w, g) {
		diffs = append(diffs, fmt.Sprintf("wake: one operator per rule %v, shared %v", w, g))
	}
	if (want.Error == nil) != (got.Error == nil) {
		diffs = append(diffs, fmt.Sprintf("error: one operator per rule %s, shared %s", errText(want), errText(got)))
	} else if want.Error != nil && !sameErrorClass(want, got) {
		diffs = append(diffs, fmt.Sprintf("error class: %s vs %s", errClassText(want), errClassText(got)))
	}
	return diffs
}

func TestSharedOperatorEqualsOperatorPerRule(t *testing.T) {
	nWide, nNarrow := 400, 300
	if testing.Short() {
		nWide, nNarrow = 100, 100
	}
	equalsPerRule(t, sharedCases(t, nWide, nNarrow))
}

// TestSharedOperatorColdKeys is the same with a sweep after every element
// and watermark: every key untouched since the previous one is frozen into
// its record and thawed by its next element (cep/cold.go), and with the
// cases' snapshot_restore steps going through state records in one store
// (only the keys changed since the previous step written,
// RestoreSharedOperatorFrom), which must change nothing.
func TestSharedOperatorColdKeys(t *testing.T) {
	conformance.SharedCompactEvery = 1
	conformance.SharedStateRecords = true
	defer func() { conformance.SharedCompactEvery, conformance.SharedStateRecords = 0, false }()
	nWide, nNarrow := 200, 200
	if testing.Short() {
		nWide, nNarrow = 50, 50
	}
	equalsPerRule(t, sharedCases(t, nWide, nNarrow))
}

func equalsPerRule(t *testing.T, cases []conformance.Input) {
	t.Helper()
	rules, failed, items := 0, 0, 0
	for _, mode := range []conformance.Mode{conformance.ModeText, conformance.ModeBuilder} {
		for i := range cases {
			in := &cases[i]
			want := perRule(in, mode)
			got := conformance.RunCaseChanging(in, mode, nil)
			if got.Error != nil {
				t.Errorf("%s (%s): shared operator: %s", in.ID, mode, *got.Error)
				continue
			}
			if len(got.Rules) != len(want) {
				t.Fatalf("%s (%s): %d rule results, want %d", in.ID, mode, len(got.Rules), len(want))
			}
			for k := range want {
				rules++
				items += len(want[k].Matches) + len(want[k].Timeouts) + len(want[k].Output) + len(want[k].Late)
				if want[k].Error != nil && want[k].ErrorClass == conformance.ErrorRun {
					failed++
				}
				for _, d := range sameRule(want[k], got.Rules[k]) {
					t.Errorf("%s (%s) rule %d: %s", in.ID, mode, k, d)
				}
			}
		}
	}
	t.Logf("%d cases with several rules, %d rule results (%d of them failed while running), %d items compared", len(cases), rules, failed, items)
}

// TestSharedOperatorRuleChanges: rules removed from and added to a live
// shared operator. Before step P rule 0 is removed and the last rule
// added; rule 0 then gave what its own operator gave over the steps
// before P, the last rule what a new operator of its own gives from P on
// (after being handed the watermark and processing clock of that point),
// and every other rule exactly what it gives without the change.
func TestSharedOperatorRuleChanges(t *testing.T) {
	nWide, nNarrow := 300, 300
	if testing.Short() {
		nWide, nNarrow = 80, 80
	}
	cases := sharedCases(t, nWide, nNarrow)
	compared := 0
	for i := range cases {
		in := &cases[i]
		if len(in.Rules) < 2 || len(in.OperatorSteps) < 2 {
			continue
		}
		p := 1 + i%(len(in.OperatorSteps)-1)
		last := len(in.Rules) - 1
		got := conformance.RunCaseChanging(in, conformance.ModeText, []conformance.RuleChange{{Step: p, Remove: []int{0}, Add: []int{last}}})
		if got.Error != nil {
			t.Errorf("%s: shared operator: %s", in.ID, *got.Error)
			continue
		}
		compared++
		for k := range in.Rules {
			sub := in.Rule(k)
			var want *conformance.Result
			switch k {
			case 0:
				sub.OperatorSteps = sub.OperatorSteps[:p]
				want = conformance.RunCaseMode(&sub, conformance.ModeText)
			case last:
				want = startedAt(&sub, p)
			default:
				want = conformance.RunCaseMode(&sub, conformance.ModeText)
			}
			for _, d := range sameRule(want, got.Rules[k]) {
				t.Errorf("%s (changed before step %d) rule %d: %s", in.ID, p, k, d)
			}
		}
	}
	if compared < 50 {
		t.Errorf("only %d cases compared", compared)
	}
	t.Logf("%d cases with rules changed mid-stream", compared)
}

// startedAt runs in (one rule) on a new operator created before step p:
// it is first given the last watermark and processing clock set before p,
// then the steps from p on. The result is given in the step numbers of in,
// without what the two first steps emitted (their watermark).
func startedAt(in *conformance.Input, p int) *conformance.Result {
	var wm, pt *int64
	for _, st := range in.OperatorSteps[:p] {
		if st.Watermark != nil {
			wm = st.Watermark
		}
		if st.ProcessingTime != nil {
			pt = st.ProcessingTime
		}
	}
	var prefix []conformance.Step
	if wm != nil {
		prefix = append(prefix, conformance.Step{Watermark: wm})
	}
	if pt != nil {
		prefix = append(prefix, conformance.Step{ProcessingTime: pt})
	}
	sub := *in
	sub.OperatorSteps = append(prefix, in.OperatorSteps[p:]...)
	r := conformance.RunCaseMode(&sub, conformance.ModeText)
	off := p - len(prefix)
	shift := func(s *int) *int {
		if s == nil {
			return nil
		}
		v := *s + off
		return &v
	}
	for i := range r.Matches {
		r.Matches[i].Step = shift(r.Matches[i].Step)
	}
	for i := range r.Timeouts {
		r.Timeouts[i].Step = shift(r.Timeouts[i].Step)
	}
	r.ErrorStep = shift(r.ErrorStep)
	if wm != nil && len(r.Output) > 0 {
		r.Output = r.Output[1:] // the watermark of the first step
	}
	return r
}
