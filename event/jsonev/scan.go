package jsonev

// The lexical layer of the decoder: JSON numbers, strings, literals and
// whitespace, validated exactly as encoding/json validates them, plus
// skipping of whole values. Errors are *DecodeError with the byte column.

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"unicode/utf8"

	"github.com/cepheus-cep/cepheus/event"
)

// pow10 holds the powers of ten that float64 represents exactly.
var pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
	1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// parseFloat converts a valid JSON number to the nearest float64, as
// strconv.ParseFloat does. Most numbers of real records take Clinger's
// fast path: with at most 2^53 as the decimal mantissa and a power of ten
// up to 10^22, both exact in float64, one multiplication or division is
// correctly rounded. The rest go to strconv.
func parseFloat(text []byte) (float64, error) {
	if f, ok := fastFloat(text); ok {
		return f, nil
	}
	return strconv.ParseFloat(string(text), 64)
}

func fastFloat(text []byte) (float64, bool) {
	i, neg := 0, false
	if text[0] == '-' {
		i, neg = 1, true
	}
	var mant uint64
	nd, exp := 0, 0 // significant digits in mant; power of ten
	for ; i < len(text) && text[i] >= '0' && text[i] <= '9'; i++ {
		if mant == 0 && text[i] == '0' {
			continue
		}
		if nd == 19 {
			return 0, false
		}
		mant = mant*10 + uint64(text[i]-'0')
		nd++
	}
	if i < len(text) && text[i] == '.' {
		for i++; i < len(text) && text[i] >= '0' && text[i] <= '9'; i++ {
			exp--
			if mant == 0 && text[i] == '0' {
				continue
			}
			if nd == 19 {
				return 0, false
			}
			mant = mant*10 + uint64(text[i]-'0')
			nd++
		}
	}
	if i < len(text) { // 'e' or 'E'
		i++
		eneg := false
		if text[i] == '+' || text[i] == '-' {
			eneg = text[i] == '-'
			i++
		}
		e := 0
		for ; i < len(text); i++ {
			if e > 1000 {
				return 0, false
			}
			e = e*10 + int(text[i]-'0')
		}
		if eneg {
			e = -e
		}
		exp += e
	}
	return exactFloat(mant, exp, neg)
}

// exactFloat is ±mant * 10^exp when one correctly rounded multiplication
// or division computes it (Clinger's fast path): mant at most 2^53 (exact
// in float64) and |exp| at most 22 (10^exp exact).
func exactFloat(mant uint64, exp int, neg bool) (float64, bool) {
	f := float64(mant)
	switch {
	case mant == 0:
	case mant > 1<<53:
		return 0, false
	case exp == 0:
	case exp > 0 && exp < len(pow10):
		f *= pow10[exp]
	case exp < 0 && -exp < len(pow10):
		f /= pow10[-exp]
	default:
		return 0, false
	}
	if neg {
		f = -f
	}
	return f, true
}

// num is a scanned JSON number.
type num struct {
	end      int    // index after the number
	isInt    bool   // written without '.' and exponent
	neg      bool   // leading '-'
	mant     uint64 // the integer part's digits, when !overflow
	digits   int    // digits in the integer part
	overflow bool   // the integer part does not fit int64 (with its sign)
	zeroFrac bool   // a fraction of zeros only and no exponent (3.00)
}

// intVal returns the integer part with its sign. REQUIRES: !overflow.
func (n *num) intVal() int64 {
	if n.neg {
		return -int64(n.mant) // mant <= 1<<63 here; -(1<<63) wraps to MinInt64
	}
	return int64(n.mant)
}

// wholeInt returns the value of a number when it is a whole number exactly
// representable in int64 (see the KindInt rule of Decoder): at once for an
// integer or a fraction of zeros, else by [event.WholeInt].
func (n *num) wholeInt(text []byte) (int64, bool) {
	if n.isInt || n.zeroFrac {
		return n.intVal(), !n.overflow
	}
	return event.WholeInt(text)
}

// beyondInt64 reports whether the JSON number text is a whole number, one
// that [num.wholeInt] refused for being out of int64 range rather than
// for a fraction: the error then says so.
func beyondInt64(text []byte) bool {
	var buf [64]byte
	_, mant, exp := splitDecimal(text, buf[:0])
	return len(mant) > 0 && exp >= 0
}

