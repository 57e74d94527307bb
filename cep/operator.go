package cep

import (
	"errors"
	"fmt"
	"slices"

	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/nfa"
)

// TimeMode is the notion of time of an [Operator].
type TimeMode uint8

// The time modes.
const (
	// EventTime orders elements by their record timestamps; a watermark
	// releases them (Flink's event time). This is the default.
	EventTime TimeMode = iota
	// ProcessingTime stamps each element with the operator's processing
	// clock when it arrives (Flink's processing time).
	ProcessingTime
)

func (m TimeMode) String() string {
	switch m {
	case EventTime:
		return "event time"
	case ProcessingTime:
		return "processing time"
	}
	return fmt.Sprintf("TimeMode(%d)", m)
}

// OperatorConfig configures an [Operator]. The same configuration (the same
// compiled pattern in particular) must be given to [RestoreOperator].
type OperatorConfig struct {
	// NFA is the compiled pattern; required.
	NFA *nfa.NFA
	// MaxPartialMatches caps the partial matches of one key's run
	// ([nfa.Run.SetMaxPartialMatches]); 0 means unlimited. Over the cap the
	// partial matches that started latest are dropped and counted in
	// Stats.DroppedPartialMatches (docs/decisions.md, "Per-key limits"). It
	// is configuration, not state: a restore may give another value.
	MaxPartialMatches int
	// Key returns the partition key of an event. nil puts every event in
	// one global partition (key "").
	Key func(*event.Event) event.Key
	// TimeMode is EventTime (the default) or ProcessingTime.
	TimeMode TimeMode
	// Less optionally orders elements with equal timestamps (Flink's
	// EventComparator); it must be a strict weak order. The sort is stable:
	// elements it does not order keep their arrival order, which is the
	// only order when Less is nil. In processing time a non-nil Less makes
	// the operator buffer elements until the processing clock moves on.
	Less func(a, b *event.Event) bool
	// MaxBufferedEvents caps the elements one key may hold waiting for the
	// watermark (or, in processing time with Less, for the clock); 0 means
	// unlimited. An element over the cap goes out as ItemOverflow and is
	// counted in Stats.Overflow, so results then differ from an unlimited
	// run (docs/decisions.md, "Per-key limits").
	MaxBufferedEvents int
	// StepDeadlines advances each key's run to each of its deadlines in
	// turn before a later time, as [SharedRule].StepDeadlines does.
	StepDeadlines bool
}

// ErrInvalidConfig marks the errors of [NewOperator] and [RestoreOperator]
// for a bad [OperatorConfig].
var ErrInvalidConfig = errors.New("cep: invalid operator config")

func (c *OperatorConfig) validate() error {
	var errs []error
	if c.NFA == nil {
		errs = append(errs, fmt.Errorf("%w: NFA is required", ErrInvalidConfig))
	}
	if c.TimeMode > ProcessingTime {
		errs = append(errs, fmt.Errorf("%w: unknown time mode %d", ErrInvalidConfig, c.TimeMode))
	}
	if c.MaxBufferedEvents < 0 {
		errs = append(errs, fmt.Errorf("%w: MaxBufferedEvents is %d, want >= 0", ErrInvalidConfig, c.MaxBufferedEvents))
	}
	return errors.Join(errs...)
}

// ItemKind says what an [Item] carries.
type ItemKind uint8

// The kinds of output item. The zero ItemKind is not a valid kind.
const (
	// ItemMatch is a complete match (Item.Match), released at Item.At.
	ItemMatch ItemKind = iota + 1
	// ItemTimeout is a partial match whose window expired (Item.Match),
	// reported with the time Flink gives it (start + window, or previous
	// event + gap window) in Item.At.
	ItemTimeout
	// ItemLate is an element at or behind the watermark (Item.Event, with
	// its record timestamp in Item.At): Flink's late-data side output.
	ItemLate
	// ItemOverflow is an element refused because its key already buffers
	// MaxBufferedEvents elements (Item.Event, timestamp in Item.At).
	ItemOverflow
	// ItemWatermark is a watermark forwarded downstream (Item.Watermark,
	// also in Item.At), after everything it released.
	ItemWatermark
)

