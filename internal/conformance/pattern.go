package conformance

import (
	"fmt"
	"strings"
	"time"

	"github.com/cepheus-cep/cepheus/nfa"
	"github.com/cepheus-cep/cepheus/rules"
)

// compilePattern builds the case's pattern with the nfa builder and compiles
// it (with timeout reporting when the case asks for it).
func compilePattern(in *Input) (*nfa.NFA, error) {
	b := &patternBuilder{stages: leafNames(in.Pattern.Stages, nil)}
	last, err := b.chain(in.Pattern.Stages)
	if err != nil {
		return nil, err
	}
	ps := &in.Pattern
	if ps.WithinMs != nil {
		// Flink's .within() at the end of the chain sets the window on the
		// last stage.
		if err := applyWithin(last, *ps.WithinMs, ps.WithinType); err != nil {
			return nil, err
		}
	}
	skip, err := parseSkip(ps.Skip, ps.SkipThrowOnMiss || in.SkipThrowOnMiss)
	if err != nil {
		return nil, err
	}
	last.Skip(skip)
	var opts []nfa.Option
	if in.TimeoutHandling {
		opts = append(opts, nfa.WithTimeouts())
	}
	n, err := nfa.Compile(last, opts...)
	if err != nil {
		return nil, fmt.Errorf("compile pattern: %w", err)
	}
	return n, nil
}

// patternBuilder turns stage specs into a chain of nfa patterns.
type patternBuilder struct {
	// stages are the leaf stage names of the whole pattern: the stages a
	// condition's ctx may name.
	stages []string
}

// chain builds the stages in order and returns the last stage of the chain.
func (b *patternBuilder) chain(stages []StageSpec) (*nfa.Pattern, error) {
	if len(stages) == 0 {
		return nil, fmt.Errorf("pattern has no stages")
	}
	var p *nfa.Pattern
	for i := range stages {
		s := &stages[i]
		next, err := b.stage(p, s)
		if err != nil {
			return nil, fmt.Errorf("stage %d (%s): %w", i, s.Name, err)
		}
		p = next
	}
	return p, nil
}

