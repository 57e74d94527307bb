package conformance

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/nfa"
	"github.com/cepheus-cep/cepheus/rules"
)

// Mode says how a case's pattern becomes an NFA.
type Mode string

// The modes.
const (
	// ModeText writes the pattern as rule-language source (CaseSource) and
	// compiles it with package rules, as a ruleset file would be: the
	// default.
	ModeText Mode = "text"
	// ModeBuilder builds the pattern with the nfa Go builder directly.
	ModeBuilder Mode = "builder"
)

// ParseMode parses a mode name; "" is ModeText.
func ParseMode(s string) (Mode, error) {
	switch Mode(s) {
	case "", ModeText:
		return ModeText, nil
	case ModeBuilder:
		return ModeBuilder, nil
	}
	return "", fmt.Errorf("unknown mode %q (want text or builder)", s)
}

// compiled is a case's pattern ready to run: the NFA, and the key of the
// operator cases (nil when the case has no key_by).
type compiled struct {
	nfa *nfa.NFA
	key func(*event.Event) event.Key
}

// compileCase compiles the case's pattern in the given mode.
func compileCase(in *Input, mode Mode) (*compiled, error) {
	switch mode {
	case ModeText:
		return compileText(in)
	case ModeBuilder:
		n, err := compilePattern(in)
		if err != nil {
			return nil, err
		}
		c := &compiled{nfa: n}
		if in.KeyBy != "" {
			slot, ok := Schema.Slot(in.KeyBy)
			if !ok {
				return nil, fmt.Errorf("key_by: unknown field %q", in.KeyBy)
			}
			c.key = func(e *event.Event) event.Key { return event.Key(e.Field(slot).String()) }
		}
		return c, nil
	}
	return nil, fmt.Errorf("unknown mode %q", mode)
}

// compileText writes the case as a ruleset file and compiles it with
// package rules. The file declares Schema, so the compiled rule reads the
// events' slots exactly as the builder's conditions do (this is checked).
func compileText(in *Input) (*compiled, error) {
	src, err := CaseSource(in)
	if err != nil {
		return nil, err
	}
	rs, err := rules.Load(in.ID+".cep", []byte(src))
	if err != nil {
		return nil, fmt.Errorf("compile rule text: %w\n%s", err, numbered(src))
	}
	if got, want := rs.Schema.String(), Schema.String(); got != want {
		return nil, fmt.Errorf("rule text schema %s, want %s", got, want)
	}
	r := rs.Rules[0]
	c := &compiled{nfa: r.NFA}
	if in.TimeoutHandling {
		if c.nfa, err = nfa.Compile(r.Pattern, nfa.WithTimeouts()); err != nil {
			return nil, fmt.Errorf("compile with timeouts: %w", err)
		}
	}
	if in.KeyBy != "" {
		c.key = r.Key
	}
	return c, nil
}

// numbered returns src with line numbers, for error messages.
func numbered(src string) string {
	var b strings.Builder
	for i, l := range strings.Split(strings.TrimRight(src, "\n"), "\n") {
		fmt.Fprintf(&b, "%4d  %s\n", i+1, l)
	}
	return b.String()
}

