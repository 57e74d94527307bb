package runtime

import (
	"bytes"
	"slices"
	"time"

	"github.com/cepheus-cep/cepheus/event"
)

// AheadConfirm is how many events in a row it takes to confirm a jump of
// the stream's time (see [SubtaskConfig.MaxAhead]), and how many events
// at the start of the input set the stream's first time.
const AheadConfirm = 5

// aheadGuard keeps events whose time is too far ahead of the stream's out
// of the operators and the watermark (SubtaskConfig.MaxAhead). The
// stream's time is the largest time of the events let through. An event
// more than bound after it is held; when AheadConfirm events in a row are
// held, each within bound of the first, the stream did jump (a gap in the
// input) and they go through; when an event within bound of the stream's
// time comes first, the held events were outliers and go to the dead
// letters. At the start there is no stream time yet: the first
// AheadConfirm events are held, and then judged in order with the stream's
// time starting at their lower median. Events keep their input order whatever
// happens, and nothing depends on a clock.
type aheadGuard struct {
	bound   event.Time // milliseconds; > 0
	boundD  time.Duration
	started bool       // the start group has been judged
	max     event.Time // the stream's time, once started
	held    []heldEvent
}

type heldEvent struct {
	ev  *event.Event
	rec Record // Data cloned
}

// pass and reject are what the guard does with an event: hand it to the
// operators, or send it to the dead letters with a reason.
type guardSink interface {
	pass(ev *event.Event, line int64) error
	reject(rec Record, reason string) error
}

func (g *aheadGuard) offer(ev *event.Event, rec Record, out guardSink) error {
	if !g.started {
		g.hold(ev, rec)
		if len(g.held) == AheadConfirm {
			return g.judgeStart(out)
		}
		return nil
	}
	if ev.Time <= g.max.Plus(int64(g.bound)) {
		if err := g.rejectHeld(out, g.max); err != nil {
			return err
		}
		return g.pass(ev, rec.Line, out)
	}
	if len(g.held) > 0 {
		d := ev.Time - g.held[0].ev.Time
		if d < -g.bound || d > g.bound {
			if err := g.rejectHeld(out, g.max); err != nil {
				return err
			}
		}
	}
	g.hold(ev, rec)
	if len(g.held) < AheadConfirm {
		return nil
	}
	for _, h := range g.held {
		if err := g.pass(h.ev, h.rec.Line, out); err != nil {
			return err
		}
	}
	g.held = g.held[:0]
	return nil
}

// end judges what is held when the input ends: a start group, or an
// unconfirmed jump (outliers).
func (g *aheadGuard) end(out guardSink) error {
	if !g.started {
		return g.judgeStart(out)
	}
	return g.rejectHeld(out, g.max)
}

func (g *aheadGuard) hold(ev *event.Event, rec Record) {
	rec.Data = bytes.Clone(rec.Data)
	g.held = append(g.held, heldEvent{ev: ev, rec: rec})
}

func (g *aheadGuard) pass(ev *event.Event, line int64, out guardSink) error {
	g.max = max(g.max, ev.Time)
	return out.pass(ev, line)
}

// judgeStart judges the held start events in input order, the stream's
// time starting at their lower median.
func (g *aheadGuard) judgeStart(out guardSink) error {
	if len(g.held) == 0 {
		return nil
	}
	times := make([]event.Time, len(g.held))
	for i, h := range g.held {
		times[i] = h.ev.Time
	}
	slices.Sort(times)
	median := times[(len(times)-1)/2]
	held := g.held
	g.held = nil
	g.started, g.max = true, median
	for _, h := range held {
		if h.ev.Time > g.max.Plus(int64(g.bound)) {
			if err := out.reject(h.rec, g.reason(h.ev.Time, "the stream (the median of its first events is "+median.String()+")")); err != nil {
				return err
			}
			continue
		}
		if err := g.pass(h.ev, h.rec.Line, out); err != nil {
			return err
		}
	}
	return nil
}

func (g *aheadGuard) rejectHeld(out guardSink, streamTime event.Time) error {
	for _, h := range g.held {
		if err := out.reject(h.rec, g.reason(h.ev.Time, "the stream (its newest time so far is "+streamTime.String()+")")); err != nil {
			return err
		}
	}
	g.held = g.held[:0]
	return nil
}

func (g *aheadGuard) reason(t event.Time, of string) string {
	return "time " + t.String() + " is more than " + g.boundD.String() + " ahead of " + of +
		"; an event so far ahead would move the watermark and make the rest late"
}

// AheadGuard is the far-ahead check of [SubtaskConfig.MaxAhead] for a
// caller that runs its own loop over records (the streaming job of
// package cep): the same judgement, with the caller's pass and reject.
// Events keep their input order through it. A checkpoint may only be
// taken while it holds nothing ([AheadGuard.Holding]); its state then is
// [AheadGuard.State].
type AheadGuard struct{ g aheadGuard }

// AheadSink is what an [AheadGuard] does with an event: Pass hands it on
// (line is its record's), Reject sends its record to the dead letters.
type AheadSink interface {
	Pass(ev *event.Event, line int64) error
	Reject(rec Record, reason string) error
}

type aheadSinkAdapter struct{ s AheadSink }

func (a aheadSinkAdapter) pass(ev *event.Event, line int64) error { return a.s.Pass(ev, line) }
func (a aheadSinkAdapter) reject(rec Record, reason string) error { return a.s.Reject(rec, reason) }

// NewAheadGuard returns a guard of bound (positive, whole milliseconds).
func NewAheadGuard(bound time.Duration) *AheadGuard {
	return &AheadGuard{g: aheadGuard{bound: event.Time(event.Millis(bound)), boundD: bound}}
}

// Offer judges ev, decoded from rec: out gets it now, or later with the
// events that follow it, or its record is rejected.
func (g *AheadGuard) Offer(ev *event.Event, rec Record, out AheadSink) error {
	return g.g.offer(ev, rec, aheadSinkAdapter{out})
}

// End judges what is held at the end of the input.
func (g *AheadGuard) End(out AheadSink) error { return g.g.end(aheadSinkAdapter{out}) }

// Holding reports how many events the guard holds.
func (g *AheadGuard) Holding() int { return len(g.g.held) }

// AheadState is the state of an [AheadGuard] that holds nothing: whether
// the start group was judged, and the stream's time.
type AheadState struct {
	Started bool
	Max     event.Time
}

// State returns the guard's state. REQUIRES: Holding() == 0.
func (g *AheadGuard) State() AheadState { return AheadState{Started: g.g.started, Max: g.g.max} }

// Restore sets the guard to st, before its first Offer.
func (g *AheadGuard) Restore(st AheadState) { g.g.started, g.g.max = st.Started, st.Max }
