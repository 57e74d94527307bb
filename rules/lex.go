package rules

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// tokKind is the kind of a lexical token of the rule language.
type tokKind uint8

const (
	tokEOF tokKind = iota
	tokError
	tokNewline
	tokComment  // "# ..." to the end of the line
	tokIdent    // identifiers and (soft) keywords
	tokString   // "..." with Go escapes; val is the literal as written
	tokInt      // 42, -3
	tokFloat    // 1.5, -0.25, 1e3
	tokDuration // 500ms, 1h30m
	tokLBrace
	tokRBrace
	tokLParen
	tokRParen
	tokLBrack
	tokRBrack
	tokColon
	tokComma
	tokDotDot
	tokExpr // a raw expression (or JSON) span, see scanRaw
)

var tokNames = [...]string{
	tokEOF: "end of file", tokError: "error", tokNewline: "end of line", tokComment: "comment",
	tokIdent: "identifier", tokString: "string", tokInt: "integer", tokFloat: "number",
	tokDuration: "duration", tokLBrace: "'{'", tokRBrace: "'}'", tokLParen: "'('", tokRParen: "')'",
	tokLBrack: "'['", tokRBrack: "']'", tokColon: "':'", tokComma: "','", tokDotDot: "'..'",
	tokExpr: "expression",
}

func (k tokKind) String() string {
	if int(k) < len(tokNames) {
		return tokNames[k]
	}
	return fmt.Sprintf("token(%d)", k)
}

// lexToken is one token: its kind, the byte offsets [pos, end) of its text
// in the file, and the text (for tokError, the message).
type lexToken struct {
	kind tokKind
	pos  int
	end  int
	val  string
}

// describe names the token for "expected X, found Y" messages.
func (t lexToken) describe() string {
	switch t.kind {
	case tokIdent, tokInt, tokFloat, tokDuration:
		return fmt.Sprintf("%q", t.val)
	case tokString:
		return "string " + t.val
	}
	return t.kind.String()
}

// lexState is a state of the lexer: it scans some input, possibly emits a
// token, and returns the next state.
type lexState func(*ruleLexer) lexState

// ruleLexer turns a ruleset file into tokens, one at a time and
// synchronously (text/template's design without the goroutine): nextToken
// runs state functions until one emits. Expressions and JSON event lines
// are not tokenised: the parser, which knows where one starts, asks for the
// whole span with scanRaw.
type ruleLexer struct {
	src   string
	start int // start of the token being scanned
	pos   int // scanning position
	state lexState
	tok   lexToken
	ready bool
}

func newRuleLexer(src string) *ruleLexer {
	return &ruleLexer{src: src, state: lexAny}
}

const lexEOF = -1

func (l *ruleLexer) next() rune {
	if l.pos >= len(l.src) {
		l.pos = len(l.src) + 1 // so that backup works at EOF
		return lexEOF
	}
	r, w := utf8.DecodeRuneInString(l.src[l.pos:])
	l.pos += w
	return r
}

func (l *ruleLexer) peek() rune {
	if l.pos >= len(l.src) {
		return lexEOF
	}
	r, _ := utf8.DecodeRuneInString(l.src[l.pos:])
	return r
}

// backup steps back over the rune just read by next.
func (l *ruleLexer) backup() {
	if l.pos > len(l.src) {
		l.pos = len(l.src)
		return
	}
	_, w := utf8.DecodeLastRuneInString(l.src[:l.pos])
	l.pos -= w
}

func (l *ruleLexer) emit(k tokKind) lexState {
	end := min(l.pos, len(l.src))
	l.tok = lexToken{kind: k, pos: l.start, end: end, val: l.src[l.start:end]}
	l.ready = true
	l.start = end
	return lexAny
}

func (l *ruleLexer) errorf(format string, args ...any) lexState {
	end := min(l.pos, len(l.src))
	l.tok = lexToken{kind: tokError, pos: l.start, end: end, val: fmt.Sprintf(format, args...)}
	l.ready = true
	l.start = end
	return lexAny
}

// nextToken returns the next token; after the end of input it keeps
// returning tokEOF.
func (l *ruleLexer) nextToken() lexToken {
	l.ready = false
	for !l.ready {
		l.state = l.state(l)
	}
	return l.tok
}

