package jsonev

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/cepheus-cep/cepheus/event"
)

// TimeFormat says how the event-time field of a JSON record is written.
type TimeFormat uint8

// The time formats. Epoch values are milliseconds only: a record in epoch
// seconds would silently land in January 1970, so there is no seconds
// format and no guessing from the magnitude.
const (
	// TimeAuto accepts both forms: a string is RFC 3339, a number is
	// milliseconds since the Unix epoch.
	TimeAuto TimeFormat = iota
	// TimeRFC3339 accepts only an RFC 3339 string such as
	// "2024-05-01T12:00:00.250Z" or "2024-05-01T14:00:00+02:00": a 'T'
	// between date and time, seconds always present, an optional fraction
	// after a '.', and 'Z' or a ±hh:mm offset. This is the grammar of Go's
	// fast RFC 3339 parser; fractions beyond milliseconds are truncated
	// (towards the past, as time.Time.UnixMilli does).
	TimeRFC3339
	// TimeEpochMillis accepts only a number of milliseconds since the Unix
	// epoch. It must be a whole number in int64 range, by the same rule as a
	// KindInt field (1714564800000, 1714564800000.0 and 1.7145648e12 are
	// fine; 1.5 is an error).
	TimeEpochMillis
)

var timeFormatNames = [...]string{"auto", "rfc3339", "epoch-ms"}

// TimeUnit is the unit of times written as numbers.
type TimeUnit uint8

// The time units.
const (
	// Millis: a number is milliseconds since the Unix epoch.
	Millis TimeUnit = iota
	// Seconds: a number is seconds since the Unix epoch, which may have a
	// fraction (1714564800.25); finer than milliseconds is truncated towards
	// the past, as for RFC 3339 strings.
	Seconds
)

var timeUnitNames = [...]string{"ms", "s"}

func (u TimeUnit) String() string {
	if int(u) < len(timeUnitNames) {
		return timeUnitNames[u]
	}
	return fmt.Sprintf("TimeUnit(%d)", u)
}

// The plausible window of [Config.CheckNumericTimes]: [PlausibleFrom,
// PlausibleTo), 2000-01-01 to 2100-01-01 UTC. Epoch seconds read as
// milliseconds land in January 1970; epoch micro- and nanoseconds read as
// milliseconds land tens of thousands of years ahead.
const (
	PlausibleFrom event.Time = 946684800000  // 2000-01-01T00:00:00Z
	PlausibleTo   event.Time = 4102444800000 // 2100-01-01T00:00:00Z
)

func (f TimeFormat) String() string {
	if int(f) < len(timeFormatNames) {
		return timeFormatNames[f]
	}
	return fmt.Sprintf("TimeFormat(%d)", f)
}

// Config configures a [Decoder].
type Config struct {
	// Schema assigns the slots of the decoded events. Required.
	Schema *event.Schema
	// TimeField names the event-time field, which sets Event.Time and
	// must be present and non-null in every record. Required. It need not
	// be a field of Schema; when it is, it must be declared int or any
	// (KindInt or KindNull), and its slot holds the event time as an int of
	// epoch milliseconds, whatever form the record wrote it in.
	TimeField string
	// TimeFields lists other fields of Schema that hold times, decoded like
	// TimeField into ints of epoch milliseconds (but they may be null or
	// missing). They must be declared int or any.
	TimeFields []string
	// TimeFormat says how the time fields are written; default TimeAuto.
	TimeFormat TimeFormat
	// TimeUnit is the unit of time fields written as numbers; default
	// Millis.
	TimeUnit TimeUnit
	// CheckNumericTimes refuses a time field written as a number whose time
	// in TimeUnit lies outside [PlausibleFrom, PlausibleTo): the error says
	// what the number would be in the other usual units (epoch seconds,
	// micro- and nanoseconds), so a stream in the wrong unit is refused
	// line by line instead of read as times in 1970. Times written as RFC
	// 3339 strings are not checked: they carry no unit. Off by default:
	// in-file tests and conformance cases use times a few milliseconds
	// from the epoch. Streams whose unit nobody stated turn it on.
	CheckNumericTimes bool
	// OptionalTime lets a record go without its TimeField, or with it
	// null: its Event.Time is then event.MinTime. For processing time,
	// which stamps each event with the clock when it is processed and
	// reads no event time: a record's time is then no reason to refuse
	// it. A time that is there is decoded and checked as ever.
	OptionalTime bool
	// Required lists fields of Schema that every record must carry with a
	// non-null value: the key fields of the rules. A record without one is
	// rejected, so it goes to the dead letters rather than to a key made of
	// nulls.
	Required []string
	// Mode is Lenient (the default: streams and backtests) or Strict (the
	// events written in a ruleset's tests). See [Mode].
	Mode Mode
	// Open says that Schema lists only the fields someone reads (a
	// ruleset's inferred schema), not all the fields a record may carry:
	// fields outside it are skipped in Strict mode too. Duplicate keys of
	// schema fields are still errors then.
	Open bool
}

// Mode says how a [Decoder] treats fields outside the schema and keys
// given twice. Everything else (syntax, kinds, time fields, required
// fields) is the same in both modes, so an event decodes to the same
// [event.Event] in both, or fails in both with the same [DecodeError].
type Mode uint8