var itemKindNames = [...]string{"", "match", "timeout", "late", "overflow", "watermark"}

func (k ItemKind) String() string {
	if k > 0 && int(k) < len(itemKindNames) {
		return itemKindNames[k]
	}
	return fmt.Sprintf("ItemKind(%d)", k)
}

// Item is one output of the operator. Kind says which fields are set.
type Item struct {
	Kind ItemKind
	// Rule is, in the output of a [SharedOperator], the id of the rule a
	// match or timeout belongs to, and [AllRules] for the late,
	// overflowing and watermark items, which concern every rule. An
	// [Operator] hosts one rule and leaves it zero.
	Rule int
	// Key is the partition key the item belongs to (not set for
	// ItemWatermark).
	Key event.Key
	// Match holds the events of a match or of a timed-out partial match,
	// by stage position ([nfa.NFA.Stages]).
	Match nfa.Match
	// At is the item's timestamp: for a match, the timestamp of the element
	// or time advance that released it (Flink's output record timestamp);
	// for a timeout, the time the partial match expired; for a late or
	// overflowing element, its timestamp; for a watermark, the watermark.
	At event.Time
	// Wake is, for a match or timeout released while the operator fired a
	// key's timer (a watermark or a processing-time advance), the due time
	// of that timer; zero (with Woken false) when an element released it.
	Wake  event.Time
	Woken bool
	// Event is the late or overflowing element.
	Event *event.Event
	// Watermark is the forwarded watermark.
	Watermark event.Time
}

// Output collects the items of operator calls, appended in emission order.
// Callers reuse an Output across calls by calling Reset; the operator never
// keeps a reference to it.
type Output struct {
	Items []Item
}

// Reset empties o, keeping its storage.
func (o *Output) Reset() {
	clear(o.Items)
	o.Items = o.Items[:0]
}

// Stats are the operator's counters and gauges.
type Stats struct {
	// Late counts elements found at or behind the watermark.
	Late uint64
	// Overflow counts elements refused by MaxBufferedEvents.
	Overflow uint64
	// DroppedPartialMatches counts partial matches discarded by the NFA's
	// partial-match limit.
	DroppedPartialMatches uint64
	// Matches and Timeouts count the emitted matches and timed-out partial
	// matches.
	Matches  uint64
	Timeouts uint64
	// Keys is the number of keys holding state now.
	Keys int
	// BufferedEvents is the number of elements buffered now, over all keys.
	BufferedEvents int
}

// counters are the monotonic part of Stats; they are checkpointed.
type counters struct {
	late, overflow, dropped, matches, timeouts uint64
}

// KeyError is the error of a key's run (for example a skip strategy with
// throw-on-miss that missed). The operator has failed: like Flink, which
// fails the job, it returns the same error from every later call, and the
// caller restores the last snapshot.
type KeyError struct {
	Key event.Key
	Err error
}

func (e *KeyError) Error() string { return fmt.Sprintf("cep: key %q: %v", string(e.Key), e.Err) }

// Unwrap returns the run's error.
func (e *KeyError) Unwrap() error { return e.Err }

// Operator is the keyed CEP operator of one subtask (Flink's CepOperator):
// per-key element buffers, per-key NFA runs, and the timers that release
// them. It is not safe for concurrent use; one goroutine owns it.
type Operator struct {
	cfg  OperatorConfig
	less func(a, b *event.Event) int // from cfg.Less; nil: arrival order

	keys   map[event.Key]*keyState
	timers timerHeap

	watermark event.Time
	procTime  event.Time
	buffered  int
	stats     counters

	err   error       // sticky: set by the first run error
	res   nfa.Result  // scratch, reused across run calls
	fired []*keyState // scratch for fireTimers
	// wake is the due time of the key fireTimers is firing (woken is set
	// while it does): Item.Wake of what that releases.
	wake  event.Time
	woken bool

	// Most keys hold state only for a moment (an event that starts no
	// partial match): their records and runs are recycled, not reallocated.
	freeKeys []*keyState
	freeRuns []*nfa.Run
	evsPool  evsPool
}

