package rules

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/cepheus-cep/cepheus/event"
)

// DecodeEvent decodes one event, a flat JSON object, into an event of the
// ruleset's schema. The event time field is an RFC 3339 string or a number
// of milliseconds since the epoch; it sets Event.Time, and its slot holds
// the milliseconds as an int (other fields of type time likewise). With a
// declared schema, values must fit the declared types and unknown fields
// are errors; without one, fields no expression reads are ignored, and a
// number is an int when written without a fraction or exponent, else a
// float. null is the null value. Seq is left 0.
func (rs *Ruleset) DecodeEvent(data []byte) (*event.Event, error) {
	ev, err := rs.decodeEvent(data)
	if err != nil {
		return nil, fmt.Errorf("rules: %w", err)
	}
	return ev, nil
}

// decodeError is an error in an event at a byte offset of its JSON.
type decodeError struct {
	off int
	msg string
}

func (e *decodeError) Error() string { return e.msg }

func (rs *Ruleset) decodeEvent(data []byte) (*event.Event, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	fail := func(off int64, format string, args ...any) error {
		return &decodeError{off: int(off), msg: fmt.Sprintf(format, args...)}
	}
	syntax := func(err error) error {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return fail(max(se.Offset-1, 0), "malformed event: %v", se)
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return fail(int64(len(data)), "malformed event: unexpected end")
		}
		return fail(dec.InputOffset(), "malformed event: %v", err)
	}
	if t, err := dec.Token(); err != nil {
		return nil, syntax(err)
	} else if t != json.Delim('{') {
		return nil, fail(0, "an event is a JSON object")
	}
	fields := make([]event.Value, rs.Schema.Len())
	seen := make([]bool, rs.Schema.Len())
	for dec.More() {
		off := dec.InputOffset()
		t, err := dec.Token()
		if err != nil {
			return nil, syntax(err)
		}
		key := t.(string)
		keyOff := off + int64(bytes.IndexByte(data[off:], '"'))
		var v any
		if err := dec.Decode(&v); err != nil {
			return nil, syntax(err)
		}
		slot, ok := rs.Schema.Slot(key)
		if !ok {
			if rs.Declared {
				return nil, fail(keyOff, "unknown field %q (not in the schema)", key)
			}
			continue
		}
		if seen[slot] {
			return nil, fail(keyOff, "field %q is given twice", key)
		}
		seen[slot] = true
		val, err := rs.fieldValue(slot, v)
		if err != nil {
			return nil, fail(keyOff, "field %q: %v", key, err)
		}
		fields[slot] = val
	}
	if _, err := dec.Token(); err != nil {
		return nil, syntax(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fail(dec.InputOffset(), "unexpected data after the event")
	}
	ev := &event.Event{Fields: fields}
	if rs.TimeSlot >= 0 {
		ms, ok := fields[rs.TimeSlot].AsInt()
		if !ok {
			return nil, fail(0, "the event has no %s (its event time)", rs.TimeField)
		}
		ev.Time = event.Time(ms)
	}
	return ev, nil
}

// fieldValue converts the JSON value v (decoded with UseNumber) for slot.
func (rs *Ruleset) fieldValue(slot int, v any) (event.Value, error) {
	if v == nil {
		return event.Null, nil
	}
	if rs.timeSlots[slot] {
		switch t := v.(type) {
		case string:
			tm, err := time.Parse(time.RFC3339Nano, t)
			if err != nil {
				return event.Null, fmt.Errorf("want an RFC 3339 time or epoch milliseconds, got %q", t)
			}
			return event.Int(tm.UnixMilli()), nil
		case json.Number:
			ms, err := t.Int64()
			if err != nil {
				return event.Null, fmt.Errorf("want an RFC 3339 time or epoch milliseconds, got %s", t)
			}
			return event.Int(ms), nil
		}
		return event.Null, fmt.Errorf("want an RFC 3339 time or epoch milliseconds, got %s", jsonKind(v))
	}
	kind := rs.Schema.Field(slot).Kind
	switch t := v.(type) {
	case string:
		if kind == event.KindString || kind == event.KindNull {
			return event.String(t), nil
		}
	case bool:
		if kind == event.KindBool || kind == event.KindNull {
			return event.Bool(t), nil
		}
	case json.Number:
		integral := !strings.ContainsAny(t.String(), ".eE")
		switch {
		case kind == event.KindInt || kind == event.KindNull && integral:
			i, err := t.Int64()
			if err != nil {
				if kind == event.KindNull {
					break
				}
				return event.Null, fmt.Errorf("want an int, got %s", t)
			}
			return event.Int(i), nil
		}
		if kind == event.KindFloat || kind == event.KindNull {
			f, err := t.Float64()
			if err != nil {
				return event.Null, fmt.Errorf("number %s out of range", t)
			}
			return event.Float(f), nil
		}
	case map[string]any, []any:
		return event.Null, fmt.Errorf("nested values are not supported (events are flat)")
	}
	return event.Null, fmt.Errorf("want %s, got %s", kind, jsonKind(v))
}

func jsonKind(v any) string {
	switch t := v.(type) {
	case string:
		return fmt.Sprintf("string %q", t)
	case bool:
		return "bool"
	case json.Number:
		return "number " + t.String()
	case map[string]any:
		return "object"
	case []any:
		return "array"
	}
	return "null"
}
