package event

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// Time is an event time: milliseconds since the Unix epoch. Durations between
// event times are plain int64 milliseconds as well.
type Time int64

// MinTime and MaxTime bound [Time]. MinTime is also the time of a record that
// carries no timestamp (Flink's Long.MIN_VALUE); MaxTime is the final
// watermark that flushes a bounded input.
const (
	MinTime Time = math.MinInt64
	MaxTime Time = math.MaxInt64
)

// Watermark asserts that no more events with a time at or before it will
// arrive on a stream. An event whose time is <= the current watermark is late.
type Watermark = Time

// Millis returns d in whole milliseconds, the unit of [Time].
func Millis(d time.Duration) int64 { return int64(d / time.Millisecond) }

// String formats t as RFC 3339 with milliseconds in UTC, or as MIN/MAX for the
// two sentinels.
func (t Time) String() string {
	switch t {
	case MinTime:
		return "MIN"
	case MaxTime:
		return "MAX"
	}
	return time.UnixMilli(int64(t)).UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// Key is the partition key of a keyed stream: the encoded values of the key
// fields of a rule. The empty key is the single global partition.
type Key string

// Kind is the type of a [Value].
type Kind uint8

// The kinds of a [Value].
const (
	KindNull Kind = iota
	KindBool
	KindInt
	KindFloat
	KindString
)

var kindNames = [...]string{"null", "bool", "int", "float", "string"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", k)
}

// Value is one field value of an [Event]: null, bool, int64, float64 or
// string. The zero Value is null. Values are compared by kind and content.
type Value struct {
	kind Kind
	bits uint64 // bool (0/1), int64, or float64 bits
	str  string
}

// Null is the null value.
var Null = Value{}

// Bool returns a boolean value.
func Bool(b bool) Value {
	v := Value{kind: KindBool}
	if b {
		v.bits = 1
	}
	return v
}

// Int returns an integer value.
func Int(i int64) Value { return Value{kind: KindInt, bits: uint64(i)} }

// Float returns a floating-point value.
func Float(f float64) Value { return Value{kind: KindFloat, bits: math.Float64bits(f)} }

// String returns a string value.
func String(s string) Value { return Value{kind: KindString, str: s} }

// Kind returns the kind of v.
func (v Value) Kind() Kind { return v.kind }

// IsNull reports whether v is null.
func (v Value) IsNull() bool { return v.kind == KindNull }

// AsBool returns the boolean held by v; ok is false when v is not a bool.
func (v Value) AsBool() (b bool, ok bool) { return v.bits == 1, v.kind == KindBool }

// AsInt returns the integer held by v; ok is false when v is not an int.
func (v Value) AsInt() (i int64, ok bool) { return int64(v.bits), v.kind == KindInt }

// AsFloat returns v as a float64 when v is an int or a float.
func (v Value) AsFloat() (f float64, ok bool) {
	switch v.kind {
	case KindFloat:
		return math.Float64frombits(v.bits), true
	case KindInt:
		return float64(int64(v.bits)), true
	}
	return 0, false
}

// AsString returns the string held by v; ok is false when v is not a string.
func (v Value) AsString() (s string, ok bool) { return v.str, v.kind == KindString }

// Any returns v as a Go value: nil, bool, int64, float64 or string.
func (v Value) Any() any {
	switch v.kind {
	case KindBool:
		return v.bits == 1
	case KindInt:
		return int64(v.bits)
	case KindFloat:
		return math.Float64frombits(v.bits)
	case KindString:
		return v.str
	}
	return nil
}

// FromAny converts a Go value (nil, bool, any integer type, float32/64,
// string) to a Value. Other types yield ok == false.
func FromAny(x any) (Value, bool) {
	switch t := x.(type) {
	case nil:
		return Null, true
	case bool:
		return Bool(t), true
	case int:
		return Int(int64(t)), true
	case int32:
		return Int(int64(t)), true
	case int64:
		return Int(t), true
	case uint32:
		return Int(int64(t)), true
	case float32:
		return Float(float64(t)), true
	case float64:
		return Float(t), true
	case string:
		return String(t), true
	}
	return Null, false
}

// Equal reports whether v and w have the same kind and content. Floats
// compare by value (so NaN != NaN, 0 == -0).
func (v Value) Equal(w Value) bool {
	if v.kind != w.kind {
		return false
	}
	switch v.kind {
	case KindFloat:
		return math.Float64frombits(v.bits) == math.Float64frombits(w.bits)
	case KindString:
		return v.str == w.str
	}
	return v.bits == w.bits
}

// String formats v for humans: strings are quoted, null is "null".
func (v Value) String() string {
	switch v.kind {
	case KindBool:
		return strconv.FormatBool(v.bits == 1)
	case KindInt:
		return strconv.FormatInt(int64(v.bits), 10)
	case KindFloat:
		return strconv.FormatFloat(math.Float64frombits(v.bits), 'g', -1, 64)
	case KindString:
		return strconv.Quote(v.str)
	}
	return "null"
}

// SeqLineBits is the width of the line in a Seq made by [SeqOf].
const SeqLineBits = 40

// SeqOf is the Seq of the event read from line of partition p of a source
// with several partitions (a directory of files): the partition in the
// high bits, the line in the low SeqLineBits, so that Seq is unique and
// the outputs still show the line. For partition 0 it is the line.
func SeqOf(p int, line int64) uint64 { return uint64(p)<<SeqLineBits | uint64(line) }

// Line returns the line part of e.Seq ([SeqOf]).
func (e *Event) Line() int64 { return int64(e.Seq & (1<<SeqLineBits - 1)) }

// Partition returns the partition part of e.Seq ([SeqOf]); 0 for a source
// of one partition.
func (e *Event) Partition() int { return int(e.Seq >> SeqLineBits) }

// Event is a flat record: an event time and one [Value] per field of its
// [Schema], addressed by slot. Seq is the arrival sequence number assigned by
// the source (or the test harness); it identifies the event in outputs and
// is the final tie-break between equal timestamps.
type Event struct {
	Time   Time
	Seq    uint64
	Fields []Value
}

// Field returns the value in slot i, or null when the slot is out of range.
func (e *Event) Field(i int) Value {
	if i < 0 || i >= len(e.Fields) {
		return Null
	}
	return e.Fields[i]
}