// keyState is everything the operator holds for one key.
type keyState struct {
	key event.Key
	// order is the key's rank: the Seq of the element that created its
	// state (its arrival position, docs/decisions.md). Keys due at the
	// same time fire by rank, then by key bytes.
	order uint64
	run   *nfa.Run // nil until the key's first element reaches the NFA
	buf   []bucket // buffered elements by ascending timestamp
	n     int      // elements in buf
	// timer is the timer of the key's earliest buffered element, deadline
	// that of its run's (in a SharedOperator: its rules') earliest window
	// deadline (timers.go).
	timer    timerRef
	deadline timerRef
	// rules holds, in a SharedOperator, the state of each rule at this key
	// (in the operator's rule order); nil in an Operator.
	rules []ruleSlot
	dirty bool // in a SharedOperator: listed in its dirty keys
	warm  bool // in a SharedOperator: touched since the last sweep
	snap  bool // in a SharedOperator: not yet written by the snapshot in progress
	// quiet is, in a SharedOperator, the quiet start at this uniform key
	// (quiet.group != nil), if any.
	quiet quietStart
}

// bucket holds the elements buffered at one timestamp, in arrival order.
type bucket struct {
	ts  event.Time
	evs []*event.Event
}

// NewOperator returns an operator with no state: the watermark at
// event.MinTime and the processing clock at 0.
func NewOperator(cfg OperatorConfig) (*Operator, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return newOperator(cfg), nil
}

func newOperator(cfg OperatorConfig) *Operator {
	o := &Operator{
		cfg:       cfg,
		keys:      map[event.Key]*keyState{},
		watermark: event.MinTime,
	}
	o.less = compareFunc(cfg.Less)
	return o
}

// compareFunc turns a Less into a comparison for a stable sort; nil stays
// nil (arrival order).
func compareFunc(less func(a, b *event.Event) bool) func(a, b *event.Event) int {
	if less == nil {
		return nil
	}
	return func(a, b *event.Event) int {
		switch {
		case less(a, b):
			return -1
		case less(b, a):
			return 1
		}
		return 0
	}
}

// Watermark returns the current watermark (event.MinTime before the first).
func (o *Operator) Watermark() event.Time { return o.watermark }

// ProcessingTime returns the processing clock (0 before the first
// SetProcessingTime).
func (o *Operator) ProcessingTime() event.Time { return o.procTime }

// Stats returns the counters and gauges.
func (o *Operator) Stats() Stats {
	return Stats{
		Late:                  o.stats.late,
		Overflow:              o.stats.overflow,
		DroppedPartialMatches: o.stats.dropped,
		Matches:               o.stats.matches,
		Timeouts:              o.stats.timeouts,
		Keys:                  len(o.keys),
		BufferedEvents:        o.buffered,
	}
}

// ProcessElement takes one element with its record timestamp ts and appends
// what it releases to out.
//
// In event time an element with ts <= the watermark is late (ItemLate, and
// counted); any other is buffered under its key until a watermark passes
// it. In processing time ts is ignored: the element is stamped with the
// processing clock and, without Less, fed to its key's run at once;
// with Less it is buffered until the clock moves past its stamp.
//
// The operator keeps ev (the NFA keeps pointers to matched events): the
// caller must not modify it afterwards.
// REQUIRES: ev != nil, out != nil.
func (o *Operator) ProcessElement(ev *event.Event, ts event.Time, out *Output) error {
	if o.err != nil {
		return o.err
	}
	var k event.Key
	if o.cfg.Key != nil {
		k = o.cfg.Key(ev)
	}
	switch {
	case o.cfg.TimeMode == ProcessingTime && o.less == nil:
		// Elements cannot arrive out of order in processing time.
		return o.processNow(k, ev, out)
	case o.cfg.TimeMode == ProcessingTime:
		o.buffer(k, ev, o.procTime, out)
	case ts > o.watermark:
		o.buffer(k, ev, ts, out)
	default:
		o.stats.late++
		out.Items = append(out.Items, Item{Kind: ItemLate, Key: k, At: ts, Event: ev})
	}
	return nil
}

