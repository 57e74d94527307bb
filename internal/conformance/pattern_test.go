package conformance

import (
	"encoding/json"
	"reflect"
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
