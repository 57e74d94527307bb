package cond

import (
	"reflect"
	"strings"
	"testing"
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
		{Stage: 0, Field: "amount", Offset: at("a.amount", "a.amount")},
		{Stage: 1, Offset: at("count(b", "b")},
		{Stage: 2, Offset: at(`ctx("c")`, `ctx("c")`)},
		{Stage: 0, Field: "y", Offset: at(`stage("a")`, `stage("a")`)},
		{Stage: 2, Offset: at("any(c", "c")},
		{Stage: 0, Field: "customer.tier", Offset: at("&& a.customer", "a.customer")},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("StageRefs =\n%+v\nwant\n%+v", got, want)
	}
	if _, err := StageRefs(`a.amount >`, []string{"a"}); err == nil {
		t.Error("parse error not reported")
	}
}