// ProcessWatermark sets the watermark to w (unconditionally, as Flink
// does), then, in event time, fires the keys that are due: every key with a
// buffered element at or before w or a window deadline at or before w, in
// the order of the key's earliest due time (ties: the key whose state was
// created first). A fired key feeds its elements up to w to its run in timestamp
// order, each timestamp preceded by advancing the run to it, and finally
// advances the run to w. The watermark itself is appended last.
// REQUIRES: out != nil.
func (o *Operator) ProcessWatermark(w event.Time, out *Output) error {
	if o.err != nil {
		return o.err
	}
	o.watermark = w
	if o.cfg.TimeMode == EventTime {
		if err := o.fireTimers(w, out); err != nil {
			return err
		}
	}
	out.Items = append(out.Items, Item{Kind: ItemWatermark, At: w, Watermark: w})
	return nil
}

// SetProcessingTime sets the processing clock to t, then, in processing
// time, fires the keys that are due: a key whose buffered elements' timer
// (their stamp + 1) is at or before t feeds all of them to its run in
// timestamp order; every fired key, including one fired only because its
// window deadline is at or before t, then advances its run to t. In event
// time it only sets the clock.
// REQUIRES: out != nil.
func (o *Operator) SetProcessingTime(t event.Time, out *Output) error {
	if o.err != nil {
		return o.err
	}
	o.procTime = t
	if o.cfg.TimeMode == ProcessingTime {
		return o.fireTimers(t, out)
	}
	return nil
}

// keyState returns k's state, creating it ranked by rank (the Seq of the
// element that creates it).
func (o *Operator) keyState(k event.Key, rank uint64) *keyState {
	if ks := o.keys[k]; ks != nil {
		return ks
	}
	return o.newKeyState(k, rank)
}

// newKeyState creates the state of k, which has none, ranked by rank.
func (o *Operator) newKeyState(k event.Key, rank uint64) *keyState {
	var ks *keyState
	if n := len(o.freeKeys); n > 0 {
		ks = o.freeKeys[n-1]
		o.freeKeys[n-1] = nil
		o.freeKeys = o.freeKeys[:n-1]
		ks.key, ks.order = k, rank
	} else {
		ks = &keyState{key: k, order: rank}
	}
	o.keys[k] = ks
	return ks
}

func (o *Operator) runOf(ks *keyState) *nfa.Run {
	if ks.run == nil {
		if n := len(o.freeRuns); n > 0 {
			ks.run = o.freeRuns[n-1]
			o.freeRuns[n-1] = nil
			o.freeRuns = o.freeRuns[:n-1]
		} else {
			ks.run = o.cfg.NFA.NewRun()
		}
		ks.run.SetMaxPartialMatches(o.cfg.MaxPartialMatches)
	}
	return ks.run
}

// maxFree bounds the recycled key records and runs kept for reuse.
const maxFree = 1024

// release recycles the record and run of a key whose state was dropped.
func (o *Operator) release(ks *keyState) {
	if ks.run != nil && len(o.freeRuns) < maxFree {
		ks.run.Reset()
		o.freeRuns = append(o.freeRuns, ks.run)
	}
	if len(o.freeKeys) < maxFree {
		clear(ks.buf)
		// Stale heap entries may still point at ks: its timer generations
		// must keep growing so that they never look live again.
		gen, dgen := ks.timer.gen, ks.deadline.gen
		*ks = keyState{buf: ks.buf[:0]}
		ks.timer.gen, ks.deadline.gen = gen, dgen
		o.freeKeys = append(o.freeKeys, ks)
	}
}

// buffer stores ev under k at ts, or refuses it when k is full.
func (o *Operator) buffer(k event.Key, ev *event.Event, ts event.Time, out *Output) {
	ks := o.keys[k]
	if ks != nil && o.cfg.MaxBufferedEvents > 0 && ks.n >= o.cfg.MaxBufferedEvents {
		o.stats.overflow++
		out.Items = append(out.Items, Item{Kind: ItemOverflow, Key: k, At: ts, Event: ev})
		return
	}
	if ks == nil {
		ks = o.newKeyState(k, ev.Seq)
	}
	ks.insert(ev, ts, &o.evsPool)
	o.buffered++
	// The key's earliest element can only move earlier.
	if due := o.bufferDue(ts); !ks.timer.armed || due < ks.timer.due {
		o.timers.arm(ks, due)
	}
}

// insert buffers ev at ts, after the elements already buffered at ts.
// evsPool recycles the element slices of the buckets a key released, so
// that buffering allocates nothing in a steady state.
type evsPool [][]*event.Event