const (
	// Lenient skips fields outside the schema, whatever their value
	// (validated, not decoded, not allocated), and resolves a key given
	// twice to its last occurrence; every occurrence must still be valid
	// for its field. This is the mode of streams and backtests: producers
	// add fields, and a record is not lost for a field no rule reads.
	Lenient Mode = iota
	// Strict rejects a record with a field outside the schema (the error
	// names the field; unless Config.Open) and a record that gives a key
	// twice. This is the mode of the events written in a ruleset's tests,
	// where an unknown field is a typo.
	Strict
)

var modeNames = [...]string{"lenient", "strict"}

func (m Mode) String() string {
	if int(m) < len(modeNames) {
		return modeNames[m]
	}
	return fmt.Sprintf("Mode(%d)", m)
}

// DecodeError is a record that [Decoder.Decode] rejected.
type DecodeError struct {
	// Column is the 1-based byte column of the offending byte in the record,
	// or 0 when the problem has no single place (a missing field).
	Column int
	// Reason says what is wrong, e.g. `invalid character 'x' in number` or
	// `field "amount": want int, got 3.5`.
	Reason string
	// Unknown is the name of the field outside the schema that a strict
	// decoder refused, "" for any other error.
	Unknown string
}

func (e *DecodeError) Error() string {
	if e.Column > 0 {
		return "column " + strconv.Itoa(e.Column) + ": " + e.Reason
	}
	return e.Reason
}

// maxDepth is the deepest nesting of arrays and objects the decoder skips,
// counting the record's own object; encoding/json has the same limit.
const maxDepth = 10000

// maxOrder bounds the per-position field prediction (Decoder.order), so a
// record with thousands of keys cannot grow it without bound.
const maxOrder = 256

// decField is one field name the decoder looks for.
type decField struct {
	name      string
	slot      int // schema slot; -1 for the event-time field when it is not in the schema
	kind      event.Kind
	eventTime bool // the event-time field
	isTime    bool // holds a time: the event-time field or one of TimeFields
	required  bool
	plain     bool // the name is printable ASCII without '"' or '\\': a key without escapes spells it as is
	str       bool // takes strings as they are: declared string or any, and not a time

	// For a plain name of at most 15 bytes (short), quoted holds the bytes
	// of name+'"' as two little-endian words, zero-padded, and mask has
	// 0xff where quoted has a byte: Decoder.predictedKey compares a key
	// with two loads instead of a call to compare bytes.
	short  bool
	quoted [2]uint64
	mask   [2]uint64
}

// strField is a string decoded for a slot: its bytes in Decoder.arena.
type strField struct{ slot, start, end int }

// Decoder decodes flat JSON objects into [event.Event] values of one schema.
// It is a hand-written single-pass scanner: no reflection, no maps of any,
// no encoding/json.
//
// What it accepts is RFC 8259 JSON, exactly as encoding/json does: the same
// syntax errors, escapes (\uXXXX with surrogate pairs; a lone surrogate
// becomes U+FFFD), invalid UTF-8 in strings replaced by U+FFFD, nesting up
// to 10000 levels. The record must be one object. Fields outside the
// schema and keys given twice are the business of the [Mode]: in Lenient
// mode the former are skipped whatever their value (nested objects and
// arrays included, validated but not decoded, and without allocating) and
// the latter resolve to the last occurrence, every occurrence having to be
// valid for its field (as when encoding/json decodes into a struct); in
// Strict mode both are errors.
//
// Values convert by the declared [event.Field] kind:
//
//   - any (KindNull): a string, a bool, an int for a number written
//     without '.' or exponent that fits int64, a float for one written
//     with them; a number without them beyond int64 is an error (a float
//     would not keep its digits);
//   - KindString, KindBool: only that JSON type;
//   - KindInt: a number whose value, computed exactly in decimal, is a
//     whole number in int64 range: 3, -3, 3.0, 3e2, 1.5e1; 3.5, 1e19 or
//     an integer literal beyond int64 is an error. JSON has one number
//     type, and many encoders write a whole float as 3.0, so 3.0 is the
//     int 3, in both modes (docs/decisions.md, "JSON events");
//   - KindFloat: any number (3 becomes 3.0); an out-of-range float
//     (1e400) is an error;
//   - time fields (TimeField, TimeFields): an RFC 3339 string or a number
//     of epoch milliseconds, as TimeFormat allows, stored as an int of
//     epoch milliseconds.
//
// null is accepted for every kind and gives the null value; fields the
// record lacks are null too. A nested object or array in a schema field is
// an error. Every error is a [*DecodeError].
//
// Strings are copied out of the input (the source reuses its buffer): all
// the strings of an event share one allocation, the event and its fields
// another. A Decoder keeps scratch buffers between calls, so it is not safe
// for concurrent use; use one per goroutine.
type Decoder struct {
	fields  []decField
	index   map[string]int
	nSlots  int
	timeIdx int   // index of the time field in fields
	reqIdx  []int // indexes of the required fields in fields
	format  TimeFormat
	unit    TimeUnit
	check   bool // Config.CheckNumericTimes
	optTime bool // Config.OptionalTime
	strict  bool // Strict mode
	open    bool // Config.Open

	// watch are the fields (indexes, each with a slot) that no record
	// decoded so far has had: [Decoder.Absent]. Each is dropped when a
	// record has it, so that a stream whose records hold every field
	// soon looks at none.
	watch []int

	// order[p] is the field index found at key position p in the previous
	// record (-1: not a field of ours). Records of one stream usually list
	// their keys in the same order, so a byte comparison usually replaces
	// the map lookup.
	order []int

	// untyped are the fields of no declared kind (not times), and kinds
	// how many decoded records gave each a number and a string (Mixed).
	untyped []int
	kinds   [][2]int64
	decoded int64 // the records decoded

	// Per-record scratch (see Decode). A slot given a non-empty string
	// holds event.String("") in vals until newEvent sets the string.
	vals    []event.Value // per slot
	seen    []bool        // per field index: present in this record
	strs    []strField    // the strings given to slots, in order
	arena   []byte        // unescaped strings of the record
	keyBuf  []byte        // an unescaped key
	timeVal event.Time
}

