package event

import (
	"errors"
	"math"
	"testing"
)

func TestValueKindsAndConversions(t *testing.T) {
	if !Null.IsNull() || Null.Kind() != KindNull {
		t.Fatal("zero Value is not null")
	}
	if f, ok := Int(3).AsFloat(); !ok || f != 3 {
		t.Errorf("Int(3).AsFloat() = %v, %v", f, ok)
	}
	if _, ok := String("x").AsFloat(); ok {
		t.Error("String.AsFloat succeeded")
	}
	if !Float(0).Equal(Float(math.Copysign(0, -1))) {
		t.Error("0 != -0")
	}
	if Float(math.NaN()).Equal(Float(math.NaN())) {
		t.Error("NaN == NaN")
	}
	if Int(1).Equal(Float(1)) {
		t.Error("values of different kinds compare equal")
	}
	for _, x := range []any{nil, true, 7, int64(-2), 1.5, "s"} {
		v, ok := FromAny(x)
		if !ok {
			t.Fatalf("FromAny(%v) failed", x)
		}
		back := v.Any()
		if i, isInt := x.(int); isInt {
			if back != int64(i) {
				t.Errorf("FromAny(%v).Any() = %v", x, back)
			}
		} else if back != x {
			t.Errorf("FromAny(%v).Any() = %v", x, back)
		}
	}
	if _, ok := FromAny(struct{}{}); ok {
		t.Error("FromAny accepted a struct")
	}
}

func TestEventCodecRoundTrip(t *testing.T) {
	in := &Event{Time: -5, Seq: 42, Fields: []Value{Null, Bool(true), Int(math.MinInt64), Float(-1.25), String("héllo")}}
	b := in.AppendBinary([]byte("prefix"))
	out, rest, err := DecodeEvent(b[len("prefix"):])
	if err != nil || len(rest) != 0 {
		t.Fatalf("DecodeEvent: %v, rest %d", err, len(rest))
	}
	if out.Time != in.Time || out.Seq != in.Seq || len(out.Fields) != len(in.Fields) {
		t.Fatalf("decoded %+v, want %+v", out, in)
	}
	for i := range in.Fields {
		if !out.Fields[i].Equal(in.Fields[i]) {
			t.Errorf("field %d: %v, want %v", i, out.Fields[i], in.Fields[i])
		}
	}
	full := in.AppendBinary(nil)
	for cut := 0; cut < len(full); cut++ {
		if _, _, err := DecodeEvent(full[:cut]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("DecodeEvent(%d of %d bytes) err = %v, want ErrCorrupt", cut, len(full), err)
		}
	}
}

func TestSchema(t *testing.T) {
	s, err := NewSchema(Field{Name: "a", Kind: KindInt}, Field{Name: "b"})
	if err != nil {
		t.Fatal(err)
	}
	if i, ok := s.Slot("b"); !ok || i != 1 {
		t.Errorf("Slot(b) = %d, %v", i, ok)
	}
	if _, ok := s.Slot("c"); ok {
		t.Error("Slot(c) found")
	}
	if got := s.String(); got != "a:int, b" {
		t.Errorf("String() = %q", got)
	}
	if _, err := NewSchema(Field{Name: "a"}, Field{Name: "a"}); err == nil {
		t.Error("duplicate field accepted")
	}
	if _, err := NewSchema(Field{}); err == nil {
		t.Error("empty name accepted")
	}
}
