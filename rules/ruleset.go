package rules

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/nfa"
	"github.com/cepheus-cep/cepheus/rules/internal/cond"
)

// Ruleset is a compiled ruleset file. It is immutable and safe for
// concurrent use (each rule's NFA is shared by the runs of all keys).
type Ruleset struct {
	// Name is the name after the ruleset keyword.
	Name string
	// TimeField is the field that carries event time; TimeSlot its slot.
	TimeField string
	TimeSlot  int
	// Schema gives the fields in slot order: the declared schema, or, when
	// the file declares none, every field an expression reads plus the key
	// and time fields, sorted by name and untyped (KindNull).
	Schema *event.Schema
	// Declared reports whether the file declared its schema.
	Declared bool
	// Lookups are the file's lookups in file order; their fields are
	// schema fields named lookup.field, after the event's fields.
	Lookups []*Lookup
	// Aggregates are the file's velocity aggregates in file order; each
	// is a schema field of its name, after the lookups' fields.
	Aggregates []*Aggregate
	// IDSlots are the slots of the event fields the file reads from its
	// input (the declared or inferred schema, neither a lookup's nor an
	// aggregate's fields), in the file's order: what an alert id hashes of
	// each matched event (docs/decisions.md, "Alert id"). Compiled over a
	// layout ([CompileLayout]), the slots are the layout's, still in the
	// file's order, and a field only the layout has is not one of them, so
	// that the ids of a version's alerts do not depend on the versions
	// that ran before it in the process.
	IDSlots []int
	// Rules are the rules in file order.
	Rules []*Rule
	// Tests are the tests written in the file, in file order.
	Tests []*Test
	// Warnings are what the file says that is legal but surely not
	// meant, each "warning: " and why, by position: today a stage
	// reference that always reads nothing (a.f in the condition of a
	// stage a that takes one event, a field of a later or of a negated
	// stage). Flink accepts them; the engine runs them as written.
	Warnings ErrorList
	// Hash is the hex SHA-256 of the canonical source of the file without
	// its comments: it changes when the rules change, not when the file is
	// reformatted or its comments are edited.
	Hash string
	// Source is that canonical source: it compiles to the same ruleset
	// (a running engine keeps its versions as their sources).
	Source string

	// timeSlots marks the fields declared with type time (decoded from
	// RFC 3339 strings or epoch milliseconds).
	timeSlots map[int]bool
}

// Rule returns the rule with the given name, or nil.
func (rs *Ruleset) Rule(name string) *Rule {
	for _, r := range rs.Rules {
		if r.Name == name {
			return r
		}
	}
	return nil
}

// Severity is the severity of a rule's alerts.
type Severity uint8

// The severities, least severe first. A rule that gives no severity is
// SeverityMedium.
const (
	SeverityInfo Severity = iota
	SeverityLow
	SeverityMedium
	SeverityHigh
	SeverityCritical
)

var severityNames = [...]string{"info", "low", "medium", "high", "critical"}

func (s Severity) String() string {
	if int(s) < len(severityNames) {
		return severityNames[s]
	}
	return fmt.Sprintf("severity(%d)", s)
}

// parseSeverity returns the severity named s.
func parseSeverity(s string) (Severity, bool) {
	for i, n := range severityNames {
		if n == s {
			return Severity(i), true
		}
	}
	return 0, false
}

// Rule is a compiled rule. It is immutable apart from the error counters of
// its conditions, and safe for concurrent use.
type Rule struct {
	Name        string
	Description string
	// Severity is the declared severity (SeverityMedium when none is given).
	Severity Severity
	// KeyFields are the fields the rule partitions by, and KeySlots their
	// slots in the ruleset's schema; none means one global partition.
	KeyFields []string
	KeySlots  []int
	// Pattern is the pattern as built with the nfa builder, for callers that
	// compile it with other options (nfa.WithTimeouts); NFA is it compiled
	// without options, or, for a rule with a timeout block (Timeout),
	// with nfa.WithTimeouts only.
	Pattern *nfa.Pattern
	NFA     *nfa.NFA
	// Emits are the fields the rule's alerts carry, computed from a match.
	Emits []Emit
	// Timeout, for a rule with a timeout block, is what its alerts for
	// timed-out partial matches carry; nil otherwise (the rule's partial
	// matches that time out are dropped silently).
	Timeout *TimeoutOutput
	// Aggregates names the velocity aggregates the rule's expressions
	// read, in declaration order.
	Aggregates []string
	// Reads are the names the rule reads, sorted: its key fields and
	// what its expressions read of the events (fields, lookups' fields
	// as lookup.field, aggregates).
	Reads []string
	// Source is the canonical source of the rule, without comments.
	Source string
	// Hash is the hex SHA-256 of the rule's content: the event time field,
	// the declared types of the fields the rule reads, and Source. Alert
	// ids are derived from it.
	Hash string

	conds []*cond.BoolExpr
	// what Explain reads: the rule's declaration, the environment of its
	// expressions and each clause's compiled condition.
	decl        *RuleDecl
	env         *cond.Env
	clauseConds map[*Clause]*cond.BoolExpr
}

