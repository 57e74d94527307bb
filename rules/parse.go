package rules

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// ParseFile parses a ruleset file. name is used in positions (it need not
// be a path). The returned tree holds every declaration that could be
// parsed; the error, if any, is an [ErrorList] of every syntax error found
// (sorted, one per line, at most [MaxErrors]).
func ParseFile(name string, src []byte) (*File, error) {
	if i := bytes.IndexByte(src, 0); i >= 0 {
		// A binary file (an events .gz given for a ruleset): one error,
		// not a page of stray characters.
		var errs ErrorList
		errs.add(newSrcFile(name, string(src)), posAt(i), "not a ruleset: the file holds a NUL byte (a binary or compressed file?); a ruleset is text")
		return &File{Path: name}, errs.finish(tooManyErrors).Err()
	}
	p := newRuleParser(name, string(src))
	f := p.parseFile()
	return f, p.errs.finish(tooManyErrors).Err()
}

// ruleParser is a recursive-descent parser with one token of lookahead
// (tok). The language is line oriented: every item ends at the end of its
// line, so after an error the parser skips to the end of the line (and over
// any block the line opened) and goes on, collecting errors.
type ruleParser struct {
	src  *srcFile
	lex  *ruleLexer
	tok  lexToken
	errs ErrorList
	// skipping suppresses the lexer's errors while skipping a bad line.
	skipping bool
	// groups is how deep the group being parsed nests (0 outside groups);
	// stages counts the stages of the pattern being parsed.
	groups, stages int
}

// MaxGroupDepth is how deep groups may nest in a pattern, and MaxStages how
// many stages a pattern may have. The parser recurses once per group, and
// compiling a pattern takes time and memory quadratic in its stages (each
// condition may read every stage): unbounded, a ruleset sent to the control
// API could exhaust the server's stack or memory.
const (
	MaxGroupDepth = 32
	MaxStages     = 256
)

func newRuleParser(name, src string) *ruleParser {
	p := &ruleParser{src: newSrcFile(name, src), lex: newRuleLexer(src)}
	p.next()
	return p
}

// next moves to the next token, reporting lexical errors on the way.
func (p *ruleParser) next() {
	for {
		p.tok = p.lex.nextToken()
		if p.tok.kind != tokError {
			return
		}
		if !p.skipping {
			p.errorAt(p.tok.pos, p.tok.val)
		}
	}
}

func (p *ruleParser) errorAt(off int, msg string) { p.errs.add(p.src, posAt(off), msg) }

func (p *ruleParser) errorf(format string, args ...any) {
	p.errorAt(p.tok.pos, fmt.Sprintf(format, args...))
}

// unexpected reports the current token where something else was expected.
// When the token is one of keywords but for case (followedby), the message
// names the keyword.
func (p *ruleParser) unexpected(want string, keywords ...string) {
	hint := ""
	for _, k := range keywords {
		if p.tok.kind == tokIdent && strings.EqualFold(p.tok.val, k) {
			hint = " (did you mean " + k + "?)"
			break
		}
	}
	// A misspelt keyword (folowedBy): a slip of a few letters, not a
	// short form, which a keyword of four letters or more is not.
	if w := p.tok.val; hint == "" && p.tok.kind == tokIdent && len(w) >= 4 {
		if k := Closest(w, keywords); k != "" && len(k) >= len(w)-2 && len(k) <= len(w)+2 {
			hint = " (did you mean " + k + "?)"
		}
	}
	p.errorf("expected %s, found %s%s", want, p.tok.describe(), hint)
}

// isWord reports whether the current token is the identifier w (a keyword;
// keywords are not reserved, their meaning depends on where they stand).
func (p *ruleParser) isWord(w string) bool { return p.tok.kind == tokIdent && p.tok.val == w }

// atDecl reports whether the token starts a top-level declaration: its
// keyword at the very start of a line and not followed by ':' (that is a
// field of that name). A block left open ends there (not closed), so that
// the declarations after it are read as such instead of as the block's
// items, an error each.
func (p *ruleParser) atDecl() bool {
	if p.tok.kind != tokIdent {
		return false
	}
	switch p.tok.val {
	case "ruleset", "event", "schema", "lookup", "aggregate", "rule", "test":
	default:
		return false
	}
	src, off := p.lex.src, p.tok.pos
	if off > 0 && src[off-1] != '\n' {
		return false
	}
	return !strings.HasPrefix(strings.TrimLeft(src[off+len(p.tok.val):], " \t"), ":")
}

// expect consumes a token of kind k, or reports an error and returns false.
func (p *ruleParser) expect(k tokKind, what string) bool {
	if p.tok.kind != k {
		p.unexpected(what)
		return false
	}
	p.next()
	return true
}

// expectWord consumes the keyword w, or reports an error.
func (p *ruleParser) expectWord(w string) bool {
	if !p.isWord(w) {
		p.unexpected(strconv.Quote(w))
		return false
	}
	p.next()
	return true
}

// endLine ends an item: an optional comment, then the end of the line (or
// of the file). It returns the comment. Anything else is an error, and the
// rest of the line is skipped.
func (p *ruleParser) endLine() string {
	var c string
	if p.tok.kind == tokComment {
		c = p.tok.val
		p.next()
	}
	switch p.tok.kind {
	case tokNewline:
		p.next()
	case tokEOF:
	default:
		p.errorf("unexpected %s at the end of the line%s", p.tok.describe(), p.misplacedWindow())
		p.skipLine()
	}
	return c
}

// misplacedWindow is the hint for a "within" where no window goes (among a
// rule's items, after the pattern block's '}', at the top level): a
// newcomer's window for the whole rule, which is a line of the pattern
// block. It is "" for any other token.
func (p *ruleParser) misplacedWindow() string {
	if !p.isWord("within") {
		return ""
	}
	return p.windowHint(p.tok.pos)
}

// windowHint is misplacedWindow's hint for the "within" at offset pos.
func (p *ruleParser) windowHint(pos int) string {
	line := p.lex.src[pos:]
	if i := strings.IndexAny(line, "#\n"); i >= 0 {
		line = line[:i]
	}
	return fmt.Sprintf(": the pattern window is a line of the pattern block, after its stages (pattern { ... %s })", strings.TrimSpace(line))
}

// skipLine skips to the start of the next line. When the skipped tokens
// open more braces than they close, the lines up to the matching closing
// brace are skipped too, so that the body of a block whose header was
// malformed is not parsed as items of the enclosing block. A closing brace
// that would close the enclosing block is left alone.
func (p *ruleParser) skipLine() {
	p.skipping = true
	defer func() { p.skipping = false }()
	depth := 0
	for {
		switch p.tok.kind {
		case tokEOF:
			return
		case tokLBrace:
			depth++
		case tokRBrace:
			if depth == 0 {
				return
			}
			depth--
		case tokNewline:
			if depth == 0 {
				p.next()
				return
			}
		}
		p.next()
	}
}

// skipRestOfLine skips to the start of the next line, braces and all: an
// expected match is one line, so a '}' on it closes no enclosing block.
func (p *ruleParser) skipRestOfLine() {
	p.skipping = true
	defer func() { p.skipping = false }()
	for p.tok.kind != tokNewline && p.tok.kind != tokEOF {
		p.next()
	}
	if p.tok.kind == tokNewline {
		p.next()
	}
}

// docLines consumes the blank and comment-only lines before an item, and
// returns them as a Doc ("" for blank lines, runs collapsed to one).
func (p *ruleParser) docLines() []string {
	var doc []string
	for {
		switch p.tok.kind {
		case tokNewline:
			if len(doc) == 0 || doc[len(doc)-1] != "" {
				doc = append(doc, "")
			}
			p.next()
		case tokComment:
			doc = append(doc, p.tok.val)
			p.next()
			if p.tok.kind == tokNewline {
				p.next()
			}
		default:
			return doc
		}
	}
}

// trimDoc drops the leading blank line of the Doc of a block's first item
// (a block does not start with a blank line).
func trimDoc(doc []string) []string {
	if len(doc) > 0 && doc[0] == "" {
		doc = doc[1:]
	}
	if len(doc) == 0 {
		return nil
	}
	return doc
}

// trimEndDoc drops trailing blank lines of a block's end comments.
func trimEndDoc(doc []string) []string {
	for len(doc) > 0 && doc[len(doc)-1] == "" {
		doc = doc[:len(doc)-1]
	}
	if len(doc) == 0 {
		return nil
	}
	return doc
}