// stage appends s to prev (nil for the first stage) and applies its
// condition, quantifier and until.
func (b *patternBuilder) stage(prev *nfa.Pattern, s *StageSpec) (*nfa.Pattern, error) {
	p, err := b.link(prev, s)
	if err != nil {
		return nil, err
	}
	if err := b.conditions(p, s); err != nil {
		return nil, err
	}
	if err := applyQuantifier(p, &s.Quantifier); err != nil {
		return nil, err
	}
	if s.Until != nil {
		c, err := rules.CompileCondition(*s.Until, Schema, b.stages)
		if err != nil {
			return nil, fmt.Errorf("until: %w", err)
		}
		p.Until(c)
	}
	if s.WithinMs != nil {
		if err := applyWithin(p, *s.WithinMs, s.WithinType); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// conditions applies s's condition and then its chain, each where with
// Where (AND) and each or with Or (OR), as Flink's where and or do.
func (b *patternBuilder) conditions(p *nfa.Pattern, s *StageSpec) error {
	if s.Group != nil && (s.Condition != nil || len(s.Chain) > 0) {
		return fmt.Errorf("a group stage has no condition")
	}
	if s.Condition != nil {
		c, err := rules.CompileCondition(*s.Condition, Schema, b.stages)
		if err != nil {
			return err
		}
		p.Where(c)
	}
	for i, cc := range s.Chain {
		c, err := rules.CompileCondition(cc.Expr, Schema, b.stages)
		if err != nil {
			return fmt.Errorf("chain %d: %w", i, err)
		}
		switch cc.Op {
		case "where":
			p.Where(c)
		case "or":
			p.Or(c)
		default:
			return fmt.Errorf("chain %d: unknown op %q (want where or or)", i, cc.Op)
		}
	}
	return nil
}

// applyWithin sets a window of type typ on p: Within for FIRST_AND_LAST
// (the default), WithinGap for PREVIOUS_AND_CURRENT.
func applyWithin(p *nfa.Pattern, ms int64, typ string) error {
	switch typ {
	case "", "FIRST_AND_LAST":
		p.Within(millis(ms))
	case "PREVIOUS_AND_CURRENT":
		p.WithinGap(millis(ms))
	default:
		return fmt.Errorf("unknown within_type %q", typ)
	}
	return nil
}

// link creates the stage (or group) s after prev with s's contiguity.
func (b *patternBuilder) link(prev *nfa.Pattern, s *StageSpec) (*nfa.Pattern, error) {
	if (prev == nil) != (s.Contiguity == "begin") {
		return nil, fmt.Errorf("contiguity %q: only the first stage is begin, and it must be", s.Contiguity)
	}
	if s.Group != nil {
		inner, err := b.chain(s.Group.Stages)
		if err != nil {
			return nil, fmt.Errorf("group: %w", err)
		}
		switch s.Contiguity {
		case "begin":
			return nfa.BeginGroup(inner), nil
		case "next":
			return prev.NextGroup(inner), nil
		case "followedBy":
			return prev.FollowedByGroup(inner), nil
		case "followedByAny":
			return prev.FollowedByAnyGroup(inner), nil
		}
		return nil, fmt.Errorf("contiguity %q is not supported for a group", s.Contiguity)
	}
	switch s.Contiguity {
	case "begin":
		return nfa.Begin(s.Name), nil
	case "next":
		return prev.Next(s.Name), nil
	case "followedBy":
		return prev.FollowedBy(s.Name), nil
	case "followedByAny":
		return prev.FollowedByAny(s.Name), nil
	case "notNext":
		return prev.NotNext(s.Name), nil
	case "notFollowedBy":
		return prev.NotFollowedBy(s.Name), nil
	}
	return nil, fmt.Errorf("unknown contiguity %q", s.Contiguity)
}

// applyQuantifier applies q to p in the order a Java test writes it:
// quantifier, inner contiguity, optional, greedy. times with min 0 is
// TimesRange(0, max), which makes the stage optional itself, as Flink does.
func applyQuantifier(p *nfa.Pattern, q *QuantifierSpec) error {
	var gap []time.Duration
	if q.WindowMs != nil {
		gap = []time.Duration{millis(*q.WindowMs)}
	}
	switch q.Kind {
	case "", "one":
		if q.WindowMs != nil {
			return fmt.Errorf("quantifier one takes no window_ms")
		}
	case "oneOrMore":
		p.OneOrMore(gap...)
	case "timesOrMore":
		p.TimesOrMore(q.Min, gap...)
	case "times":
		if q.Max == nil {
			return fmt.Errorf("quantifier times needs a max")
		}
		if q.Min == *q.Max {
			p.Times(q.Min, gap...)
		} else {
			p.TimesRange(q.Min, *q.Max, gap...)
		}
	default:
		return fmt.Errorf("unknown quantifier kind %q", q.Kind)
	}
	switch q.Inner {
	case "", "relaxed":
	case "consecutive":
		p.Consecutive()
	case "allowCombinations":
		p.AllowCombinations()
	default:
		return fmt.Errorf("unknown inner contiguity %q", q.Inner)
	}
	if q.Optional {
		p.Optional()
	}
	if q.Greedy {
		p.Greedy()
	}
	return nil
}

// parseSkip parses the skip notation of the cases.
func parseSkip(s string, throw bool) (nfa.SkipStrategy, error) {
	var st nfa.SkipStrategy
	switch kind, stage, _ := strings.Cut(s, ":"); kind {
	case "", "noSkip":
		st = nfa.NoSkip()
	case "skipToNext":
		st = nfa.SkipToNextEvent()
	case "skipPastLastEvent":
		st = nfa.SkipPastLast()
	case "skipToFirst":
		st = nfa.SkipToFirstOf(stage)
	case "skipToLast":
		st = nfa.SkipToLastOf(stage)
	default:
		return st, fmt.Errorf("unknown skip strategy %q", s)
	}
	if throw {
		st = st.OrThrow()
	}
	return st, nil
}

// leafNames appends the stage names of stages, descending into groups.
func leafNames(stages []StageSpec, names []string) []string {
	for _, s := range stages {
		if s.Group != nil {
			names = leafNames(s.Group.Stages, names)
			continue
		}
		names = append(names, s.Name)
	}
	return names
}

func millis(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }
