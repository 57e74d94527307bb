package cond

import (
	"reflect"
	"strings"
	"testing"

	"github.com/cepheus-cep/cepheus/event"
)

func TestExprIdentifiers(t *testing.T) {
	got, err := Identifiers(`amount > 5 && len(ctx("a")) == 2 && sum(map(xs, .price)) < amount && upper(country) == "FR"`)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"amount", "country", "xs"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Identifiers = %q, want %q", got, want)
	}
	if _, err := Identifiers(`amount >`); err == nil {
		t.Error("parse error not reported")
	}
}

// TestStageRefs: every form of a stage reference is found, with its field
// and its byte offset (the source holds a multi-byte rune before them);
// let-bound names, closure members, fields and lookups are not stages.
func TestStageRefs(t *testing.T) {
	src := `name == "é" && a.amount > 1 && count(b) > 0 && ctx("c")[0].x > 0 && stage("a").y > 0 && ` +
		`(let b = 2; b > 1) && any(c, .amount > 1) && customer.tier > 1 && a.customer.tier > 0`
	got, err := StageRefs(src, []string{"a", "b", "c"}, "customer")
	if err != nil {
		t.Fatal(err)
	}
	// at is the offset of the reference that ends before the end of the
	// first occurrence of s.
	at := func(s, ref string) int { return strings.Index(src, s) + len(s) - len(ref) }
	want := []StageRef{
		{Stage: 0, Field: "amount", Offset: at("a.amount", "a.amount"), NullFails: true},
		{Stage: 1, Offset: at("count(b", "b")},
		{Stage: 2, Offset: at(`ctx("c")`, `ctx("c")`)},
		{Stage: 0, Field: "y", Offset: at(`stage("a")`, `stage("a")`), NullFails: true},
		{Stage: 2, Offset: at("any(c", "c")},
		{Stage: 0, Field: "customer.tier", Offset: at("&& a.customer", "a.customer"), NullFails: true},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("StageRefs =\n%+v\nwant\n%+v", got, want)
	}
	if _, err := StageRefs(`a.amount >`, []string{"a"}); err == nil {
		t.Error("parse error not reported")
	}
}

// TestStageRefsNullFails: a field reference is NullFails exactly when the
// expression fails at run time as that field is null (the emit of a match
// without an optional stage's event), checked against the evaluator over
// a match whose stage b* is empty: the warning it feeds is never wrong.
// The builtins of two arguments (max, min) are missed (no warning).
func TestStageRefsNullFails(t *testing.T) {
	const f, s = `stage("b*").amount`, `stage("b*").country`
	tests := []struct {
		src    string
		missed bool // fails, but is not found
	}{
		{f + " + 1", false}, {"1 - " + f, false}, {f + " * 2", false}, {f + " / 2", false},
		{f + " > 1", false}, {"1 <= " + f, false}, {"-" + f, false},
		{"abs(" + f + ")", false}, {"round(" + f + ")", false}, {"int(" + f + ")", false},
		{"len(" + s + ")", false}, {"upper(" + s + ")", false}, {s + ` + "x"`, false},
		{f + " ?? 0", false}, {"(" + f + " ?? 0) + 1", false}, {f + " == 1", false},
		{f + " != 1", false}, {"string(" + f + ")", false}, {f + " in [1.0]", false},
		{f, false}, {s + ` ?? ""`, false},
		{"max(" + f + ", 1)", true}, {"min(" + f + ", 1)", true},
	}
	m := [][]*event.Event(stageMatch())
	for _, tt := range tests {
		refs, err := StageRefs(tt.src, stageEnv.Stages)
		if err != nil || len(refs) != 1 {
			t.Fatalf("%s: refs %+v, %v", tt.src, refs, err)
		}
		v, err := CompileValueExpr(tt.src, stageEnv)
		if err != nil {
			t.Fatalf("%s: %v", tt.src, err)
		}
		_, evalErr := v.Eval(m)
		fails := evalErr != nil
		if refs[0].NullFails != (fails && !tt.missed) || tt.missed && !fails {
			t.Errorf("%s: NullFails %v, evaluation over a null: %v (missed %v)", tt.src, refs[0].NullFails, evalErr, tt.missed)
		}
	}
}