// closeBlock consumes the closing brace of a block opened at open, and the
// end of its line; a comment after the brace joins the block's end
// comments. It returns the end comments.
func (p *ruleParser) closeBlock(open int, what string, endDoc []string) []string {
	if p.tok.kind != tokRBrace {
		p.errorAt(open, fmt.Sprintf("%s is not closed: expected '}', found %s", what, p.tok.describe()))
		return trimEndDoc(endDoc)
	}
	p.next()
	if c := p.endLine(); c != "" {
		endDoc = append(endDoc, c)
	}
	return trimEndDoc(endDoc)
}

// openBlock consumes '{' and the end of its line, returning the comment on
// that line; ok is false when there is no '{' (the line is then skipped).
func (p *ruleParser) openBlock(what string) (comment string, ok bool) {
	if p.tok.kind != tokLBrace {
		p.unexpected("'{' to open " + what)
		p.skipLine()
		return "", false
	}
	p.next()
	if k := p.tok.kind; k != tokComment && k != tokNewline && k != tokEOF {
		p.errorf("unexpected %s after '{': a block's items go on lines of their own, and its '}' on a line of its own", p.tok.describe())
		p.skipLine()
		return "", true
	}
	return p.endLine(), true
}

// parseName parses a name: an identifier or a string.
func (p *ruleParser) parseName(what string) (Name, bool) {
	n := Name{Pos: posAt(p.tok.pos)}
	switch p.tok.kind {
	case tokIdent:
		n.Value = p.tok.val
	case tokString:
		s, ok := p.unquote()
		if !ok {
			return n, false
		}
		if s == "" {
			p.errorf("%s is empty", what)
			return n, false
		}
		n.Value = s
	default:
		p.unexpected(what)
		return n, false
	}
	p.next()
	return n, true
}

// parseIdent parses a name that must be an identifier.
func (p *ruleParser) parseIdent(what string) (Name, bool) {
	if p.tok.kind != tokIdent {
		p.unexpected(what)
		return Name{}, false
	}
	n := Name{Pos: posAt(p.tok.pos), Value: p.tok.val}
	p.next()
	return n, true
}

// unquote returns the value of the current string token.
func (p *ruleParser) unquote() (string, bool) {
	s, err := strconv.Unquote(p.tok.val)
	if err != nil {
		p.errorf("malformed string %s", p.tok.val)
		return "", false
	}
	return s, true
}

func (p *ruleParser) parseString(what string) (string, bool) {
	if p.tok.kind != tokString {
		p.unexpected(what)
		return "", false
	}
	s, ok := p.unquote()
	if ok {
		p.next()
	}
	return s, ok
}

func (p *ruleParser) parseInt(what string) (IntLit, bool) {
	if p.tok.kind != tokInt {
		p.unexpected(what)
		return IntLit{}, false
	}
	v, err := strconv.Atoi(p.tok.val)
	if err != nil {
		p.errorf("integer %s out of range", p.tok.val)
		return IntLit{}, false
	}
	n := IntLit{Pos: posAt(p.tok.pos), Value: v}
	p.next()
	return n, true
}

// maxDuration bounds durations: a year is far beyond any sensible window,
// and keeps the millisecond arithmetic of the NFA far from overflow.
const maxDuration = 366 * 24 * time.Hour

func (p *ruleParser) parseDuration() (Duration, bool) {
	d := Duration{Pos: posAt(p.tok.pos)}
	if p.tok.kind != tokDuration {
		line := p.src.src[p.tok.pos:]
		if i := strings.IndexByte(line, '\n'); i >= 0 {
			line = line[:i]
		}
		switch {
		case p.tok.kind == tokInt:
			hint := ""
			if f := strings.Fields(line); len(f) > 1 {
				if dur, ok := flinkDuration(f[0] + " " + f[1]); ok {
					hint = ": write " + dur
				}
			}
			p.errorf("duration %s has no unit (ms, s, m, h or d)%s", p.tok.val, hint)
		case p.tok.kind == tokLParen || p.tok.kind == tokIdent:
			// within(Time.minutes(5)), within Duration.ofMinutes(5)
			text, _, _ := strings.Cut(strings.TrimPrefix(line, "("), ")")
			text += ")"
			if calls, ok := readCalls("within" + line); ok && p.tok.kind == tokLParen && strings.Contains(calls[0].args, "PREVIOUS_AND_CURRENT") {
				if f, ok := flinkForm(calls[0]); ok {
					p.errorf("expected a duration (500ms, 30s, 10m, 2h, 1d), found '(': Flink's within(%s) is written %s, on a line of its own after the stage", calls[0].args, f)
					return d, false
				}
			}
			if dur, ok := flinkDuration(text); ok {
				p.errorf("expected a duration (500ms, 30s, 10m, 2h, 1d), found %s: Flink's %s is written %s", p.tok.describe(), text, dur)
				return d, false
			}
			p.unexpected("a duration (500ms, 30s, 10m, 2h, 1d)")
		default:
			p.unexpected("a duration (500ms, 30s, 10m, 2h, 1d)")
		}
		return d, false
	}
	v, err := parseDurationText(p.tok.val)
	if err != nil {
		p.errorf("%v", err)
		return d, false
	}
	d.Value = v
	p.next()
	return d, true
}

// unitWords are the units a duration is often written with elsewhere
// (Flink's, Java's, English), by the unit they stand for.
var unitWords = map[string]string{
	"msec": "ms", "msecs": "ms", "millis": "ms", "milli": "ms", "millisecond": "ms", "milliseconds": "ms",
	"sec": "s", "secs": "s", "second": "s", "seconds": "s",
	"min": "m", "mins": "m", "minute": "m", "minutes": "m",
	"hr": "h", "hrs": "h", "hour": "h", "hours": "h",
	"day": "d", "days": "d", "ms": "ms", "s": "s", "m": "m", "h": "h", "d": "d", // 5M, 30S
}

// parseDurationText parses integer-unit pairs: 500ms, 30s, 10m, 2h, 1d,
// 1h30m. The result is positive and at most maxDuration.
func parseDurationText(s string) (time.Duration, error) {
	units := map[string]time.Duration{"ms": time.Millisecond, "s": time.Second, "m": time.Minute, "h": time.Hour, "d": 24 * time.Hour}
	text := s
	if strings.HasPrefix(s, "-") {
		return 0, fmt.Errorf("duration %q must be positive", text)
	}
	var total time.Duration
	for s != "" {
		i := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		j := i
		for j < len(s) && (s[j] < '0' || s[j] > '9') {
			j++
		}
		if i == 0 {
			return 0, fmt.Errorf("malformed duration %q", text)
		}
		if i == j {
			return 0, fmt.Errorf("duration %q: %s has no unit (ms, s, m, h or d)", text, s[:i])
		}
		unit, ok := units[s[i:j]]
		if !ok {
			if u, ok := unitWords[strings.ToLower(s[i:j])]; ok {
				return 0, fmt.Errorf("duration %q: unknown unit %q (use ms, s, m, h or d: write %s%s)", text, s[i:j], s[:i], u)
			}
			return 0, fmt.Errorf("duration %q: unknown unit %q (use ms, s, m, h or d)", text, s[i:j])
		}
		n, err := strconv.ParseInt(s[:i], 10, 64)
		if err != nil || time.Duration(n) > maxDuration/unit || total+time.Duration(n)*unit > maxDuration {
			return 0, fmt.Errorf("duration %q is too long (at most %s)", text, formatDuration(maxDuration))
		}
		total += time.Duration(n) * unit
		s = s[j:]
	}
	if total <= 0 {
		return 0, fmt.Errorf("duration %q must be positive", text)
	}
	return total, nil
}

// parseExpr scans the expression that follows the current token (a
// keyword or ':'), which must be the last token lexed, and moves past it.
func (p *ruleParser) parseExpr(what string) (*Expr, bool) {
	raw := p.lex.scanRaw()
	p.next()
	return p.exprFrom(raw, what)
}

// parseRawLine scans a raw span (a JSON event) from the start of the
// current token and moves past it.
func (p *ruleParser) parseRawLine(what string) (*Expr, bool) {
	p.lex.pos, p.lex.start = p.tok.pos, p.tok.pos
	raw := p.lex.scanRaw()
	p.next()
	return p.exprFrom(raw, what)
}

// exprFrom makes an expression of a raw span. On failure the caller skips
// the rest of the line.
func (p *ruleParser) exprFrom(raw lexToken, what string) (*Expr, bool) {
	if raw.kind == tokError {
		p.errorAt(raw.pos, raw.val)
		return nil, false
	}
	if raw.val == "" {
		p.errorAt(raw.pos, "expected "+what)
		return nil, false
	}
	text, verbatim := exprText(p.src.src, raw.pos, raw.val)
	return &Expr{Pos: posAt(raw.pos), Text: text, raw: raw.val, verbatim: verbatim}, true
}

