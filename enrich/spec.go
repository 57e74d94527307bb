package enrich

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/cepheus-cep/cepheus/event"
)

// Field is one typed field of a lookup, with its default.
type Field struct {
	// Name is the field's name as the ruleset declares it (home_country);
	// conditions read it as lookup.name. It is also the member of a lookup
	// file's lines, the hash field of the Redis "hash" format and the member
	// of the Redis "json" format that holds the field.
	Name string
	// Kind is event.KindString, KindInt, KindFloat or KindBool. A declared
	// time is KindInt (epoch milliseconds) with Time set.
	Kind event.Kind
	// Time marks a time field: it accepts RFC 3339 strings or epoch
	// milliseconds and is stored as KindInt milliseconds. It requires Kind
	// == event.KindInt.
	Time bool
	// Default is the value an event gets when the lookup has no value for
	// the field: no record, a null key, a null field, or a failure under
	// [FailOpen]. It is null or of Kind; event.Null when the declaration
	// gives none.
	Default event.Value
}

// Spec is a lookup as a ruleset declares it.
type Spec struct {
	// Name is the lookup's name (customer): the prefix of its fields in
	// conditions, and part of the default Redis key prefix.
	Name string
	// KeyFields are the event fields the lookup key is built from, in order
	// (see [KeyOf]). A lookup file names them by these names.
	KeyFields []string
	// KeyKinds are the declared kinds of the key fields, in the order of
	// KeyFields (event.KindNull for a field of no declared kind), or nil
	// when none is known: all of event.KindNull. A number in a lookup
	// record's key member makes the key part of the value that the event
	// decoder gives a field of that kind (see [OpenFile]), so that the
	// record's key is the key ([KeyOf]) of the events that carry the same
	// number.
	KeyKinds []event.Kind
	// KeyTimes say which key fields are times (of kind event.KindInt,
	// epoch milliseconds), in the order of KeyFields, or nil when none is:
	// a record's key member for one is an RFC 3339 string or a number of
	// epoch milliseconds, and makes the key part of those milliseconds.
	KeyTimes []bool
	// Fields are the fields the lookup adds to events, in order: the order
	// of the values of a [Source]'s records.
	Fields []Field
}

// validate reports every problem of s, joined, each prefixed with the
// lookup's name.
func (s Spec) validate() error {
	name := s.Name
	if name == "" {
		name = "(unnamed)"
	}
	var errs []error
	add := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("enrich: lookup %s: "+format, append([]any{name}, args...)...))
	}
	if s.Name == "" {
		add("no name")
	}
	if len(s.KeyFields) == 0 {
		add("no key fields")
	}
	for i, k := range s.KeyFields {
		if k == "" {
			add("key field %d has no name", i+1)
		}
	}
	if len(s.KeyKinds) > 0 && len(s.KeyKinds) != len(s.KeyFields) {
		add("%d key kinds for %d key fields", len(s.KeyKinds), len(s.KeyFields))
	} else {
		for i, k := range s.KeyKinds {
			switch k {
			case event.KindNull, event.KindString, event.KindInt, event.KindFloat, event.KindBool:
			default:
				add("key field %s: kind %s (want null, string, int, float or bool)", s.KeyFields[i], k)
			}
		}
	}
	if len(s.KeyTimes) > 0 && len(s.KeyTimes) != len(s.KeyFields) {
		add("%d key times for %d key fields", len(s.KeyTimes), len(s.KeyFields))
	} else {
		for i, t := range s.KeyTimes {
			if t && s.keyKind(i) != event.KindInt {
				add("key field %s: a time must be of kind int (epoch ms), not %s", s.KeyFields[i], s.keyKind(i))
			}
		}
	}
	if len(s.Fields) == 0 {
		add("no fields")
	}
	seen := make(map[string]bool, len(s.Fields))
	for i, f := range s.Fields {
		if f.Name == "" {
			add("field %d has no name", i+1)
			continue
		}
		if seen[f.Name] {
			add("field %s declared twice", f.Name)
		}
		seen[f.Name] = true
		switch f.Kind {
		case event.KindString, event.KindInt, event.KindFloat, event.KindBool:
		default:
			add("field %s: kind %s (want string, int, float or bool)", f.Name, f.Kind)
			continue
		}
		if f.Time && f.Kind != event.KindInt {
			add("field %s: a time field must be of kind int (epoch ms), not %s", f.Name, f.Kind)
		}
		if !f.Default.IsNull() && f.Default.Kind() != f.Kind {
			add("field %s: default %s is a %s, the field a %s", f.Name, f.Default, f.Default.Kind(), f.Kind)
		}
	}
	return errors.Join(errs...)
}

// keyKind returns the declared kind of key field i (event.KindNull when
// not known).
func (s Spec) keyKind(i int) event.Kind {
	if i < len(s.KeyKinds) {
		return s.KeyKinds[i]
	}
	return event.KindNull
}

