package event

import (
	"encoding/json"
	"errors"
	"math"
	goruntime "runtime"
	"strconv"
	"strings"
	"testing"
	"unsafe"
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

// TestValueRepresentation checks what the two-word Value must keep apart:
// every kind with its zero content, strings equal by content wherever they
// are stored, and the empty string from null.
func TestValueRepresentation(t *testing.T) {
	if unsafe.Sizeof(Value{}) != 16 {
		t.Errorf("a Value is %d bytes, want 16", unsafe.Sizeof(Value{}))
	}
	zeros := []struct {
		v    Value
		kind Kind
		text string
	}{
		{Null, KindNull, "null"},
		{Bool(false), KindBool, "false"},
		{Int(0), KindInt, "0"},
		{Float(0), KindFloat, "0"},
		{String(""), KindString, `""`},
	}
	for i, z := range zeros {
		if z.v.Kind() != z.kind || z.v.String() != z.text || z.v.IsNull() != (z.kind == KindNull) {
			t.Errorf("%v: kind %v, text %s, null %v; want %v, %s", z.v, z.v.Kind(), z.v.String(), z.v.IsNull(), z.kind, z.text)
		}
		for j, w := range zeros {
			if got := z.v.Equal(w.v); got != (i == j) {
				t.Errorf("%v.Equal(%v) = %v", z.v, w.v, got)
			}
		}
	}
	if s, ok := String("").AsString(); !ok || s != "" {
		t.Errorf(`String("").AsString() = %q, %v`, s, ok)
	}
	if s, ok := Null.AsString(); ok || s != "" {
		t.Errorf("Null.AsString() = %q, %v", s, ok)
	}
	b := []byte("card_6982 card_6982")
	x, y := String(string(b[:9])), String(string(b[10:]))
	if !x.Equal(y) || x.Equal(String("card_6983")) {
		t.Errorf("strings stored apart: %v.Equal(%v) = %v", x, y, x.Equal(y))
	}
	if s, _ := x.AsString(); s != "card_6982" {
		t.Errorf("AsString = %q", s)
	}
	if v, _ := Int(math.MinInt64).AsInt(); v != math.MinInt64 {
		t.Errorf("Int(MinInt64).AsInt() = %d", v)
	}
	if f, _ := Float(-1.25).AsFloat(); f != -1.25 {
		t.Errorf("Float(-1.25).AsFloat() = %v", f)
	}
	if bv, ok := Bool(true).AsBool(); !bv || !ok {
		t.Errorf("Bool(true).AsBool() = %v, %v", bv, ok)
	}
	if _, ok := Int(1).AsBool(); ok {
		t.Error("Int(1).AsBool() succeeded")
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

// TestNew checks New's events: n null fields, for up to MaxInline of them
// in the event's allocation, right after its header; fields that the
// collector keeps alive through that array.
func TestNew(t *testing.T) {
	for n := range MaxInline + 8 {
		ev := New(n)
		if len(ev.Fields) != n || cap(ev.Fields) != n {
			t.Fatalf("New(%d): %d fields, capacity %d", n, len(ev.Fields), cap(ev.Fields))
		}
		for i, v := range ev.Fields {
			if !v.IsNull() {
				t.Fatalf("New(%d): field %d is %v", n, i, v)
			}
		}
		if n == 0 || n > MaxInline {
			continue
		}
		header := unsafe.Sizeof(Event{})
		if d := uintptr(unsafe.Pointer(&ev.Fields[0])) - uintptr(unsafe.Pointer(ev)); d != header {
			t.Fatalf("New(%d): fields %d bytes after the event, want %d", n, d, header)
		}
	}
	// Strings made at run time, reachable only through the inline arrays,
	// survive collections.
	evs := make([]*Event, 2000)
	for i := range evs {
		evs[i] = New(1 + i%MaxInline)
		for j := range evs[i].Fields {
			evs[i].Fields[j] = String(strings.Repeat("x", 1+(i+j)%40) + strconv.Itoa(i*100+j))
		}
	}
	for range 3 {
		goruntime.GC()
		_ = make([]byte, 1<<20) // reuse of freed memory would show
	}
	for i, ev := range evs {
		for j, v := range ev.Fields {
			want := strings.Repeat("x", 1+(i+j)%40) + strconv.Itoa(i*100+j)
			if s, ok := v.AsString(); !ok || s != want {
				t.Fatalf("event %d field %d: %v after collections, want %q", i, j, v, want)
			}
		}
	}
}

// TestValueMarshalJSON: a Value is written as its JSON value, in a struct
// too (it was an empty object); a NaN float is an error, as a float64's.
func TestValueMarshalJSON(t *testing.T) {
	got, err := json.Marshal(struct {
		Key  []Value
		Emit map[string]Value
	}{
		Key:  []Value{String("c1"), Null},
		Emit: map[string]Value{"n": Int(3), "x": Float(1.5), "ok": Bool(true), "s": String(`a "b"`), "e": String("")},
	})
	want := `{"Key":["c1",null],"Emit":{"e":"","n":3,"ok":true,"s":"a \"b\"","x":1.5}}`
	if err != nil || string(got) != want {
		t.Errorf("json.Marshal: %s, %v; want %s", got, err, want)
	}
	if b, err := json.Marshal(Float(math.NaN())); err == nil {
		t.Errorf("json.Marshal of a NaN: %s, want an error", b)
	}
}