// exprText returns the printed form of the raw span val that starts at
// offset pos of src: continuation lines lose the indentation of the line
// the span starts on, and trailing blanks. A span with a string or comment
// that crosses a line break is returned verbatim.
func exprText(src string, pos int, val string) (string, bool) {
	if !strings.Contains(val, "\n") {
		return val, false
	}
	for i := 0; i < len(val); i++ {
		switch c := val[i]; {
		case c == '"' || c == '\'' || c == '`':
			end := skipQuoted(val, i)
			if end < 0 || strings.Contains(val[i:end], "\n") {
				return val, true
			}
			i = end - 1
		case c == '/' && i+1 < len(val) && val[i+1] == '*':
			end := strings.Index(val[i+2:], "*/")
			if end < 0 || strings.Contains(val[i:i+2+end], "\n") {
				return val, true
			}
			i += end + 3
		case c == '/' && i+1 < len(val) && val[i+1] == '/':
			for i < len(val) && val[i] != '\n' {
				i++
			}
		}
	}
	lineStart := strings.LastIndexByte(src[:pos], '\n') + 1
	base := src[lineStart:pos]
	base = base[:len(base)-len(strings.TrimLeft(base, " \t"))]
	lines := strings.Split(val, "\n")
	for i, l := range lines {
		l = strings.TrimRight(l, " \t\r")
		if i > 0 {
			if strings.HasPrefix(l, base) {
				l = l[len(base):]
			} else {
				l = strings.TrimLeft(l, " \t")
			}
		}
		lines[i] = l
	}
	return strings.Join(lines, "\n"), false
}

// parseFile parses a whole file.
func (p *ruleParser) parseFile() *File {
	f := &File{Path: p.src.name, src: p.src}
	f.Doc = trimDoc(p.docLines())
	if p.isWord("ruleset") {
		f.Pos = posAt(p.tok.pos)
		p.next()
		if n, ok := p.parseName("a ruleset name"); ok {
			f.Name = n
			f.Line = p.endLine()
		} else {
			p.skipLine()
		}
	} else {
		p.errorf("a ruleset file starts with 'ruleset NAME', found %s", p.tok.describe())
	}
	for {
		doc := p.docLines()
		if p.tok.kind == tokEOF {
			f.EndDoc = trimEndDoc(doc)
			break
		}
		c := Comments{Doc: doc}
		pos := p.tok.pos
		switch {
		case p.isWord("event"):
			p.next()
			if !p.expectWord("time") {
				p.skipLine()
				continue
			}
			field, ok := p.parseIdent("the name of the event time field")
			if !ok {
				p.skipLine()
				continue
			}
			c.Line = p.endLine()
			f.Decls = append(f.Decls, &EventTimeDecl{Comments: c, Pos: posAt(pos), Field: field})
		case p.isWord("schema"):
			p.next()
			if d := p.parseSchema(c, pos); d != nil {
				f.Decls = append(f.Decls, d)
			}
		case p.isWord("lookup"):
			p.next()
			if d := p.parseLookup(c, pos); d != nil {
				f.Decls = append(f.Decls, d)
			}
		case p.isWord("aggregate"):
			p.next()
			if d := p.parseAggregate(c, pos); d != nil {
				f.Decls = append(f.Decls, d)
			}
		case p.isWord("rule"):
			p.next()
			if d := p.parseRule(c, pos); d != nil {
				f.Decls = append(f.Decls, d)
			}
		case p.isWord("test"):
			p.next()
			if d := p.parseTest(c, pos); d != nil {
				f.Decls = append(f.Decls, d)
			}
		case p.isWord("ruleset"):
			p.errorf("a file holds one ruleset")
			p.skipLine()
		case p.tok.kind == tokRBrace:
			p.errorf("unexpected '}'")
			p.next()
			p.endLine()
		default:
			if hint := p.misplacedWindow(); hint != "" {
				p.errorf("unexpected \"within\"%s", hint)
			} else {
				p.unexpected("event time, schema, lookup, aggregate, rule or test", "event", "schema", "lookup", "aggregate", "rule", "test")
			}
			p.skipLine()
		}
	}
	return f
}

func (p *ruleParser) parseSchema(c Comments, pos int) *SchemaDecl {
	line, ok := p.openBlock("the schema")
	if !ok {
		return nil
	}
	d := &SchemaDecl{Comments: c, Pos: posAt(pos)}
	d.Line = line
	for {
		doc := p.docLines()
		if p.tok.kind == tokRBrace || p.tok.kind == tokEOF || p.atDecl() {
			d.EndDoc = p.closeBlock(pos, "schema", doc)
			return d
		}
		if len(d.Fields) == 0 {
			doc = trimDoc(doc)
		}
		name, typ, ok := p.parseFieldHead()
		if !ok {
			continue
		}
		fd := &FieldDecl{Comments: Comments{Doc: doc}, Name: name, Type: typ}
		fd.Line = p.endLine()
		d.Fields = append(d.Fields, fd)
	}
}

// parseFieldHead parses the `name: type` that begins a field of the
// schema or of a lookup's fields; after an error it skips the line.
func (p *ruleParser) parseFieldHead() (name, typ Name, ok bool) {
	name, ok = p.parseIdent("a field name")
	if !ok || !p.expect(tokColon, "':' after the field name") {
		p.skipLine()
		return Name{}, Name{}, false
	}
	if typ, ok = p.parseIdent("a type (string, int, float, bool or time)"); !ok {
		p.skipLine()
		return Name{}, Name{}, false
	}
	return name, typ, true
}

func (p *ruleParser) parseRule(c Comments, pos int) *RuleDecl {
	name, ok := p.parseName("a rule name")
	if !ok {
		p.skipLine()
		return nil
	}
	line, ok := p.openBlock("the rule")
	if !ok {
		return nil
	}
	d := &RuleDecl{Comments: c, Pos: posAt(pos), Name: name}
	d.Line = line
	for {
		doc := p.docLines()
		if p.tok.kind == tokRBrace || p.tok.kind == tokEOF || p.atDecl() {
			d.EndDoc = p.closeBlock(pos, "rule "+name.Value, doc)
			break
		}
		ic := Comments{Doc: doc}
		ipos := p.tok.pos
		switch {
		case p.isWord("description"):
			if p.givenTwice("description", d.Description != nil) {
				continue
			}
			p.next()
			s, ok := p.parseString("a description string")
			if !ok {
				p.skipLine()
				continue
			}
			ic.Line = p.endLine()
			d.Description = &StringItem{Comments: ic, Pos: posAt(ipos), Value: s}
		case p.isWord("severity"):
			if p.givenTwice("severity", d.Severity != nil) {
				continue
			}
			if it := p.parseSeverityItem(ic, ipos); it != nil {
				d.Severity = it
			}
		case p.isWord("key"):
			if p.givenTwice("key", d.Key != nil) {
				continue
			}
			p.next()
			if k := p.parseKey(ic, ipos, "key fields (leave out key for one global partition)"); k != nil {
				d.Key = k
			}
		case p.isWord("pattern"):
			if p.givenTwice("pattern", d.Pattern != nil) {
				continue
			}
			p.next()
			d.Pattern = p.parsePattern(ic, ipos)
		case p.isWord("skip"):
			if p.givenTwice("skip", d.Skip != nil) {
				continue
			}
			p.next()
			if s := p.parseSkip(ic, ipos); s != nil {
				d.Skip = s
			}
		case p.isWord("emit"):
			if p.givenTwice("emit", d.Emit != nil) {
				continue
			}
			p.next()
			d.Emit = p.parseEmit(ic, ipos)
		case p.isWord("timeout"):
			if p.givenTwice("timeout", d.Timeout != nil) {
				continue
			}
			p.next()
			d.Timeout = p.parseTimeout(ic, ipos)
		default:
			if hint := p.misplacedWindow(); hint != "" {
				p.errorf("unexpected \"within\"%s", hint)
			} else {
				p.unexpected("description, severity, key, pattern, skip, emit or timeout", "description", "severity", "key", "pattern", "skip", "emit", "timeout")
			}
			p.skipLine()
		}
	}
	// The first item printed does not start with a blank line.
	for _, c := range []*Comments{
		commentsOf(d.Description), commentsOf(d.Severity), commentsOf(d.Key),
		commentsOf(d.Pattern), commentsOf(d.Skip), commentsOf(d.Emit), commentsOf(d.Timeout),
	} {
		if c != nil {
			c.Doc = trimDoc(c.Doc)
			break
		}
	}
	return d
}