// keyTime reports whether key field i is a time.
func (s Spec) keyTime(i int) bool { return i < len(s.KeyTimes) && s.KeyTimes[i] }

// defaults returns the fields' defaults, in order.
func (s Spec) defaults() []event.Value {
	d := make([]event.Value, len(s.Fields))
	for i, f := range s.Fields {
		d[i] = f.Default
	}
	return d
}

// keySeparator joins the parts of a key of several fields (see [KeyOf]).
const keySeparator = '|'

// KeyOf builds the lookup key of ev from the values at slots, in order:
// strings as they are, ints in decimal, floats as strconv 'g' -1 but a
// whole number in int64 range in decimal (1e6 as 1000000), bools as
// true/false, several parts joined by "|", in each of which a backslash
// and "|" are escaped with a backslash (so that ("a|b", "c") and ("a", "b|c")
// are two keys; a key of one part is never escaped). ok is false when a
// part is null: the event then gets no lookup, only the defaults.
//
// buf is scratch space for building a key of several parts or of a
// non-string part, used when its capacity suffices; KeyOf does not keep it.
// A key of one string part is the string itself, with no allocation.
func KeyOf(ev *event.Event, slots []int, buf []byte) (key string, ok bool) {
	if len(slots) == 1 {
		if s, isStr := ev.Field(slots[0]).AsString(); isStr {
			return s, true
		}
	}
	b, ok := appendKey(buf[:0], ev, slots)
	if !ok {
		return "", false
	}
	return string(b), true
}

// appendKey appends the key of ev from slots to buf (see [KeyOf]); ok is
// false when a part is null.
func appendKey(buf []byte, ev *event.Event, slots []int) ([]byte, bool) {
	for i, s := range slots {
		if i > 0 {
			buf = append(buf, keySeparator)
		}
		if len(slots) > 1 {
			if str, isStr := ev.Field(s).AsString(); isStr {
				buf = appendEscapedPart(buf, str)
				continue
			}
		}
		var ok bool
		if buf, ok = appendKeyPart(buf, ev.Field(s)); !ok {
			return buf, false
		}
	}
	return buf, true
}

// keyEscape is the escape character of the parts of a key of several
// parts (see [KeyOf]).
const keyEscape = '\\'

// appendEscapedPart appends part, one part of a key of several, with
// keyEscape and keySeparator escaped.
func appendEscapedPart(buf []byte, part string) []byte {
	if strings.IndexByte(part, keySeparator) < 0 && strings.IndexByte(part, keyEscape) < 0 {
		return append(buf, part...)
	}
	for i := 0; i < len(part); i++ {
		if c := part[i]; c == keySeparator || c == keyEscape {
			buf = append(buf, keyEscape)
		}
		buf = append(buf, part[i])
	}
	return buf
}

// joinKey joins the parts of a key (see [KeyOf]).
func joinKey(parts []string) string {
	if len(parts) == 1 {
		return parts[0]
	}
	var buf []byte
	for i, p := range parts {
		if i > 0 {
			buf = append(buf, keySeparator)
		}
		buf = appendEscapedPart(buf, p)
	}
	return string(buf)
}

// appendKeyPart appends one part of a key; ok is false when v is null.
func appendKeyPart(buf []byte, v event.Value) ([]byte, bool) {
	switch v.Kind() {
	case event.KindString:
		s, _ := v.AsString()
		return append(buf, s...), true
	case event.KindInt:
		i, _ := v.AsInt()
		return strconv.AppendInt(buf, i, 10), true
	case event.KindFloat:
		f, _ := v.AsFloat()
		return appendFloatPart(buf, f), true
	case event.KindBool:
		b, _ := v.AsBool()
		return strconv.AppendBool(buf, b), true
	}
	return buf, false
}

// appendFloatPart appends f as a key part: a whole number in int64 range
// as the int of its value, in decimal (as rule keys and aggregate keys
// treat it: 1e6 and 1000000 are one key), another as strconv 'g' -1.
func appendFloatPart(buf []byte, f float64) []byte {
	if f == math.Trunc(f) && math.Abs(f) < 1<<63 {
		return strconv.AppendInt(buf, int64(f), 10)
	}
	return strconv.AppendFloat(buf, f, 'g', -1, 64)
}

// checkRecord reports whether rec, a source's record, has one value per
// field of s, each null or of the field's kind.
func (s Spec) checkRecord(rec []event.Value) error {
	if len(rec) != len(s.Fields) {
		return fmt.Errorf("%d values for %d fields", len(rec), len(s.Fields))
	}
	for i, v := range rec {
		if f := s.Fields[i]; !v.IsNull() && v.Kind() != f.Kind {
			return fmt.Errorf("field %s is a %s, want a %s", f.Name, v.Kind(), f.Kind)
		}
	}
	return nil
}
