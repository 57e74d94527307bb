package enrich

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/cepheus-cep/cepheus/event"
)

// recordCodec converts the JSON objects of a lookup file and of the Redis
// "json" format, and the strings of the Redis "hash" format, into records
// of one spec, and records back into them (for [Load]).
type recordCodec struct {
	spec Spec
}

// decodeObject decodes data, one JSON object, into the values of the spec's
// fields (event.Null for a member that is missing or null). Other members
// are ignored. When parts is not nil (len(parts) == len(spec.KeyFields)), it
// also fills parts with the key parts of the key members and returns the
// key they make (see [KeyOf]). An error names the member at fault.
func (c recordCodec) decodeObject(data []byte, parts []string) (key string, rec []event.Value, err error) {
	if len(data) == 0 || data[0] != '{' {
		return "", nil, fmt.Errorf("not a JSON object: %s", describeJSON(data))
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil {
		return "", nil, fmt.Errorf("not a JSON object: %s", jsonErrorText(err))
	}
	if parts != nil {
		for i, name := range c.spec.KeyFields {
			if parts[i], err = jsonKeyPart(obj[name], c.spec.keyKind(i), c.spec.keyTime(i)); err != nil {
				return "", nil, fmt.Errorf("key field %s: %w", name, err)
			}
		}
		key = joinKey(parts)
	}
	rec = make([]event.Value, len(c.spec.Fields))
	for i, f := range c.spec.Fields {
		raw, ok := obj[f.Name]
		if !ok {
			continue
		}
		if rec[i], err = jsonValue(f, raw); err != nil {
			return "", nil, fmt.Errorf("field %s: %w", f.Name, err)
		}
	}
	return key, rec, nil
}

// jsonErrorText is err's message without encoding/json's package prefix.
func jsonErrorText(err error) string {
	return strings.TrimPrefix(err.Error(), "json: ")
}

// jsonKeyPart is the key part of one key member, as [KeyOf] would build it
// from the event value the member decodes to in a key field of kind: a
// string as it is, a bool as true/false, and a number as the event decoder
// reads it, then formats it as KeyOf does. For an int field, the number
// must be a whole number in int64 range ([event.WholeInt]), in decimal; for
// a float field, the nearest float64, formatted as KeyOf formats a float
// (a whole number in int64 range in decimal, another as strconv 'g' -1);
// for another kind
// (event.KindNull: undeclared), an int in decimal when the number is
// written without '.' or exponent and fits int64, else a float. For a
// time field (isTime, of kind int), an RFC 3339 string or a number by the
// int rule: the epoch milliseconds in decimal.
func jsonKeyPart(raw json.RawMessage, kind event.Kind, isTime bool) (string, error) {
	if raw == nil {
		return "", fmt.Errorf("missing")
	}
	if isTime && raw[0] != 'n' {
		v, err := jsonValue(Field{Kind: event.KindInt, Time: true}, raw)
		if err != nil {
			return "", err
		}
		ms, _ := v.AsInt()
		return strconv.FormatInt(ms, 10), nil
	}
	switch raw[0] {
	case 'n':
		return "", fmt.Errorf("null (a record needs its whole key)")
	case 't', 'f':
		return string(raw), nil
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", err
		}
		return s, nil
	case '{', '[':
		return "", fmt.Errorf("want a string, number or bool, got %s", describeJSON(raw))
	}
	switch kind {
	case event.KindInt:
		if i, ok := event.WholeInt(raw); ok {
			return strconv.FormatInt(i, 10), nil
		}
		return "", fmt.Errorf("want an integer (the event field is an int), got %s", describeJSON(raw))
	case event.KindFloat:
	default:
		if i, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
			return strconv.FormatInt(i, 10), nil
		}
		if !bytes.ContainsAny(raw, ".eE") {
			// As the event decoder refuses it in a field of no declared
			// kind: a float would be another number.
			return "", fmt.Errorf("the whole number %s is beyond int64, and a float would not keep its digits: write it as a string (an id)", describeJSON(raw))
		}
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil {
		return "", fmt.Errorf("number %s is out of range", describeJSON(raw))
	}
	return string(appendFloatPart(nil, f)), nil
}

// jsonValue converts one member's JSON value to the kind of f: int, a
// number whose exact value is a whole number in int64 range however it is
// written (3, 3.0, 3e0; not 3.5 or 1e19: [event.WholeInt], the rule of
// events), or a string of a decimal integer ("12"); float, any number;
// string, a string; bool, true or false; time, an RFC 3339 string or a
// number of epoch milliseconds by the int rule; null, for any kind,
// event.Null.
func jsonValue(f Field, raw json.RawMessage) (event.Value, error) {
	if raw[0] == 'n' {
		return event.Null, nil
	}
	var str string
	isStr := raw[0] == '"'
	if isStr {
		if err := json.Unmarshal(raw, &str); err != nil {
			return event.Null, err
		}
	}
	isNum := raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9'
	switch {
	case f.Time:
		if isStr {
			t, err := time.Parse(time.RFC3339Nano, str)
			if err != nil {
				return event.Null, fmt.Errorf("want an RFC 3339 time, got %s", raw)
			}
			return event.Int(t.UnixMilli()), nil
		}
		if i, ok := event.WholeInt(raw); ok {
			return event.Int(i), nil
		}
		return event.Null, fmt.Errorf("want an RFC 3339 string or an integer of epoch milliseconds, got %s", describeJSON(raw))
	case f.Kind == event.KindInt:
		if isStr {
			if i, err := strconv.ParseInt(str, 10, 64); err == nil {
				return event.Int(i), nil
			}
		} else if i, ok := event.WholeInt(raw); ok {
			return event.Int(i), nil
		}
		return event.Null, fmt.Errorf("want an integer, got %s", describeJSON(raw))
	case f.Kind == event.KindFloat:
		if isNum {
			if x, err := strconv.ParseFloat(string(raw), 64); err == nil {
				return event.Float(x), nil
			}
		}
		return event.Null, fmt.Errorf("want a number, got %s", describeJSON(raw))
	case f.Kind == event.KindString:
		if isStr {
			return event.String(str), nil
		}
		return event.Null, fmt.Errorf("want a string, got %s", describeJSON(raw))
	case f.Kind == event.KindBool:
		switch string(raw) {
		case "true":
			return event.Bool(true), nil
		case "false":
			return event.Bool(false), nil
		}
		return event.Null, fmt.Errorf("want true or false, got %s", describeJSON(raw))
	}
	return event.Null, fmt.Errorf("field of kind %s", f.Kind)
}

// describeJSON names a JSON value in an error: the value itself when short,
// else its type.
func describeJSON(raw json.RawMessage) string {
	if len(raw) <= 40 {
		return string(raw)
	}
	switch raw[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a long string"
	}
	return string(raw[:40]) + "..."
}

// hashValue converts one hash field of the Redis "hash" format to the kind
// of f: int, a decimal integer; float, a number strconv.ParseFloat reads;
// string, the string; bool, true or false (also 1 or 0); time, an RFC 3339
// time or a decimal integer of epoch milliseconds.
func hashValue(f Field, s string) (event.Value, error) {
	switch {
	case f.Time:
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return event.Int(i), nil
		}
		if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
			return event.Int(t.UnixMilli()), nil
		}
		return event.Null, fmt.Errorf("want an RFC 3339 time or epoch milliseconds, got %q", s)
	case f.Kind == event.KindInt:
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return event.Int(i), nil
		}
		return event.Null, fmt.Errorf("want an integer, got %q", s)
	case f.Kind == event.KindFloat:
		if x, err := strconv.ParseFloat(s, 64); err == nil {
			return event.Float(x), nil
		}
		return event.Null, fmt.Errorf("want a number, got %q", s)
	case f.Kind == event.KindString:
		return event.String(s), nil
	case f.Kind == event.KindBool:
		switch s {
		case "true", "1":
			return event.Bool(true), nil
		case "false", "0":
			return event.Bool(false), nil
		}
		return event.Null, fmt.Errorf("want true, false, 1 or 0, got %q", s)
	}
	return event.Null, fmt.Errorf("field of kind %s", f.Kind)
}

// hashString is the hash field [Load] writes for v, which hashValue reads
// back as v: a time or int in decimal (epoch ms), a float as strconv 'g'
// -1, a bool as true/false, a string as it is.
func hashString(v event.Value) string {
	if s, ok := v.AsString(); ok {
		return s
	}
	return v.String()
}

// encodeObject is the JSON object [Load] writes for a record of the Redis
// "json" format: the key members as their key parts (strings) and the
// non-null fields of rec (a time as epoch milliseconds), which decodeObject
// reads back as rec.
func (c recordCodec) encodeObject(parts []string, rec []event.Value) ([]byte, error) {
	obj := make(map[string]any, len(parts)+len(rec))
	for i, name := range c.spec.KeyFields {
		obj[name] = parts[i]
	}
	for i, v := range rec {
		if !v.IsNull() {
			obj[c.spec.Fields[i].Name] = v.Any()
		}
	}
	return json.Marshal(obj)
}