// CaseSource returns the pattern of a case as the source of a ruleset file
// in the rule language: the conformance schema, event time ts, and one rule
// named after the case (or "case" when it has no id), keyed by key_by when the case has one. Stage names
// are kept verbatim (quoted when they are not identifiers); conditions are
// expr source already.
func CaseSource(in *Input) (string, error) {
	w := &sourceWriter{}
	w.line(0, "ruleset conformance")
	w.line(0, "event time ts")
	w.line(0, "schema {")
	for i := range Schema.Len() {
		f := Schema.Field(i)
		typ := f.Kind.String()
		if f.Name == "ts" {
			typ = "time"
		}
		w.line(1, f.Name+": "+typ)
	}
	w.line(0, "}")
	rule := in.ID
	if rule == "" {
		rule = "case"
	}
	w.line(0, "rule "+name(rule)+" {")
	if in.KeyBy != "" {
		w.line(1, "key "+name(in.KeyBy))
	}
	w.line(1, "pattern {")
	ps := &in.Pattern
	window, err := patternWindow(ps)
	if err != nil {
		return "", err
	}
	if err := w.stages(2, textStages(ps)); err != nil {
		return "", err
	}
	if ps.WithinMs != nil && ps.WithinType == "PREVIOUS_AND_CURRENT" {
		// Flink's within(d, PREVIOUS_AND_CURRENT) at the end of the chain
		// sets the gap window of the last stage.
		w.line(3, "within "+strconv.FormatInt(*ps.WithinMs, 10)+"ms of previous")
	}
	if window != nil {
		w.line(2, "within "+strconv.FormatInt(*window, 10)+"ms")
	}
	w.line(1, "}")
	skip, err := skipSource(ps.Skip, ps.SkipThrowOnMiss || in.SkipThrowOnMiss)
	if err != nil {
		return "", err
	}
	if skip != "" {
		w.line(1, skip)
	}
	w.line(0, "}")
	return w.b.String(), nil
}

// patternWindow returns the pattern window (FIRST_AND_LAST) of the rule
// text: the smallest of the pattern's within and the FIRST_AND_LAST
// windows of its top-level stages, as Flink's compiler keeps the smallest;
// nil when there is none. The rule language has one pattern window, so a
// FIRST_AND_LAST window inside a group cannot be written, nor one on an
// earlier stage of a pattern that ends in notFollowedBy with no window of
// its own, or in a group that ends in one (at any depth): Flink's compiler
// has not seen that window yet when it compiles the final notFollowedBy,
// which then gets no pending state (a match is emitted at its last event
// taken), where the pattern window of the rule text gives it one (the
// match waits out the window, and an event of the notFollowedBy drops it).
func patternWindow(ps *PatternSpec) (*int64, error) {
	var window *int64
	keep := func(ms int64) {
		if window == nil || ms < *window {
			window = &ms
		}
	}
	switch ps.WithinType {
	case "", "FIRST_AND_LAST", "PREVIOUS_AND_CURRENT":
	default:
		return nil, fmt.Errorf("unknown within_type %q", ps.WithinType)
	}
	if ps.WithinMs != nil && ps.WithinType != "PREVIOUS_AND_CURRENT" {
		keep(*ps.WithinMs)
	}
	lastOwn := window != nil || ps.WithinMs != nil
	for i := range ps.Stages {
		s := &ps.Stages[i]
		if s.Group != nil && hasStageWindow(s.Group.Stages) {
			return nil, fmt.Errorf("stage %d: a FIRST_AND_LAST window inside a group has no form in the rule language", i)
		}
		if s.WithinMs == nil || s.WithinType == "PREVIOUS_AND_CURRENT" {
			continue
		}
		keep(*s.WithinMs)
	}
	if len(ps.Stages) == 0 {
		return window, nil
	}
	last := &ps.Stages[len(ps.Stages)-1]
	lastOwn = lastOwn || last.WithinMs != nil
	if window != nil && EndsInNotFollowedBy(ps.Stages) && !lastOwn {
		return nil, fmt.Errorf("a window on an earlier stage of a pattern that ends in notFollowedBy has no form in the rule language")
	}
	return window, nil
}

// EndsInNotFollowedBy says whether the last of stages is a notFollowedBy,
// or a group whose stages end in one (at any depth): a notFollowedBy that
// can end the pattern, whose pending state (the match held until the
// window closes) depends on the window Flink's compiler knows when it
// reaches it.
func EndsInNotFollowedBy(stages []StageSpec) bool {
	if len(stages) == 0 {
		return false
	}
	last := &stages[len(stages)-1]
	if last.Group != nil {
		return EndsInNotFollowedBy(last.Group.Stages)
	}
	return last.Contiguity == "notFollowedBy"
}

