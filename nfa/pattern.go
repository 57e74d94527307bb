package nfa

import (
	"errors"
	"fmt"
	"time"

	"github.com/cepheus-cep/cepheus/event"
)

// ErrMalformedPattern marks every error that rejects a pattern (Flink's
// MalformedPatternException and the argument checks of its Pattern API).
// Test with errors.Is; the concrete type is *PatternError.
var ErrMalformedPattern = errors.New("nfa: malformed pattern")

// PatternError is a rejected pattern: the stage it concerns (may be empty)
// and the reason.
type PatternError struct {
	Stage string
	Msg   string
}

func (e *PatternError) Error() string {
	if e.Stage == "" {
		return "nfa: " + e.Msg
	}
	return fmt.Sprintf("nfa: stage %q: %s", e.Stage, e.Msg)
}

// Is makes errors.Is(err, ErrMalformedPattern) hold.
func (e *PatternError) Is(target error) bool { return target == ErrMalformedPattern }

// Contiguity says how a stage relates to the events before it (Flink's
// ConsumingStrategy).
type Contiguity uint8

// The contiguities.
const (
	// Strict: the next event must match (next, consecutive).
	Strict Contiguity = iota
	// Relaxed: skip till next match (followedBy, the default inside loops).
	Relaxed
	// NonDeterministicRelaxed: skip till any match (followedByAny,
	// allowCombinations).
	NonDeterministicRelaxed
	// NotStrict: the next event must not match (notNext).
	NotStrict
	// NotRelaxed: no matching event may occur before the next stage
	// (notFollowedBy).
	NotRelaxed
)

var contiguityNames = [...]string{"next", "followedBy", "followedByAny", "notNext", "notFollowedBy"}

func (c Contiguity) String() string {
	if int(c) < len(contiguityNames) {
		return contiguityNames[c]
	}
	return fmt.Sprintf("contiguity(%d)", c)
}

func (c Contiguity) isNot() bool { return c == NotStrict || c == NotRelaxed }

type quantKind uint8

const (
	quantSingle quantKind = iota
	quantLooping
	quantTimes
)

type quantifier struct {
	kind      quantKind
	optional  bool
	greedy    bool
	consuming Contiguity
	inner     Contiguity
}

func (q quantifier) String() string {
	s := [...]string{"single", "looping", "times"}[q.kind]
	if q.optional {
		s += ",optional"
	}
	if q.greedy {
		s += ",greedy"
	}
	return s
}

type times struct {
	from, to int   // to < 0: unbounded (timesOrMore)
	window   int64 // per-loop gap window in ms, 0 = none
}

// builder is shared by every node of one pattern chain: it collects the
// errors of the chain and holds the after-match skip strategy.
type builder struct {
	errs []error
	skip SkipStrategy
}

// Pattern is one stage of a pattern under construction, linked to the stages
// before it, as in Flink's Pattern API. Methods that add a stage (Next,
// FollowedBy, ...) return the new stage; modifiers (Where, Optional, ...)
// change the stage they are called on and return it. Errors are collected
// and reported by [Compile], so calls can be chained freely.
//
// A Pattern is not safe for concurrent construction; a compiled [NFA] is
// immutable and shared.
type Pattern struct {
	b         *builder
	name      string
	prev      *Pattern
	cond      Condition // nil: accept every event
	until     Condition
	q         quantifier
	times     *times
	window    int64 // FIRST_AND_LAST, ms; 0 = none
	gapWindow int64 // PREVIOUS_AND_CURRENT, ms; 0 = none
	group     *Pattern
}

// groupName is the name Flink gives to a group pattern; inner stages keep
// their own names.
const groupName = "GroupPattern"

// Begin starts a pattern with the stage name. Every event may start a new
// partial match. As in Flink, the first stage's own contiguity is strict: it
// matters only when the pattern is a group nested at the head of another
// group.
func Begin(name string) *Pattern {
	return &Pattern{b: &builder{}, name: name, q: quantifier{consuming: Strict, inner: Relaxed}}
}

// BeginGroup starts a pattern with a group: a sub-pattern treated as one
// stage, which may then be quantified.
func BeginGroup(group *Pattern) *Pattern {
	p := &Pattern{b: &builder{}, name: groupName, q: quantifier{consuming: Strict, inner: Relaxed}}
	p.setGroup(group)
	return p
}

func (p *Pattern) errorf(format string, args ...any) {
	p.b.errs = append(p.b.errs, &PatternError{Stage: p.name, Msg: fmt.Sprintf(format, args...)})
}

func (p *Pattern) setGroup(g *Pattern) {
	if g == nil {
		p.errorf("group pattern is nil")
		return
	}
	p.group = g
	p.b.errs = append(p.b.errs, g.b.errs...)
	g.b.errs = nil
}

func (p *Pattern) add(name string, c Contiguity) *Pattern {
	return &Pattern{b: p.b, name: name, prev: p, q: quantifier{consuming: c, inner: Relaxed}}
}

