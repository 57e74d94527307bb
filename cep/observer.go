package cep

import "github.com/cepheus-cep/cepheus/event"

// Observer watches the alerts of an engine's runs ([WithObservers]), for
// statistics such as [Labels]; sinks write alerts, observers only look.
// Its methods are called on Run's goroutine and must not block.
type Observer interface {
	// OnAlert is called for every alert, in output order, before the
	// alert is written. a is valid only during the call (see [Alert];
	// keep a.Clone()).
	OnAlert(a *Alert)
}

// LateObserver is an [EventObserver] that also hears of the events that
// came late (behind the watermark: no rule saw them), as the run finds
// them, after their OnEvent.
type LateObserver interface {
	EventObserver
	OnLate(ev *event.Event)
}

// EventObserver is an [Observer] that also sees every event of a run,
// before the rules do.
type EventObserver interface {
	Observer
	// Fields names the event fields OnEvent reads: the engine decodes them
	// even when no rule reads them (and its alerts then show them).
	Fields() []string
	// Start is called at the start of each run, before its first event,
	// with the schema events are decoded into (the ruleset's plus every
	// observer's fields). An error stops the run before it starts.
	Start(schema *event.Schema) error
	// OnEvent is called for every event decoded, in input order. The
	// observer may keep ev and must not modify it.
	OnEvent(ev *event.Event)
}
