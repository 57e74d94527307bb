package cond

import (
	"reflect"
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