// NewDecoder returns a decoder for cfg.
func NewDecoder(cfg Config) (*Decoder, error) {
	if cfg.Schema == nil {
		return nil, errors.New("jsonev: no schema")
	}
	if cfg.TimeField == "" {
		return nil, errors.New("jsonev: no time field")
	}
	if cfg.Mode > Strict {
		return nil, fmt.Errorf("jsonev: unknown mode %v", cfg.Mode)
	}
	if cfg.TimeFormat > TimeEpochMillis {
		return nil, fmt.Errorf("jsonev: unknown time format %v", cfg.TimeFormat)
	}
	if cfg.TimeUnit > Seconds {
		return nil, fmt.Errorf("jsonev: unknown time unit %v", cfg.TimeUnit)
	}
	s := cfg.Schema
	d := &Decoder{
		nSlots:  s.Len(),
		format:  cfg.TimeFormat,
		unit:    cfg.TimeUnit,
		check:   cfg.CheckNumericTimes,
		optTime: cfg.OptionalTime,
		strict:  cfg.Mode == Strict,
		open:    cfg.Open,
		index:   make(map[string]int, s.Len()+1),
	}
	for i := range s.Len() {
		f := s.Field(i)
		switch f.Kind {
		case event.KindNull, event.KindBool, event.KindInt, event.KindFloat, event.KindString:
		default:
			return nil, fmt.Errorf("jsonev: field %q has unknown kind %v", f.Name, f.Kind)
		}
		d.index[f.Name] = len(d.fields)
		d.fields = append(d.fields, newDecField(f.Name, i, f.Kind))
	}
	ti, ok := d.index[cfg.TimeField]
	if !ok {
		ti = len(d.fields)
		d.index[cfg.TimeField] = ti
		d.fields = append(d.fields, newDecField(cfg.TimeField, -1, event.KindNull))
	}
	d.fields[ti].eventTime = true
	d.timeIdx = ti
	for _, name := range append([]string{cfg.TimeField}, cfg.TimeFields...) {
		fi, ok := d.index[name]
		if !ok || (d.fields[fi].slot < 0 && name != cfg.TimeField) {
			return nil, fmt.Errorf("jsonev: time field %q is not in the schema", name)
		}
		if k := d.fields[fi].kind; k != event.KindNull && k != event.KindInt {
			return nil, fmt.Errorf("jsonev: time field %q is declared %v, want int or any", name, k)
		}
		d.fields[fi].isTime = true
	}
	for fi := range d.fields {
		f := &d.fields[fi]
		f.str = !f.isTime && (f.kind == event.KindString || f.kind == event.KindNull)
	}
	for _, name := range cfg.Required {
		fi, ok := d.index[name]
		if !ok || d.fields[fi].slot < 0 {
			return nil, fmt.Errorf("jsonev: required field %q is not in the schema", name)
		}
		if !d.fields[fi].required {
			d.fields[fi].required = true
			d.reqIdx = append(d.reqIdx, fi)
		}
	}
	for fi, f := range d.fields {
		if f.slot >= 0 && f.kind == event.KindNull && !f.isTime {
			d.untyped = append(d.untyped, fi)
		}
	}
	d.kinds = make([][2]int64, len(d.untyped))
	d.vals = make([]event.Value, d.nSlots)
	d.seen = make([]bool, len(d.fields))
	for fi := range d.fields {
		if d.fields[fi].slot >= 0 {
			d.watch = append(d.watch, fi)
		}
	}
	return d, nil
}

// Absent returns the fields of the schema (in its order) that no record
// the decoder decoded had, null or not: a field misnamed in the schema or
// in the input, which every event then has as null. A record that did not
// decode counts for nothing.
func (d *Decoder) Absent() []string {
	out := make([]string, 0, len(d.watch))
	for _, fi := range d.watch {
		out = append(out, d.fields[fi].name)
	}
	return out
}

// Decoded returns how many records the decoder decoded (those that did
// not decode aside).
func (d *Decoder) Decoded() int64 { return d.decoded }

// MixedField is a field of no declared kind that the records a decoder
// decoded gave as a number and as a string: [Decoder.Mixed].
type MixedField struct {
	Name             string
	Numbers, Strings int64 // the records that gave it each
}

// Mixed returns the fields of no declared kind (an inferred schema), in
// schema order, that some decoded records gave as a number and others as
// a string: producers that disagree ("amount": "12.50" beside 12.5), whose
// strings a comparison with a number never finds equal (==, in) and
// cannot order (<: an error). A record that did not decode counts for
// nothing.
func (d *Decoder) Mixed() []MixedField {
	var out []MixedField
	for i, fi := range d.untyped {
		if k := d.kinds[i]; k[0] > 0 && k[1] > 0 {
			out = append(out, MixedField{Name: d.fields[fi].name, Numbers: k[0], Strings: k[1]})
		}
	}
	return out
}

