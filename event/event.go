package event

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"
	"unsafe"
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

// Plus returns t + d for a duration d >= 0 in milliseconds, or MaxTime when
// the sum is past it. Windows and timers end at such sums: one of an event
// near MaxTime (any number is a time with -time-unit ms) must not wrap
// around to a time before its start, which would end it at once, and the
// final watermark, MaxTime, still ends it.
func (t Time) Plus(d int64) Time {
	if t > MaxTime-Time(d) {
		return MaxTime
	}
	return t + Time(d)
}

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
// string. The zero Value is null. Values are compared with [Value.Equal]
// (by kind and content); the type is not comparable with ==, which would
// compare where two equal strings are stored.
//
// A Value is two words, not a kind, a number and a string header (four):
// an event holds one per schema field, and events are most of what a
// keyed operator keeps and the collector scans. p is nil for null, the
// address of tags[kind] for a bool, int, float or empty string, and the
// bytes of a non-empty string; n is the bool (0/1), the int64 or float64
// bits, or the string's length.
type Value struct {
	_ [0]func() // not comparable
	p unsafe.Pointer
	n uint64
}

// tags are what a Value that is not a non-empty string points at: its
// kind is its index (no string's bytes are stored here).
var tags [KindString + 1]byte

// tagged returns a non-string value of kind k (or the empty string).
func tagged(k Kind, n uint64) Value { return Value{p: unsafe.Pointer(&tags[k]), n: n} }

// Null is the null value.
var Null = Value{}

// Bool returns a boolean value.
func Bool(b bool) Value {
	if b {
		return tagged(KindBool, 1)
	}
	return tagged(KindBool, 0)
}

// Int returns an integer value.
func Int(i int64) Value { return tagged(KindInt, uint64(i)) }

// Float returns a floating-point value.
func Float(f float64) Value { return tagged(KindFloat, math.Float64bits(f)) }

// String returns a string value.
func String(s string) Value {
	if s == "" {
		return tagged(KindString, 0)
	}
	return Value{p: unsafe.Pointer(unsafe.StringData(s)), n: uint64(len(s))}
}

// Kind returns the kind of v.
func (v Value) Kind() Kind {
	if v.p == nil {
		return KindNull
	}
	// The distance from tags is computed, never turned back into a pointer.
	if d := uintptr(v.p) - uintptr(unsafe.Pointer(&tags)); d < uintptr(len(tags)) {
		return Kind(d)
	}
	return KindString
}

// IsNull reports whether v is null.
func (v Value) IsNull() bool { return v.p == nil }

// AsBool returns the boolean held by v; ok is false when v is not a bool.
func (v Value) AsBool() (b bool, ok bool) { return v.n == 1, v.Kind() == KindBool }

// AsInt returns the integer held by v; ok is false when v is not an int.
func (v Value) AsInt() (i int64, ok bool) { return int64(v.n), v.Kind() == KindInt }

// AsFloat returns v as a float64 when v is an int or a float.
func (v Value) AsFloat() (f float64, ok bool) {
	switch v.Kind() {
	case KindFloat:
		return math.Float64frombits(v.n), true
	case KindInt:
		return float64(int64(v.n)), true
	}
	return 0, false
}

// AsString returns the string held by v; ok is false when v is not a string.
func (v Value) AsString() (s string, ok bool) {
	if v.Kind() != KindString {
		return "", false
	}
	return v.str(), true
}

// str is the string of a KindString value.
func (v Value) str() string { return unsafe.String((*byte)(v.p), int(v.n)) }

// Any returns v as a Go value: nil, bool, int64, float64 or string.
func (v Value) Any() any {
	switch v.Kind() {
	case KindBool:
		return v.n == 1
	case KindInt:
		return int64(v.n)
	case KindFloat:
		return math.Float64frombits(v.n)
	case KindString:
		return v.str()
	}
	return nil
}

// MarshalJSON writes v as JSON: null, true or false, a number or a
// string (json.Marshal of a cep.Alert's key and emitted values, say). A
// time field's value is its epoch milliseconds here, having no schema:
// the alert format's encoder writes it as RFC 3339. A NaN or infinite
// float is an error, as for a float64.
func (v Value) MarshalJSON() ([]byte, error) { return json.Marshal(v.Any()) }

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
	k := v.Kind()
	if k != w.Kind() {
		return false
	}
	switch k {
	case KindFloat:
		return math.Float64frombits(v.n) == math.Float64frombits(w.n)
	case KindString:
		return v.str() == w.str()
	}
	return v.n == w.n
}

// String formats v for humans: strings are quoted, null is "null".
func (v Value) String() string {
	switch v.Kind() {
	case KindBool:
		return strconv.FormatBool(v.n == 1)
	case KindInt:
		return strconv.FormatInt(int64(v.n), 10)
	case KindFloat:
		return strconv.FormatFloat(math.Float64frombits(v.n), 'g', -1, 64)
	case KindString:
		return strconv.Quote(v.str())
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

// New returns an event with n null fields. For up to MaxInline fields the
// event and its fields are one allocation (the fields right after the
// event's header, so reading a field after the time touches memory next to
// it): decoders make one event per record, and most of an event's reads
// are of its fields.
func New(n int) *Event {
	if n > 0 && n <= MaxInline {
		return newInline[n](n)
	}
	return &Event{Fields: make([]Value, n)}
}

// MaxInline is the most fields New allocates with their event.
const MaxInline = 32

// inline is an event and the array of its fields, allocated together.
type inline[A any] struct {
	e Event
	f A
}

// newWith returns the event of a new inline[A] whose fields are the first
// n of its array A of Values (n at most its length).
func newWith[A any](n int) *Event {
	b := new(inline[A])
	b.e.Fields = unsafe.Slice((*Value)(unsafe.Pointer(&b.f)), n)
	return &b.e
}

// newInline is newWith by the number of fields.
var newInline = [MaxInline + 1]func(int) *Event{
	1:  newWith[[1]Value],
	2:  newWith[[2]Value],
	3:  newWith[[3]Value],
	4:  newWith[[4]Value],
	5:  newWith[[5]Value],
	6:  newWith[[6]Value],
	7:  newWith[[7]Value],
	8:  newWith[[8]Value],
	9:  newWith[[9]Value],
	10: newWith[[10]Value],
	11: newWith[[11]Value],
	12: newWith[[12]Value],
	13: newWith[[13]Value],
	14: newWith[[14]Value],
	15: newWith[[15]Value],
	16: newWith[[16]Value],
	17: newWith[[17]Value],
	18: newWith[[18]Value],
	19: newWith[[19]Value],
	20: newWith[[20]Value],
	21: newWith[[21]Value],
	22: newWith[[22]Value],
	23: newWith[[23]Value],
	24: newWith[[24]Value],
	25: newWith[[25]Value],
	26: newWith[[26]Value],
	27: newWith[[27]Value],
	28: newWith[[28]Value],
	29: newWith[[29]Value],
	30: newWith[[30]Value],
	31: newWith[[31]Value],
	32: newWith[[32]Value],
}

// Field returns the value in slot i, or null when the slot is out of range.
func (e *Event) Field(i int) Value {
	if i < 0 || i >= len(e.Fields) {
		return Null
	}
	return e.Fields[i]
}
