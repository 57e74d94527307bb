package rules

import (
	"strconv"
	"strings"
	"time"
)

// This file holds the syntax tree of a ruleset file. Every node records the
// position of its first token; every node prints its canonical source with
// String, and [Format] prints a whole file. Parsing the printed source gives
// the same tree again (positions aside): FuzzParse checks this.
//
// Comments are kept so that `cepheus fmt` does not lose them: a node that
// starts a line has the comment lines before it (Doc, where "" stands for a
// blank line) and the comment at the end of its line (Line); a block also
// has the comments before its closing bracket (EndDoc).

// Comments are the comments attached to a node that starts a line.
type Comments struct {
	// Doc holds the comment lines before the node, each "# ..." as written;
	// "" stands for one or more blank lines.
	Doc []string
	// Line is the comment at the end of the node's (first) line, or "".
	Line string
}

// Name is a name: a ruleset, rule, stage or field name. Names that are not
// identifiers are written as strings ("b*", "not c").
type Name struct {
	Pos   Pos
	Value string
}

// String prints the name bare when it is an identifier, else quoted.
func (n Name) String() string { return quoteName(n.Value) }

func quoteName(s string) string {
	if isIdent(s) {
		return s
	}
	return strconv.Quote(s)
}

// Flag is a keyword that is present or not (optional, greedy, orFail).
type Flag struct {
	Set bool
	Pos Pos
}

// Duration is a duration literal (500ms, 30s, 1h30m, 2d).
type Duration struct {
	Pos   Pos
	Value time.Duration
}

// String prints the duration in canonical form: days, hours, minutes,
// seconds and milliseconds, largest first, zero parts left out (90s is
// 1m30s).
func (d Duration) String() string { return formatDuration(d.Value) }

func formatDuration(d time.Duration) string {
	if d <= 0 {
		return "0ms"
	}
	var b strings.Builder
	units := []struct {
		name string
		size time.Duration
	}{{"d", 24 * time.Hour}, {"h", time.Hour}, {"m", time.Minute}, {"s", time.Second}, {"ms", time.Millisecond}}
	for _, u := range units {
		if n := d / u.size; n > 0 {
			b.WriteString(strconv.FormatInt(int64(n), 10))
			b.WriteString(u.name)
			d -= n * u.size
		}
	}
	if b.Len() == 0 {
		return "0ms"
	}
	return b.String()
}

// Expr is an expression of a condition or an emit value, kept as source:
// the expression compiler parses it. Text is the expression as printed:
// continuation lines (inside open brackets) are kept relative to the
// indentation of the line the expression starts on, so that they move with
// it when the line is re-indented; an expression with a string or comment
// that spans lines is kept verbatim. The original span, which error
// offsets refer to, is kept unexported.
type Expr struct {
	Pos      Pos
	Text     string
	raw      string
	verbatim bool
}

// String returns the expression's text.
func (e *Expr) String() string { return e.Text }

// File is the syntax tree of a ruleset file.
type File struct {
	Comments
	// Path is the file name given to [ParseFile], used in positions.
	Path string
	// Pos is the position of the ruleset keyword.
	Pos  Pos
	Name Name
	// Decls are the declarations in source order: *EventTimeDecl,
	// *SchemaDecl, *RuleDecl and *TestDecl.
	Decls  []Decl
	EndDoc []string

	src *srcFile
}

// Decl is a top-level declaration of a ruleset file.
type Decl interface {
	declNode()
	String() string
}

// EventTimeDecl is `event time FIELD`.
type EventTimeDecl struct {
	Comments
	Pos   Pos
	Field Name
}

// SchemaDecl is `schema { field: type ... }`.
type SchemaDecl struct {
	Comments
	Pos    Pos
	Fields []*FieldDecl
	EndDoc []string
}

// FieldDecl is one field of a schema: `name: type`.
type FieldDecl struct {
	Comments
	Name Name
	Type Name // string, int, float, bool or time
}

