package nfa

import (
	"errors"
	"fmt"
)

// SkipKind names an after-match skip strategy.
type SkipKind uint8

// The after-match skip strategies of Flink CEP.
const (
	SkipNone          SkipKind = iota // noSkip: every match is kept
	SkipToNext                        // skipToNext: drop partial matches that started with the match's first event
	SkipPastLastEvent                 // skipPastLastEvent: drop partial matches that started inside the match
	SkipToFirst                       // skipToFirst(stage)
	SkipToLast                        // skipToLast(stage)
)

// SkipStrategy says which partial matches are discarded after a match is
// emitted. The zero value is [NoSkip].
type SkipStrategy struct {
	Kind SkipKind
	// Stage is the target of SkipToFirst and SkipToLast.
	Stage string
	// ThrowOnMiss makes SkipToFirst/SkipToLast fail the run (an error wrapping
	// [ErrSkipMiss]) when the target stage is absent from a match or is its
	// first event, instead of falling back to noSkip.
	ThrowOnMiss bool
}

// ErrSkipMiss is the error of a skip strategy with ThrowOnMiss that missed.
var ErrSkipMiss = errors.New("nfa: after-match skip target missing")

// NoSkip keeps every match (the default).
func NoSkip() SkipStrategy { return SkipStrategy{} }

// SkipToNextEvent discards partial matches that started with the same event
// as the emitted match.
func SkipToNextEvent() SkipStrategy { return SkipStrategy{Kind: SkipToNext} }

// SkipPastLast discards every partial match that started before the last
// event of the emitted match.
func SkipPastLast() SkipStrategy { return SkipStrategy{Kind: SkipPastLastEvent} }

// SkipToFirstOf discards partial matches that started before the first event
// of stage in the emitted match.
func SkipToFirstOf(stage string) SkipStrategy { return SkipStrategy{Kind: SkipToFirst, Stage: stage} }

// SkipToLastOf discards partial matches that started before the last event of
// stage in the emitted match.
func SkipToLastOf(stage string) SkipStrategy { return SkipStrategy{Kind: SkipToLast, Stage: stage} }

// OrThrow returns s with ThrowOnMiss set.
func (s SkipStrategy) OrThrow() SkipStrategy { s.ThrowOnMiss = true; return s }

// String prints the strategy in the conformance notation
// (noSkip, skipToNext, skipPastLastEvent, skipToFirst:x, skipToLast:x).
func (s SkipStrategy) String() string {
	var out string
	switch s.Kind {
	case SkipNone:
		out = "noSkip"
	case SkipToNext:
		out = "skipToNext"
	case SkipPastLastEvent:
		out = "skipPastLastEvent"
	case SkipToFirst:
		out = "skipToFirst:" + s.Stage
	case SkipToLast:
		out = "skipToLast:" + s.Stage
	default:
		out = fmt.Sprintf("skip(%d)", s.Kind)
	}
	if s.ThrowOnMiss {
		out += "!"
	}
	return out
}

func (s SkipStrategy) isSkip() bool { return s.Kind != SkipNone }

// pruningID computes the event id before (or at) which partial matches are
// pruned, for the extracted match (Flink's getPruningId over its collection
// of maps). ok is false when nothing is pruned.
func (r *Run) pruningID(paths []path) (id eventID, ok bool, err error) {
	s := r.nfa.skip
	switch s.Kind {
	case SkipNone:
		return eventID{}, false, nil
	case SkipPastLastEvent, SkipToNext:
		// Flink: max over the last event of every stage list (past last), or
		// min over the first event of every stage list (to next).
		n := r.nfa.numStages()
		first, last := r.stageFirst[:0], r.stageLast[:0]
		for range n {
			first, last = append(first, -1), append(last, -1)
		}
		r.stageFirst, r.stageLast = first, last
		for _, p := range paths {
			// The positions in p of each stage's first and last event
			// (the ends of the stage's list).
			for i := range n {
				first[i], last[i] = -1, -1
			}
			for i, e := range p {
				if first[e.stage] < 0 {
					first[e.stage] = int32(i)
				}
				last[e.stage] = int32(i)
			}
			for i := range n {
				if first[i] < 0 {
					continue
				}
				if s.Kind == SkipPastLastEvent {
					if e := p[last[i]].ev; !ok || e.id.cmp(id) > 0 {
						id, ok = e.id, true
					}
				} else if e := p[first[i]].ev; !ok || e.id.cmp(id) < 0 {
					id, ok = e.id, true
				}
			}
		}
	case SkipToFirst, SkipToLast:
		target := r.nfa.stageIndex[s.Stage]
		for _, p := range paths {
			var first, last *bufEvent
			for _, n := range p {
				if n.stage == target {
					if first == nil {
						first = n.ev
					}
					last = n.ev
				}
			}
			if first == nil {
				if s.ThrowOnMiss {
					return eventID{}, false, fmt.Errorf("%w: could not skip to %q: no such element in the found match", ErrSkipMiss, s.Stage)
				}
			} else {
				pick := first
				if s.Kind == SkipToLast {
					pick = last
				}
				if !ok || pick.id.cmp(id) > 0 {
					id, ok = pick.id, true
				}
			}
			if s.ThrowOnMiss && len(p) > 0 {
				start := p[0].ev.id
				for _, n := range p[1:] {
					if n.ev.id.cmp(start) < 0 {
						start = n.ev.id
					}
				}
				if ok && id == start {
					return eventID{}, false, fmt.Errorf("%w: could not skip to first element of a match (stage %q)", ErrSkipMiss, s.Stage)
				}
			}
		}
	}
	return id, ok, nil
}

// shouldPrune reports whether a (partial or completed) match that started
// with start is discarded by pruning id.
func (r *Run) shouldPrune(start, pruning eventID) bool {
	switch r.nfa.skip.Kind {
	case SkipToFirst, SkipToLast:
		return start.cmp(pruning) < 0
	default:
		return start.cmp(pruning) <= 0
	}
}