// secondsMillis returns the milliseconds of the JSON number text read as
// epoch seconds, exactly in decimal, truncated towards the past below the
// millisecond (1.2345 is 1234, -1.2345 is -1235); false when out of int64
// range.
func secondsMillis(text []byte) (int64, bool) {
	var buf [64]byte
	neg, mant, exp := splitDecimal(text, buf[:0])
	exp += 3
	if len(mant) == 0 {
		return 0, true
	}
	dropped := false
	if exp < 0 {
		cut := len(mant) + exp
		if cut < 0 {
			cut = 0
		}
		for _, c := range mant[cut:] {
			dropped = dropped || c != '0'
		}
		mant, exp = mant[:cut], 0
	}
	if len(mant)+exp > 19 {
		return 0, false
	}
	var u uint64
	for _, c := range mant {
		u = u*10 + uint64(c-'0')
	}
	for range exp {
		u *= 10
	}
	if neg && dropped {
		u++ // towards the past
	}
	switch {
	case !neg && u <= math.MaxInt64:
		return int64(u), true
	case neg && u <= 1<<63:
		return -int64(u), true
	}
	return 0, false
}

// splitDecimal splits the JSON number text into its sign, its significant
// digits (appended to buf; no leading or trailing zeros, empty for zero)
// and a power of ten: the value is ±mant × 10^exp.
func splitDecimal(text []byte, buf []byte) (neg bool, mant []byte, exp int) {
	neg = text[0] == '-'
	if neg {
		text = text[1:]
	}
	mant = buf
	i := 0
	for i < len(text) && text[i] >= '0' && text[i] <= '9' {
		mant = append(mant, text[i])
		i++
	}
	if i < len(text) && text[i] == '.' {
		i++
		for i < len(text) && text[i] >= '0' && text[i] <= '9' {
			mant = append(mant, text[i])
			exp--
			i++
		}
	}
	if i < len(text) { // 'e' or 'E'
		i++
		eneg := false
		if text[i] == '+' || text[i] == '-' {
			eneg = text[i] == '-'
			i++
		}
		e := 0
		for ; i < len(text); i++ {
			if e < 1e6 {
				e = e*10 + int(text[i]-'0')
			}
		}
		if eneg {
			e = -e
		}
		exp += e
	}
	for len(mant) > 0 && mant[0] == '0' {
		mant = mant[1:]
	}
	for len(mant) > 0 && mant[len(mant)-1] == '0' {
		mant = mant[:len(mant)-1]
		exp++
	}
	return neg, mant, exp
}

// plainNumber is a JSON number of the shape of most numbers in records,
// -?int(.frac)? with at most 19 digits in all, so that mant holds all of
// them: its value is ±mant / 10^frac.
type plainNumber struct {
	mant uint64 // all the digits, integer and fraction parts
	frac int    // digits after the point
	neg  bool   // leading '-'
	end  int    // index after the number
}

// scanPlainNumber scans the number at data[i] (a '-' or a digit) when it is
// a plainNumber followed by no exponent. It returns false for every other
// number and every syntax error, which scanNumber then scans and reports:
// the plain shape is only a faster way to the same values.
func scanPlainNumber(data []byte, i int) (plainNumber, bool) {
	var p plainNumber
	j := i
	if data[j] == '-' {
		p.neg = true
		j++
	}
	start := j
	// With more than 19 digits mant wraps around, harmlessly: such a
	// number is refused below.
	for ; j < len(data); j++ {
		c := data[j] - '0' // a byte below '0' wraps around above 9
		if c > 9 {
			break
		}
		p.mant = p.mant*10 + uint64(c)
	}
	n := j - start
	if n == 0 || (n > 1 && data[start] == '0') {
		return p, false // no digit, or a leading zero (a syntax error)
	}
	if j < len(data) && data[j] == '.' {
		j++
		start = j
		for ; j < len(data); j++ {
			c := data[j] - '0'
			if c > 9 {
				break
			}
			p.mant = p.mant*10 + uint64(c)
		}
		if p.frac = j - start; p.frac == 0 {
			return p, false // no digit after the point
		}
		n += p.frac
	}
	if n > 19 || (j < len(data) && (data[j] == 'e' || data[j] == 'E')) {
		return p, false
	}
	p.end = j
	return p, true
}