// newDecField returns the decField of a field, name and kind only (the
// other flags are NewDecoder's business).
func newDecField(name string, slot int, kind event.Kind) decField {
	f := decField{name: name, slot: slot, kind: kind, plain: isPlain(name)}
	if f.short = f.plain && len(name) <= 15; f.short {
		var q, m [16]byte
		copy(q[:], name+`"`)
		for k := range len(name) + 1 {
			m[k] = 0xff
		}
		for w := range 2 {
			f.quoted[w] = binary.LittleEndian.Uint64(q[8*w:])
			f.mask[w] = binary.LittleEndian.Uint64(m[8*w:])
		}
	}
	return f
}

// isPlain reports whether name is printable ASCII without '"' or '\\', so
// that a JSON key without escapes is name exactly when its bytes are.
func isPlain(name string) bool {
	for _, c := range []byte(name) {
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// Decode decodes one JSON object from data into a new event: its Time
// from the time field and its Fields, one per slot of the schema, from the
// fields. Its Seq is left 0, for the caller. The event and its fields are
// one allocation ([event.New]), its strings one more; a record that does
// not decode allocates nothing but its error, a [*DecodeError].
//
// Decode keeps no reference to data, and none to the events it returned.
func (d *Decoder) Decode(data []byte) (*event.Event, error) {
	// The fields are decoded into d.vals, their strings into d.arena
	// (d.strs) and the event time into d.timeVal; newEvent copies them
	// into a new event at the end, so a record that does not decode
	// allocates no event.
	clear(d.vals)
	clear(d.seen)
	d.strs = d.strs[:0]
	d.timeVal = event.MinTime // kept only with OptionalTime: else a record without a time fails
	if cap(d.arena) < len(data)+8 {
		// Room for the strings without escapes, which are at most the
		// record, and the eight spare bytes of copyPlain; twice that, so
		// that slowly growing records do not reallocate each time. The
		// arena stays about the size of the largest record.
		d.arena = make([]byte, 0, 2*len(data)+8)
	}
	d.arena = d.arena[:0]

	i := skipWS(data, 0)
	if i >= len(data) {
		return nil, errAt(i, "empty record")
	}
	if data[i] != '{' {
		return nil, errAt(i, "want a JSON object, found "+describe(data, i))
	}
	i = skipWS(data, i+1)
	if i < len(data) && data[i] == '}' {
		i++
	} else {
		for pos := 0; ; pos++ {
			if i >= len(data) {
				return nil, errAt(i, "unexpected end of input, want an object key")
			}
			if data[i] != '"' {
				return nil, errAt(i, "invalid character "+quoteChar(data[i])+", want an object key")
			}
			keyAt := i
			fi, j := d.predictedKey(data, i, pos)
			if j == 0 {
				var err error
				if fi, j, err = d.key(data, i, pos); err != nil {
					return nil, err
				}
			}
			if d.strict {
				if fi < 0 && !d.open {
					name := d.keyText(data, keyAt)
					return nil, &DecodeError{Column: keyAt + 1, Reason: "unknown field " + strconv.Quote(name) + " (not in the schema)", Unknown: name}
				}
				if fi >= 0 && d.seen[fi] {
					return nil, errAt(keyAt, "field "+strconv.Quote(d.keyText(data, keyAt))+" is given twice")
				}
			}
			i = skipWS(data, j)
			if i >= len(data) {
				return nil, errAt(i, "unexpected end of input after object key")
			}
			if data[i] != ':' {
				return nil, errAt(i, "invalid character "+quoteChar(data[i])+" after object key")
			}
			i = skipWS(data, i+1)
			var err error
			if fi < 0 {
				i, err = skipValue(data, i, 2)
			} else {
				i, err = d.value(data, i, fi)
			}
			if err != nil {
				return nil, err
			}
			if i+1 < len(data) && data[i] == ',' && data[i+1] == '"' {
				i++ // the usual compact `,"`: no whitespace to skip
				continue
			}
			i = skipWS(data, i)
			if i >= len(data) {
				return nil, errAt(i, "unexpected end of input, want ',' or '}'")
			}
			if data[i] == ',' {
				i = skipWS(data, i+1)
				continue
			}
			if data[i] != '}' {
				return nil, errAt(i, afterValue(data, i))
			}
			i++
			break
		}
	}
	if i = skipWS(data, i); i < len(data) {
		return nil, errAt(i, "invalid character "+quoteChar(data[i])+" after the object")
	}

	tf := &d.fields[d.timeIdx]
	if !d.seen[d.timeIdx] && !d.optTime {
		return nil, &DecodeError{Reason: "missing time field " + strconv.Quote(tf.name)}
	}
	for _, fi := range d.reqIdx {
		f := &d.fields[fi]
		if !d.seen[fi] {
			return nil, &DecodeError{Reason: "missing required field " + strconv.Quote(f.name)}
		}
		if d.vals[f.slot].IsNull() {
			return nil, &DecodeError{Reason: "required field " + strconv.Quote(f.name) + " is null"}
		}
	}
	if len(d.watch) > 0 {
		d.watch = slices.DeleteFunc(d.watch, func(fi int) bool { return d.seen[fi] })
	}
	d.decoded++
	for i, fi := range d.untyped {
		switch d.vals[d.fields[fi].slot].Kind() {
		case event.KindInt, event.KindFloat:
			d.kinds[i][0]++
		case event.KindString:
			d.kinds[i][1]++
		}
	}
	return d.newEvent(), nil
}

// newEvent returns the event of the record decoded into d.vals and
// d.arena: one allocation for the event and its fields, one for its
// strings. (Strings in the event's allocation too cost as many
// instructions, for the copy of the fields, and made the binary larger
// and the backtest slower, by a size-class table of generic allocators.)
func (d *Decoder) newEvent() *event.Event {
	ev := event.New(d.nSlots)
	all := string(d.arena)
	ev.Time = d.timeVal
	copy(ev.Fields, d.vals)
	for _, s := range d.strs {
		if d.vals[s.slot].Kind() == event.KindString { // not replaced by a later key
			ev.Fields[s.slot] = event.String(all[s.start:s.end])
		}
	}
	return ev
}

// predictedKey returns the field predicted for the key at data[i] (a '"'),
// found at position pos of the record (d.order), and the index after the
// key, when the key is that field's; j is 0 otherwise.
//
// It compares the raw bytes of the key with the name: for a plain name,
// equal bytes followed by the closing quote are that key exactly, with
// nothing to scan or unescape.
func (d *Decoder) predictedKey(data []byte, i, pos int) (fi, j int) {
	if pos >= len(d.order) || d.order[pos] < 0 {
		return -1, 0
	}
	fi = d.order[pos]
	f := &d.fields[fi]
	end := i + 1 + len(f.name)
	if f.short && len(data)-i >= 17 {
		k := data[i+1 : i+17]
		w0, w1 := binary.LittleEndian.Uint64(k), binary.LittleEndian.Uint64(k[8:])
		if (w0&f.mask[0])^f.quoted[0]|(w1&f.mask[1])^f.quoted[1] == 0 {
			return fi, end + 1
		}
	} else if f.plain && end < len(data) && data[end] == '"' && string(data[i+1:end]) == f.name {
		return fi, end + 1
	}
	return -1, 0
}

// key scans the object key at data[i] (a '"'), found at position pos of
// the record, and returns the index in d.fields of its field (-1: not one
// of ours) and the index after the key.
func (d *Decoder) key(data []byte, i, pos int) (fi, j int, err error) {
	key, j, err := d.scanKey(data, i)
	if err != nil {
		return -1, j, err
	}
	return d.lookup(key, pos), j, nil
}

// keyText returns the key at data[i], a valid JSON string, unescaped: for
// error messages.
func (d *Decoder) keyText(data []byte, i int) string {
	key, _, _ := d.scanKey(data, i)
	return string(key)
}

// lookup returns the index in d.fields of the key found at position pos,
// or -1 when the key is not one of ours.
func (d *Decoder) lookup(key []byte, pos int) int {
	if pos < len(d.order) {
		if fi := d.order[pos]; fi >= 0 && string(key) == d.fields[fi].name {
			return fi
		}
	}
	fi, ok := d.index[string(key)] // no allocation: the compiler special-cases m[string(b)]
	if !ok {
		fi = -1
	}
	if pos < len(d.order) {
		d.order[pos] = fi
	} else if pos == len(d.order) && pos < maxOrder {
		d.order = append(d.order, fi)
	}
	return fi
}

// value decodes the value at data[i] into field fi and returns the index
// after it. The usual values, strings without escapes for a field that
// takes them, are decoded here; anyValue decodes the rest.
func (d *Decoder) value(data []byte, i, fi int) (int, error) {
	f := &d.fields[fi]
	again := d.seen[fi]
	d.seen[fi] = true
	if f.str && i < len(data) && data[i] == '"' {
		if i+1 < len(data) && data[i+1] == '"' && !again {
			// The empty string is its own final value, unless an
			// earlier string of a key given twice is in d.strs.
			d.vals[f.slot] = event.String("")
			return i + 2, nil
		}
		start := len(d.arena)
		if n, j, ok := copyPlain(d.arena[start:cap(d.arena)], data, i); ok {
			d.arena = d.arena[:start+n]
			d.setString(f.slot, start)
			return j, nil
		}
	}
	return d.anyValue(data, i, f)
}

// setString records that slot holds the string that starts at start in
// d.arena and ends at its end.
func (d *Decoder) setString(slot, start int) {
	d.strs = append(d.strs, strField{slot, start, len(d.arena)})
	d.vals[slot] = event.String("") // newEvent sets the string
}

// anyValue decodes the value at data[i] into field f, whatever it is.
func (d *Decoder) anyValue(data []byte, i int, f *decField) (int, error) {
	if i >= len(data) {
		return i, errAt(i, "unexpected end of input, want a value")
	}
	if f.isTime {
		return d.timeValue(data, i, f)
	}
	switch c := data[i]; {
	case c == '"':
		if f.kind != event.KindNull && f.kind != event.KindString {
			return i, d.kindErr(i, f, "a string")
		}
		start := len(d.arena)
		var err error
		if d.arena, i, err = appendString(d.arena, data, i); err != nil {
			return i, err
		}
		d.setString(f.slot, start)
		return i, nil

	case c == '-' || ('0' <= c && c <= '9'):
		return d.number(data, i, f)

	case c == 't' || c == 'f':
		b, j, err := scanBool(data, i)
		if err != nil {
			return j, err
		}
		if f.kind != event.KindNull && f.kind != event.KindBool {
			return i, d.kindErr(i, f, "a bool")
		}
		d.set(f.slot, event.Bool(b))
		return j, nil

	case c == 'n':
		j, err := scanNull(data, i)
		if err != nil {
			return j, err
		}
		d.set(f.slot, event.Null)
		return j, nil

	case c == '{' || c == '[':
		return i, d.kindErr(i, f, compound(c))
	}
	return i, errAt(i, "invalid character "+quoteChar(data[i])+", want a value")
}

// timeValue decodes the value at data[i] of a time field: an RFC 3339
// string or a number of epoch milliseconds (as d.format allows), stored as
// an int of milliseconds.
func (d *Decoder) timeValue(data []byte, i int, f *decField) (int, error) {
	var ms int64
	var j int
	switch c := data[i]; {
	case c == '"':
		var s []byte
		if j = plainRun(data, i+1); j < len(data) && data[j] == '"' {
			s, j = data[i+1:j], j+1 // nothing to unescape
		} else {
			start := len(d.arena)
			var err error
			if d.arena, j, err = appendString(d.arena, data, i); err != nil {
				return j, err
			}
			s = d.arena[start:]
			d.arena = d.arena[:start] // s stays readable until the next append
		}
		if d.format == TimeEpochMillis {
			return i, timeErr(i, f, ": want epoch milliseconds, got a string")
		}
		t, ok := parseRFC3339Millis(s)
		if !ok {
			if leapSecond(s) {
				return i, timeErr(i, f, ": "+strconv.Quote(string(s))+" is a leap second (second 60), which times in milliseconds since the epoch cannot hold")
			}
			return i, timeErr(i, f, ": "+strconv.Quote(string(s))+" is not RFC 3339"+rfc3339Hint(s, d.format != TimeRFC3339))
		}
		ms = int64(t)

	case c == '-' || ('0' <= c && c <= '9'):
		var err error
		if ms, j, err = d.numericTime(data, i, f); err != nil {
			return j, err
		}
		if d.check && (event.Time(ms) < PlausibleFrom || event.Time(ms) >= PlausibleTo) {
			return i, timeErr(i, f, ": "+implausible(data[i:j], ms, d.unit))
		}

	case c == 'n':
		j, err := scanNull(data, i)
		if err != nil {
			return j, err
		}
		if f.eventTime && !d.optTime {
			return i, timeErr(i, f, " is null")
		}
		d.set(f.slot, event.Null)
		return j, nil

	case c == 't' || c == 'f':
		if _, j, err := scanBool(data, i); err != nil {
			return j, err
		}
		return i, timeErr(i, f, ": want a time, got a bool")

	case c == '{' || c == '[':
		return i, timeErr(i, f, ": want a time, got "+compound(c))

	default:
		return i, errAt(i, "invalid character "+quoteChar(c)+", want a value")
	}
	if f.eventTime {
		d.timeVal = event.Time(ms)
	}
	d.set(f.slot, event.Int(ms))
	return j, nil
}

// numericTime returns the milliseconds of the number at data[i] in a time
// field, and the index after it. A number of plain shape in milliseconds
// takes a shortcut to the same value.
func (d *Decoder) numericTime(data []byte, i int, f *decField) (ms int64, j int, err error) {
	if d.format != TimeRFC3339 && d.unit == Millis {
		if p, ok := scanPlainNumber(data, i); ok {
			if ms, ok := p.int(); ok {
				return ms, p.end, nil
			}
		}
	}
	n, err := scanNumber(data, i)
	if err != nil {
		return 0, n.end, err
	}
	j = n.end
	if d.format == TimeRFC3339 {
		return 0, j, timeErr(i, f, ": want an RFC 3339 string, got a number")
	}
	text := data[i:j]
	if d.unit == Seconds {
		if ms, ok := secondsMillis(text); ok {
			return ms, j, nil
		}
		return 0, j, timeErr(i, f, ": "+string(text)+" epoch seconds is out of range")
	}
	if ms, ok := n.wholeInt(text); ok {
		return ms, j, nil
	}
	if beyondInt64(text) {
		return 0, j, timeErr(i, f, ": "+string(text)+" epoch milliseconds is out of range")
	}
	return 0, j, timeErr(i, f, ": "+string(text)+" is not whole epoch milliseconds")
}

// implausible explains a number that is no plausible time in unit (ms: its
// value in milliseconds): what it is, and the usual units that would make
// it plausible.
func implausible(text []byte, ms int64, unit TimeUnit) string {
	msg := string(text) + " as epoch " + unitWords[unit] + " is " + timeText(ms) + ", outside 2000..2100"
	v, _ := parseFloat(text) // the number as written
	fits, readable := false, false
	for _, u := range []struct {
		name     string
		perMs    float64 // counts of the unit per millisecond
		readable bool    // a unit the decoder reads (TimeUnit)
	}{{"seconds", 1e-3, true}, {"milliseconds", 1, true}, {"microseconds", 1e3, false}, {"nanoseconds", 1e6, false}} {
		alt := v / u.perMs
		if u.name != unitWords[unit] && alt >= float64(PlausibleFrom) && alt < float64(PlausibleTo) {
			msg += "; as epoch " + u.name + " it is " + timeText(int64(alt))
			fits, readable = true, readable || u.readable
		}
	}
	if fits && !readable {
		// Saying the unit cannot help: only seconds and milliseconds are.
		return msg + " (times are read as epoch seconds or milliseconds only: write them so, or as RFC 3339)"
	}
	return msg + " (say the time unit)"
}

var unitWords = [...]string{Millis: "milliseconds", Seconds: "seconds"}

// timeText formats ms as RFC 3339, or as a count when it is beyond what
// time.Time formats in four digits.
func timeText(ms int64) string {
	const year10000 = 253402300800000
	if ms <= -62135596800000 || ms >= year10000 {
		return "beyond year 9999"
	}
	return event.Time(ms).String()
}

// timeErr reports a bad value of a time field.
func timeErr(i int, f *decField, msg string) error {
	what := "field "
	if f.eventTime {
		what = "time field "
	}
	return errAt(i, what+strconv.Quote(f.name)+msg)
}

func compound(c byte) string {
	if c == '[' {
		return "an array"
	}
	return "an object"
}

// set stores a non-string value in slot.
func (d *Decoder) set(slot int, v event.Value) {
	if slot >= 0 {
		d.vals[slot] = v
	}
}

func (d *Decoder) kindErr(i int, f *decField, got string) error {
	want := "a value"
	if f.kind != event.KindNull {
		want = f.kind.String()
	}
	return errAt(i, "field "+strconv.Quote(f.name)+": want "+want+", got "+got)
}

// number decodes the number at data[i] into field f.
func (d *Decoder) number(data []byte, i int, f *decField) (int, error) {
	if p, ok := scanPlainNumber(data, i); ok {
		if v, ok := p.value(f.kind); ok {
			d.set(f.slot, v)
			return p.end, nil
		}
	}
	return d.anyNumber(data, i, f)
}

// value returns the value of p for a field of kind, when the plain number
// computes it; false sends the number to anyNumber (values it computes
// otherwise, and errors).
func (p *plainNumber) value(kind event.Kind) (event.Value, bool) {
	switch kind {
	case event.KindInt:
		v, ok := p.int()
		return event.Int(v), ok
	case event.KindFloat:
		f, ok := p.float()
		return event.Float(f), ok
	case event.KindNull:
		if p.frac == 0 {
			v, ok := p.int() // an integer beyond int64 is an error (anyNumber)
			return event.Int(v), ok
		}
		f, ok := p.float()
		return event.Float(f), ok
	}
	return event.Null, false
}

// anyNumber decodes the number at data[i] into field f, whatever its
// shape.
func (d *Decoder) anyNumber(data []byte, i int, f *decField) (int, error) {
	n, err := scanNumber(data, i)
	if err != nil {
		return n.end, err
	}
	text := data[i:n.end]
	switch f.kind {
	case event.KindNull:
		if n.isInt && !n.overflow {
			d.set(f.slot, event.Int(n.intVal()))
			return n.end, nil
		}
		if n.isInt {
			// An id, most likely: as a float it would be another number
			// (two such ids one key, one alert id; the messy-data trial).
			return i, errAt(i, "field "+strconv.Quote(f.name)+": the whole number "+string(text)+
				" is beyond int64, and a float would not keep its digits: send it as a string (an id), or declare the field float to take it rounded")
		}
		fl, err := parseFloat(text)
		if err != nil {
			return i, errAt(i, "field "+strconv.Quote(f.name)+": number "+string(text)+" is out of range")
		}
		d.set(f.slot, event.Float(fl))
	case event.KindInt:
		v, ok := n.wholeInt(text)
		if !ok {
			msg := "field " + strconv.Quote(f.name) + ": want int, got " + string(text)
			if beyondInt64(text) {
				msg += " (out of int64 range)"
			}
			return i, errAt(i, msg)
		}
		d.set(f.slot, event.Int(v))
	case event.KindFloat:
		fl, err := parseFloat(text)
		if err != nil {
			return i, errAt(i, "field "+strconv.Quote(f.name)+": number "+string(text)+" is out of range")
		}
		d.set(f.slot, event.Float(fl))
	default:
		return i, d.kindErr(i, f, "a number")
	}
	return n.end, nil
}

// parseRFC3339Millis parses b as an RFC 3339 date-time in the grammar of
// TimeRFC3339 and returns it in milliseconds since the epoch.
// leapSecond reports whether b is an RFC 3339 time of second 60, a leap
// second: valid RFC 3339, which parseRFC3339Millis refuses, as epoch
// milliseconds (and Go's time package) have no such second.
func leapSecond(b []byte) bool {
	if len(b) <= len("2006-01-02T15:04:05") || b[10] != 'T' || b[13] != ':' || b[16] != ':' || b[17] != '6' || b[18] != '0' {
		return false
	}
	c := append([]byte(nil), b...)
	c[17], c[18] = '5', '9'
	_, ok := parseRFC3339Millis(c)
	return ok
}

func parseRFC3339Millis(b []byte) (event.Time, bool) {
	if len(b) == len("2006-01-02T15:04:05.000Z") {
		if t, ok := parseUTCMillis((*[24]byte)(b)); ok {
			return t, true
		}
	}
	const base = len("2006-01-02T15:04:05")
	if len(b) < base+1 {
		return 0, false
	}
	if b[4] != '-' || b[7] != '-' || b[10] != 'T' || b[13] != ':' || b[16] != ':' {
		return 0, false
	}
	year, ok1 := digits(b[0:4])
	month, ok2 := digits(b[5:7])
	day, ok3 := digits(b[8:10])
	hour, ok4 := digits(b[11:13])
	minute, ok5 := digits(b[14:16])
	sec, ok6 := digits(b[17:19])
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) ||
		month < 1 || month > 12 || day < 1 || day > daysIn(month, year) ||
		hour > 23 || minute > 59 || sec > 59 {
		return 0, false
	}
	b = b[base:]
	var ms int64
	if len(b) >= 2 && b[0] == '.' && '0' <= b[1] && b[1] <= '9' {
		k := 1
		for ; k < len(b) && '0' <= b[k] && b[k] <= '9'; k++ {
			if k <= 3 {
				ms = ms*10 + int64(b[k]-'0')
			}
		}
		for d := k; d <= 3; d++ {
			ms *= 10
		}
		b = b[k:]
	}
	var offset int64
	switch {
	case len(b) == 1 && b[0] == 'Z':
	case len(b) == 6 && (b[0] == '+' || b[0] == '-') && b[3] == ':':
		oh, ok1 := digits(b[1:3])
		om, ok2 := digits(b[4:6])
		if !ok1 || !ok2 || oh > 23 || om > 59 {
			return 0, false
		}
		offset = (oh*60 + om) * 60
		if b[0] == '-' {
			offset = -offset
		}
	default:
		return 0, false
	}
	secs := daysFromCivil(year, month, day)*86400 + hour*3600 + minute*60 + sec - offset
	return event.Time(secs*1000 + ms), true
}

// parseUTCMillis parses the most common shape of RFC 3339 date-times,
// 2006-01-02T15:04:05.000Z, with the checks and arithmetic of
// parseRFC3339Millis at fixed places; false for anything else, which
// parseRFC3339Millis then parses or refuses.
func parseUTCMillis(b *[24]byte) (event.Time, bool) {
	if b[4] != '-' || b[7] != '-' || b[10] != 'T' || b[13] != ':' || b[16] != ':' || b[19] != '.' || b[23] != 'Z' {
		return 0, false
	}
	// d(k) is the digit at b[k]; a non-digit sets bad.
	bad := false
	d := func(k int) int64 {
		c := b[k] - '0' // a byte below '0' wraps around above 9
		bad = bad || c > 9
		return int64(c)
	}
	year := d(0)*1000 + d(1)*100 + d(2)*10 + d(3)
	month, day := d(5)*10+d(6), d(8)*10+d(9)
	hour, minute, sec := d(11)*10+d(12), d(14)*10+d(15), d(17)*10+d(18)
	ms := d(20)*100 + d(21)*10 + d(22)
	if bad || month < 1 || month > 12 || day < 1 || day > daysIn(month, year) || hour > 23 || minute > 59 || sec > 59 {
		return 0, false
	}
	secs := daysFromCivil(year, month, day)*86400 + hour*3600 + minute*60 + sec
	return event.Time(secs*1000 + ms), true
}

// digits parses a short run of decimal digits.
func digits(b []byte) (int64, bool) {
	var v int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	return v, true
}

func daysIn(month, year int64) int64 {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// daysFromCivil returns the days since 1970-01-01 of a proleptic Gregorian
// date (Howard Hinnant's algorithm). REQUIRES: year >= 0.
func daysFromCivil(y, m, d int64) int64 {
	if m <= 2 {
		y--
	}
	era := y / 400
	if y < 0 {
		era = (y - 399) / 400
	}
	yoe := y - era*400
	mp := (m + 9) % 12
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}

// rfc3339Hint says how to write a time that is RFC 3339 but for its
// separator or its zone, the usual slips ("2026-01-01 10:00:00",
// "2026-01-01T10:00:00", "2026-01-01T10:00:00+0530"): " (no time zone:
// write \"...Z\" for UTC)", " (write \"...T...\")"; and a number in
// quotes (an int64 as protobuf's JSON writes it) to drop them, when
// numbers is true (the decoder reads a number as a time: not under
// TimeRFC3339). It is "" for any other text.
func rfc3339Hint(s []byte, numbers bool) string {
	if numbers && len(s) > 0 && (s[0] == '-' || '0' <= s[0] && s[0] <= '9') {
		if n, err := scanNumber(s, 0); err == nil && n.end == len(s) {
			return " (a number in quotes: write an epoch time as a JSON number, without them)"
		}
	}
	fixed := []byte(string(s))
	if i := 10; len(fixed) > i && fixed[i] == ' ' {
		fixed[i] = 'T'
	}
	if n := len(fixed); n > 5 && (fixed[n-5] == '+' || fixed[n-5] == '-') {
		// A zone without its colon, as ISO 8601's basic format and Java's
		// "Z" pattern write it.
		fixed = append(fixed[:n-2:n-2], ':', fixed[n-2], fixed[n-1])
	}
	if _, ok := parseRFC3339Millis(fixed); ok {
		return " (write " + strconv.Quote(string(fixed)) + ")"
	}
	if _, ok := parseRFC3339Millis(append(fixed, 'Z')); ok {
		return " (no time zone: write " + strconv.Quote(string(fixed)+"Z") + " for UTC)"
	}
	return ""
}