// parseSeverityItem parses `severity S` (at the keyword), or reports what
// is missing, skips the line and returns nil.
func (p *ruleParser) parseSeverityItem(c Comments, pos int) *NameItem {
	p.next()
	n, ok := p.parseIdent("a severity (info, low, medium, high or critical)")
	if !ok {
		p.skipLine()
		return nil
	}
	c.Line = p.endLine()
	return &NameItem{Comments: c, Pos: posAt(pos), Name: n}
}

// parseTimeout parses a rule's `timeout { ... }` block (the keyword
// consumed): its severity and emit items.
func (p *ruleParser) parseTimeout(c Comments, pos int) *TimeoutBlock {
	line, ok := p.openBlock("timeout")
	if !ok {
		return nil
	}
	t := &TimeoutBlock{Comments: c, Pos: posAt(pos)}
	t.Line = line
	for {
		doc := p.docLines()
		if p.tok.kind == tokRBrace || p.tok.kind == tokEOF || p.atDecl() {
			t.EndDoc = p.closeBlock(pos, "timeout", doc)
			break
		}
		ic := Comments{Doc: doc}
		ipos := p.tok.pos
		switch {
		case p.isWord("only"):
			if p.givenTwice("only", t.Only != nil) {
				continue
			}
			p.next()
			ic.Line = p.endLine()
			t.Only = &WordItem{Comments: ic, Pos: posAt(ipos)}
		case p.isWord("severity"):
			if p.givenTwice("severity", t.Severity != nil) {
				continue
			}
			if it := p.parseSeverityItem(ic, ipos); it != nil {
				t.Severity = it
			}
		case p.isWord("emit"):
			if p.givenTwice("emit", t.Emit != nil) {
				continue
			}
			p.next()
			t.Emit = p.parseEmit(ic, ipos)
		default:
			if hint := p.misplacedWindow(); hint != "" {
				p.errorf("unexpected \"within\" in a timeout block%s", hint)
			} else {
				p.unexpected("only, severity or emit (a timeout block's items)", "only", "severity", "emit")
			}
			p.skipLine()
		}
	}
	for _, c := range []*Comments{commentsOf(t.Only), commentsOf(t.Severity), commentsOf(t.Emit)} {
		if c != nil {
			c.Doc = trimDoc(c.Doc)
			break
		}
	}
	return t
}

// givenTwice reports an item of a block given a second time (set: the
// first is there), skipping its line.
func (p *ruleParser) givenTwice(what string, set bool) bool {
	if set {
		p.errorf("%s given twice", what)
		p.skipLine()
	}
	return set
}

// parseKey parses the fields of `key f1, f2` (the keyword consumed), or
// reports want and skips the line.
func (p *ruleParser) parseKey(c Comments, pos int, want string) *KeyItem {
	k := &KeyItem{Comments: c, Pos: posAt(pos)}
	if p.tok.kind != tokIdent {
		p.unexpected(want)
		p.skipLine()
		return nil
	}
	for {
		n, ok := p.parseIdent("a key field")
		if !ok {
			break
		}
		k.Fields = append(k.Fields, n)
		if p.tok.kind != tokComma {
			break
		}
		p.next()
	}
	k.Line = p.endLine()
	return k
}

func (p *ruleParser) parseLookup(c Comments, pos int) *LookupDecl {
	name, ok := p.parseIdent("a lookup name")
	if !ok {
		p.skipLine()
		return nil
	}
	line, ok := p.openBlock("the lookup")
	if !ok {
		return nil
	}
	d := &LookupDecl{Comments: c, Pos: posAt(pos), Name: name}
	d.Line = line
	for {
		doc := p.docLines()
		if p.tok.kind == tokRBrace || p.tok.kind == tokEOF || p.atDecl() {
			d.EndDoc = p.closeBlock(pos, "lookup "+name.Value, doc)
			break
		}
		ic := Comments{Doc: doc}
		ipos := p.tok.pos
		switch {
		case p.isWord("key"):
			if p.givenTwice("key", d.Key != nil) {
				continue
			}
			p.next()
			if k := p.parseKey(ic, ipos, "the key fields of the lookup"); k != nil {
				d.Key = k
			}
		case p.isWord("fields"):
			if p.givenTwice("fields", d.Fields != nil) {
				continue
			}
			p.next()
			d.Fields = p.parseLookupFields(ic, ipos)
		case p.isWord("on"):
			if p.givenTwice("on failure", d.Failure != nil) {
				continue
			}
			p.next()
			if it := p.parseFailure(ic, ipos); it != nil {
				d.Failure = it
			}
		case p.isWord("timeout"):
			if p.givenTwice("timeout", d.Timeout != nil) {
				continue
			}
			p.next()
			dur, ok := p.parseDuration()
			if !ok {
				p.skipLine()
				continue
			}
			ic.Line = p.endLine()
			d.Timeout = &DurationItem{Comments: ic, Pos: posAt(ipos), Dur: dur}
		default:
			p.unexpected("key, fields, on failure or timeout")
			p.skipLine()
		}
	}
	for _, c := range []*Comments{commentsOf(d.Key), commentsOf(d.Fields), commentsOf(d.Failure), commentsOf(d.Timeout)} {
		if c != nil {
			c.Doc = trimDoc(c.Doc)
			break
		}
	}
	return d
}

// aggFuncs are the functions of an aggregate; true: it takes a field.
var aggFuncs = map[string]bool{"count": false, "sum": true, "avg": true, "min": true, "max": true, "distinct": true}

func (p *ruleParser) parseAggregate(c Comments, pos int) *AggregateDecl {
	name, ok := p.parseIdent("an aggregate name")
	if !ok {
		p.skipLine()
		return nil
	}
	line, ok := p.openBlock("the aggregate")
	if !ok {
		return nil
	}
	d := &AggregateDecl{Comments: c, Pos: posAt(pos), Name: name}
	d.Line = line
	for {
		doc := p.docLines()
		if p.tok.kind == tokRBrace || p.tok.kind == tokEOF || p.atDecl() {
			d.EndDoc = p.closeBlock(pos, "aggregate "+name.Value, doc)
			break
		}
		ic := Comments{Doc: doc}
		ipos := p.tok.pos
		_, isFunc := aggFuncs[p.tok.val]
		switch {
		case p.isWord("key"):
			if p.givenTwice("key", d.Key != nil) {
				continue
			}
			p.next()
			if k := p.parseKey(ic, ipos, "the key fields of the aggregate"); k != nil {
				d.Key = k
			}
		case p.tok.kind == tokIdent && isFunc:
			if d.Func != nil && d.Func.Func.Value == p.tok.val {
				p.errorf("%s is given twice", p.tok.val)
				p.skipLine()
				continue
			}
			if d.Func != nil {
				p.errorf("a second function: aggregate %s computes %s already; declare another aggregate for %s", name.Value, d.Func.Func.Value, p.tok.val)
				p.skipLine()
				continue
			}
			fn, _ := p.parseIdent("a function")
			it := &AggFuncItem{Comments: ic, Pos: posAt(ipos), Func: fn}
			if fn.Value == "count" && p.tok.kind == tokIdent {
				p.errorf("count takes no field: it counts the events (sum %s adds up a field)", p.tok.val)
				p.skipLine()
				continue
			}
			if aggFuncs[fn.Value] {
				field, ok := p.parseIdent("the field " + fn.Value + " reads")
				if !ok {
					p.skipLine()
					continue
				}
				it.Field = &field
			}
			it.Line = p.endLine()
			d.Func = it
		case p.isWord("window"):
			if p.givenTwice("window", d.Window != nil) {
				continue
			}
			p.next()
			if p.isWord("sliding") || p.isWord("tumbling") {
				p.errorf("%s comes after the window's length: window 1h %s", p.tok.val, p.tok.val)
				p.skipLine()
				continue
			}
			dur, ok := p.parseDuration()
			if !ok {
				p.skipLine()
				continue
			}
			it := &WindowItem{Comments: ic, Pos: posAt(ipos), Dur: dur}
			if p.isWord("tumbling") {
				it.Tumbling = Flag{Set: true, Pos: posAt(p.tok.pos)}
				p.next()
			} else if p.isWord("sliding") {
				p.next() // the default, printed without the word
			} else if p.tok.kind == tokIdent {
				p.unexpected("sliding or tumbling after the window's length")
				p.skipLine()
				continue
			}
			it.Line = p.endLine()
			d.Window = it
		case p.isWord("where"):
			if p.givenTwice("where", d.Where != nil) {
				continue
			}
			x, ok := p.parseExpr("a condition after where")
			if !ok {
				p.skipLine()
				continue
			}
			it := &ExprItem{Comments: ic, Pos: posAt(ipos), Expr: x}
			it.Line = p.endLine()
			d.Where = it
		default:
			p.unexpected("key, a function (count, sum, avg, min, max or distinct), window or where")
			p.skipLine()
		}
	}
	for _, c := range []*Comments{commentsOf(d.Key), commentsOf(d.Func), commentsOf(d.Window), commentsOf(d.Where)} {
		if c != nil {
			c.Doc = trimDoc(c.Doc)
			break
		}
	}
	return d
}