// hasStageWindow says whether some stage of stages, or of a group inside
// them, has a FIRST_AND_LAST window of its own.
func hasStageWindow(stages []StageSpec) bool {
	for i := range stages {
		s := &stages[i]
		if s.WithinMs != nil && s.WithinType != "PREVIOUS_AND_CURRENT" {
			return true
		}
		if s.Group != nil && hasStageWindow(s.Group.Stages) {
			return true
		}
	}
	return false
}

// textStages returns the top-level stages as the rule text writes them:
// when the pattern's within is PREVIOUS_AND_CURRENT, it replaces a gap
// window of the last stage (Flink's later within call overwrites the
// earlier), which the rule language would reject as given twice.
func textStages(ps *PatternSpec) []StageSpec {
	n := len(ps.Stages)
	if n == 0 || ps.WithinMs == nil || ps.WithinType != "PREVIOUS_AND_CURRENT" {
		return ps.Stages
	}
	if last := &ps.Stages[n-1]; last.WithinMs == nil || last.WithinType != "PREVIOUS_AND_CURRENT" {
		return ps.Stages
	}
	out := slices.Clone(ps.Stages)
	out[n-1].WithinMs, out[n-1].WithinType = nil, ""
	return out
}

// name writes a name bare when it is an identifier, else quoted.
func name(s string) string { return rules.Name{Value: s}.String() }

type sourceWriter struct{ b strings.Builder }

func (w *sourceWriter) line(indent int, s string) {
	w.b.WriteString(strings.Repeat("  ", indent))
	w.b.WriteString(s)
	w.b.WriteByte('\n')
}

// stages writes the stages (and groups) of a pattern at indent.
func (w *sourceWriter) stages(indent int, stages []StageSpec) error {
	if len(stages) == 0 {
		return fmt.Errorf("pattern has no stages")
	}
	for i := range stages {
		s := &stages[i]
		if (i == 0) != (s.Contiguity == "begin") {
			return fmt.Errorf("stage %d (%s): contiguity %q: only the first stage is begin, and it must be", i, s.Name, s.Contiguity)
		}
		switch s.Contiguity {
		case "begin", "next", "followedBy", "followedByAny", "notNext", "notFollowedBy":
		default:
			return fmt.Errorf("stage %d (%s): unknown contiguity %q", i, s.Name, s.Contiguity)
		}
		q, err := quantifierSource(&s.Quantifier)
		if err != nil {
			return fmt.Errorf("stage %d (%s): %w", i, s.Name, err)
		}
		var head string
		if s.Group != nil {
			if s.Condition != nil {
				return fmt.Errorf("stage %d (%s): a group stage has no condition", i, s.Name)
			}
			w.line(indent, s.Contiguity+" (")
			if err := w.stages(indent+1, s.Group.Stages); err != nil {
				return fmt.Errorf("stage %d (%s): group: %w", i, s.Name, err)
			}
			head = ")"
		} else {
			head = s.Contiguity + " " + name(s.Name)
		}
		if q != "" {
			head += " " + q
		}
		if s.Condition != nil {
			c, err := exprSource(*s.Condition)
			if err != nil {
				return fmt.Errorf("stage %d (%s): %w", i, s.Name, err)
			}
			head += " where " + c
		}
		w.line(indent, head)
		if err := w.clauses(indent+1, s); err != nil {
			return fmt.Errorf("stage %d (%s): %w", i, s.Name, err)
		}
	}
	return nil
}

