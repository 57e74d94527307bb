package conformance

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/rules"
)

func ptr[T any](v T) *T { return &v }

// TestCompilePattern covers what the Flink cases do not, in both modes:
// nested groups with a per-loop window, a gap window, throw-on-miss and
// malformed stages; and the rule text of such a case.
func TestCompilePattern(t *testing.T) {
	one := QuantifierSpec{Kind: "one", Min: 1, Max: ptr(1)}
	in := Input{Pattern: PatternSpec{
		Stages: []StageSpec{
			{Name: "a", Contiguity: "begin", Condition: ptr(`name == "a"`), Quantifier: one},
			{Name: "(group)", Contiguity: "followedBy", Quantifier: QuantifierSpec{Kind: "times", Min: 0, Max: ptr(2), WindowMs: ptr(int64(5))},
				Group: &GroupSpec{Stages: []StageSpec{
					{Name: "b", Contiguity: "begin", Condition: ptr(`len(ctx("a")) == 1`), Quantifier: one},
					{Name: "c", Contiguity: "next", Quantifier: QuantifierSpec{Kind: "oneOrMore", Min: 1, Inner: "consecutive", WindowMs: ptr(int64(3))}},
				}}},
			{Name: "d", Contiguity: "followedByAny", Quantifier: one},
		},
		WithinMs: ptr(int64(10)), WithinType: "PREVIOUS_AND_CURRENT", Skip: "skipToLast:d", SkipThrowOnMiss: true,
	}}
	for _, mode := range []Mode{ModeBuilder, ModeText} {
		c, err := compileCase(&in, mode)
		if err != nil {
			t.Fatalf("%s: compileCase: %v", mode, err)
		}
		n := c.nfa
		if got, want := n.Stages(), []string{"a", "b", "c", "d"}; !reflect.DeepEqual(got, want) {
			t.Errorf("%s: Stages() = %v, want %v", mode, got, want)
		}
		if s := n.Skip(); s.Stage != "d" || !s.ThrowOnMiss {
			t.Errorf("%s: Skip() = %v, want skipToLast:d with throw", mode, s)
		}
		if w := n.Window(); w != 0 {
			t.Errorf("%s: Window() = %d, want 0 (the window is PREVIOUS_AND_CURRENT)", mode, w)
		}
	}
	src, err := CaseSource(&in)
	if err != nil {
		t.Fatal(err)
	}
	want := `ruleset conformance
event time ts
schema {
  id: int
  name: string
  price: float
  ts: time
  type: string
  volume: float
}
rule case {
  pattern {
    begin a where name == "a"
    followedBy (
      begin b where len(ctx("a")) == 1
      next c oneOrMore within 3ms consecutive
    ) times 0..2 within 5ms
    followedByAny d
      within 10ms of previous
  }
  skip toLast d orFail
}
`
	if src != want {
		t.Errorf("CaseSource =\n%s\nwant\n%s", src, want)
	}

	for _, tt := range []struct {
		name   string
		mutate func(*Input)
		want   string
	}{
		{"second begin", func(in *Input) { in.Pattern.Stages[2].Contiguity = "begin" }, "only the first stage is begin"},
		{"unknown contiguity", func(in *Input) { in.Pattern.Stages[2].Contiguity = "after" }, `unknown contiguity "after"`},
		{"group condition", func(in *Input) { in.Pattern.Stages[1].Condition = ptr("true") }, "group stage has no condition"},
		{"ctx of unknown stage", func(in *Input) { in.Pattern.Stages[0].Condition = ptr(`len(ctx("zz")) == 0`) }, `unknown stage "zz"`},
		{"unknown quantifier", func(in *Input) { in.Pattern.Stages[0].Quantifier.Kind = "some" }, `unknown quantifier kind "some"`},
		{"unknown skip", func(in *Input) { in.Pattern.Skip = "skipSome" }, `unknown skip strategy "skipSome"`},
		{"unknown within type", func(in *Input) { in.Pattern.WithinType = "LAST" }, `unknown within_type "LAST"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, mode := range []Mode{ModeBuilder, ModeText} {
				bad := in
				bad.Pattern.Stages = append([]StageSpec(nil), in.Pattern.Stages...)
				tt.mutate(&bad)
				_, err := compileCase(&bad, mode)
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Errorf("%s: compileCase error = %v, want one containing %q", mode, err, tt.want)
				}
			}
		})
	}
}

func TestParseComparator(t *testing.T) {
	lo := &event.Event{Fields: []event.Value{event.Int(2), event.String("x"), event.Float(1)}}
	hi := &event.Event{Fields: []event.Value{event.Int(1), event.String("y"), event.Float(2)}}
	for _, tt := range []struct {
		raw      string
		loBefore bool // whether Less(lo, hi)
		hiBefore bool
	}{
		{`"price ascending (ties on equal timestamp)"`, true, false},
		{`"Price DESCENDING"`, false, true},
		{`{"field": "price", "order": "asc"}`, true, false},
		{`{"field": "id", "order": "asc"}`, false, true},
		{`{"field": "name", "order": "desc"}`, false, true},
	} {
		less, err := parseComparator(json.RawMessage(tt.raw))
		if err != nil {
			t.Errorf("parseComparator(%s): %v", tt.raw, err)
			continue
		}
		if got := less(lo, hi); got != tt.loBefore {
			t.Errorf("%s: Less(lo, hi) = %v, want %v", tt.raw, got, tt.loBefore)
		}
		if got := less(hi, lo); got != tt.hiBefore {
			t.Errorf("%s: Less(hi, lo) = %v, want %v", tt.raw, got, tt.hiBefore)
		}
	}
	if less, err := parseComparator(json.RawMessage(`null`)); less != nil || err != nil {
		t.Errorf("parseComparator(null) = %v, %v; want nil, nil", less != nil, err)
	}
	for _, bad := range []string{`"by arrival"`, `{"field": "colour", "order": "asc"}`, `{"field": "price", "order": "up"}`, `{"field": "price", "order": "asc", "x": 1}`} {
		if _, err := parseComparator(json.RawMessage(bad)); err == nil {
			t.Errorf("parseComparator(%s) succeeded", bad)
		}
	}
}

// TestCaseSources checks the rule text of every shared case: it is
// canonical up to formatting (formatting it twice changes nothing more),
// and compiles to the stages the builder gives.
func TestCaseSources(t *testing.T) {
	cases, err := LoadDir("testdata")
	if err != nil {
		t.Fatal(err)
	}
	for i := range cases {
		in := &cases[i].Input
		src, err := CaseSource(in)
		if err != nil {
			t.Errorf("%s: %v", in.ID, err)
			continue
		}
		f, err := rules.ParseFile(in.ID, []byte(src))
		if err != nil {
			t.Errorf("%s: %v\n%s", in.ID, err, src)
			continue
		}
		out := rules.Format(f)
		f2, err := rules.ParseFile(in.ID, out)
		if err != nil {
			t.Errorf("%s: canonical source: %v\n%s", in.ID, err, out)
			continue
		}
		if again := rules.Format(f2); string(again) != string(out) {
			t.Errorf("%s: Format not idempotent:\n%s\nthen\n%s", in.ID, out, again)
		}
		text, err1 := compileCase(in, ModeText)
		built, err2 := compileCase(in, ModeBuilder)
		if err1 != nil || err2 != nil {
			t.Errorf("%s: text: %v, builder: %v", in.ID, err1, err2)
			continue
		}
		if !reflect.DeepEqual(text.nfa.Stages(), built.nfa.Stages()) {
			t.Errorf("%s: stages %q through text, %q through the builder", in.ID, text.nfa.Stages(), built.nfa.Stages())
		}
	}
}

// TestChainedConditionsModes: a stage's chained where and or clauses mean
// the same in builder and text mode, Flink's order of application (each
// where ANDs with everything before it, each or ORs), and so does a within
// set on a stage with stages after it. An or after a clause that fails at
// run time (volume > 1.0 on a plain Event) still counts: the failure makes
// that clause false only.
func TestChainedConditionsModes(t *testing.T) {
	ev := func(seq uint64, name string, price float64, ts int64, volume *float64) EventSpec {
		e := EventSpec{Seq: seq, ID: 1, Name: name, Price: price, Ts: ptr(ts), Type: "Event"}
		if volume != nil {
			e.Type, e.Volume = "SubEvent", volume
		}
		return e
	}
	events := []EventSpec{
		ev(1, "a", 1, 1, nil), ev(2, "b", 1, 2, nil), ev(3, "b", 2, 10, ptr(3.0)),
		ev(4, "b", 3, 12, nil), ev(5, "c", 1, 13, ptr(0.5)),
	}
	one := QuantifierSpec{Kind: "one"}
	single := func(chain ...ChainedCondition) []StageSpec {
		return []StageSpec{{Name: "s", Contiguity: "begin", Condition: ptr(`name == "a"`), Chain: chain, Quantifier: one}}
	}
	for _, tt := range []struct {
		name   string
		stages []StageSpec
		within *int64
		want   []string
	}{
		{"or then where", single(ChainedCondition{"or", "price > 1.5"}, ChainedCondition{"where", "ts > 5"}),
			nil, []string{"s:[3]", "s:[4]"}},
		{"where then or", single(ChainedCondition{"where", "ts > 5"}, ChainedCondition{"or", "price > 2.5"}),
			nil, []string{"s:[4]"}},
		{"or after an erring clause", single(ChainedCondition{"where", "volume > 1.0"}, ChainedCondition{"or", `name == "c"`}),
			nil, []string{"s:[5]"}},
		{"true then or", []StageSpec{{Name: "s", Contiguity: "begin", Condition: ptr("true"),
			Chain: []ChainedCondition{{"or", `name == "c"`}}, Quantifier: one}},
			nil, []string{"s:[1]", "s:[2]", "s:[3]", "s:[4]", "s:[5]"}},
		{"within on an earlier stage", []StageSpec{
			{Name: "a", Contiguity: "begin", Condition: ptr(`name == "a"`), Quantifier: one, WithinMs: ptr(int64(3))},
			{Name: "b", Contiguity: "followedByAny", Condition: ptr(`name == "b"`), Quantifier: one},
		}, ptr(int64(50)), []string{"a:[1] b:[2]"}},
		{"gap window on an earlier stage", []StageSpec{
			{Name: "a", Contiguity: "begin", Condition: ptr(`name == "a"`), Quantifier: one},
			{Name: "b", Contiguity: "followedByAny", Condition: ptr(`name == "b"`), Quantifier: one,
				WithinMs: ptr(int64(9)), WithinType: "PREVIOUS_AND_CURRENT"},
			{Name: "c", Contiguity: "followedBy", Condition: ptr(`name == "c"`), Quantifier: one},
		}, nil, []string{"a:[1] b:[2] c:[5]"}},
	} {
		in := Input{ID: "chain", Driver: DriverNFA, Events: events,
			Pattern: PatternSpec{Stages: tt.stages, WithinMs: tt.within, Skip: "noSkip"}}
		for _, mode := range []Mode{ModeBuilder, ModeText} {
			r := RunCaseMode(&in, mode)
			if r.Error != nil {
				t.Errorf("%s, %s mode: %s", tt.name, mode, *r.Error)
				continue
			}
			var got []string
			for _, m := range r.Matches {
				got = append(got, matchString(m))
			}
			slices.Sort(got)
			if !slices.Equal(got, tt.want) {
				t.Errorf("%s, %s mode: matches %q, want %q", tt.name, mode, got, tt.want)
			}
		}
	}
}

// matchString writes a match as "stage:[seqs] ...", in stage order.
func matchString(m MatchResult) string {
	var parts []string
	for _, s := range m.Stages {
		parts = append(parts, fmt.Sprintf("%s:%v", s.Stage, s.Seqs))
	}
	return strings.Join(parts, " ")
}

// TestStageWindowSource: a FIRST_AND_LAST window on a stage joins the
// pattern window (the smallest wins), a PREVIOUS_AND_CURRENT one becomes
// the stage's "within ... of previous", and chained conditions become
// where and or clause lines; the windows that the rule language cannot
// write are refused.
func TestStageWindowSource(t *testing.T) {
	one := QuantifierSpec{Kind: "one"}
	in := Input{Pattern: PatternSpec{Stages: []StageSpec{
		{Name: "a", Contiguity: "begin", Condition: ptr(`name == "a"`), Quantifier: one, WithinMs: ptr(int64(7)),
			Chain: []ChainedCondition{{"or", "price > 2.0"}, {"where", "ts > 1"}}},
		{Name: "b", Contiguity: "next", Quantifier: one, WithinMs: ptr(int64(4)), WithinType: "PREVIOUS_AND_CURRENT"},
		{Name: "c", Contiguity: "followedBy", Quantifier: one},
	}, WithinMs: ptr(int64(20))}}
	src, err := CaseSource(&in)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"    begin a where name == \"a\"\n      or price > 2.0\n      where ts > 1\n",
		"    next b\n      within 4ms of previous\n",
		"    within 7ms\n  }",
	} {
		if !strings.Contains(src, want) {
			t.Errorf("CaseSource has no %q:\n%s", want, src)
		}
	}
	in.Pattern.Stages[2].Contiguity, in.Pattern.WithinMs = "notFollowedBy", nil
	if _, err := CaseSource(&in); err == nil {
		t.Errorf("CaseSource writes a window on an earlier stage of a pattern that ends in notFollowedBy")
	}
}

// TestTrailingGroupNotFollowedBy is the minimal case of wide seed 3502,
// case 842: a window on the first stage of a pattern that ends in a group
// ending in notFollowedBy. Flink's compiler reaches that notFollowedBy
// before it has seen the window, so it gets no pending state: the match
// (a, b) comes out when the watermark feeds b, and the c after it changes
// nothing (Flink 2.3.0's output: match [1,2], watermark 5000, watermark
// 20000). The nfa builder does the same. The rule text cannot say it (its
// one window would be the pattern's, which Flink's compiler sees first,
// and the c would drop the match held until the window closes), so
// CaseSource refuses it; with the window on the pattern as well, both
// engines hold the match and the c drops it (Flink: no match).
func TestTrailingGroupNotFollowedBy(t *testing.T) {
	one := QuantifierSpec{Kind: "one"}
	stage := func(name, cont, cond string) StageSpec {
		return StageSpec{Name: name, Contiguity: cont, Condition: ptr(cond), Quantifier: one}
	}
	first := stage("s1", "begin", `name == "a"`)
	first.WithinMs = ptr(int64(10_000))
	group := StageSpec{Name: "(group)", Contiguity: "followedBy", Quantifier: one, Group: &GroupSpec{Stages: []StageSpec{
		stage("s2", "begin", `name == "b"`), stage("s3", "notFollowedBy", `name == "c"`),
	}}}
	var events []EventSpec
	var steps []Step
	for i, name := range []string{"a", "b", "c"} {
		seq := uint64(i + 1)
		events = append(events, EventSpec{Seq: seq, ID: 1, Name: name, Price: 1, Ts: ptr(int64(1000 * (i + 1))), Type: "Event"})
		steps = append(steps, Step{Event: ptr(seq)})
	}
	steps = append(steps, Step{Watermark: ptr(int64(5000))}, Step{Watermark: ptr(int64(20_000))})
	in := Input{ID: "ws3502-00842-minimal", Driver: DriverOperator, KeyBy: "id", Events: events, OperatorSteps: steps,
		Pattern: PatternSpec{Stages: []StageSpec{first, group}, Skip: "noSkip"}}

	r := RunCaseMode(&in, ModeBuilder)
	if r.Error != nil {
		t.Fatalf("builder mode: %s", *r.Error)
	}
	if len(r.Matches) != 1 || matchString(r.Matches[0]) != "s1:[1] s2:[2]" ||
		r.Matches[0].Step == nil || *r.Matches[0].Step != 3 || r.Matches[0].Timestamp == nil || *r.Matches[0].Timestamp != 2000 {
		t.Errorf("builder mode: matches %+v, want s1:[1] s2:[2] at step 3 (watermark 5000), timestamp 2000", r.Matches)
	}
	if got, want := outputString(r.Output), "match [1 2], wm 5000, wm 20000"; got != want {
		t.Errorf("builder mode: output %q, want %q", got, want)
	}
	if _, err := CaseSource(&in); err == nil {
		t.Errorf("CaseSource writes the first stage's window as the pattern window")
	}
	if r := RunCaseMode(&in, ModeText); r.Error == nil || r.ErrorClass != ErrorCompile {
		t.Errorf("text mode: %d matches, error %v class %q; want the case refused", len(r.Matches), r.Error, r.ErrorClass)
	}
	nested := in
	nested.Pattern.Stages = []StageSpec{first, {Name: "(group)", Contiguity: "followedBy", Quantifier: one,
		Group: &GroupSpec{Stages: []StageSpec{stage("s4", "begin", "true"), group}}}}
	if _, err := CaseSource(&nested); err == nil {
		t.Errorf("CaseSource writes the first stage's window as the pattern window of a nested group's notFollowedBy")
	}
	own := in
	own.Pattern.Stages = []StageSpec{first, group}
	own.Pattern.Stages[1].WithinMs = ptr(int64(20_000))
	if src, err := CaseSource(&own); err != nil || !strings.Contains(src, "    within 10000ms\n  }") {
		t.Errorf("a window on the last stage (the group) too: CaseSource error %v, source:\n%s", err, src)
	}

	in.Pattern.WithinMs = ptr(int64(10_000))
	for _, mode := range []Mode{ModeBuilder, ModeText} {
		r := RunCaseMode(&in, mode)
		if r.Error != nil {
			t.Fatalf("window on the pattern too, %s mode: %s", mode, *r.Error)
		}
		if got, want := outputString(r.Output), "wm 5000, wm 20000"; len(r.Matches) != 0 || got != want {
			t.Errorf("window on the pattern too, %s mode: %d matches, output %q, want none, %q", mode, len(r.Matches), got, want)
		}
	}
}

// outputString writes an operator's output as "match [seqs], wm t, ...".
func outputString(out []OutputItem) string {
	var parts []string
	for _, o := range out {
		if o.Watermark != nil {
			parts = append(parts, fmt.Sprintf("wm %d", *o.Watermark))
		} else {
			parts = append(parts, fmt.Sprintf("match %v", o.Match))
		}
	}
	return strings.Join(parts, ", ")
}