// lexAny scans the start of a token.
func lexAny(l *ruleLexer) lexState {
	switch r := l.next(); {
	case r == lexEOF:
		l.pos = len(l.src)
		return l.emit(tokEOF)
	case r == '\n':
		return l.emit(tokNewline)
	case r == ' ' || r == '\t' || r == '\r', r == '\ufeff' && l.start == 0:
		// A UTF-8 byte-order mark may open the file (editors on Windows
		// write one); it is skipped, as Go's scanner skips it.
		l.start = l.pos
		return lexAny
	case r == '#':
		return lexComment
	case r == '"':
		return lexString
	case r == '-' || '0' <= r && r <= '9':
		l.backup()
		return lexNumber
	case isIdentStart(r):
		return lexIdent
	case r == '/' && l.peek() == '/':
		// A comment as other languages write it: one error, and the rest
		// of the line is read as a comment.
		for r := l.peek(); r != '\n' && r != lexEOF; r = l.peek() {
			l.next()
		}
		return l.errorf("unexpected '//': a comment starts with '#'")
	case r == '=' && l.peek() != '=':
		// Outside expressions '=' has no use: most often a field of an
		// emit, a schema or a lookup written name = value.
		return l.errorf("unexpected '=': write name: value in an emit, name: type in a schema, name: type default value in a lookup's fields")
	case r == '\'' || r == '`':
		return l.errorf("unexpected %q: a string of the rule language is written in double quotes", string(r))
	case r == '.':
		if l.peek() == '.' {
			l.next()
			return l.emit(tokDotDot)
		}
		// b.times(3).consecutive(), or .or(...) on a line of its own, as
		// Flink's Pattern API chains its calls.
		if calls, ok := readCalls(l.src[l.start:]); ok {
			if f, ok := flinkForms(calls); ok {
				return l.errorf("unexpected '.': Flink's calls are written as words after the stage name, without dots or parentheses: %s", f)
			}
		}
		if w := leadingWord(l.src[l.start+1:]); slices.Contains(quantWords, w) {
			// oneOrMore.greedy: the quantifiers chained as in Java; the
			// form meant is "oneOrMore greedy".
			b := l.start
			for b > 0 && isIdentPart(rune(l.src[b-1])) {
				b--
			}
			if b < l.start {
				w = string(l.src[b:l.start]) + " " + w
			}
			return l.errorf("unexpected '.': quantifiers are words after the stage name, separated by spaces: %s", w)
		}
		if l.start > 0 && isIdentStart(rune(l.src[l.start-1])) || l.start > 0 && '0' <= l.src[l.start-1] && l.src[l.start-1] <= '9' {
			// customer.home_country as a key or an aggregate's field.
			return l.errorf("unexpected '.': here a name is a field of the event, without a dot (a lookup's or a stage's fields are read in conditions and emits)")
		}
		return l.errorf("unexpected '.'")
	}
	if k, ok := punct[l.src[l.start]]; ok && l.pos == l.start+1 {
		return l.emit(k)
	}
	if n, ok := spokenCount(l.src[:l.start], l.src[l.start:]); ok {
		// times >= 3, times 3+, times 3..*: at least a count.
		return l.errorf("unexpected character %q: at least %s events is written timesOrMore %s", l.src[l.start:l.pos], n, n)
	}
	return l.errorf("unexpected character %q", l.src[l.start:l.pos])
}

// spokenCount recognises an open count written as said, at the character
// that starts rest, after before: "times >= N" (rest ">= N"), "times N+"
// and "times N..*" (before ending in "times N" or "times N.."). It
// returns N.
func spokenCount(before, rest string) (string, bool) {
	before = strings.TrimRight(before, " \t")
	digits := func(s string) string {
		i := len(s)
		for i > 0 && '0' <= s[i-1] && s[i-1] <= '9' {
			i--
		}
		return s[i:]
	}
	timesBefore := func(s string) bool { return strings.HasSuffix(strings.TrimRight(s, " \t"), "times") }
	switch {
	case strings.HasPrefix(rest, ">=") && timesBefore(before):
		r := strings.TrimLeft(rest[2:], " \t")
		if n := r[:len(r)-len(strings.TrimLeft(r, "0123456789"))]; n != "" {
			return n, true
		}
	case rest[0] == '+':
		if n := digits(before); n != "" && timesBefore(before[:len(before)-len(n)]) {
			return n, true
		}
	case rest[0] == '*' && strings.HasSuffix(before, ".."):
		b := before[:len(before)-2]
		if n := digits(b); n != "" && timesBefore(b[:len(b)-len(n)]) {
			return n, true
		}
	}
	return "", false
}

var punct = map[byte]tokKind{
	'{': tokLBrace, '}': tokRBrace, '(': tokLParen, ')': tokRParen,
	'[': tokLBrack, ']': tokRBrack, ':': tokColon, ',': tokComma,
}

func lexComment(l *ruleLexer) lexState {
	for {
		r := l.next()
		if r == '\n' || r == lexEOF {
			l.backup()
			break
		}
	}
	l.tok = lexToken{kind: tokComment, pos: l.start, end: l.pos, val: strings.TrimRight(l.src[l.start:l.pos], " \t\r")}
	l.ready = true
	l.start = l.pos
	return lexAny
}