func (p *ruleParser) parseLookupFields(c Comments, pos int) *LookupFields {
	line, ok := p.openBlock("the lookup's fields")
	if !ok {
		return nil
	}
	b := &LookupFields{Comments: c, Pos: posAt(pos)}
	b.Line = line
	for {
		doc := p.docLines()
		if p.tok.kind == tokRBrace || p.tok.kind == tokEOF || p.atDecl() {
			b.EndDoc = p.closeBlock(pos, "fields", doc)
			return b
		}
		if len(b.Fields) == 0 {
			doc = trimDoc(doc)
		}
		name, typ, ok := p.parseFieldHead()
		if !ok {
			continue
		}
		f := &LookupFieldDecl{Comments: Comments{Doc: doc}, Name: name, Type: typ}
		if p.isWord("default") {
			p.next()
			lit, ok := p.parseLiteral()
			if !ok {
				p.skipLine()
				continue
			}
			f.Default = &lit
		}
		f.Line = p.endLine()
		b.Fields = append(b.Fields, f)
	}
}

// parseFailure parses the rest of `on failure open|closed` or `on failure
// retry N then open|closed`.
func (p *ruleParser) parseFailure(c Comments, pos int) *FailureItem {
	if !p.expectWord("failure") {
		p.skipLine()
		return nil
	}
	it := &FailureItem{Comments: c, Pos: posAt(pos)}
	if p.isWord("retry") {
		p.next()
		n, ok := p.parseInt("the number of retries")
		if !ok || !p.expectWord("then") {
			p.skipLine()
			return nil
		}
		it.Retries = &n
	}
	if !p.isWord("open") && !p.isWord("closed") {
		p.unexpected("open (the defaults) or closed (the dead letters)")
		p.skipLine()
		return nil
	}
	it.Mode, _ = p.parseIdent("open or closed")
	it.Line = p.endLine()
	return it
}

// commentsOf returns the comments of a rule item, or nil for a nil item.
func commentsOf[T any, PT interface {
	*T
	comments() *Comments
}](it PT) *Comments {
	if it == nil {
		return nil
	}
	return it.comments()
}

func (c *Comments) comments() *Comments { return c }

func (p *ruleParser) parseSkip(c Comments, pos int) *SkipItem {
	s := &SkipItem{Comments: c, Pos: posAt(pos)}
	if p.tok.kind != tokIdent {
		p.unexpected("a skip strategy (noSkip, toNext, pastLastEvent, toFirst or toLast)")
		p.skipLine()
		return nil
	}
	found := false
	for k, w := range skipWords {
		if p.tok.val == w {
			s.Kind, found = SkipKind(k), true
		}
	}
	if !found && !slices.ContainsFunc(skipWords[:], func(w string) bool { return strings.EqualFold(w, p.tok.val) }) {
		if f, ok := flinkSkip(p.src.src[p.tok.pos:]); ok {
			p.errorf("expected a skip strategy (noSkip, toNext, pastLastEvent, toFirst or toLast), found %s: that is Flink's name, write %s", p.tok.describe(), f)
			p.skipLine()
			return nil
		}
	}
	if !found {
		p.unexpected("a skip strategy (noSkip, toNext, pastLastEvent, toFirst or toLast)", skipWords[:]...)
		p.skipLine()
		return nil
	}
	p.next()
	if s.Kind == SkipToFirst || s.Kind == SkipToLast {
		if p.tok.kind == tokLParen {
			if f, ok := flinkSkip("skip" + skipWords[s.Kind] + p.src.src[p.tok.pos:]); ok {
				p.errorf("expected the stage to skip to, found '(': the stage's name follows without parentheses: %s", f)
				p.skipLine()
				return nil
			}
		}
		n, ok := p.parseName("the stage to skip to")
		if !ok {
			p.skipLine()
			return nil
		}
		s.Stage = n
	}
	if p.isWord("orFail") {
		s.OrFail = Flag{Set: true, Pos: posAt(p.tok.pos)}
		p.next()
	}
	s.Line = p.endLine()
	return s
}

func (p *ruleParser) parseEmit(c Comments, pos int) *EmitBlock {
	line, ok := p.openBlock("emit")
	if !ok {
		return nil
	}
	e := &EmitBlock{Comments: c, Pos: posAt(pos)}
	e.Line = line
	for {
		doc := p.docLines()
		if p.tok.kind == tokRBrace || p.tok.kind == tokEOF || p.atDecl() {
			e.EndDoc = p.closeBlock(pos, "emit", doc)
			return e
		}
		if len(e.Fields) == 0 {
			doc = trimDoc(doc)
		}
		name, ok := p.parseIdent("an emit field name")
		if !ok {
			p.skipLine()
			continue
		}
		if p.tok.kind != tokColon {
			switch {
			case len(e.Fields) > 0 && continued(e.Fields[len(e.Fields)-1].Expr):
				p.errorAt(name.Pos.Offset(), "expected an emit field, found "+strconv.Quote(name.Value)+"; "+continuedHint)
			case name.Value == "within":
				p.errorAt(name.Pos.Offset(), `unexpected "within" in an emit block`+p.windowHint(name.Pos.Offset()))
			default:
				p.unexpected("':' after the emit field name")
			}
			p.skipLine()
			continue
		}
		x, ok := p.parseExpr("an expression")
		if !ok {
			p.skipLine()
			continue
		}
		f := &EmitField{Comments: Comments{Doc: doc}, Name: name, Expr: x}
		f.Line = p.endLine()
		e.Fields = append(e.Fields, f)
	}
}

// contiguityOf returns the contiguity named by the current token.
func (p *ruleParser) contiguityOf() (Contiguity, bool) {
	if p.tok.kind != tokIdent {
		return 0, false
	}
	for i, w := range contiguityWords {
		if p.tok.val == w {
			return Contiguity(i), true
		}
	}
	return 0, false
}

func (p *ruleParser) parsePattern(c Comments, pos int) *PatternBlock {
	line, ok := p.openBlock("the pattern")
	if !ok {
		return nil
	}
	b := &PatternBlock{Comments: c, Pos: posAt(pos)}
	b.Line = line
	p.stages = 0
	var endDoc []string
	b.Elems, endDoc = p.parseElems(false, &b.Within)
	b.EndDoc = p.closeBlock(pos, "pattern", endDoc)
	return b
}

