package cep

import (
	"errors"
	"slices"
	"strings"

	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/rules"
	"github.com/cepheus-cep/cepheus/runtime"
	"github.com/cepheus-cep/cepheus/runtime/state"
)

// This file runs a ruleset's velocity aggregates (docs/rules.md,
// "Velocity aggregates"): a runtime.Aggregator (or ParallelAggregator,
// WithAggregateWorkers) before keying, which holds
// each event until the watermark passes it and releases it with its
// aggregates set. A backtest's host operator runs it in front of its
// shared operators; a live job's coordinator runs it before routing (one
// for the whole job: an aggregate's key need not be any rule's).

// Aggregates returns the velocity aggregates the engine runs: the
// ruleset's, and those of the other versions a live job holds (the first
// declaration of a name wins).
func (e *Engine) Aggregates() []*rules.Aggregate {
	var out []*rules.Aggregate
	add := func(rs *rules.Ruleset) {
		for _, a := range rs.Aggregates {
			if !slices.ContainsFunc(out, func(o *rules.Aggregate) bool { return o.Name == a.Name }) {
				out = append(out, a)
			}
		}
	}
	add(e.cfg.ruleset)
	for _, cr := range e.rules {
		if cr.rs != nil {
			add(cr.rs)
		}
	}
	return out
}

// newAggregator returns the aggregation of the engine's aggregates on
// workers workers; nil without any.
func (e *Engine) newAggregator(workers int) (runtime.Aggregation, error) {
	decls := e.Aggregates()
	if len(decls) == 0 {
		return nil, nil
	}
	return newAggregation(aggregateSpecs(decls), workers)
}

// newAggregation returns the aggregation of specs: a runtime.Aggregator,
// or with workers > 1 a runtime.ParallelAggregator salting hot keys over
// all of them (the same values and state encoding).
func newAggregation(specs []runtime.AggregateSpec, workers int) (runtime.Aggregation, error) {
	if workers <= 1 {
		a, err := runtime.NewAggregator(specs)
		if err != nil {
			return nil, err // not a nil *Aggregator in an Aggregation
		}
		return a, nil
	}
	a, err := runtime.NewParallelAggregator(specs, workers, workers)
	if err != nil {
		return nil, err
	}
	a.SetHot(runtime.HotShare, aggHotMin)
	return a, nil
}

// aggHotMin is the least number of a release's events that makes a key
// hot (salted) when the aggregates have workers: runtime.HotMin; tests
// lower it so that the small releases of their logs salt keys.
var aggHotMin = runtime.HotMin

// aggregateSpecs are the runtime's specifications of decls.
func aggregateSpecs(decls []*rules.Aggregate) []runtime.AggregateSpec {
	specs := make([]runtime.AggregateSpec, len(decls))
	for i, d := range decls {
		specs[i] = runtime.AggregateSpec{
			KeySlots: d.KeySlots, Func: runtime.AggFunc(d.Func), ValueSlot: d.FieldSlot,
			Window: d.Window.Milliseconds(), Tumbling: d.Tumbling, Accepts: d.Accepts, Slot: d.Slot,
			Name: aggregateID(d),
		}
	}
	return specs
}

// AggregateStats are the figures of one velocity aggregate of a run.
type AggregateStats struct {
	Name string
	// Keys is the number of keys whose window holds at least one event
	// at the watermark (runtime.Aggregator.KeyCounts: exact, the same on
	// any number of workers; none at the end of a bounded input, whose
	// watermark is past every window), Dropped the events forgotten at
	// the bound of a key's window (its values then undercount).
	Keys    int
	Dropped uint64
	// HotKeys is the number of keys with a large share of the events
	// recently (more than 20% of a watermark's release, at least 64, in
	// the last minute of event time): the metric of skew.
	HotKeys int
}

// aggregateStats returns the figures of each aggregate of e run by a,
// and the events a holds (nil, 0 without).
func aggregateStats(e *Engine, a runtime.Aggregation) ([]AggregateStats, int) {
	if a == nil {
		return nil, 0
	}
	decls := e.Aggregates()
	keys, dropped, hot := a.KeyCounts(), a.Dropped(), a.HotKeys()
	var out []AggregateStats
	for i, d := range decls {
		if i < len(keys) {
			out = append(out, AggregateStats{Name: d.Name, Keys: keys[i], Dropped: dropped[i], HotKeys: hot[i]})
		}
	}
	return out, a.Len()
}

// aggregateSignature identifies the aggregates of e: their declarations
// and slots (the checkpoints of earlier builds hold it as it is).
func aggregateSignature(e *Engine) string {
	var b strings.Builder
	for _, a := range e.Aggregates() {
		b.WriteString(aggregateID(a))
		b.WriteByte(0)
	}
	return b.String()
}

// aggregateID identifies the aggregate a: its declaration and slot. A
// restore gives an aggregate the windows of the aggregate of its id in the
// state (runtime.AggregateSpec.Name): those of a declaration another
// version changed start empty.
func aggregateID(a *rules.Aggregate) string {
	return a.Source + string([]byte{byte(a.Slot), byte(a.Slot >> 8)})
}

// errAggregatesProcessingTime refuses aggregates without event time.
var errAggregatesProcessingTime = errors.New("cep: velocity aggregates need event time: their windows are of event time")

// aggregateRecord is the key of the backtest host's aggregator state.
func (e *Engine) aggregateRecord() state.Key {
	return state.Key{Operator: state.OperatorID("cep/" + e.cfg.ruleset.Name + "/aggregates")}
}

// FillAggregates sets the velocity aggregates aggs in events (in arrival
// order), as a backtest computes them over those events alone: for the
// tests written in ruleset files.
func FillAggregates(aggs []*rules.Aggregate, events []*event.Event) error {
	if len(aggs) == 0 {
		return nil
	}
	a, err := runtime.NewAggregator(aggregateSpecs(aggs))
	if err != nil {
		return err
	}
	for _, ev := range events {
		a.Add(ev)
	}
	return a.Advance(event.MaxTime, func(*event.Event) error { return nil })
}

// alertNulls marks, in a schema of n slots, the slots of the aggregates
// aggs that rule r's alerts show as null: those keyed by other fields
// than r's key fields that r does not read (nil when there is none).
// An event's aggregates keyed by the rule's key are what a Kafka job
// computes on the rule's partition of the events, and the others are not
// computed there (docs/decisions.md, "Velocity aggregates"): so an alert
// shows the same everywhere.
func alertNulls(r *rules.Rule, aggs []*rules.Aggregate, n int) []bool {
	var null []bool
	for _, a := range aggs {
		if sameFields(a.KeyFields, r.KeyFields) || slices.Contains(r.Aggregates, a.Name) || a.Slot >= n {
			continue
		}
		if null == nil {
			null = make([]bool, n)
		}
		null[a.Slot] = true
	}
	return null
}

// sameFields reports whether a and b hold the same fields, in any order.
func sameFields(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for _, f := range a {
		if !slices.Contains(b, f) {
			return false
		}
	}
	return true
}
