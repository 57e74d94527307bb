package conformance

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/cepheus-cep/cepheus/event"
)

// comparatorSpec is the structured event_comparator of generated cases.
type comparatorSpec struct {
	Field string `json:"field"`
	Order string `json:"order"` // asc or desc
}

// parseComparator returns the tie-break of equal timestamps that
// event_comparator describes, or nil when there is none.
//
// Two forms are accepted. The structured form {"field": "price", "order":
// "asc"|"desc"} names any field of Schema. The transcribed cases describe
// their comparator in prose ("price ascending (ties on equal timestamp)"),
// which cannot be parsed in general; a prose string is recognised only when
// it mentions price and asc or desc, the two orders the Java tests use.
func parseComparator(raw json.RawMessage) (func(a, b *event.Event) bool, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var spec comparatorSpec
	if raw[0] == '"' {
		var prose string
		if err := json.Unmarshal(raw, &prose); err != nil {
			return nil, fmt.Errorf("event_comparator: %w", err)
		}
		p := strings.ToLower(prose)
		switch {
		case !strings.Contains(p, "price"):
		case strings.Contains(p, "desc"):
			spec = comparatorSpec{Field: "price", Order: "desc"}
		case strings.Contains(p, "asc"):
			spec = comparatorSpec{Field: "price", Order: "asc"}
		}
		if spec.Field == "" {
			return nil, fmt.Errorf("event_comparator: cannot understand %q (want price asc/desc)", prose)
		}
	} else {
		d := json.NewDecoder(bytes.NewReader(raw))
		d.DisallowUnknownFields()
		if err := d.Decode(&spec); err != nil {
			return nil, fmt.Errorf("event_comparator: %w", err)
		}
	}
	slot, ok := Schema.Slot(spec.Field)
	if !ok {
		return nil, fmt.Errorf("event_comparator: unknown field %q", spec.Field)
	}
	switch spec.Order {
	case "asc":
		return func(a, b *event.Event) bool { return compareValues(a.Field(slot), b.Field(slot)) < 0 }, nil
	case "desc":
		return func(a, b *event.Event) bool { return compareValues(a.Field(slot), b.Field(slot)) > 0 }, nil
	}
	return nil, fmt.Errorf("event_comparator: order %q, want asc or desc", spec.Order)
}

// compareValues orders field values: null first, then numbers by value,
// then strings; values of other kinds compare equal.
func compareValues(a, b event.Value) int {
	rank := func(v event.Value) int {
		switch v.Kind() {
		case event.KindNull:
			return 0
		case event.KindInt, event.KindFloat:
			return 1
		case event.KindString:
			return 2
		}
		return 3
	}
	if ra, rb := rank(a), rank(b); ra != rb {
		return ra - rb
	}
	if x, ok := a.AsFloat(); ok {
		y, _ := b.AsFloat()
		switch {
		case x < y:
			return -1
		case x > y:
			return 1
		}
		return 0
	}
	if x, ok := a.AsString(); ok {
		y, _ := b.AsString()
		return strings.Compare(x, y)
	}
	return 0
}