func (p *evsPool) get() []*event.Event {
	if n := len(*p); n > 0 {
		s := (*p)[n-1]
		(*p)[n-1] = nil
		*p = (*p)[:n-1]
		return s
	}
	return make([]*event.Event, 0, 1)
}

func (p *evsPool) put(s []*event.Event) {
	if len(*p) < maxFree && cap(s) <= 16 {
		for i := range s { // mostly one element: cheaper than clear's call
			s[i] = nil
		}
		*p = append(*p, s[:0])
	}
}

func (ks *keyState) insert(ev *event.Event, ts event.Time, pool *evsPool) {
	// Elements mostly arrive in timestamp order: look from the back.
	i := len(ks.buf)
	for i > 0 && ks.buf[i-1].ts > ts {
		i--
	}
	switch {
	case i > 0 && ks.buf[i-1].ts == ts:
		ks.buf[i-1].evs = append(ks.buf[i-1].evs, ev)
	case i == len(ks.buf):
		ks.buf = append(ks.buf, bucket{ts: ts, evs: append(pool.get(), ev)})
	default:
		ks.buf = slices.Insert(ks.buf, i, bucket{ts: ts, evs: append(pool.get(), ev)})
	}
	ks.n++
}

// bufferDue is the time of the timer of elements buffered at ts: the
// watermark passing ts in event time, the clock moving past ts in
// processing time (Flink registers ts+1 there).
func (o *Operator) bufferDue(ts event.Time) event.Time {
	if o.cfg.TimeMode == ProcessingTime && ts < event.MaxTime {
		return ts + 1
	}
	return ts
}

// processNow feeds ev to k's run at the processing clock (processing time
// without a comparator).
func (o *Operator) processNow(k event.Key, ev *event.Event, out *Output) error {
	ks := o.keyState(k, ev.Seq)
	run := o.runOf(ks)
	t := o.procTime
	if err := o.advanceRun(ks, run, t, out); err != nil {
		return err
	}
	if err := run.Process(ev, t, &o.res); err != nil {
		return o.fail(ks, err)
	}
	o.emit(ks, t, out)
	o.settle(ks)
	return nil
}

// fireTimers fires every key due at or before t. Each key fires at most
// once per call: firing drains everything due up to t, so its next due
// time is later than t, and re-arming after the loop keeps the loop finite
// even if that ever failed to hold.
func (o *Operator) fireTimers(t event.Time, out *Output) error {
	o.fired = o.fired[:0]
	for {
		ks, due := o.timers.popDue(t)
		if ks == nil {
			break
		}
		o.fired = append(o.fired, ks)
		o.wake, o.woken = due, true
		var err error
		if o.cfg.TimeMode == EventTime {
			err = o.fireEventTime(ks, t, out)
		} else {
			err = o.fireProcessingTime(ks, t, out)
		}
		o.woken = false
		if err != nil {
			// The operator has failed; its runs are undefined now.
			clear(o.fired)
			return err
		}
	}
	for _, ks := range o.fired {
		o.settle(ks)
	}
	clear(o.fired)
	return nil
}

// fireEventTime is Flink's onEventTime for one key: the buffered elements
// up to watermark w in timestamp order, then time advanced to w.
func (o *Operator) fireEventTime(ks *keyState, w event.Time, out *Output) error {
	n := 0
	for n < len(ks.buf) && ks.buf[n].ts <= w {
		n++
	}
	if err := o.drain(ks, n, out); err != nil {
		return err
	}
	return o.advance(ks, w, out)
}

// fireProcessingTime is Flink's onProcessingTime for one key, followed by
// advancing the run to the clock t so that windows expire without new
// elements.
func (o *Operator) fireProcessingTime(ks *keyState, t event.Time, out *Output) error {
	if len(ks.buf) > 0 && o.bufferDue(ks.buf[0].ts) <= t {
		if err := o.drain(ks, len(ks.buf), out); err != nil {
			return err
		}
	}
	return o.advance(ks, t, out)
}