// int returns the value of p when it is written without a fraction and fits
// int64.
func (p *plainNumber) int() (int64, bool) {
	switch {
	case p.frac != 0:
		return 0, false
	case !p.neg && p.mant <= math.MaxInt64:
		return int64(p.mant), true
	case p.neg && p.mant <= 1<<63:
		return -int64(p.mant), true // -(1<<63) wraps to MinInt64
	}
	return 0, false
}

// float returns the float64 nearest to the value of p when one correctly
// rounded division computes it (exactFloat).
func (p *plainNumber) float() (float64, bool) { return exactFloat(p.mant, -p.frac, p.neg) }

// scanNumber scans the JSON number at data[i], validating its syntax.
func scanNumber(data []byte, i int) (num, error) {
	n := num{isInt: true}
	j := i
	if data[j] == '-' {
		n.neg = true
		j++
	}
	if j >= len(data) {
		return num{end: j}, errAt(j, "unexpected end of input in number")
	}
	switch c := data[j]; {
	case c == '0':
		j++
		n.digits = 1
	case '1' <= c && c <= '9':
		var m uint64
		start := j
		for j < len(data) && '0' <= data[j] && data[j] <= '9' {
			j++
		}
		n.digits = j - start
		if n.digits <= 18 {
			for _, c := range data[start:j] {
				m = m*10 + uint64(c-'0')
			}
		} else {
			for _, c := range data[start:j] {
				if m > (math.MaxUint64-9)/10 {
					n.overflow = true
					break
				}
				m = m*10 + uint64(c-'0')
			}
			limit := uint64(math.MaxInt64)
			if n.neg {
				limit++
			}
			if m > limit {
				n.overflow = true
			}
		}
		n.mant = m
	default:
		return num{end: j}, errAt(j, "invalid character "+quoteChar(c)+" in number")
	}
	if j < len(data) && data[j] == '.' {
		n.isInt = false
		j++
		start := j
		zero := true
		for j < len(data) && '0' <= data[j] && data[j] <= '9' {
			if data[j] != '0' {
				zero = false
			}
			j++
		}
		if j == start {
			return num{end: j}, numErr(data, j, "after decimal point in number")
		}
		n.zeroFrac = zero
	}
	if j < len(data) && (data[j] == 'e' || data[j] == 'E') {
		n.isInt = false
		n.zeroFrac = false
		j++
		if j < len(data) && (data[j] == '+' || data[j] == '-') {
			j++
		}
		start := j
		for j < len(data) && '0' <= data[j] && data[j] <= '9' {
			j++
		}
		if j == start {
			return num{end: j}, numErr(data, j, "in exponent of number")
		}
	}
	n.end = j
	return n, nil
}

func numErr(data []byte, j int, where string) error {
	if j >= len(data) {
		return errAt(j, "unexpected end of input "+where)
	}
	return errAt(j, "invalid character "+quoteChar(data[j])+" "+where)
}

// scanKey scans the object key at data[i] (a '"'). The key is returned as a
// slice of data when it has no escapes and is ASCII, otherwise unescaped
// into d.keyBuf.
func (d *Decoder) scanKey(data []byte, i int) ([]byte, int, error) {
	j := plainRun(data, i+1)
	if j < len(data) && data[j] == '"' {
		return data[i+1 : j], j + 1, nil
	}
	var err error
	d.keyBuf, j, err = appendString(d.keyBuf[:0], data, i)
	return d.keyBuf, j, err
}

// strSpecial marks the bytes that end the fast path of a string scan: the
// closing quote, a backslash, control characters and non-ASCII bytes.
var strSpecial = func() (t [256]bool) {
	for c := range 256 {
		t[c] = c == '"' || c == '\\' || c < 0x20 || c >= 0x80
	}
	return t
}()