// Next appends a stage whose event must directly follow the previous match
// (strict contiguity).
func (p *Pattern) Next(name string) *Pattern { return p.add(name, Strict) }

// FollowedBy appends a stage with relaxed contiguity: non-matching events in
// between are ignored, but the first matching event is taken.
func (p *Pattern) FollowedBy(name string) *Pattern { return p.add(name, Relaxed) }

// FollowedByAny appends a stage with non-deterministic relaxed contiguity:
// matching events may also be skipped, which branches.
func (p *Pattern) FollowedByAny(name string) *Pattern { return p.add(name, NonDeterministicRelaxed) }

// NotNext appends a negative stage: the event right after the previous stage
// must not match it.
func (p *Pattern) NotNext(name string) *Pattern {
	if p.q.optional {
		p.errorf("a NOT pattern cannot follow an optional pattern (Flink: unsupported optional path to NOT condition)")
	}
	return p.add(name, NotStrict)
}

// NotFollowedBy appends a negative stage: no matching event may occur between
// the previous stage and the next one. At the end of a pattern it needs a
// within window; the match is then released when the window expires.
func (p *Pattern) NotFollowedBy(name string) *Pattern {
	if p.q.optional {
		p.errorf("a NOT pattern cannot follow an optional pattern (Flink: unsupported optional path to NOT condition)")
	}
	return p.add(name, NotRelaxed)
}

func (p *Pattern) addGroup(g *Pattern, c Contiguity) *Pattern {
	n := p.add(groupName, c)
	n.setGroup(g)
	return n
}

// NextGroup appends a group stage with strict contiguity.
func (p *Pattern) NextGroup(g *Pattern) *Pattern { return p.addGroup(g, Strict) }

// FollowedByGroup appends a group stage with relaxed contiguity.
func (p *Pattern) FollowedByGroup(g *Pattern) *Pattern { return p.addGroup(g, Relaxed) }

// FollowedByAnyGroup appends a group stage with non-deterministic relaxed
// contiguity.
func (p *Pattern) FollowedByAnyGroup(g *Pattern) *Pattern {
	return p.addGroup(g, NonDeterministicRelaxed)
}

// Where adds a condition, ANDed with the conditions already set on the stage.
func (p *Pattern) Where(c Condition) *Pattern {
	if p.group != nil {
		p.errorf("a group pattern does not support where")
		return p
	}
	if c == nil {
		p.errorf("where: nil condition")
		return p
	}
	if p.cond == nil {
		p.cond = c
	} else {
		p.cond = And(p.cond, c)
	}
	return p
}

// Or adds a condition, ORed with the conditions already set on the stage.
func (p *Pattern) Or(c Condition) *Pattern {
	if p.group != nil {
		p.errorf("a group pattern does not support or")
		return p
	}
	if c == nil {
		p.errorf("or: nil condition")
		return p
	}
	if p.cond == nil {
		p.cond = c
	} else {
		p.cond = Or(p.cond, c)
	}
	return p
}

// Until sets the stop condition of a looping stage: the first event that
// satisfies it ends the loop and is not taken.
func (p *Pattern) Until(c Condition) *Pattern {
	switch {
	case c == nil:
		p.errorf("until: nil condition")
	case p.q.kind != quantLooping:
		p.errorf("the until condition is only applicable to looping states")
	case p.until != nil:
		p.errorf("only one until condition can be applied")
	default:
		p.until = c
	}
	return p
}

// Within sets the pattern window (Flink's WithinType.FIRST_AND_LAST): a
// partial match is dropped once ts - first_ts >= d. If several stages set a
// window, the smallest applies.
func (p *Pattern) Within(d time.Duration) *Pattern {
	if d <= 0 {
		p.errorf("within: window must be positive, got %v", d)
		return p
	}
	p.window = event.Millis(d)
	return p
}

// WithinGap bounds the time between the event this stage takes and the
// previously matched event (Flink's WithinType.PREVIOUS_AND_CURRENT, set on
// this stage).
func (p *Pattern) WithinGap(d time.Duration) *Pattern {
	if d <= 0 {
		p.errorf("within: window must be positive, got %v", d)
		return p
	}
	p.gapWindow = event.Millis(d)
	return p
}

// Skip sets the after-match skip strategy of the whole pattern (Flink passes
// it to begin). The default is [NoSkip].
func (p *Pattern) Skip(s SkipStrategy) *Pattern {
	p.b.skip = s
	return p
}

func (p *Pattern) checkNotNot() bool {
	if p.q.consuming.isNot() {
		p.errorf("option not applicable to NOT pattern")
		return false
	}
	return true
}

func (p *Pattern) checkQuantifierNotApplied() bool {
	if p.q.kind != quantSingle {
		p.errorf("already applied quantifier to this pattern; current quantifier is %s", p.q)
		return false
	}
	return true
}