// drain feeds the first n buckets of ks to its run: for each timestamp,
// advance the run to it, then process its elements sorted by Less.
func (o *Operator) drain(ks *keyState, n int, out *Output) error {
	if n == 0 {
		return nil
	}
	run := o.runOf(ks)
	for i := range n {
		b := &ks.buf[i]
		if err := o.advanceRun(ks, run, b.ts, out); err != nil {
			return err
		}
		if o.less != nil {
			slices.SortStableFunc(b.evs, o.less)
		}
		for _, ev := range b.evs {
			if err := run.Process(ev, b.ts, &o.res); err != nil {
				return o.fail(ks, err)
			}
			o.emit(ks, b.ts, out)
		}
		ks.n -= len(b.evs)
		o.buffered -= len(b.evs)
		o.evsPool.put(b.evs)
	}
	rest := copy(ks.buf, ks.buf[n:])
	clear(ks.buf[rest:])
	ks.buf = ks.buf[:rest]
	return nil
}

func (o *Operator) advance(ks *keyState, t event.Time, out *Output) error {
	return o.advanceRun(ks, o.runOf(ks), t, out)
}

// advanceRun advances run, ks's, to t and emits what it released; with
// StepDeadlines, to each deadline before t first, in turn.
func (o *Operator) advanceRun(ks *keyState, run *nfa.Run, t event.Time, out *Output) error {
	if o.cfg.StepDeadlines {
		prev := event.MinTime
		for d, ok := run.NextDeadline(); ok && d < t && d > prev; d, ok = run.NextDeadline() {
			if err := run.AdvanceTime(d, &o.res); err != nil {
				return o.fail(ks, err)
			}
			o.emit(ks, d, out)
			prev = d
		}
	}
	if err := run.AdvanceTime(t, &o.res); err != nil {
		return o.fail(ks, err)
	}
	o.emit(ks, t, out)
	return nil
}

// emit moves what the last run call released into out: matches first (at),
// then timeouts, as Flink's advanceTime emits pending matches before it
// processes timed-out sequences.
func (o *Operator) emit(ks *keyState, at event.Time, out *Output) {
	if len(o.res.Matches) == 0 && len(o.res.Timeouts) == 0 && o.res.Dropped == 0 {
		return // most run calls release nothing
	}
	for _, m := range o.res.Matches {
		out.Items = append(out.Items, Item{Kind: ItemMatch, Key: ks.key, Match: m, At: at, Wake: o.wake, Woken: o.woken})
	}
	for _, to := range o.res.Timeouts {
		out.Items = append(out.Items, Item{Kind: ItemTimeout, Key: ks.key, Match: to.Match, At: to.At, Wake: o.wake, Woken: o.woken})
	}
	o.stats.matches += uint64(len(o.res.Matches))
	o.stats.timeouts += uint64(len(o.res.Timeouts))
	o.stats.dropped += uint64(o.res.Dropped)
	o.res.Reset()
}

// settle drops the state of a key that holds nothing any more, or re-arms
// its timers for its earliest buffered element and its run's window
// deadline.
func (o *Operator) settle(ks *keyState) {
	if ks.n == 0 && (ks.run == nil || ks.run.Empty()) {
		o.timers.disarm(ks)
		delete(o.keys, ks.key)
		o.release(ks)
		return
	}
	o.armTimers(ks)
}

// armTimers arms ks's timers for its earliest buffered element and its
// run's window deadline, or disarms those it has none for; a timer already
// armed at the right time is left alone.
func (o *Operator) armTimers(ks *keyState) {
	switch {
	case len(ks.buf) == 0:
		o.timers.disarmKind(ks, bufferTimer)
	case !ks.timer.armed || ks.timer.due != o.bufferDue(ks.buf[0].ts):
		o.timers.arm(ks, o.bufferDue(ks.buf[0].ts))
	}
	d, ok := event.Time(0), false
	if ks.run != nil {
		d, ok = ks.run.NextDeadline()
	}
	switch {
	case !ok:
		o.timers.disarmKind(ks, deadlineTimer)
	case !ks.deadline.armed || ks.deadline.due != d:
		o.timers.armDeadline(ks, d)
	}
}

func (o *Operator) fail(ks *keyState, err error) error {
	o.res.Reset()
	o.err = &KeyError{Key: ks.key, Err: err}
	return o.err
}