// Byte-wise constants for plainRun: every byte 0x01, every byte 0x80.
const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// special flags the bytes of w, eight bytes of a string read as a
// little-endian word (the first byte lowest), that strSpecial marks: the
// lowest flagged byte (0x80 in it) is the first such byte, and none is
// flagged when there is none. Bytes above the first may be flagged wrongly.
//
// For n <= 0x80, (w - n*ones) &^ w & highs flags the bytes below n: such a
// byte wraps around and sets its high bit, which ^w keeps only for bytes
// below 0x80. A wrapping byte borrows from the byte above it, which may
// then be flagged wrongly, but never from a byte below it, so the lowest
// flag is always right; and the lowest flag of an OR of such tests is the
// lowest right one of them all. The tests: a byte below 0x20, a zero byte
// of w^'"' (a quote) or of w^'\\' (a backslash), and a byte with its high
// bit set (0x80 and above).
func special(w uint64) uint64 {
	q := w ^ ('"' * ones)
	b := w ^ ('\\' * ones)
	return ((w-0x20*ones)&^w | (q-ones)&^q | (b-ones)&^b | w) & highs
}

// plainRun returns the index of the first byte at or after j that
// strSpecial marks, or len(data). It tests eight bytes at a time.
func plainRun(data []byte, j int) int {
	for j+8 <= len(data) {
		if m := special(binary.LittleEndian.Uint64(data[j:])); m != 0 {
			return j + bits.TrailingZeros64(m)/8
		}
		j += 8
	}
	for j < len(data) && !strSpecial[data[j]] {
		j++
	}
	return j
}

// copyPlain copies the string at data[i] (a '"') to the start of buf when
// it has nothing to unescape (no backslash, control or non-ASCII byte),
// and returns its length and the index after its closing quote. It copies
// eight bytes at a time as plainRun scans them, the word holding the
// closing quote included, so it needs eight bytes of buf to spare; it
// returns false (buf then holds garbage) for a string it cannot copy so,
// or that ends in the last eight bytes of data: appendString's business.
func copyPlain(buf, data []byte, i int) (n, j int, ok bool) {
	for j = i + 1; j+8 <= len(data) && n+8 <= len(buf); j, n = j+8, n+8 {
		w := binary.LittleEndian.Uint64(data[j:])
		binary.LittleEndian.PutUint64(buf[n:], w)
		if m := special(w); m != 0 {
			k := bits.TrailingZeros64(m) / 8
			return n + k, j + k + 1, data[j+k] == '"'
		}
	}
	return 0, j, false
}

// appendString unescapes the JSON string at data[i] (a '"') onto dst and
// returns dst and the index after the closing quote. Invalid UTF-8 bytes
// become U+FFFD, as in encoding/json.
func appendString(dst, data []byte, i int) ([]byte, int, error) {
	j := i + 1
	for {
		start := j
		j = plainRun(data, j)
		dst = append(dst, data[start:j]...)
		if j >= len(data) {
			return dst, j, errAt(j, "unexpected end of input in string")
		}
		switch c := data[j]; {
		case c == '"':
			return dst, j + 1, nil
		case c == '\\':
			var err error
			dst, j, err = appendEscape(dst, data, j)
			if err != nil {
				return dst, j, err
			}
		case c < 0x20:
			return dst, j, errAt(j, "invalid control character "+quoteChar(c)+" in string")
		default:
			r, size := utf8.DecodeRune(data[j:])
			if r == utf8.RuneError && size == 1 {
				dst = append(dst, "\uFFFD"...)
			} else {
				dst = append(dst, data[j:j+size]...)
			}
			j += size
		}
	}
}

// appendEscape decodes the escape sequence at data[j] (a '\\').
func appendEscape(dst, data []byte, j int) ([]byte, int, error) {
	if j+1 >= len(data) {
		return dst, j + 1, errAt(j+1, "unexpected end of input in string escape")
	}
	switch c := data[j+1]; c {
	case '"', '\\', '/':
		return append(dst, c), j + 2, nil
	case 'b':
		return append(dst, '\b'), j + 2, nil
	case 'f':
		return append(dst, '\f'), j + 2, nil
	case 'n':
		return append(dst, '\n'), j + 2, nil
	case 'r':
		return append(dst, '\r'), j + 2, nil
	case 't':
		return append(dst, '\t'), j + 2, nil
	case 'u':
		r, err := hex4(data, j+2)
		if err != nil {
			return dst, j, err
		}
		j += 6
		if 0xD800 <= r && r < 0xE000 {
			// A surrogate: combine with a following \u low surrogate, else
			// U+FFFD (and the next escape, if any, stands on its own).
			if r < 0xDC00 && j+1 < len(data) && data[j] == '\\' && data[j+1] == 'u' {
				if r2, err := hex4(data, j+2); err == nil && 0xDC00 <= r2 && r2 < 0xE000 {
					return utf8.AppendRune(dst, 0x10000+(r-0xD800)<<10+(r2-0xDC00)), j + 6, nil
				}
			}
			r = utf8.RuneError
		}
		return utf8.AppendRune(dst, r), j, nil
	default:
		return dst, j + 1, errAt(j+1, "invalid character "+quoteChar(c)+" in string escape")
	}
}