func lexString(l *ruleLexer) lexState {
	for {
		switch l.next() {
		case '\\':
			if r := l.next(); r == '\n' || r == lexEOF {
				l.backup()
				return l.errorf("string not terminated")
			}
		case '"':
			return l.emit(tokString)
		case '\n', lexEOF:
			l.backup()
			return l.errorf("string not terminated")
		}
	}
}

// lexNumber scans an integer, a decimal number or a duration (a run of
// integer-unit pairs: 1h30m, 500ms). "2..4" is an integer followed by '..'.
func lexNumber(l *ruleLexer) lexState {
	if l.peek() == '-' {
		l.next()
		if r := l.peek(); r < '0' || r > '9' {
			return l.errorf("unexpected '-'")
		}
	}
	digits := func() {
		for r := l.peek(); '0' <= r && r <= '9'; r = l.peek() {
			l.next()
		}
	}
	digits()
	kind := tokInt
	if l.peek() == '.' && l.pos+1 < len(l.src) && l.src[l.pos+1] != '.' {
		l.next()
		digits()
		kind = tokFloat
	}
	if r := l.peek(); r == 'e' || r == 'E' {
		if rest := l.src[l.pos+1:]; len(rest) > 0 && (rest[0] >= '0' && rest[0] <= '9' || (rest[0] == '-' || rest[0] == '+') && len(rest) > 1 && rest[1] >= '0' && rest[1] <= '9') {
			l.next()
			if r := l.peek(); r == '-' || r == '+' {
				l.next()
			}
			digits()
			kind = tokFloat
		}
	}
	if kind == tokInt && isIdentStart(l.peek()) {
		// A duration: units and more integer-unit pairs.
		for {
			for isIdentPart(l.peek()) && !('0' <= l.peek() && l.peek() <= '9') {
				l.next()
			}
			if r := l.peek(); r < '0' || r > '9' {
				break
			}
			digits()
		}
		return l.emit(tokDuration)
	}
	if isIdentPart(l.peek()) {
		l.next()
		if num := l.src[l.start : l.pos-1]; strings.HasSuffix(num, ".") {
			// times 3.optional(): Flink's chained call after a count.
			return l.errorf("malformed number %q (a quantifier's words follow its count with a space: times %s optional, not Flink's times(%s).optional())",
				l.src[l.start:l.pos], strings.TrimSuffix(num, "."), strings.TrimSuffix(num, "."))
		}
		return l.errorf("malformed number %q", l.src[l.start:l.pos])
	}
	return l.emit(kind)
}

func lexIdent(l *ruleLexer) lexState {
	for isIdentPart(l.peek()) {
		l.next()
	}
	return l.emit(tokIdent)
}

func isIdentStart(r rune) bool { return r == '_' || unicode.IsLetter(r) }

func isIdentPart(r rune) bool { return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) }

// isIdent reports whether s is an identifier of the rule language (and of
// expr-lang): a letter or '_', then letters, digits and '_'.
func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if i == 0 && !isIdentStart(r) || !isIdentPart(r) {
			return false
		}
	}
	return true
}

