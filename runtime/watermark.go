package runtime

import (
	"errors"
	"time"

	"github.com/cepheus-cep/cepheus/event"
)

// WatermarkGenerator generates the watermarks of one source partition with
// bounded out-of-orderness, as Flink's BoundedOutOfOrdernessWatermarks: it
// tracks the largest timestamp seen, and its watermark is that maximum
// minus the bound minus 1 ms, so an event exactly bound behind the maximum
// is still on time.
//
// Emission is driven by record timestamps only, never by a wall-clock
// ticker, so a replay produces the same watermarks: every emitEvery events
// the generator offers its current watermark, and it is emitted only if it
// is past the last one emitted (watermarks never go back or repeat).
//
// A WatermarkGenerator is not safe for concurrent use.
type WatermarkGenerator struct {
	bound   int64 // milliseconds
	every   int
	n       int // events since the last offer
	seen    bool
	max     event.Time
	emitted event.Watermark
}

// NewWatermarkGenerator returns a generator for an out-of-orderness bound
// (in whole milliseconds; a finer part is truncated) that offers a
// watermark every emitEvery events (0 means 1). Before any event its
// watermark is event.MinTime.
func NewWatermarkGenerator(outOfOrderness time.Duration, emitEvery int) (*WatermarkGenerator, error) {
	if outOfOrderness < 0 {
		return nil, errors.New("runtime: negative out-of-orderness bound")
	}
	if emitEvery < 0 {
		return nil, errors.New("runtime: negative watermark emission interval")
	}
	if emitEvery == 0 {
		emitEvery = 1
	}
	return &WatermarkGenerator{
		bound:   event.Millis(outOfOrderness),
		every:   emitEvery,
		max:     event.MinTime,
		emitted: event.MinTime,
	}, nil
}

// OnEvent records an event's timestamp. When this event completes a group
// of emitEvery events and the watermark has advanced past the last one
// emitted, it returns the new watermark and true: the caller forwards it
// after the event.
func (g *WatermarkGenerator) OnEvent(ts event.Time) (event.Watermark, bool) {
	if !g.seen || ts > g.max {
		g.max = ts
		g.seen = true
	}
	if g.n++; g.n < g.every {
		return 0, false
	}
	g.n = 0
	if w := g.Current(); w > g.emitted {
		g.emitted = w
		return w, true
	}
	return 0, false
}

// Current returns the watermark the events so far allow: the largest
// timestamp - bound - 1, or event.MinTime before the first event (and for
// timestamps so small that the subtraction would underflow).
func (g *WatermarkGenerator) Current() event.Watermark {
	if !g.seen || int64(g.max) < int64(event.MinTime)+g.bound+1 {
		return event.MinTime
	}
	return g.max - event.Time(g.bound) - 1
}

// Emitted returns the last watermark OnEvent or Final returned
// (event.MinTime before the first).
func (g *WatermarkGenerator) Emitted() event.Watermark { return g.emitted }

// Final returns the watermark that ends a bounded input, event.MaxTime: it
// fires every timer that is left.
func (g *WatermarkGenerator) Final() event.Watermark {
	g.emitted = event.MaxTime
	return event.MaxTime
}