// hex4 decodes the four hex digits at data[j:].
func hex4(data []byte, j int) (rune, error) {
	var r rune
	for k := j; k < j+4; k++ {
		if k >= len(data) {
			return 0, errAt(k, "unexpected end of input in \\u escape")
		}
		c := data[k]
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, errAt(k, "invalid character "+quoteChar(c)+" in \\u escape")
		}
		r = r<<4 | rune(c)
	}
	return r, nil
}

// skipString validates the JSON string at data[i] (a '"') without decoding
// it and returns the index after it.
func skipString(data []byte, i int) (int, error) {
	j := i + 1
	for {
		if j = plainRun(data, j); j >= len(data) {
			break
		}
		c := data[j]
		switch {
		case c == '"':
			return j + 1, nil
		case c == '\\':
			if j+1 >= len(data) {
				return j + 1, errAt(j+1, "unexpected end of input in string escape")
			}
			switch e := data[j+1]; e {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				j += 2
			case 'u':
				if _, err := hex4(data, j+2); err != nil {
					return j, err
				}
				j += 6
			default:
				return j + 1, errAt(j+1, "invalid character "+quoteChar(e)+" in string escape")
			}
		case c < 0x20:
			return j, errAt(j, "invalid control character "+quoteChar(c)+" in string")
		default:
			j++
		}
	}
	return j, errAt(j, "unexpected end of input in string")
}

// skipValue validates the JSON value at data[i] without decoding it and
// returns the index after it. depth is the nesting depth the value would
// open (the record's object is depth 1).
func skipValue(data []byte, i, depth int) (int, error) {
	if i >= len(data) {
		return i, errAt(i, "unexpected end of input, want a value")
	}
	switch c := data[i]; {
	case c == '"':
		return skipString(data, i)
	case c == '-' || ('0' <= c && c <= '9'):
		n, err := scanNumber(data, i)
		return n.end, err
	case c == 't' || c == 'f':
		_, j, err := scanBool(data, i)
		return j, err
	case c == 'n':
		return scanNull(data, i)
	case c == '{' || c == '[':
		if depth > maxDepth {
			return i, errAt(i, "nesting deeper than "+strconv.Itoa(maxDepth))
		}
		if c == '{' {
			return skipObject(data, i, depth)
		}
		return skipArray(data, i, depth)
	default:
		return i, errAt(i, "invalid character "+quoteChar(c)+", want a value")
	}
}

func skipObject(data []byte, i, depth int) (int, error) {
	i = skipWS(data, i+1)
	if i < len(data) && data[i] == '}' {
		return i + 1, nil
	}
	for {
		if i >= len(data) {
			return i, errAt(i, "unexpected end of input, want an object key")
		}
		if data[i] != '"' {
			return i, errAt(i, "invalid character "+quoteChar(data[i])+", want an object key")
		}
		j, err := skipString(data, i)
		if err != nil {
			return j, err
		}
		i = skipWS(data, j)
		if i >= len(data) {
			return i, errAt(i, "unexpected end of input after object key")
		}
		if data[i] != ':' {
			return i, errAt(i, "invalid character "+quoteChar(data[i])+" after object key")
		}
		if i, err = skipValue(data, skipWS(data, i+1), depth+1); err != nil {
			return i, err
		}
		i = skipWS(data, i)
		if i >= len(data) {
			return i, errAt(i, "unexpected end of input, want ',' or '}'")
		}
		switch data[i] {
		case ',':
			i = skipWS(data, i+1)
		case '}':
			return i + 1, nil
		default:
			return i, errAt(i, afterValue(data, i))
		}
	}
}

