package kafka

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
	"time"
)

// errNotObject is returned by topFields for a line that is not a JSON
// object at its top level.
var errNotObject = errors.New("not a JSON object")

// topFields returns the raw JSON values of the top-level fields a and b of
// line, nil for a field that is missing or named "". A field given twice
// has its last value, as the engine's decoder reads it (jsonev, Lenient),
// so a record is keyed by the value its rules key it by. The values are
// slices of line.
//
// It reads the top level only, which is what a produce of hundreds of
// thousands of lines can afford: it returns errNotObject when line is not
// an object of string keys and values (strings, numbers, literals, and
// objects and arrays whose brackets balance), but does not check inside
// nested objects and arrays.
func topFields(line []byte, a, b string) (va, vb []byte, err error) {
	i := skipBlanks(line, 0)
	if i == len(line) || line[i] != '{' {
		return nil, nil, errNotObject
	}
	i = skipBlanks(line, i+1)
	if i < len(line) && line[i] == '}' {
		i++
	} else {
		for {
			if i == len(line) || line[i] != '"' {
				return nil, nil, errNotObject
			}
			end, esc := scanString(line, i)
			if end < 0 {
				return nil, nil, errNotObject
			}
			name := line[i+1 : end-1]
			if esc {
				var s string
				if json.Unmarshal(line[i:end], &s) != nil {
					return nil, nil, errNotObject
				}
				name = []byte(s)
			}
			i = skipBlanks(line, end)
			if i == len(line) || line[i] != ':' {
				return nil, nil, errNotObject
			}
			i = skipBlanks(line, i+1)
			end = skipValue(line, i)
			if end < 0 {
				return nil, nil, errNotObject
			}
			switch {
			case a != "" && string(name) == a:
				va = line[i:end]
			case b != "" && string(name) == b:
				vb = line[i:end]
			}
			i = skipBlanks(line, end)
			if i < len(line) && line[i] == ',' {
				i = skipBlanks(line, i+1)
				continue
			}
			if i < len(line) && line[i] == '}' {
				i++
				break
			}
			return nil, nil, errNotObject
		}
	}
	if skipBlanks(line, i) != len(line) {
		return nil, nil, errNotObject
	}
	if a != "" && a == b {
		vb = va
	}
	return va, vb, nil
}

// skipBlanks returns the index of the first byte at or after i that is not
// JSON white space.
func skipBlanks(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// scanString returns the index after the string that starts with the quote
// at b[i] (-1 when it does not end), and whether it holds escapes.
func scanString(b []byte, i int) (end int, esc bool) {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			esc = true
			j++
		case '"':
			return j + 1, esc
		}
	}
	return -1, esc
}

// skipValue returns the index after the JSON value that starts at b[i], or
// -1 when there is none. Objects and arrays are skipped by balancing their
// brackets, honouring strings.
func skipValue(b []byte, i int) int {
	if i == len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		end, _ := scanString(b, i)
		return end
	case '{', '[':
		var stack []byte
		for j := i; j < len(b); j++ {
			switch c := b[j]; c {
			case '"':
				end, _ := scanString(b, j)
				if end < 0 {
					return -1
				}
				j = end - 1
			case '{', '[':
				stack = append(stack, c+2) // '{'+2 is '}', '['+2 is ']'
			case '}', ']':
				if len(stack) == 0 || stack[len(stack)-1] != c {
					return -1
				}
				stack = stack[:len(stack)-1]
				if len(stack) == 0 {
					return j + 1
				}
			}
		}
		return -1
	}
	j := i
	for j < len(b) && !endsLiteral(b[j]) {
		j++
	}
	switch v := b[i:j]; {
	case string(v) == "true" || string(v) == "false" || string(v) == "null":
		return j
	case isNumber(v):
		return j
	}
	return -1
}

// endsLiteral reports whether c ends a number or a literal.
func endsLiteral(c byte) bool {
	switch c {
	case ',', '}', ']', ' ', '\t', '\r', '\n':
		return true
	}
	return false
}

// isNumber reports whether b is a JSON number: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func isNumber(b []byte) bool {
	i := 0
	digits := func() bool {
		start := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		return i > start
	}
	if i < len(b) && b[i] == '-' {
		i++
	}
	if i < len(b) && b[i] == '0' {
		i++
	} else if !digits() {
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if !digits() {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if !digits() {
			return false
		}
	}
	return i == len(b)
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
		if bytes.IndexByte(v, '\\') < 0 {
			return bytes.Clone(v[1 : len(v)-1])
		}
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
// holds: an RFC 3339 string, or a number of epoch milliseconds (integral)
// or, when unit is time.Second, of epoch seconds (a fraction finer than a
// millisecond truncated); never negative. ok is false for anything else,
// a missing field included.
func timeOf(v []byte, unit time.Duration) (t time.Time, ok bool) {
	switch {
	case len(v) == 0:
		return time.Time{}, false
	case v[0] == '"':
		s := string(v[1 : len(v)-1])
		if bytes.IndexByte(v, '\\') >= 0 && json.Unmarshal(v, &s) != nil {
			return time.Time{}, false
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		return t, err == nil
	case unit == time.Second:
		return secondsTime(string(v))
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

// secondsTime reads a JSON number of epoch seconds: digits with an
// optional fraction, read exactly (1714564800.123 is 123 ms, never 122
// through a float), or an exponent form through a float.
func secondsTime(s string) (time.Time, bool) {
	if strings.HasPrefix(s, "-") {
		return time.Time{}, false // -0.5 too
	}
	whole, frac, _ := strings.Cut(s, ".")
	if strings.ContainsAny(s, "eE") || whole == "" {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || f < 0 || f*1000 > math.MaxInt64/2 {
			return time.Time{}, false
		}
		return time.UnixMilli(int64(math.Floor(f * 1000))), true
	}
	sec, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || sec < 0 || sec > math.MaxInt64/1000-1 {
		return time.Time{}, false
	}
	ms := int64(0)
	for i := range 3 {
		ms *= 10
		if i < len(frac) {
			if frac[i] < '0' || frac[i] > '9' {
				return time.Time{}, false
			}
			ms += int64(frac[i] - '0')
		}
	}
	for i := 3; i < len(frac); i++ {
		if frac[i] < '0' || frac[i] > '9' {
			return time.Time{}, false
		}
	}
	return time.UnixMilli(sec*1000 + ms), true
}
