package conformance

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/cepheus-cep/cepheus/event"
)

func ptr[T any](v T) *T { return &v }

// TestCompilePattern covers what the Flink cases do not: nested groups with
// a per-loop window, a gap window, throw-on-miss and malformed stages.
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
	n, err := compilePattern(&in)
	if err != nil {
		t.Fatalf("compilePattern: %v", err)
	}
	if got, want := n.Stages(), []string{"a", "b", "c", "d"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Stages() = %v, want %v", got, want)
	}
	if s := n.Skip(); s.Stage != "d" || !s.ThrowOnMiss {
		t.Errorf("Skip() = %v, want skipToLast:d with throw", s)
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
			bad := in
			bad.Pattern.Stages = append([]StageSpec(nil), in.Pattern.Stages...)
			tt.mutate(&bad)
			_, err := compilePattern(&bad)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("compilePattern error = %v, want one containing %q", err, tt.want)
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