// parseElems parses the lines of a pattern block (or, with inGroup, of a
// group) up to its closing '}' (or ')') or the next top-level declaration,
// which it leaves alone, and returns the elements and the comments before
// the closing bracket. A pattern window line sets *within.
func (p *ruleParser) parseElems(inGroup bool, within **WithinItem) ([]PatternElem, []string) {
	var elems []PatternElem
	first := true
	for {
		doc := p.docLines()
		if first {
			doc = trimDoc(doc)
		}
		switch {
		case p.tok.kind == tokEOF, p.tok.kind == tokRBrace, inGroup && p.tok.kind == tokRParen, p.atDecl():
			return elems, doc
		case p.tok.kind == tokRParen:
			p.errorf("unexpected ')': no group is open")
			p.skipLine()
			continue
		}
		first = false
		c := Comments{Doc: doc}
		pos := p.tok.pos
		if cont, ok := p.contiguityOf(); ok {
			p.next()
			if e := p.parseElem(c, pos, cont); e != nil {
				elems = append(elems, e)
			}
			continue
		}
		if p.isWord("where") || p.isWord("or") || p.isWord("until") || p.isWord("within") {
			var last *elemHead
			if len(elems) > 0 {
				last = elems[len(elems)-1].head()
			}
			if p.isWord("within") {
				p.parseWithinLine(c, last, inGroup, within)
				continue
			}
			if last == nil {
				p.errorf("%s needs a stage before it", p.tok.val)
				p.skipLine()
				continue
			}
			if cl := p.parseClause(); cl != nil {
				cl.Comments = c
				cl.Line = p.endLine()
				last.Clauses = append(last.Clauses, cl)
			}
			continue
		}
		if len(elems) > 0 && continued(lastExpr(elems[len(elems)-1].head().Clauses)) {
			p.errorf("expected a stage or a clause, found %s; %s", p.tok.describe(), continuedHint)
		} else if p.isWord("Pattern") && strings.HasPrefix(p.src.src[p.tok.pos+len("Pattern"):], ".") {
			skip := ""
			line, _, _ := strings.Cut(p.src.src[p.tok.pos:], "\n")
			if i := strings.Index(line, "AfterMatchSkipStrategy."); i >= 0 {
				// begin("a", AfterMatchSkipStrategy.skipPastLastEvent()):
				// the rule's skip line.
				if f, ok := flinkSkip(line[i:]); ok {
					skip = "; its skip strategy is the rule's line " + f + ", after the pattern block"
				}
			}
			p.errorf("Flink's Pattern.begin(\"a\") is written begin a (the pattern block is the Pattern, its first stage begins it)%s", skip)
		} else {
			p.unexpected("a stage (begin, next, followedBy, followedByAny, notNext, notFollowedBy) or a clause (where, or, until, within)", append(contiguityWords[:], clauseWords[:]...)...)
		}
		p.skipLine()
	}
}

// parseWithinLine parses a line that starts with within: a clause of the
// element before (within d of previous) or the pattern window.
func (p *ruleParser) parseWithinLine(c Comments, last *elemHead, inGroup bool, within **WithinItem) {
	pos := p.tok.pos
	p.next()
	d, ok := p.parseDuration()
	if !ok {
		p.skipLine()
		return
	}
	if p.isWord("of") {
		cl, ok := p.parseOfPrevious(pos, d)
		if !ok {
			return
		}
		if last == nil {
			p.errorAt(pos, "within ... of previous needs a stage before it")
			p.skipLine()
			return
		}
		cl.Comments = c
		cl.Line = p.endLine()
		last.Clauses = append(last.Clauses, cl)
		return
	}
	if inGroup {
		p.errorAt(pos, "the pattern window (within d) belongs at the end of the pattern, not inside a group; write 'within d of previous' for the time since the previous event")
		p.skipLine()
		return
	}
	if *within != nil {
		p.errorAt(pos, "the pattern window is given twice (Flink applies the shortest of several within calls: keep that one, on a line of its own at the end of the pattern)")
		p.skipLine()
		return
	}
	w := &WithinItem{Comments: c, Pos: posAt(pos), Dur: d}
	w.Line = p.endLine()
	*within = w
}

// parseOfPrevious parses "of previous" after `within d`.
func (p *ruleParser) parseOfPrevious(pos int, d Duration) (*Clause, bool) {
	p.next()
	if !p.expectWord("previous") {
		p.skipLine()
		return nil, false
	}
	return &Clause{Pos: posAt(pos), Kind: ClauseGap, Dur: d}, true
}

// parseClause parses a where, or or until clause (the current token is
// the keyword) up to the end of its expression.
func (p *ruleParser) parseClause() *Clause {
	cl := &Clause{Pos: posAt(p.tok.pos)}
	switch p.tok.val {
	case "where":
		cl.Kind = ClauseWhere
	case "or":
		cl.Kind = ClauseOr
	case "until":
		cl.Kind = ClauseUntil
	}
	x, ok := p.parseExpr("a condition after " + cl.Kind.String())
	if !ok {
		p.skipLine()
		return nil
	}
	// or where x == 2: the clause's keyword written twice, as Flink's
	// .or(...) reads after .where(...).
	if f := strings.Fields(x.Text); len(f) > 1 && (f[0] == "where" || f[0] == "or" || f[0] == "until") {
		if r, _ := utf8.DecodeRuneInString(f[1]); isIdentStart(r) || unicode.IsDigit(r) || strings.ContainsRune("(!\"'", r) {
			p.errorAt(x.Pos.Offset(), fmt.Sprintf("%s takes its condition right after it, without %s: %s %s", cl.Kind, f[0], cl.Kind, strings.TrimSpace(strings.TrimPrefix(x.Text, f[0]))))
			p.skipLine()
			return nil
		}
	}
	cl.Expr = x
	return cl
}

// parseElem parses a stage or group line after its contiguity keyword.
func (p *ruleParser) parseElem(c Comments, pos int, cont Contiguity) PatternElem {
	if p.tok.kind == tokLParen && p.flinkStage(cont) {
		p.skipLine()
		return nil
	}
	if p.tok.kind == tokLParen {
		return p.parseGroup(c, pos, cont)
	}
	quoted := p.tok.kind == tokString
	name, ok := p.parseName("a stage name")
	if !ok {
		p.skipLine()
		return nil
	}
	if !quoted && slices.Contains(quantWords, name.Value) && p.quantifierFirst() {
		p.errorAt(name.Pos.Offset(), fmt.Sprintf("%s is a quantifier: the stage name comes first, then the quantifiers (%s NAME %s)", name.Value, cont, name.Value))
		p.skipLine()
		return nil
	}
	if p.stages++; p.stages == MaxStages+1 {
		p.errorAt(name.Pos.Offset(), fmt.Sprintf("a pattern of more than %d stages", MaxStages))
	}
	s := &StageNode{Comments: c, Pos: posAt(pos), Name: name}
	s.Contiguity = cont
	if !p.parseHeadRest(&s.elemHead) {
		return s
	}
	s.Line = p.endLine()
	return s
}

// continuedHint says why the line after an expression that ends with an
// operator is not read as its continuation.
const continuedHint = "the line before ends with an operator, and an expression continues past its line only inside brackets: wrap it in ( )"

// continued reports whether x ends with an operator that wants an operand
// (type == "auth" &&): its author meant the next line to continue it.
func continued(x *Expr) bool {
	if x == nil {
		return false
	}
	raw := strings.TrimSpace(x.raw)
	for _, op := range []string{"&&", "||", "=", "!", "<", ">", "+", "-", "*", "/", "%"} {
		if strings.HasSuffix(raw, op) {
			return true
		}
	}
	f := strings.Fields(raw)
	return len(f) > 0 && slices.Contains([]string{"and", "or", "not", "in"}, f[len(f)-1])
}

// lastExpr returns the expression of the last of clauses that has one.
func lastExpr(clauses []*Clause) *Expr {
	for i := len(clauses) - 1; i >= 0; i-- {
		if clauses[i].Expr != nil {
			return clauses[i].Expr
		}
	}
	return nil
}

// quantifierFirst reports whether the token after a stage named like a
// quantifier shows that the name was meant as one (begin oneOrMore a, begin
// times 3 a): a number, or a word that is neither a quantifier nor a clause.
func (p *ruleParser) quantifierFirst() bool {
	switch p.tok.kind {
	case tokInt:
		return true
	case tokIdent:
		return !slices.Contains(quantWords, p.tok.val) && !slices.Contains(clauseWords[:], p.tok.val)
	}
	return false
}

func (p *ruleParser) parseGroup(c Comments, pos int, cont Contiguity) PatternElem {
	open := p.tok.pos
	if p.groups == MaxGroupDepth {
		p.errorAt(open, fmt.Sprintf("groups nested deeper than %d", MaxGroupDepth))
		p.skipGroup()
		return nil
	}
	p.groups++
	defer func() { p.groups-- }()
	p.next()
	g := &GroupNode{Comments: c, Pos: posAt(pos)}
	g.Contiguity = cont
	g.Line = p.endLine()
	g.Elems, g.EndDoc = p.parseElems(true, nil)
	g.EndDoc = trimEndDoc(g.EndDoc)
	if p.tok.kind != tokRParen {
		p.errorAt(open, fmt.Sprintf("the group is not closed: expected ')', found %s", p.tok.describe()))
		return g
	}
	g.Close = posAt(p.tok.pos)
	p.next()
	if !p.parseHeadRest(&g.elemHead) {
		return g
	}
	g.CloseLine = p.endLine()
	return g
}