func skipArray(data []byte, i, depth int) (int, error) {
	i = skipWS(data, i+1)
	if i < len(data) && data[i] == ']' {
		return i + 1, nil
	}
	for {
		var err error
		if i, err = skipValue(data, i, depth+1); err != nil {
			return i, err
		}
		i = skipWS(data, i)
		if i >= len(data) {
			return i, errAt(i, "unexpected end of input, want ',' or ']'")
		}
		switch data[i] {
		case ',':
			i = skipWS(data, i+1)
		case ']':
			return i + 1, nil
		default:
			return i, errAt(i, "invalid character "+quoteChar(data[i])+" after array element, want ',' or ']'")
		}
	}
}

// scanBool scans true or false at data[i]. The usual case compares with a
// constant, a single load; scanLiteral reports the errors.
func scanBool(data []byte, i int) (bool, int, error) {
	if len(data)-i >= 4 && string(data[i:i+4]) == "true" {
		return true, i + 4, nil
	}
	if len(data)-i >= 5 && string(data[i:i+5]) == "false" {
		return false, i + 5, nil
	}
	if data[i] == 't' {
		j, err := scanLiteral(data, i, "true")
		return true, j, err
	}
	j, err := scanLiteral(data, i, "false")
	return false, j, err
}

// scanNull scans null at data[i], as scanBool scans true and false.
func scanNull(data []byte, i int) (int, error) {
	if len(data)-i >= 4 && string(data[i:i+4]) == "null" {
		return i + 4, nil
	}
	return scanLiteral(data, i, "null")
}

// scanLiteral checks that data[i:] starts with lit.
func scanLiteral(data []byte, i int, lit string) (int, error) {
	for k := 0; k < len(lit); k++ {
		if i+k >= len(data) {
			return i + k, errAt(i+k, "unexpected end of input in literal "+lit)
		}
		if data[i+k] != lit[k] {
			return i + k, errAt(i+k, "invalid character "+quoteChar(data[i+k])+" in literal "+lit)
		}
	}
	return i + len(lit), nil
}

// wsBits has bit c set for each JSON whitespace byte c (all below 64).
const wsBits = 1<<' ' | 1<<'\t' | 1<<'\n' | 1<<'\r'

// skipWS skips JSON whitespace. The usual byte, above ' ', costs one
// comparison; below it, wsBits tells whitespace apart.
func skipWS(data []byte, i int) int {
	for i < len(data) && data[i] <= ' ' && wsBits>>data[i]&1 != 0 {
		i++
	}
	return i
}

func errAt(i int, reason string) error { return &DecodeError{Column: i + 1, Reason: reason} }

// quoteChar formats a byte for an error message.
func quoteChar(c byte) string {
	switch {
	case c == '\'':
		return `'\''`
	case c == '"':
		return `'"'`
	case c >= 0x20 && c < 0x7f:
		return "'" + string(rune(c)) + "'"
	}
	return fmt.Sprintf("byte 0x%02x", c)
}

// describe names what starts at data[i], for "want an object" errors.
func describe(data []byte, i int) string {
	switch c := data[i]; {
	case c == '[':
		return "an array"
	case c == '"':
		return "a string"
	case c == '-' || ('0' <= c && c <= '9'):
		return "a number"
	case c == 't' || c == 'f' || c == 'n':
		for _, lit := range []string{"true", "false", "null"} {
			if _, err := scanLiteral(data, i, lit); err == nil {
				return lit
			}
		}
	}
	return quoteChar(data[i])
}

// afterValue is the message for data[i], which neither ends the object
// nor goes on to its next member: a digit right after a number's leading
// 0 (01, -012) is told a leading zero, which JSON numbers do not have.
func afterValue(data []byte, i int) string {
	msg := "invalid character " + quoteChar(data[i]) + " after object value, want ',' or '}'"
	if c := data[i]; c >= '0' && c <= '9' && i >= 2 && data[i-1] == '0' {
		switch data[i-2] {
		case ':', '-', ' ', '\t', '[', ',':
			msg += " (a number has no leading zero: write 1, not 01)"
		}
	}
	return msg
}