// TimeoutOutput is what a rule's timeout block says of its alerts for
// partial matches its window drops.
type TimeoutOutput struct {
	// Only says that the rule alerts for its timed-out partial matches
	// alone (the block's `only`): its completed matches raise none.
	Only bool
	// Severity is the block's severity, the rule's when it gives none.
	Severity Severity
	// Emits are the block's emitted fields, computed from the events the
	// partial match took (a stage it did not reach reads null).
	Emits []Emit
}

// Emit is one emitted field of a rule: a name and the expression that
// computes it from a complete match.
type Emit struct {
	Name string
	Expr *ValueExpr
}

// Key returns the partition key of ev for this rule; "" for a rule without
// key fields (the single global partition). A string value stands for
// itself; other values are written as [event.Value.String] writes them,
// behind a 0 byte (so an int and a float of the same value share a key, and
// neither collides with a string). Several key fields are joined by the
// byte 0x1f. Keys are for partitioning, not for display: alerts print the
// key fields' values ([Rule.KeyValues]).
func (r *Rule) Key(ev *event.Event) event.Key {
	switch len(r.KeySlots) {
	case 0:
		return ""
	case 1:
		// The hot path: a single string key is the string itself, with no
		// copy and no allocation.
		v := ev.Field(r.KeySlots[0])
		if s, ok := v.AsString(); ok {
			return event.Key(s)
		}
		return event.Key("\x00" + v.String())
	}
	var b strings.Builder
	n := len(r.KeySlots)
	for _, s := range r.KeySlots {
		if str, ok := ev.Field(s).AsString(); ok {
			n += len(str)
		} else {
			n += 24
		}
	}
	b.Grow(n) // one allocation for a key of strings
	for i, s := range r.KeySlots {
		if i > 0 {
			b.WriteByte('\x1f')
		}
		v := ev.Field(s)
		if str, ok := v.AsString(); ok {
			b.WriteString(str)
		} else {
			b.WriteByte(0)
			b.WriteString(v.String())
		}
	}
	return event.Key(b.String())
}

// KeyText returns key k of this rule ([Rule.Key]) for display, each key
// field with its value: card="c42" (a string quoted), or account=7,
// branch="x" for several; "" for the rule without key fields. A value
// longer than 48 bytes is cut short, ending in "...".
func (r *Rule) KeyText(k event.Key) string {
	if len(r.KeyFields) == 0 {
		return ""
	}
	parts := strings.SplitN(string(k), "\x1f", len(r.KeyFields))
	if len(r.KeyFields) == 1 {
		parts = []string{string(k)} // a string key is itself, 0x1f included
	}
	var b strings.Builder
	for i, f := range r.KeyFields {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(f)
		b.WriteByte('=')
		if i >= len(parts) {
			b.WriteString("?")
			continue
		}
		v, str := parts[i], true
		if rest, ok := strings.CutPrefix(v, "\x00"); ok {
			v, str = rest, false
		}
		if len(v) > 48 {
			cut := 48
			for cut > 0 && !utf8.RuneStart(v[cut]) {
				cut--
			}
			v = v[:cut] + "..."
		}
		if str {
			v = strconv.Quote(v)
		}
		b.WriteString(v)
	}
	return b.String()
}

// KeyValues returns the values of ev's key fields, in KeyFields order.
func (r *Rule) KeyValues(ev *event.Event) []event.Value {
	out := make([]event.Value, len(r.KeySlots))
	for i, s := range r.KeySlots {
		out[i] = ev.Field(s)
	}
	return out
}

// ConditionErrors returns how many condition evaluations of the rule have
// failed at run time (and counted as false) since it was compiled.
func (r *Rule) ConditionErrors() uint64 {
	var n uint64
	for _, c := range r.conds {
		n += c.Errors()
	}
	return n
}