// skipGroup skips the group that opens at the current '(', the groups
// inside it and the rest of its closing line, without recursing; it stops
// early at the end of the file, a '}' that closes an enclosing block or a
// top-level declaration.
func (p *ruleParser) skipGroup() {
	p.skipping = true
	defer func() { p.skipping = false }()
	parens, braces := 0, 0
	for {
		switch p.tok.kind {
		case tokEOF:
			return
		case tokLParen:
			parens++
		case tokRParen:
			if parens--; parens == 0 {
				p.skipping = false
				p.skipLine()
				return
			}
		case tokLBrace:
			braces++
		case tokRBrace:
			if braces == 0 {
				return
			}
			braces--
		case tokNewline:
			p.next()
			if p.atDecl() {
				return
			}
			continue
		}
		p.next()
	}
}

// quantWords are the quantifier keywords.
var quantWords = []string{"oneOrMore", "times", "timesOrMore", "consecutive", "allowCombinations", "optional", "greedy"}

// parseHeadRest parses what follows a stage name (or a group's ')'):
// quantifiers, then at most one clause. It returns false when it skipped
// the rest of the line after an error.
func (p *ruleParser) parseHeadRest(h *elemHead) bool {
	q := &h.Quant
	for p.tok.kind == tokIdent {
		w, pos := p.tok.val, posAt(p.tok.pos)
		switch {
		case slices.Contains(quantWords, w):
			p.next()
			if p.tok.kind == tokLParen {
				p.flinkCallError(pos.Offset())
				p.skipLine()
				return false
			}
			if !p.parseQuantWord(q, w, pos) {
				p.skipLine()
				return false
			}
		case w == "within":
			p.next()
			d, ok := p.parseDuration()
			if !ok {
				p.skipLine()
				return false
			}
			if p.isWord("of") {
				cl, ok := p.parseOfPrevious(pos.Offset(), d)
				if !ok {
					return false
				}
				h.Clauses, h.Inline = append(h.Clauses, cl), true
				return true
			}
			switch {
			case q.Kind == QuantOne:
				p.errorAt(pos.Offset(), "a loop gap (within d) follows oneOrMore, times or timesOrMore; write 'within d of previous' for the time since the previous event, or put the pattern window on its own line at the end of the pattern")
				p.skipLine()
				return false
			case q.Gap != nil:
				p.errorAt(pos.Offset(), "the loop gap is given twice")
				p.skipLine()
				return false
			}
			q.Gap = &d
		case w == "where" || w == "or" || w == "until":
			cl := p.parseClause()
			if cl == nil {
				return false
			}
			h.Clauses, h.Inline = append(h.Clauses, cl), true
			return true
		case w == "zeroOrMore":
			p.errorf("there is no zeroOrMore (nor in Flink): a loop that may take no event is oneOrMore optional")
			p.skipLine()
			return false
		default:
			p.unexpected("a quantifier (oneOrMore, times, timesOrMore, optional, greedy, consecutive, allowCombinations) or a clause (where, or, until, within)", append(quantWords, clauseWords[:]...)...)
			p.skipLine()
			return false
		}
	}
	if p.tok.kind == tokInt {
		// begin a 3 times, as it is said.
		n := p.tok.val
		p.errorf("unexpected %s: a count follows its quantifier: times %s (exactly %s events) or timesOrMore %s (%s or more)", p.tok.describe(), n, n, n, n)
		p.skipLine()
		return false
	}
	return true
}

// flinkStage reports a stage written as Flink's Pattern API calls it,
// begin("a").where(...), and returns true; the current token is the '('
// after the contiguity cont. It returns false for a group.
func (p *ruleParser) flinkStage(cont Contiguity) bool {
	calls, ok := readCalls(cont.String() + p.src.src[p.tok.pos:])
	if !ok {
		return false
	}
	name, err := strconv.Unquote(calls[0].args)
	if err != nil || name == "" {
		return false
	}
	if !isIdent(name) {
		name = strconv.Quote(name)
	}
	f := cont.String() + " " + name
	if rest, ok := flinkForms(calls[1:]); ok && rest != "" {
		f += " " + rest
	}
	p.errorf("unexpected '(': Flink's %s(%s) is written without parentheses, the stage's name after %s: %s", cont, calls[0].args, cont, f)
	return true
}

// flinkCallError reports a quantifier written as Flink's Pattern API calls
// it, times(2, 4) or oneOrMore(): the word starts at off, and the current
// token is the '(' after it.
func (p *ruleParser) flinkCallError(off int) {
	if calls, ok := readCalls(p.src.src[off:]); ok {
		if f, ok := flinkForms(calls); ok {
			p.errorf("unexpected '(': Flink's calls are written as words after the stage name, without dots or parentheses: %s", f)
			return
		}
	}
	p.errorf("unexpected '(': a quantifier takes no parentheses (oneOrMore, times 3, times 2..4, timesOrMore 2)")
}

// parseQuantWord applies the quantifier keyword w (already consumed).
func (p *ruleParser) parseQuantWord(q *Quantifier, w string, pos Pos) bool {
	flag := func(f *Flag) bool {
		if f.Set {
			p.errorAt(pos.Offset(), w+" is given twice")
			return false
		}
		*f = Flag{Set: true, Pos: pos}
		return true
	}
	switch w {
	case "consecutive":
		return flag(&q.Consecutive)
	case "allowCombinations":
		return flag(&q.AllowCombinations)
	case "optional":
		return flag(&q.Optional)
	case "greedy":
		return flag(&q.Greedy)
	}
	if q.Kind != QuantOne {
		p.errorAt(pos.Offset(), "a stage takes one of oneOrMore, times and timesOrMore (Flink: already applied quantifier to this pattern)")
		return false
	}
	q.Pos = pos
	switch w {
	case "oneOrMore":
		q.Kind = QuantOneOrMore
	case "timesOrMore":
		n, ok := p.parseInt("the least number of events")
		if !ok {
			return false
		}
		q.Kind, q.Min = QuantTimesOrMore, n.Value
	case "times":
		n, ok := p.parseInt("a number of events")
		if !ok {
			return false
		}
		q.Kind, q.Min, q.Max = QuantTimes, n.Value, n.Value
		if p.tok.kind == tokComma || p.tok.kind == tokInt {
			// times 2, 4 or times 2 4: Flink's times(2, 4).
			p.errorf("unexpected %s: a range of counts is written with '..': times %d..%s", p.tok.describe(), n.Value, p.rangeEnd())
			return false
		}
		if p.isWord("or") && strings.HasPrefix(strings.TrimLeft(p.src.src[p.tok.pos+len("or"):], " \t"), "more") {
			p.errorf("times %d or more is written timesOrMore %d", n.Value, n.Value)
			return false
		}
		if p.tok.kind == tokDotDot {
			p.next()
			if p.tok.kind != tokInt {
				p.errorf("expected the largest number of events, found %s (%d or more: timesOrMore %d)", p.tok.describe(), n.Value, n.Value)
				return false
			}
			m, ok := p.parseInt("the largest number of events")
			if !ok {
				return false
			}
			q.Max = m.Value
		}
	}
	return true
}

// rangeEnd returns the largest count of times N, M or times N M, the
// current token being the comma or M: the number as written, so that the
// error shows the range the user meant; M when none follows.
func (p *ruleParser) rangeEnd() string {
	rest := p.src.src[p.tok.pos:]
	if p.tok.kind == tokComma {
		rest = strings.TrimLeft(rest[1:], " \t")
	}
	n := 0
	if strings.HasPrefix(rest, "-") {
		n = 1
	}
	digits := n
	for digits < len(rest) && rest[digits] >= '0' && rest[digits] <= '9' {
		digits++
	}
	if digits == n || digits < len(rest) && isIdentStart(rune(rest[digits])) {
		return "M"
	}
	return rest[:digits]
}

func (p *ruleParser) parseTest(c Comments, pos int) *TestDecl {
	name, ok := p.parseString("a test name string")
	if !ok {
		p.skipLine()
		return nil
	}
	line, ok := p.openBlock("the test")
	if !ok {
		return nil
	}
	d := &TestDecl{Comments: c, Pos: posAt(pos), Name: name}
	d.Line = line
	first := true
	for {
		doc := p.docLines()
		if p.tok.kind == tokRBrace || p.tok.kind == tokEOF || p.atDecl() {
			d.EndDoc = p.closeBlock(pos, "test", doc)
			return d
		}
		if first {
			doc = trimDoc(doc)
		}
		ic := Comments{Doc: doc}
		ipos := p.tok.pos
		switch {
		case p.isWord("rule"):
			if d.Rule != nil || d.Events != nil || d.Expect != nil {
				p.errorf("a test names its rule once, before events and expect")
				p.skipLine()
				continue
			}
			p.next()
			n, ok := p.parseName("a rule name")
			if !ok {
				p.skipLine()
				continue
			}
			ic.Line = p.endLine()
			d.Rule = &NameItem{Comments: ic, Pos: posAt(ipos), Name: n}
		case p.isWord("events"):
			if d.Events != nil || d.Expect != nil {
				p.errorf("a test has one events block, before expect")
				p.skipLine()
				continue
			}
			p.next()
			d.Events = p.parseEvents(ic, ipos)
		case p.isWord("expect"):
			if d.Expect != nil {
				p.errorf("expect given twice")
				p.skipLine()
				continue
			}
			p.next()
			d.Expect = p.parseExpect(ic, ipos)
		default:
			p.unexpected("rule, events or expect")
			p.skipLine()
			continue
		}
		first = false
	}
}