// RuleDecl is `rule NAME { ... }`. Its items are kept in fields and printed
// in a fixed order: description, severity, key, pattern, skip, emit,
// timeout.
type RuleDecl struct {
	Comments
	Pos         Pos
	Name        Name
	Description *StringItem
	Severity    *NameItem
	Key         *KeyItem
	Pattern     *PatternBlock
	Skip        *SkipItem
	Emit        *EmitBlock
	Timeout     *TimeoutBlock
	EndDoc      []string
}

// TimeoutBlock is `timeout { [severity S] [emit { ... }] }`: the rule also
// raises an alert for each partial match its window drops (Flink's
// TimedOutPartialMatchHandler), with that severity (the rule's when not
// given) and those emitted fields, computed from the events taken so far.
type TimeoutBlock struct {
	Comments
	Pos Pos
	// Only is the item `only`: the rule raises alerts for its timed-out
	// partial matches alone, none for its completed matches (Flink's
	// timeout side output without the main one).
	Only     *WordItem
	Severity *NameItem
	Emit     *EmitBlock
	EndDoc   []string
}

// StringItem is a keyword and a string: `description "..."`.
type StringItem struct {
	Comments
	Pos   Pos
	Value string
}

// WordItem is a keyword alone on its line: a timeout block's `only`.
type WordItem struct {
	Comments
	Pos Pos
}

// NameItem is a keyword and a name: `severity high`, a test's `rule r`.
type NameItem struct {
	Comments
	Pos  Pos
	Name Name
}

// KeyItem is `key f1, f2`.
type KeyItem struct {
	Comments
	Pos    Pos
	Fields []Name
}

// PatternBlock is `pattern { ... }`: stages and groups in order, then the
// optional pattern window (`within d`, Flink's FIRST_AND_LAST).
type PatternBlock struct {
	Comments
	Pos    Pos
	Elems  []PatternElem
	Within *WithinItem
	EndDoc []string
}

// WithinItem is the pattern window line `within d`.
type WithinItem struct {
	Comments
	Pos Pos
	Dur Duration
}

// PatternElem is a stage or a group of a pattern.
type PatternElem interface {
	patternElem()
	String() string
	// head returns the contiguity, quantifier and clauses of the element.
	head() *elemHead
}

// Contiguity is how a stage or group follows the one before it.
type Contiguity uint8

// The contiguities; ContBegin is the first element of a pattern or group.
const (
	ContBegin Contiguity = iota
	ContNext
	ContFollowedBy
	ContFollowedByAny
	ContNotNext
	ContNotFollowedBy
)

var contiguityWords = [...]string{"begin", "next", "followedBy", "followedByAny", "notNext", "notFollowedBy"}

func (c Contiguity) String() string { return contiguityWords[c] }

// IsNot reports whether c is notNext or notFollowedBy.
func (c Contiguity) IsNot() bool { return c == ContNotNext || c == ContNotFollowedBy }

// elemHead is what stages and groups share: how they follow the element
// before them, their quantifier and their clauses.
type elemHead struct {
	Contiguity Contiguity
	Quant      Quantifier
	// Clauses are the where/or/until/within-of-previous clauses in source
	// order. When Inline is set, the first clause is written on the header
	// line (for a group, the line of its closing parenthesis).
	Clauses []*Clause
	Inline  bool
}

func (h *elemHead) head() *elemHead { return h }

// StageNode is a stage: `followedBy name quantifiers [where expr]` and its
// clause lines.
type StageNode struct {
	Comments
	Pos  Pos
	Name Name
	elemHead
}

// GroupNode is a group: `followedBy (` stages `) quantifiers` and its
// clause lines. Its stages keep their names (Flink's GroupPattern).
type GroupNode struct {
	Comments
	Pos    Pos
	Elems  []PatternElem
	EndDoc []string
	// CloseLine is the comment at the end of the closing parenthesis line.
	CloseLine string
	// Close is the position of the closing parenthesis.
	Close Pos
	elemHead
}

func (*StageNode) patternElem() {}
func (*GroupNode) patternElem() {}

// QuantKind is the counting part of a quantifier.
type QuantKind uint8