// clauses writes the clause lines of s after its head: the chained
// conditions in order (the rule language applies where and or clauses as
// Flink's where and or), until, and a gap window of the stage's own.
func (w *sourceWriter) clauses(indent int, s *StageSpec) error {
	if s.Group != nil && len(s.Chain) > 0 {
		return fmt.Errorf("a group stage has no condition")
	}
	for k, cc := range s.Chain {
		if cc.Op != "where" && cc.Op != "or" {
			return fmt.Errorf("chain %d: unknown op %q (want where or or)", k, cc.Op)
		}
		c, err := exprSource(cc.Expr)
		if err != nil {
			return fmt.Errorf("chain %d: %w", k, err)
		}
		w.line(indent, cc.Op+" "+c)
	}
	if s.Until != nil {
		c, err := exprSource(*s.Until)
		if err != nil {
			return fmt.Errorf("until: %w", err)
		}
		w.line(indent, "until "+c)
	}
	if s.WithinMs != nil {
		switch s.WithinType {
		case "", "FIRST_AND_LAST":
			// Part of the pattern window (patternWindow).
		case "PREVIOUS_AND_CURRENT":
			w.line(indent, "within "+strconv.FormatInt(*s.WithinMs, 10)+"ms of previous")
		default:
			return fmt.Errorf("unknown within_type %q", s.WithinType)
		}
	}
	return nil
}

// exprSource checks that an expression fits on its line.
func exprSource(src string) (string, error) {
	if strings.ContainsAny(src, "\n\r") {
		return "", fmt.Errorf("condition %q spans lines", src)
	}
	if strings.TrimSpace(src) == "" {
		return "", fmt.Errorf("empty condition")
	}
	return strings.TrimSpace(src), nil
}

// quantifierSource writes a quantifier in the rule language.
func quantifierSource(q *QuantifierSpec) (string, error) {
	var parts []string
	switch q.Kind {
	case "", "one":
		if q.WindowMs != nil {
			return "", fmt.Errorf("quantifier one takes no window_ms")
		}
	case "oneOrMore":
		parts = append(parts, "oneOrMore")
	case "timesOrMore":
		parts = append(parts, "timesOrMore "+strconv.Itoa(q.Min))
	case "times":
		if q.Max == nil {
			return "", fmt.Errorf("quantifier times needs a max")
		}
		if q.Min == *q.Max {
			parts = append(parts, "times "+strconv.Itoa(q.Min))
		} else {
			parts = append(parts, fmt.Sprintf("times %d..%d", q.Min, *q.Max))
		}
	default:
		return "", fmt.Errorf("unknown quantifier kind %q", q.Kind)
	}
	if q.WindowMs != nil {
		parts = append(parts, "within "+strconv.FormatInt(*q.WindowMs, 10)+"ms")
	}
	switch q.Inner {
	case "", "relaxed":
	case "consecutive", "allowCombinations":
		parts = append(parts, q.Inner)
	default:
		return "", fmt.Errorf("unknown inner contiguity %q", q.Inner)
	}
	if q.Optional {
		parts = append(parts, "optional")
	}
	if q.Greedy {
		parts = append(parts, "greedy")
	}
	return strings.Join(parts, " "), nil
}

// skipSource writes the skip notation of a case as a skip line ("" for
// noSkip without throw).
func skipSource(s string, throw bool) (string, error) {
	var out string
	switch kind, stage, _ := strings.Cut(s, ":"); kind {
	case "", "noSkip":
		out = "skip noSkip"
	case "skipToNext":
		out = "skip toNext"
	case "skipPastLastEvent":
		out = "skip pastLastEvent"
	case "skipToFirst":
		out = "skip toFirst " + name(stage)
	case "skipToLast":
		out = "skip toLast " + name(stage)
	default:
		return "", fmt.Errorf("unknown skip strategy %q", s)
	}
	// Only toFirst and toLast can throw on a miss (Flink has
	// throwExceptionOnMiss on skipToFirst and skipToLast only); the flag
	// does nothing on the other strategies, and the rule language rejects
	// orFail there.
	if throw && strings.HasPrefix(s, "skipTo") && strings.Contains(s, ":") {
		out += " orFail"
	}
	if out == "skip noSkip" {
		return "", nil
	}
	return out, nil
}
