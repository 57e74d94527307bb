package kafka

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"strconv"
	"time"
)

// errNotObject is returned by topFields for a line that is not a JSON
// object.
var errNotObject = errors.New("not a JSON object")

// topFields returns the raw JSON values of the top-level fields a and b of
// line, nil for a field that is missing or named "". A field given twice
// has its last value, as the engine's decoder reads it (jsonev, Lenient),
// so a record is keyed by the value its rules key it by. It returns
// errNotObject, or the decoder's error, when line is not one JSON object.
// The values are copies.
func topFields(line []byte, a, b string) (va, vb []byte, err error) {
	dec := json.NewDecoder(bytes.NewReader(line))
	tok, err := dec.Token()
	if err != nil {
		return nil, nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, nil, errNotObject
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, err
		}
		name, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, nil, err
		}
		switch {
		case a != "" && name == a:
			va = v
		case b != "" && name == b:
			vb = v
		}
	}
	if _, err := dec.Token(); err != nil {
		return nil, nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, nil, errNotObject
	}
	if a != "" && a == b {
		vb = va
	}
	return va, vb, nil
}

// keyOf returns the record key that the raw JSON value v of the key field
// stands for: a string's characters, nil (a null key) for null or a
// missing field, and otherwise the JSON text (compacted for an object or an
// array).
func keyOf(v []byte) []byte {
	switch {
	case v == nil || string(v) == "null":
		return nil
	case v[0] == '"':
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return nil
		}
		return []byte(s)
	case v[0] == '{' || v[0] == '[':
		var b bytes.Buffer
		if err := json.Compact(&b, v); err != nil {
			return nil
		}
		return b.Bytes()
	}
	return bytes.Clone(v)
}

// timeOf returns the time that the raw JSON value v of the time field
// holds: an RFC 3339 string, or an integral number of epoch milliseconds
// (not negative). ok is false for anything else, a missing field included.
func timeOf(v []byte) (t time.Time, ok bool) {
	switch {
	case len(v) == 0:
		return time.Time{}, false
	case v[0] == '"':
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return time.Time{}, false
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		return t, err == nil
	}
	ms, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		f, ferr := strconv.ParseFloat(string(v), 64)
		if ferr != nil || f != math.Trunc(f) || f > math.MaxInt64/2 {
			return time.Time{}, false
		}
		ms = int64(f)
	}
	if ms < 0 {
		return time.Time{}, false
	}
	return time.UnixMilli(ms), true
}