// The quantifier kinds.
const (
	QuantOne         QuantKind = iota // no counting quantifier: one event
	QuantOneOrMore                    // oneOrMore
	QuantTimes                        // times n, times n..m
	QuantTimesOrMore                  // timesOrMore n
)

// Quantifier is a stage's (or group's) quantifiers. They are a set, not a
// sequence: they print in the order count [loop gap], consecutive or
// allowCombinations, optional, greedy, and are applied to the Go builder in
// that order.
type Quantifier struct {
	Kind QuantKind
	Pos  Pos // of the counting keyword
	// Min and Max are the counts: times n is n..n, times n..m is n..m,
	// timesOrMore n is Min n; both 0 otherwise.
	Min, Max int
	// Gap is the loop gap (Flink's oneOrMore(Duration)): the longest time
	// to each of the loop's first events from the event before it, as
	// Flink's compiler applies it (docs/rules.md, "Windows"); nil when
	// none.
	Gap               *Duration
	Consecutive       Flag
	AllowCombinations Flag
	Optional          Flag
	Greedy            Flag
}

// ClauseKind says what a clause is.
type ClauseKind uint8

// The clause kinds.
const (
	ClauseWhere ClauseKind = iota // where expr: ANDed with the conditions before
	ClauseOr                      // or expr: ORed with the conditions before
	ClauseUntil                   // until expr: stop condition of a loop
	ClauseGap                     // within d of previous: Flink's PREVIOUS_AND_CURRENT
)

var clauseWords = [...]string{"where", "or", "until", "within"}

func (k ClauseKind) String() string { return clauseWords[k] }

// Clause is one clause of a stage or group.
type Clause struct {
	Comments
	Pos  Pos
	Kind ClauseKind
	Expr *Expr    // where, or, until
	Dur  Duration // within d of previous
}

// SkipKind is an after-match skip strategy.
type SkipKind uint8

// The skip strategies, as written after `skip`.
const (
	SkipNoSkip SkipKind = iota
	SkipToNext
	SkipPastLastEvent
	SkipToFirst
	SkipToLast
)

var skipWords = [...]string{"noSkip", "toNext", "pastLastEvent", "toFirst", "toLast"}

func (k SkipKind) String() string { return skipWords[k] }

// SkipItem is `skip strategy [stage] [orFail]`.
type SkipItem struct {
	Comments
	Pos    Pos
	Kind   SkipKind
	Stage  Name // toFirst and toLast
	OrFail Flag
}

// EmitBlock is `emit { name: expr ... }`.
type EmitBlock struct {
	Comments
	Pos    Pos
	Fields []*EmitField
	EndDoc []string
}

// EmitField is one emitted field: `name: expr`.
type EmitField struct {
	Comments
	Name Name
	Expr *Expr
}

// TestDecl is `test "name" { ... }`: events in, expected matches out.
type TestDecl struct {
	Comments
	Pos    Pos
	Name   string
	Rule   *NameItem // optional: run only this rule
	Events *EventsBlock
	Expect *ExpectBlock
	EndDoc []string
}

// EventsBlock is `events { json lines }`.
type EventsBlock struct {
	Comments
	Pos    Pos
	Lines  []*EventLine
	EndDoc []string
}

// EventLine is one event: a JSON object on one line (continued across line
// breaks inside its braces).
type EventLine struct {
	Comments
	JSON *Expr
}

// ExpectBlock is `expect none` or `expect { matches }`.
type ExpectBlock struct {
	Comments
	Pos     Pos
	Matches []*ExpectLine // empty: expect none
	EndDoc  []string
}

// ExpectLine is `rule [timedOut] [key v1, v2] { stage: [1, 2], ... } [emit
// { f: v }]`: a match of rule (with timedOut, a partial match its window
// dropped, as the rule's timeout block reports it) with those key values,
// each stage taking those events (1-based numbers in the test's events),
// and, when given, those emitted values.
type ExpectLine struct {
	Comments
	Rule     Name
	TimedOut bool
	Key      []Literal
	Stages   []StageEvents
	Emits    []EmitLit
}