// LastConditionError returns the message of the most recent run-time error
// of one of the rule's conditions (the first in pattern order that
// failed), or "" when none has failed.
func (r *Rule) LastConditionError() string {
	for _, c := range r.conds {
		if err := c.LastError(); err != nil {
			return ExprErrorMessage(err)
		}
	}
	return ""
}

// EmitErrors returns how many evaluations of the rule's emit fields have
// failed at run time since it was compiled (each gave its field null).
func (r *Rule) EmitErrors() uint64 {
	var n uint64
	for _, em := range r.allEmits() {
		n += em.Expr.Errors()
	}
	return n
}

// allEmits returns the rule's emit fields, then its timeout block's.
func (r *Rule) allEmits() []Emit {
	if r.Timeout == nil {
		return r.Emits
	}
	return append(slices.Clip(r.Emits), r.Timeout.Emits...)
}

// LastEmitError returns the most recent run-time error of one of the
// rule's emit fields (the first in emit order that failed), as "name:
// message", or "" when none has failed.
func (r *Rule) LastEmitError() string {
	for _, em := range r.allEmits() {
		if err := em.Expr.LastError(); err != nil {
			return em.Name + ": " + ExprErrorMessage(err)
		}
	}
	return ""
}

// Test is a test written in a ruleset file: events in, expected matches
// out. Package internal/rulestest runs it.
type Test struct {
	Name string
	Pos  Position
	// Rules are the rules the test runs: the one it names, or all.
	Rules []*Rule
	// Events are the test's events in file order; Seq is the 1-based
	// number that expected matches refer to.
	Events []*event.Event
	// Sources are where the events are written, by Seq - 1: the position
	// and text of each event's line, for a failed test's report.
	Sources []EventSource
	// Expect are the expected matches (none when empty).
	Expect []ExpectedMatch
	// Aggregates are the ruleset's velocity aggregates: a test runner
	// computes them over the test's events (they are not in the events'
	// lines).
	Aggregates []*Aggregate
}

// EventSource is where a test's event is written: its position in the
// file and its text (the lines of an event written over several joined by
// single spaces).
type EventSource struct {
	Pos  Position
	Text string
}

// ExpectedMatch is one match a test expects.
type ExpectedMatch struct {
	Pos  Position
	Rule *Rule
	// Key holds the values of the rule's key fields.
	Key []event.Value
	// Stages holds, by stage index of Rule.NFA.Stages(), the numbers of the
	// events the stage takes, in order (nil for a stage that takes none).
	Stages [][]int
	// TimedOut marks a partial match the rule's window dropped (the rule
	// has a timeout block).
	TimedOut bool
	// Emits are the expected emitted values, in the order of the rule's
	// emit block (of its timeout block, for a timed-out match); nil when
	// the test does not compare them. Within a test,
	// the expected matches of one rule all give the same emit fields.
	Emits []NamedValue
}

// NamedValue is a named value: an emitted field of a match.
type NamedValue struct {
	Name  string
	Value event.Value
}

// Load parses and compiles a ruleset file. The error is an [ErrorList]:
// the syntax errors if there are any, else every error the checker and
// compiler found.
func Load(name string, src []byte) (*Ruleset, error) { return LoadLayout(name, src, nil) }

// LoadRules is [Load] for a run of the rules alone (a backtest): the
// errors of the file's tests are warnings, and its tests are left out.
// A what-if change of a rule (a threshold) breaks the tests that expect
// the old matches; the rules still run.
func LoadRules(name string, src []byte) (*Ruleset, error) {
	f, err := ParseFile(name, src)
	if err != nil {
		return nil, besideSyntax(f, err, nil)
	}
	return compileLayout(f, nil, true)
}

// LoadStored is [LoadLayout] for a version a checkpoint kept: as with
// [LoadRules], the errors of its tests are warnings and its tests are left
// out, so that a test a later build refuses (its decoder made stricter:
// an untyped whole number beyond int64) does not keep the state from
// resuming. The version's hash is that of its whole source, tests
// included, as ever.
func LoadStored(name string, src []byte, layout *event.Schema) (*Ruleset, error) {
	f, err := ParseFile(name, src)
	if err != nil {
		return nil, besideSyntax(f, err, layout)
	}
	return compileLayout(f, layout, true)
}

// LoadLayout is [Load] over a slot layout ([CompileLayout]).
func LoadLayout(name string, src []byte, layout *event.Schema) (*Ruleset, error) {
	f, err := ParseFile(name, src)
	if err != nil {
		return nil, besideSyntax(f, err, layout)
	}
	return CompileLayout(f, layout)
}
