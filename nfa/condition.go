package nfa

import "github.com/cepheus-cep/cepheus/event"

// Condition decides whether an event satisfies a stage. Implementations must
// be safe for concurrent use by several runs (compiled patterns are shared
// between goroutines); per-evaluation scratch space belongs in the
// implementation's own pools, never in shared fields.
//
// Eval must not panic: a condition that fails at run time (a type error, a
// missing field) returns false and counts the failure itself. The nfa package
// never sees expr or any other condition language.
type Condition interface {
	Eval(ev *event.Event, ctx *Context) bool
}

// CondFunc adapts a function to [Condition].
type CondFunc func(ev *event.Event, ctx *Context) bool

// Eval calls f.
func (f CondFunc) Eval(ev *event.Event, ctx *Context) bool { return f(ev, ctx) }

// True is the condition that accepts every event (a stage without where).
var True Condition = trueCond{}

type trueCond struct{}

func (trueCond) Eval(*event.Event, *Context) bool { return true }

// And returns a condition that holds when both a and b hold; b is evaluated
// only when a holds (Flink's RichAndCondition).
func And(a, b Condition) Condition { return andCond{a, b} }

// Or returns a condition that holds when a or b holds; b is evaluated only
// when a does not hold (Flink's RichOrCondition).
func Or(a, b Condition) Condition { return orCond{a, b} }

// Not returns the negation of c (Flink's RichNotCondition).
func Not(c Condition) Condition { return notCond{c} }

type andCond struct{ a, b Condition }

func (c andCond) Eval(ev *event.Event, ctx *Context) bool {
	return c.a.Eval(ev, ctx) && c.b.Eval(ev, ctx)
}

type orCond struct{ a, b Condition }

func (c orCond) Eval(ev *event.Event, ctx *Context) bool {
	return c.a.Eval(ev, ctx) || c.b.Eval(ev, ctx)
}

type notCond struct{ c Condition }

func (c notCond) Eval(ev *event.Event, ctx *Context) bool { return !c.c.Eval(ev, ctx) }

// Context is what an iterative condition may read besides the event itself:
// the events already accepted by each stage of the partial match under test
// (Flink's IterativeCondition.Context.getEventsForPattern) and the timestamp
// of the event being evaluated. A Context is valid only during the Eval call
// it is passed to; conditions must not keep it or the slices it returns.
type Context struct {
	run   *Run
	comp  *computation
	ts    event.Time
	ready bool
	match [][]*event.Event // by stage index, materialised on first use
	// store keeps match's storage across resets: conditions must not keep
	// what EventsAt returns.
	store [][]*event.Event
}

// Timestamp returns the timestamp of the event being evaluated (the record
// timestamp in event time, the processing time in processing-time mode).
func (c *Context) Timestamp() event.Time { return c.ts }

// Events returns the events that stage has accepted so far in this partial
// match, in the order it accepted them; the event under evaluation is not
// included. An unknown stage name yields nil.
func (c *Context) Events(stage string) []*event.Event {
	if c == nil || c.run == nil {
		return nil
	}
	i, ok := c.run.nfa.stageIndex[stage]
	if !ok {
		return nil
	}
	return c.EventsAt(i)
}

// EventsAt is [Context.Events] by stage index (see [NFA.Stages]); rule
// compilers resolve names to indexes once and call this on the hot path.
func (c *Context) EventsAt(stage int) []*event.Event {
	if c == nil || c.comp == nil {
		return nil
	}
	if !c.ready {
		c.ready = true
		c.store = c.run.currentMatchInto(c.store, c.comp)
		c.match = c.store
	}
	if stage < 0 || stage >= len(c.match) {
		return nil
	}
	return c.match[stage]
}

// LastAt is the last event of EventsAt(stage), nil when there is none.
// When the partial match's last event is that stage's (a condition on the
// stage after it), it is that event, found without materialising the match
// (EventsAt walks the buffer from it).
func (c *Context) LastAt(stage int) *event.Event {
	if c == nil || c.comp == nil {
		return nil
	}
	if p := c.comp.prev; !c.ready && p.live() && int(p.n.stage) == stage && lastAtShortcut {
		return p.n.ev.ev
	}
	evs := c.EventsAt(stage)
	if len(evs) == 0 {
		return nil
	}
	return evs[len(evs)-1]
}

// lastAtShortcut turns on LastAt's shortcut; tests turn it off to compare.
var lastAtShortcut = true

func (c *Context) reset(r *Run, comp *computation, ts event.Time) {
	c.run, c.comp, c.ts, c.ready, c.match = r, comp, ts, false, nil

}