func gapMillis(gap []time.Duration) int64 {
	if len(gap) > 0 && gap[0] > 0 {
		return event.Millis(gap[0])
	}
	return 0
}

// OneOrMore makes the stage a loop that takes one or more events. An optional
// gap bounds the time between consecutive events of the loop (Flink's
// oneOrMore(Duration)).
func (p *Pattern) OneOrMore(gap ...time.Duration) *Pattern {
	if p.checkNotNot() && p.checkQuantifierNotApplied() {
		p.q.kind = quantLooping
		p.times = &times{from: 1, to: 1, window: gapMillis(gap)}
	}
	return p
}

// TimesOrMore makes the stage a loop that takes at least n events.
func (p *Pattern) TimesOrMore(n int, gap ...time.Duration) *Pattern {
	if p.checkNotNot() && p.checkQuantifierNotApplied() {
		if n <= 0 {
			p.errorf("timesOrMore: you should give a positive number greater than 0, got %d", n)
			return p
		}
		p.q.kind = quantLooping
		p.times = &times{from: n, to: n, window: gapMillis(gap)}
	}
	return p
}

// Times makes the stage take exactly n events.
func (p *Pattern) Times(n int, gap ...time.Duration) *Pattern {
	if p.checkNotNot() && p.checkQuantifierNotApplied() {
		if n <= 0 {
			p.errorf("times: you should give a positive number greater than 0, got %d", n)
			return p
		}
		p.q.kind = quantTimes
		p.times = &times{from: n, to: n, window: gapMillis(gap)}
	}
	return p
}

// TimesRange makes the stage take between from and to events. from == 0
// makes the stage optional and takes 1..to, as in Flink.
func (p *Pattern) TimesRange(from, to int, gap ...time.Duration) *Pattern {
	if p.checkNotNot() && p.checkQuantifierNotApplied() {
		p.q.kind = quantTimes
		if from == 0 {
			p.setOptional()
			from = 1
		}
		if from <= 0 {
			p.errorf("times: the from should be a positive number greater than 0, got %d", from)
			return p
		}
		if to < from {
			p.errorf("times: the to should be a number greater than or equal to from: %d", from)
			return p
		}
		p.times = &times{from: from, to: to, window: gapMillis(gap)}
	}
	return p
}

// Optional lets the stage (single, looping or times) be skipped.
func (p *Pattern) Optional() *Pattern {
	if p.prev != nil && p.prev.q.greedy {
		p.errorf("optional pattern cannot be preceded by greedy pattern")
		return p
	}
	return p.setOptional()
}

// setOptional is Flink's Quantifier.optional, without the greedy-predecessor
// check of Pattern.optional (times(0, n) calls it directly).
func (p *Pattern) setOptional() *Pattern {
	switch {
	case p.q.optional:
		p.errorf("optional already applied")
	case p.q.consuming.isNot():
		p.errorf("a NOT pattern cannot be optional")
	default:
		p.q.optional = true
	}
	return p
}

// Greedy makes a looping or times stage take as many events as possible.
func (p *Pattern) Greedy() *Pattern {
	switch {
	case !p.checkNotNot():
	case p.group != nil:
		p.errorf("option not applicable to group pattern")
	case p.q.inner == NonDeterministicRelaxed:
		p.errorf("option not applicable to FollowedByAny pattern")
	case p.q.kind == quantSingle:
		p.errorf("option not applicable to singleton quantifier")
	default:
		p.q.greedy = true
	}
	return p
}

// Consecutive makes the events of a looping or times stage strictly
// contiguous.
func (p *Pattern) Consecutive() *Pattern {
	switch {
	case p.q.kind == quantSingle:
		p.errorf("consecutive is only applicable to looping or times states")
	case p.q.inner == NonDeterministicRelaxed:
		p.errorf("you can apply either combinations or consecutive, not both")
	case p.q.inner == Strict:
		p.errorf("consecutive already applied")
	default:
		p.q.inner = Strict
	}
	return p
}

// AllowCombinations lets a looping or times stage skip matching events too
// (skip till any match inside the loop).
func (p *Pattern) AllowCombinations() *Pattern {
	switch {
	case p.q.kind == quantSingle:
		p.errorf("combinations are only applicable to looping or times states")
	case p.q.inner == Strict:
		p.errorf("you can apply either combinations or consecutive, not both")
	case p.q.inner == NonDeterministicRelaxed:
		p.errorf("combinations already applied")
	default:
		p.q.inner = NonDeterministicRelaxed
	}
	return p
}

// Name returns the stage name.
func (p *Pattern) Name() string { return p.name }

// windowSize returns the FIRST_AND_LAST window of this node, if any.
func (p *Pattern) windowSize() (int64, bool) { return p.window, p.window > 0 }

// condition is the stage's where condition (True when none was given).
func (p *Pattern) condition() Condition {
	if p.cond == nil {
		return True
	}
	return p.cond
}