// EmitLit is `name: value` in the emit part of an expect line.
type EmitLit struct {
	Name  Name
	Value Literal
}

// StageEvents is `stage: [n, ...]` in an expected match.
type StageEvents struct {
	Stage  Name
	Events []IntLit
}

// IntLit is an integer with its position.
type IntLit struct {
	Pos   Pos
	Value int
}

// LitKind is the kind of a literal.
type LitKind uint8

// The literal kinds.
const (
	LitString LitKind = iota
	LitInt
	LitFloat
	LitBool
	LitNull
)

// Literal is a key value in an expected match: a string, number, true,
// false or null. Text is its canonical source.
type Literal struct {
	Pos  Pos
	Kind LitKind
	Text string
}

func (*EventTimeDecl) declNode() {}
func (*SchemaDecl) declNode()    {}
func (*RuleDecl) declNode()      {}
func (*TestDecl) declNode()      {}

// LookupDecl is `lookup NAME { key ...  fields { ... }  on failure ...
// timeout D }`: data about the event's key read from a source bound at run
// time (a file or Redis), which conditions read as NAME.field. Its items
// are printed in that fixed order.
type LookupDecl struct {
	Comments
	Pos     Pos
	Name    Name
	Key     *KeyItem
	Fields  *LookupFields
	Failure *FailureItem
	Timeout *DurationItem
	EndDoc  []string
}

// LookupFields is the `fields { name: type default literal ... }` block of
// a lookup.
type LookupFields struct {
	Comments
	Pos    Pos
	Fields []*LookupFieldDecl
	EndDoc []string
}

// LookupFieldDecl is one field of a lookup: `name: type`, optionally
// `default literal` (else the default is null).
type LookupFieldDecl struct {
	Comments
	Name    Name
	Type    Name // string, int, float, bool or time
	Default *Literal
}

// FailureItem is a lookup's `on failure open`, `on failure closed` or
// `on failure retry N then open|closed`.
type FailureItem struct {
	Comments
	Pos     Pos
	Mode    Name // open or closed: what happens once the retries are spent
	Retries *IntLit
}

// DurationItem is a keyword and a duration: a lookup's `timeout 100ms`.
type DurationItem struct {
	Comments
	Pos Pos
	Dur Duration
}

func (*LookupDecl) declNode() {}

// String prints the declaration's canonical source.
func (d *LookupDecl) String() string { return printNode(func(p *printer) { p.lookup(d) }) }

func (it *FailureItem) source() string {
	if it.Retries != nil {
		return "on failure retry " + strconv.Itoa(it.Retries.Value) + " then " + it.Mode.String()
	}
	return "on failure " + it.Mode.String()
}

// AggregateDecl is `aggregate NAME { key ...  FUNC [FIELD]  window D
// [tumbling]  where EXPR }`: a velocity aggregate over the events of a key
// in a time window, which conditions read as NAME. Its items are printed
// in that fixed order.
type AggregateDecl struct {
	Comments
	Pos    Pos
	Name   Name
	Key    *KeyItem
	Func   *AggFuncItem
	Window *WindowItem
	Where  *ExprItem
	EndDoc []string
}

// AggFuncItem is the function of an aggregate: `count`, or `sum`, `avg`,
// `min`, `max`, `distinct` and a field.
type AggFuncItem struct {
	Comments
	Pos   Pos
	Func  Name
	Field *Name
}

// WindowItem is an aggregate's `window D`, optionally `tumbling`.
type WindowItem struct {
	Comments
	Pos      Pos
	Dur      Duration
	Tumbling Flag
}

// ExprItem is a keyword and an expression: an aggregate's `where EXPR`.
type ExprItem struct {
	Comments
	Pos  Pos
	Expr *Expr
}

func (*AggregateDecl) declNode() {}

// String prints the declaration's canonical source.
func (d *AggregateDecl) String() string { return printNode(func(p *printer) { p.aggregate(d) }) }

func (it *AggFuncItem) source() string {
	if it.Field != nil {
		return it.Func.String() + " " + it.Field.String()
	}
	return it.Func.String()
}