// scanRaw scans a raw span starting at the current position (after spaces
// and tabs): an expression (where, or, until, emit values) or a JSON event
// line. The span runs to the end of the line, but continues across line
// breaks inside an open bracket; it also ends before a '#' that is outside
// brackets and strings (a comment) and before an unmatched closing bracket.
// Strings ('...', "...", `...`) and expr comments (// and /* */) are
// skipped as units, so brackets inside them do not count.
//
// The token's val is the span with trailing blanks removed. A span that
// does not close (a bracket left open at the end of the file or at a
// closing bracket of another kind on a later line, or a '...' or "..."
// string at the end of its line) is a tokError pointing at the opener; the
// scan then resumes at the end of the opener's line.
//
// A span with brackets nested deeper than [MaxExprDepth], or with more than
// [MaxExprTokens] tokens, is a tokError too (at the bracket, or the token,
// that passes the bound), the scan resuming after the span: expr's parser
// recurses once per bracket, prefix operator or nested operand, and a
// ruleset from the control API may be 64 MiB, enough to exhaust the
// goroutine stack, which is fatal.
func (l *ruleLexer) scanRaw() lexToken {
	for l.pos < len(l.src) && (l.src[l.pos] == ' ' || l.src[l.pos] == '\t') {
		l.pos++
	}
	l.start = l.pos
	var open []int // offsets of open brackets
	tokens := 0
	tooDeep, tooLong := -1, -1 // offsets where a bound was first passed
	errAt := func(off int, msg string) lexToken {
		l.start = l.pos
		return lexToken{kind: tokError, pos: off, end: off + 1, val: msg}
	}
	i := l.pos
scan:
	for i < len(l.src) {
		c := l.src[i]
		switch {
		case c == '\n':
			if len(open) == 0 {
				break scan
			}
			i++
		case c == '#' && len(open) == 0:
			break scan
		case c == '(' || c == '[' || c == '{':
			open = append(open, i)
			if len(open) > MaxExprDepth && tooDeep < 0 {
				tooDeep = i
			}
			tokens++
			i++
		case c == ')' || c == ']' || c == '}':
			if len(open) == 0 {
				break scan
			}
			o := open[len(open)-1]
			if want := closer(l.src[o]); c != want {
				if end := l.lineEnd(o); end < i {
					// The bracket opened on an earlier line is the one
					// left open: the error is at it, and the scan resumes
					// at the end of its line, so that the lines after it
					// and the block c closes are read as usual.
					l.pos = end
					return errAt(o, fmt.Sprintf("%q is not closed", l.src[o]))
				}
				l.pos = i + 1
				return errAt(i, fmt.Sprintf("unexpected %q in expression, want %q", c, want))
			}
			open = open[:len(open)-1]
			tokens++
			i++
		case c == '"' || c == '\'' || c == '`':
			tokens++
			end := skipQuoted(l.src, i)
			if end < 0 {
				// A '...' or "..." string ends at its line: outside
				// brackets, scanning resumes at the line end, as after
				// a string not terminated outside expressions, so that
				// the blocks around it still close.
				l.pos = len(l.src)
				if c != '`' && len(open) == 0 {
					l.pos = l.lineEnd(i)
				}
				return errAt(i, "string not terminated")
			}
			i = end
		case c == '/' && i+1 < len(l.src) && l.src[i+1] == '/':
			for i < len(l.src) && l.src[i] != '\n' {
				i++
			}
		case c == '/' && i+1 < len(l.src) && l.src[i+1] == '*':
			end := strings.Index(l.src[i+2:], "*/")
			if end < 0 {
				l.pos = len(l.src)
				return errAt(i, "comment not terminated")
			}
			i += 2 + end + 2
		case c == ' ' || c == '\t' || c == '\r':
			i++
		default:
			// A run of word bytes (a name, a number, a keyword) is one
			// token; any other byte is one (== counts two: a bound need
			// not be exact).
			if !isWordByte(c) || i == l.start || !isWordByte(l.src[i-1]) {
				tokens++
			}
			i++
		}
		if tokens > MaxExprTokens && tooLong < 0 {
			tooLong = i - 1
		}
	}
	if len(open) > 0 {
		// As above: the rest of the file is read from the end of the
		// opener's line.
		o := open[len(open)-1]
		l.pos = l.lineEnd(o)
		return errAt(o, fmt.Sprintf("%q is not closed", l.src[o]))
	}
	if tooDeep >= 0 {
		l.pos = i
		return errAt(tooDeep, fmt.Sprintf("brackets nested deeper than %d", MaxExprDepth))
	}
	if tooLong >= 0 {
		l.pos = i
		return errAt(tooLong, fmt.Sprintf("an expression of more than %d tokens: split it (a long list of values is a lookup)", MaxExprTokens))
	}
	end := i
	for end > l.start && (l.src[end-1] == ' ' || l.src[end-1] == '\t' || l.src[end-1] == '\r') {
		end--
	}
	l.pos = i
	tok := lexToken{kind: tokExpr, pos: l.start, end: end, val: l.src[l.start:end]}
	l.start = l.pos
	return tok
}

// lineEnd returns the offset of the newline that ends off's line (the
// end of the source on its last line).
func (l *ruleLexer) lineEnd(off int) int {
	if nl := strings.IndexByte(l.src[off:], '\n'); nl >= 0 {
		return off + nl
	}
	return len(l.src)
}

// MaxExprDepth is how deep brackets may nest in an expression (or a JSON
// event line of a test); MaxExprTokens is how many tokens an expression
// may have. Both bound the recursion of expr's parser (see scanRaw); expr
// itself refuses an expression of more than 10,000 nodes.
const (
	MaxExprDepth  = 100
	MaxExprTokens = 100_000
)

// isWordByte reports whether c may be part of a name or a number.
func isWordByte(c byte) bool {
	return c == '_' || c >= 0x80 || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

func closer(open byte) byte {
	switch open {
	case '(':
		return ')'
	case '[':
		return ']'
	}
	return '}'
}

// skipQuoted returns the offset just past the string literal that starts at
// src[i], or -1 when it is not terminated. '...' and "..." end at the line;
// `...` may span lines.
func skipQuoted(src string, i int) int {
	q := src[i]
	for j := i + 1; j < len(src); j++ {
		switch c := src[j]; {
		case c == q:
			return j + 1
		case c == '\\' && q != '`':
			j++
		case c == '\n' && q != '`':
			return -1
		}
	}
	return -1
}