func (p *ruleParser) parseEvents(c Comments, pos int) *EventsBlock {
	line, ok := p.openBlock("the events")
	if !ok {
		return nil
	}
	b := &EventsBlock{Comments: c, Pos: posAt(pos)}
	b.Line = line
	for {
		doc := p.docLines()
		if p.tok.kind == tokRBrace || p.tok.kind == tokEOF || p.atDecl() {
			b.EndDoc = p.closeBlock(pos, "events", doc)
			return b
		}
		if len(b.Lines) == 0 {
			doc = trimDoc(doc)
		}
		if p.tok.kind != tokLBrace {
			p.unexpected("an event (a JSON object)")
			p.skipLine()
			continue
		}
		x, ok := p.parseRawLine("an event")
		if !ok {
			p.skipLine()
			continue
		}
		if first, close := unclosedEvent(p.src.src, x.Pos.Offset(), x.raw); close >= 0 {
			// Read on from that '}', the events block's end.
			closeLine := strings.Count(p.src.src[:close], "\n") + 1
			p.errorAt(first, fmt.Sprintf("event not closed: a '}' missing here? (the '}' on line %d, meant to end the events block, closed it)", closeLine))
			p.lex.pos, p.lex.start = close, close
			p.next()
			continue
		}
		l := &EventLine{Comments: Comments{Doc: doc}, JSON: x}
		l.Line = p.endLine()
		b.Lines = append(b.Lines, l)
	}
}

// unclosedEvent tells an event left open on its line, whose '{' the
// events block's '}' then closed, from an event written over several
// lines: raw, the event's span at offset pos of src, ends with a line
// holding only its '}', indented less than its '{' (an event over several
// lines closes at or right of where it opened). It returns the offset of
// the end of the event's first line and that of the '}', or -1, -1.
func unclosedEvent(src string, pos int, raw string) (first, close int) {
	nl := strings.IndexByte(raw, '\n')
	last := raw[strings.LastIndexByte(raw, '\n')+1:]
	if nl < 0 || strings.TrimSpace(last) != "}" {
		return -1, -1
	}
	open := pos - (strings.LastIndexByte(src[:pos], '\n') + 1)
	if indent := len(last) - len(strings.TrimLeft(last, " \t")); indent >= open {
		return -1, -1
	}
	line := raw[:nl]
	for i := 0; i < len(line); i++ { // up to a comment
		if c := line[i]; c == '"' {
			if end := skipQuoted(line, i); end > 0 {
				i = end - 1
			}
		} else if c == '#' {
			line = line[:i]
			break
		}
	}
	return pos + len(strings.TrimRight(line, " \t\r")), pos + strings.LastIndexByte(raw, '}')
}

func (p *ruleParser) parseExpect(c Comments, pos int) *ExpectBlock {
	b := &ExpectBlock{Comments: c, Pos: posAt(pos)}
	if p.isWord("none") {
		p.next()
		b.Line = p.endLine()
		return b
	}
	line, ok := p.openBlock("expect (or write 'expect none')")
	if !ok {
		return nil
	}
	b.Line = line
	for {
		doc := p.docLines()
		if p.tok.kind == tokRBrace || p.tok.kind == tokEOF || p.atDecl() {
			b.EndDoc = p.closeBlock(pos, "expect", doc)
			return b
		}
		if len(b.Matches) == 0 {
			doc = trimDoc(doc)
		}
		m := p.parseExpectedMatch()
		if m == nil {
			p.skipRestOfLine()
			continue
		}
		m.Comments = Comments{Doc: doc}
		m.Line = p.endLine()
		b.Matches = append(b.Matches, m)
	}
}

// parseExpectedMatch parses `rule [timedOut] [key v, ...] { stage: [n,
// ...], ... } [emit { ... }]`.
func (p *ruleParser) parseExpectedMatch() *ExpectLine {
	rule, ok := p.parseName("a rule name")
	if !ok {
		return nil
	}
	m := &ExpectLine{Rule: rule}
	if p.isWord("timedOut") {
		m.TimedOut = true
		p.next()
	}
	if p.isWord("key") {
		p.next()
		for {
			lit, ok := p.parseLiteral()
			if !ok {
				return nil
			}
			m.Key = append(m.Key, lit)
			if p.tok.kind != tokComma {
				break
			}
			p.next()
		}
	}
	if !p.expect(tokLBrace, "'{' and the events of each stage") {
		return nil
	}
	for {
		st, ok := p.parseName("a stage name")
		if !ok {
			return nil
		}
		if !p.expect(tokColon, "':' after the stage name") || !p.expect(tokLBrack, "'[' and event numbers") {
			return nil
		}
		se := StageEvents{Stage: st}
		for p.tok.kind != tokRBrack {
			n, ok := p.parseInt("an event number")
			if !ok {
				return nil
			}
			se.Events = append(se.Events, n)
			if p.tok.kind != tokComma {
				break
			}
			p.next()
		}
		if !p.expect(tokRBrack, "']'") {
			return nil
		}
		m.Stages = append(m.Stages, se)
		if p.tok.kind != tokComma {
			break
		}
		p.next()
	}
	if !p.expect(tokRBrace, "'}'") {
		return nil
	}
	if p.isWord("emit") {
		p.next()
		if !p.expect(tokLBrace, "'{' and emitted values") {
			return nil
		}
		for {
			n, ok := p.parseIdent("an emit field name")
			if !ok || !p.expect(tokColon, "':' after the emit field name") {
				return nil
			}
			v, ok := p.parseLiteral()
			if !ok {
				return nil
			}
			m.Emits = append(m.Emits, EmitLit{Name: n, Value: v})
			if p.tok.kind != tokComma {
				break
			}
			p.next()
		}
		if !p.expect(tokRBrace, "'}'") {
			return nil
		}
	}
	return m
}

// parseLiteral parses a key or emitted value: a string, a number, true, false or
// null. Its Text is canonical.
func (p *ruleParser) parseLiteral() (Literal, bool) {
	l := Literal{Pos: posAt(p.tok.pos)}
	switch p.tok.kind {
	case tokString:
		s, ok := p.unquote()
		if !ok {
			return l, false
		}
		l.Kind, l.Text = LitString, strconv.Quote(s)
	case tokInt:
		n, err := strconv.ParseInt(p.tok.val, 10, 64)
		if err != nil {
			p.errorf("integer %s out of range", p.tok.val)
			return l, false
		}
		l.Kind, l.Text = LitInt, strconv.FormatInt(n, 10)
	case tokFloat:
		f, err := strconv.ParseFloat(p.tok.val, 64)
		if err != nil {
			p.errorf("malformed number %s", p.tok.val)
			return l, false
		}
		l.Kind, l.Text = LitFloat, formatFloat(f)
	case tokIdent:
		switch p.tok.val {
		case "true", "false":
			l.Kind, l.Text = LitBool, p.tok.val
		case "null":
			l.Kind, l.Text = LitNull, "null"
		case "True", "TRUE", "False", "FALSE", "Null", "NULL":
			p.unexpected("a value (a string, number, true, false or null)", "true", "false", "null")
			return l, false
		case "nil", "None":
			p.errorf("expected a value (a string, number, true, false or null), found %s (did you mean null?)", p.tok.describe())
			return l, false
		default:
			// A word where a value goes is most often a key or an
			// emitted text left without its quotes: key c1.
			p.errorf("expected a value (a string, number, true, false or null), found %s: a text is written in quotes, %q", p.tok.describe(), p.tok.val)
			return l, false
		}
	default:
		p.unexpected("a value (a string, number, true, false or null)")
		return l, false
	}
	p.next()
	return l, true
}

// formatFloat prints f so that it reads back as a float (1.0, not 1).
func formatFloat(f float64) string {
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".eEn") {
		s += ".0"
	}
	return s
}
