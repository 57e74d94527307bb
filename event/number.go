package event

import "math"

// WholeInt returns the value of text, a JSON number (RFC 8259 syntax), when
// its exact decimal value is a whole number in int64 range, however it is
// written: 3, 3.0, 3e0 and 0.3e1 are 3; 3.5, 1e19 and
// 99999999999999999999 are not (false), nor is text that is not a JSON
// number. It is the rule of a number for an int or time field, in events
// (package jsonev) and in lookup records (package enrich); see
// docs/decisions.md, "JSON events".
func WholeInt(text []byte) (int64, bool) {
	i := 0
	neg := i < len(text) && text[i] == '-'
	if neg {
		i++
	}
	// Split into significant digits and a power of ten, checking the
	// syntax on the way: the value is ±mant × 10^exp.
	var buf [64]byte
	mant := buf[:0] // digits of the integer and fraction parts
	start := i
	for i < len(text) && isDigit(text[i]) {
		mant = append(mant, text[i])
		i++
	}
	if i == start || text[start] == '0' && i-start > 1 {
		return 0, false // no integer part, or a leading zero
	}
	exp := 0
	if i < len(text) && text[i] == '.' {
		i++
		start = i
		for i < len(text) && isDigit(text[i]) {
			mant = append(mant, text[i])
			exp--
			i++
		}
		if i == start {
			return 0, false
		}
	}
	if i < len(text) && (text[i] == 'e' || text[i] == 'E') {
		i++
		eneg := false
		if i < len(text) && (text[i] == '+' || text[i] == '-') {
			eneg = text[i] == '-'
			i++
		}
		start = i
		e := 0
		for ; i < len(text) && isDigit(text[i]); i++ {
			if e < 1e6 {
				e = e*10 + int(text[i]-'0')
			}
		}
		if i == start {
			return 0, false
		}
		if eneg {
			e = -e
		}
		exp += e
	}
	if i != len(text) {
		return 0, false
	}
	// Drop leading zeros; a zero mantissa is 0 whatever the exponent.
	for len(mant) > 0 && mant[0] == '0' {
		mant = mant[1:]
	}
	if len(mant) == 0 {
		return 0, true
	}
	// Move trailing zeros into the exponent.
	for len(mant) > 0 && mant[len(mant)-1] == '0' {
		mant = mant[:len(mant)-1]
		exp++
	}
	if exp < 0 || len(mant)+exp > 19 {
		return 0, false // not whole, or at least 10^19
	}
	var u uint64
	for _, c := range mant {
		u = u*10 + uint64(c-'0')
	}
	for range exp {
		u *= 10
	}
	switch {
	case !neg && u <= math.MaxInt64:
		return int64(u), true
	case neg && u <= 1<<63:
		return -int64(u), true
	}
	return 0, false
}

// isDigit reports whether c is an ASCII digit.
func isDigit(c byte) bool { return c >= '0' && c <= '9' }
