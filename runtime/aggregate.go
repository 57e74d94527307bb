package runtime

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"math/big"
	"slices"

	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/runtime/state"
)

// This file is the velocity aggregates' stage: events held until the
// watermark passes them, then released in time order with, in a slot of
// each, an aggregate over the events of its key in a window before its
// time (count, sum, avg, min, max, distinct count; sliding or tumbling).
// It knows nothing of rules: the front end gives it specifications.

// AggFunc is the function of an aggregate.
type AggFunc uint8

// The functions, in the order of rules.AggFunc.
const (
	AggCount AggFunc = iota
	AggSum
	AggAvg
	AggMin
	AggMax
	AggDistinct
)

// AggregateSpec is one aggregate.
type AggregateSpec struct {
	// KeySlots are the slots of the key fields: events with equal values
	// there are counted together; an event with a null key gets a null
	// value and counts nowhere.
	KeySlots []int
	Func     AggFunc
	// ValueSlot is the slot Func reads (-1 for AggCount). A null (or, for
	// sum, avg, min and max, non-numeric) value does not count.
	ValueSlot int
	// Window is the window's length in milliseconds (positive). Sliding:
	// the events of the key with a time in (t-Window, t] count at time t;
	// Tumbling: those in [floor(t/Window)*Window, t].
	Window   int64
	Tumbling bool
	// Accepts says which events count (nil: all); every event of the key
	// gets the value, whether it counts or not.
	Accepts func(*event.Event) bool
	// Slot is where the value goes: an int for count and distinct, a
	// float for the others; over no event 0 for count, distinct and sum,
	// null for avg, min and max.
	Slot int
	// MaxPerKey bounds the events a key's window holds (0: 100,000): past
	// it the oldest are forgotten early (counted in Dropped), and the
	// key's values undercount.
	MaxPerKey int
	// Name identifies the aggregate in the state (AppendBinary): a
	// RestoreMatching of a state written under other specifications gives
	// each spec the windows of the spec of its Name there. Empty: the
	// windows are never taken over.
	Name string
}

// DefaultMaxPerKey is the default of AggregateSpec.MaxPerKey.
const DefaultMaxPerKey = 100_000

// Aggregator holds events until the watermark passes them and releases
// them in time order (ties in arrival order) with their aggregates set.
// Every event of a time counts at that time, whatever their arrival
// order: an event's values are exact at its timestamp. Sums are exact
// (the window's values summed without rounding, rounded once), so a value
// does not depend on the order events came in. An Aggregator is used by
// one goroutine.
type Aggregator struct {
	specs   []AggregateSpec
	keys    []map[aggKey]*aggWindow // by spec
	pending pendingHeap
	taken   []pendingEvent // the events of an Advance
	// kept are the events an Advance released (counted, their values
	// set) and did not hand out, its out having failed: the next Advance
	// hands them out first (handOut).
	kept    []pendingEvent
	arrival uint64
	wm      event.Watermark
	dropped []uint64
	group   []*event.Event
	keyBuf  []byte
	groupKs [][]aggKey // by spec, the group's keys (ok false: null)
	groupOK [][]bool
	sweepAt int // releases until the next sweep of empty windows
	// hot are, by aggregate, the keys with more than HotShare of a
	// release's events (at least HotMin) in the releases since the
	// watermark passed hotSince + HotPeriod: the metric of skew.
	hot      []map[aggKey]bool
	hotSince event.Watermark
	hotN     map[aggKey]int
}

// The detection of hot keys: a key with more than HotShare of the events
// of a release, and at least HotMin of them, is hot for HotPeriod of
// event time (Aggregator.HotKeys).
const (
	HotShare  = 0.2
	HotMin    = 64
	HotPeriod = event.Time(60_000)
)

// HotKeys returns, per aggregate, the number of keys hot recently (the
// metric of skew: a hot key's window is the one the work of its
// aggregate concentrates on).
func (a *Aggregator) HotKeys() []int {
	out := make([]int, len(a.specs))
	for i := range out {
		if i < len(a.hot) {
			out[i] = len(a.hot[i])
		}
	}
	return out
}

// noteHot counts the keys of the events a release takes.
func (a *Aggregator) noteHot() {
	if len(a.taken) < HotMin {
		return
	}
	if a.hot == nil {
		a.hot, a.hotN = make([]map[aggKey]bool, len(a.specs)), map[aggKey]int{}
		for i := range a.hot {
			a.hot[i] = map[aggKey]bool{}
		}
	}
	if a.wm > a.hotSince+HotPeriod {
		for _, m := range a.hot {
			clear(m)
		}
		a.hotSince = a.wm
	}
	for si := range a.specs {
		clear(a.hotN)
		for _, p := range a.taken {
			if k, ok := a.key(p.ev, a.specs[si].KeySlots); ok {
				a.hotN[k]++
			}
		}
		for k, n := range a.hotN {
			if n >= HotMin && float64(n) > HotShare*float64(len(a.taken)) {
				a.hot[si][k] = true
			}
		}
	}
}

// NewAggregator returns an aggregator of specs at watermark MinTime.
func NewAggregator(specs []AggregateSpec) (*Aggregator, error) {
	a := &Aggregator{specs: append([]AggregateSpec(nil), specs...), wm: event.MinTime}
	for i := range a.specs {
		s := &a.specs[i]
		if s.Window <= 0 {
			return nil, fmt.Errorf("runtime: aggregate %d: window %d ms is not positive", i, s.Window)
		}
		if s.Func != AggCount && s.ValueSlot < 0 {
			return nil, fmt.Errorf("runtime: aggregate %d: no value slot", i)
		}
		if s.MaxPerKey <= 0 {
			s.MaxPerKey = DefaultMaxPerKey
		}
		a.keys = append(a.keys, map[aggKey]*aggWindow{})
	}
	a.dropped = make([]uint64, len(a.specs))
	a.groupKs = make([][]aggKey, len(a.specs))
	a.groupOK = make([][]bool, len(a.specs))
	return a, nil
}

// Close does nothing: an Aggregator has no goroutine (Aggregation).
func (a *Aggregator) Close() {}

// Len is the number of events held, those an Advance kept included.
func (a *Aggregator) Len() int { return len(a.pending) + len(a.kept) }

// Dropped returns, per aggregate, the events forgotten at MaxPerKey.
func (a *Aggregator) Dropped() []uint64 { return append([]uint64(nil), a.dropped...) }

// KeyCounts returns, per aggregate, the number of keys whose window
// holds at least one event at the watermark: an event of the key that
// counts, at a time in the window of the watermark's time (sliding: in
// (wm-Window, wm]; tumbling: in wm's bucket; none at MaxTime, the end of
// a bounded input). It is exact whatever the sweeps of empty windows
// have forgotten yet, and a ParallelAggregator of the same events gives
// the same, whatever its workers and salts. It changes nothing: it reads
// each window's newest entry (O(windows): for statistics, not per event).
func (a *Aggregator) KeyCounts() []int {
	out := make([]int, len(a.keys))
	if a.wm == event.MinTime {
		return out // nothing released yet (and the window start of MinTime overflows)
	}
	for si, m := range a.keys {
		s := &a.specs[si]
		for _, w := range m {
			if w.holdsAt(s, a.wm) {
				out[si]++
			}
		}
	}
	return out
}

// Keys returns the keys KeyCounts counts, summed over the aggregates.
func (a *Aggregator) Keys() int {
	n := 0
	for _, c := range a.KeyCounts() {
		n += c
	}
	return n
}

// EachHeld calls f with each event held, in no promised order: f may
// change the event's fields (and grow them), and returns false to have it
// held no more (it is then never released). For the switch of a live
// job's rules (the events held were decoded under the rules before), not
// per event.
func (a *Aggregator) EachHeld(f func(ev *event.Event) (keep bool)) {
	a.pending.filter(f)
	keepIf(&a.kept, f)
}

// Add takes an event in arrival order. An event at or behind the
// watermark is late: Add returns false, sets its aggregate slots to null
// and keeps nothing (the caller hands it on, to be found late).
func (a *Aggregator) Add(ev *event.Event) bool {
	return hold(a.specs, a.wm, &a.pending, &a.arrival, ev)
}

// hold is Add of an aggregator of specs at watermark wm, holding its
// events in pending numbered by arrival.
func hold(specs []AggregateSpec, wm event.Watermark, pending *pendingHeap, arrival *uint64, ev *event.Event) bool {
	if ev.Time <= wm {
		for _, s := range specs {
			if s.Slot < len(ev.Fields) {
				ev.Fields[s.Slot] = event.Null
			}
		}
		return false
	}
	*arrival++
	*pending = append(*pending, pendingEvent{ev: ev, arrival: *arrival})
	return true
}

// Advance moves the watermark to wm and hands out, in time order (ties in
// arrival order), every event held at or before it, its aggregates set.
// An error of out stops the handing out, not the release: out had the
// event it failed on; the events after it, counted and their values set
// as without the error, are kept, and the next Advance hands them out
// first, in order, whatever its watermark (it counts none of them again).
func (a *Aggregator) Advance(wm event.Watermark, out func(*event.Event) error) error {
	if err := handOut(&a.kept, out); err != nil {
		return err
	}
	if wm <= a.wm {
		return nil
	}
	a.wm = wm
	a.taken = a.pending.take(wm, a.taken)
	a.noteHot()
	var failed error
	sent := 0 // the events of a.taken out had
	for i := 0; i < len(a.taken); {
		t := a.taken[i].ev.Time
		a.group = a.group[:0]
		for ; i < len(a.taken) && a.taken[i].ev.Time == t; i++ {
			a.group = append(a.group, a.taken[i].ev)
		}
		a.release(t)
		if failed != nil {
			continue // released all the same: the windows go on exactly
		}
		for _, ev := range a.group {
			sent++
			if err := out(ev); err != nil {
				failed = err
				break
			}
		}
	}
	if failed != nil {
		a.kept = append(a.kept, a.taken[sent:]...)
	}
	clear(a.taken)
	if a.sweepAt--; a.sweepAt <= 0 {
		a.sweep()
	}
	return failed
}

// handOut hands out the events *kept, in order, and removes them; an
// error of out stops it, the events after the one it failed on kept.
func handOut(kept *[]pendingEvent, out func(*event.Event) error) error {
	k := *kept
	for i, p := range k {
		if err := out(p.ev); err != nil {
			n := copy(k, k[i+1:])
			clear(k[n:])
			*kept = k[:n]
			return err
		}
	}
	clear(k)
	*kept = k[:0]
	return nil
}

// keepIf keeps the events of *kept for which f holds, in order.
func keepIf(kept *[]pendingEvent, f func(*event.Event) bool) {
	h := pendingHeap(*kept)
	h.filter(f)
	*kept = h
}

// release counts the events of a.group, all of time t, then sets their
// values.
func (a *Aggregator) release(t event.Time) {
	for si := range a.specs {
		s := &a.specs[si]
		ks, oks := a.groupKs[si][:0], a.groupOK[si][:0]
		for _, ev := range a.group {
			k, ok := a.key(ev, s.KeySlots)
			ks, oks = append(ks, k), append(oks, ok)
			if !ok || s.Accepts != nil && !s.Accepts(ev) {
				continue
			}
			v := event.Null
			if s.ValueSlot >= 0 {
				v = ev.Field(s.ValueSlot)
			}
			if !counts(s.Func, v) {
				continue
			}
			w := a.keys[si][k]
			if w == nil {
				w = &aggWindow{}
				a.keys[si][k] = w
			}
			w.evict(s, t)
			// Its live entries: those before head left, not yet compacted.
			if len(w.entries)-w.head >= s.MaxPerKey {
				w.drop(s, 1)
				a.dropped[si]++
			}
			w.insert(s, aggEntry{t: t, v: v})
		}
		a.groupKs[si], a.groupOK[si] = ks, oks
		for i, ev := range a.group {
			if s.Slot >= len(ev.Fields) {
				continue
			}
			if !oks[i] {
				ev.Fields[s.Slot] = event.Null
				continue
			}
			w := a.keys[si][ks[i]]
			if w != nil {
				w.evict(s, t)
			}
			ev.Fields[s.Slot] = w.value(s)
		}
	}
}

// counts reports whether a value counts for fn.
func counts(fn AggFunc, v event.Value) bool {
	switch fn {
	case AggCount:
		return true
	case AggDistinct:
		return !v.IsNull()
	case AggMin, AggMax:
		f, ok := v.AsFloat()
		return ok && !math.IsNaN(f)
	}
	_, ok := v.AsFloat()
	return ok
}

// aggKey is a key of an aggregate, or a distinct value: one value as it
// is (an integral float as the int of its value, as rule keys treat
// them), or several as their encodings (kind keyParts). A struct, so that
// the key of a string field costs no allocation.
type aggKey struct {
	kind event.Kind
	s    string
	n    uint64
}

// keyParts is the kind of an aggKey of several values.
const keyParts event.Kind = 255

// keyOf is the aggKey of one non-null value.
func keyOf(v event.Value) aggKey {
	switch v.Kind() {
	case event.KindString:
		s, _ := v.AsString()
		return aggKey{kind: event.KindString, s: s}
	case event.KindBool:
		b, _ := v.AsBool()
		if b {
			return aggKey{kind: event.KindBool, n: 1}
		}
		return aggKey{kind: event.KindBool}
	case event.KindInt:
		n, _ := v.AsInt()
		return aggKey{kind: event.KindInt, n: uint64(n)}
	}
	f, _ := v.AsFloat()
	if f == math.Trunc(f) && math.Abs(f) < 1<<63 {
		return aggKey{kind: event.KindInt, n: uint64(int64(f))}
	}
	return aggKey{kind: event.KindFloat, n: math.Float64bits(f)}
}

// key is the key of ev at slots (ok false when one value is null).
func (a *Aggregator) key(ev *event.Event, slots []int) (aggKey, bool) {
	if len(slots) == 1 {
		v := ev.Field(slots[0])
		if v.IsNull() {
			return aggKey{}, false
		}
		return keyOf(v), true
	}
	b := a.keyBuf[:0]
	for _, s := range slots {
		v := ev.Field(s)
		if v.IsNull() {
			return aggKey{}, false
		}
		b = canonical(b, v)
	}
	a.keyBuf = b
	return aggKey{kind: keyParts, s: string(b)}, true
}

// appendKey appends the encoding of k (the state's).
func appendKey(b []byte, k aggKey) []byte {
	b = append(b, byte(k.kind))
	b = binary.AppendUvarint(b, k.n)
	b = binary.AppendUvarint(b, uint64(len(k.s)))
	return append(b, k.s...)
}

// decodeKey decodes a key appendKey wrote, and returns the rest of b.
func decodeKey(b []byte) (aggKey, []byte, bool) {
	if len(b) == 0 {
		return aggKey{}, nil, false
	}
	k := aggKey{kind: event.Kind(b[0])}
	b = b[1:]
	n, m := binary.Uvarint(b)
	if m <= 0 {
		return aggKey{}, nil, false
	}
	k.n, b = n, b[m:]
	l, m := binary.Uvarint(b)
	if m <= 0 || l > uint64(len(b)-m) {
		return aggKey{}, nil, false
	}
	b = b[m:]
	k.s, b = string(b[:l]), b[l:]
	return k, b, true
}

// canonical appends v's encoding in which an integral float and the int
// of its value are one (as rule keys treat them).
func canonical(b []byte, v event.Value) []byte {
	if f, ok := v.AsFloat(); ok && v.Kind() == event.KindFloat && f == math.Trunc(f) && math.Abs(f) < 1<<63 {
		return event.Int(int64(f)).AppendBinary(b)
	}
	return v.AppendBinary(b)
}

// sweep forgets the windows that hold nothing at the watermark.
func (a *Aggregator) sweep() {
	n := 0
	for si := range a.specs {
		s := &a.specs[si]
		for k, w := range a.keys[si] {
			w.evict(s, a.wm)
			if len(w.entries) == 0 {
				delete(a.keys[si], k)
			}
			n++
		}
	}
	a.sweepAt = max(64, n/8)
}

// aggEntry is one event counted in a window: its time and value (and,
// in a distinct count's window, the hash of its value's key, so that
// forgetting it does not read the value's string again).
type aggEntry struct {
	t event.Time
	v event.Value
	h uint64
}

// aggWindow is one key's window: its entries in time order (a ring) and
// what the function keeps of them. The fields a count or a distinct
// count reads at every event come first (with a partial's key, its first
// two cache lines), then min and max's candidates (evict reads them for
// those alone), then the exact sum (128 bytes), which was between them:
// a window out of the cache costs fewer lines.
type aggWindow struct {
	entries []aggEntry // in time order; entries[head:] are live
	head    int
	// first is the time of entries[head] (while live): evict reads the
	// ring only when an entry leaves (a tail key's ring is out of the cache).
	first event.Time
	seen  distinctSet // distinct: occurrences of each value in the window
	mhead int         // of mono
	mono  []aggEntry  // min or max: the candidates, monotonic
	nums  int         // entries with a numeric value
	sum   exactSum
}

func (w *aggWindow) live() []aggEntry { return w.entries[w.head:] }

// start is the time the window of s at time t starts at: the entries
// before it have left. REQUIRES: t > MinTime (no overflow).
func (s *AggregateSpec) start(t event.Time) event.Time {
	if s.Tumbling {
		return floorDiv(t, event.Time(s.Window)) * event.Time(s.Window)
	}
	return t - event.Time(s.Window) + 1
}

// holdsAt reports whether the window holds an entry at time t (one not
// evicted yet may have left): its newest, the last, is not before the
// window's start. It changes nothing.
func (w *aggWindow) holdsAt(s *AggregateSpec, t event.Time) bool {
	return w.head < len(w.entries) && w.entries[len(w.entries)-1].t >= s.start(t)
}

// evict forgets the entries that left the window at time t.
func (w *aggWindow) evict(s *AggregateSpec, t event.Time) {
	if w == nil {
		return
	}
	from := s.start(t) // entries before from have left
	for w.head < len(w.entries) && w.first < from {
		w.remove(s)
	}
	w.compact()
	if s.Func == AggMin || s.Func == AggMax {
		for w.mhead < len(w.mono) && w.mono[w.mhead].t < from {
			w.mhead++
		}
		if w.mhead > 32 && w.mhead*2 >= len(w.mono) {
			n := copy(w.mono, w.mono[w.mhead:])
			w.mono, w.mhead = w.mono[:n], 0
		}
	}
}

// drop forgets the n oldest entries (MaxPerKey; at most the live ones);
// the candidates of min and max are then worked out again from the live
// entries.
func (w *aggWindow) drop(s *AggregateSpec, n int) {
	for range n {
		w.remove(s)
	}
	if s.Func == AggMin || s.Func == AggMax {
		live := w.live()
		w.mono, w.mhead = w.mono[:0], 0
		for _, e := range live {
			w.candidate(s, e)
		}
	}
}

// remove forgets the oldest live entry.
func (w *aggWindow) remove(s *AggregateSpec) {
	e := w.entries[w.head]
	w.entries[w.head] = aggEntry{}
	w.head++
	if w.head < len(w.entries) {
		w.first = w.entries[w.head].t
	}
	switch s.Func {
	case AggSum, AggAvg:
		w.sum.addValue(e.v, -1)
		w.nums--
	case AggDistinct:
		w.seen.remove(e, w.live())
	}
}

// compact moves the live entries to the front once the dead ones are
// half of the slice (evict does the same for the candidates).
func (w *aggWindow) compact() {
	if w.head > 32 && w.head*2 >= len(w.entries) {
		n := copy(w.entries, w.entries[w.head:])
		clear(w.entries[n:])
		w.entries, w.head = w.entries[:n], 0
	}
}

// push appends e to the entries. When the slice is full, the live
// entries move to its front if a quarter of it is dead, else to a new
// slice of twice its size: append grows a large slice by a quarter, so a
// hot key's window was allocated anew many times over as it filled (most
// of the aggregator's garbage, and so of its collections).
func (w *aggWindow) push(e aggEntry) {
	if w.head == len(w.entries) {
		w.first = e.t
	}
	if n := len(w.entries); n == cap(w.entries) && n >= 256 {
		to := w.entries
		if w.head < n/4 {
			to = make([]aggEntry, n-w.head, 2*n)
		}
		m := copy(to[:n-w.head], w.entries[w.head:])
		if w.head >= n/4 {
			clear(w.entries[m:])
		}
		w.entries, w.head = to[:m], 0
	}
	w.entries = append(w.entries, e)
}

// insert counts an entry (its time not before the live ones').
func (w *aggWindow) insert(s *AggregateSpec, e aggEntry) {
	if s.Func == AggDistinct {
		e.h = distinctHash(keyOf(e.v))
	}
	w.insertHashed(s, e)
}

// insertHashed is insert of an entry whose h is already its value's
// distinctHash (distinct: a salted entry's, found for its salt).
func (w *aggWindow) insertHashed(s *AggregateSpec, e aggEntry) {
	w.push(e)
	switch s.Func {
	case AggSum, AggAvg:
		w.sum.addValue(e.v, 1)
		w.nums++
	case AggMin, AggMax:
		w.candidate(s, e)
	case AggDistinct:
		w.seen.add(e, w.live())
	}
}

// candidate adds e to the candidates of min or max, dropping those it
// beats: it outlives them.
func (w *aggWindow) candidate(s *AggregateSpec, e aggEntry) {
	f, _ := e.v.AsFloat()
	for len(w.mono) > w.mhead {
		g, _ := w.mono[len(w.mono)-1].v.AsFloat()
		if s.Func == AggMin && g >= f || s.Func == AggMax && g <= f {
			w.mono = w.mono[:len(w.mono)-1]
			continue
		}
		break
	}
	w.mono = append(w.mono, aggEntry{t: e.t, v: event.Float(f)})
}

// value is the aggregate over the window (nil: no event).
func (w *aggWindow) value(s *AggregateSpec) event.Value {
	n := 0
	if w != nil {
		n = len(w.entries) - w.head
	}
	switch s.Func {
	case AggCount:
		return event.Int(int64(n))
	case AggDistinct:
		if w == nil {
			return event.Int(0)
		}
		return event.Int(int64(w.seen.len()))
	case AggSum:
		if w == nil {
			return event.Float(0)
		}
		return event.Float(w.sum.value())
	case AggAvg:
		if w == nil || w.nums == 0 {
			return event.Null
		}
		return event.Float(w.sum.value() / float64(w.nums))
	}
	if w == nil || w.mhead == len(w.mono) {
		return event.Null
	}
	return w.mono[w.mhead].v
}

// distinctSet counts the values in a distinct count's window, by the
// hash of their key (an entry keeps its value's), in a distinctTable: a
// table by a uint64 costs less than a map by aggKey, which hashes the
// string of each value added and of each value forgotten, long after it
// was read. A value whose hash another value in the set has (a clash: a
// chance of about n²/2^65 in a window of n values) is counted by its key
// instead, in clash.
//
// A window of few entries has no table: its values are counted by
// scanning its entries' hashes, which the window's own reads bring into
// the cache, where a table's slots were more lines out of it (most keys'
// windows are small, and out of the cache: a tail key's event cost
// several times a hot key's). It gets a table past distinctSmall entries,
// and loses it at distinctSmall/2.
type distinctSet struct {
	byHash distinctTable
	clash  map[aggKey]int
	small  int32 // at most distinctSmall
	mapped bool  // byHash and clash count the values; else small does
}

// distinctSmall is the most entries a window counts the values of by
// scanning them.
const distinctSmall = 16

// distinctValue is a value in a distinctSet and its occurrences.
type distinctValue struct {
	key aggKey
	n   int
}

// distinctSeed seeds the hashes of a distinctSet's values.
var distinctSeed = maphash.MakeSeed()

// distinctHash is the hash of a distinct value's key (a variable, so
// that a test can make values clash).
var distinctHash = func(k aggKey) uint64 {
	if k.s != "" {
		return maphash.String(distinctSeed, k.s) ^ uint64(k.kind)
	}
	return maphash.Comparable(distinctSeed, k.n) ^ uint64(k.kind)
}

// add counts e's value (e.h its hash), the last of the window's live
// entries.
func (d *distinctSet) add(e aggEntry, live []aggEntry) {
	if !d.mapped {
		if len(live) <= distinctSmall {
			if !holds(live[:len(live)-1], e) {
				d.small++
			}
			return
		}
		d.mapped = true
		for _, x := range live[:len(live)-1] {
			d.count(x)
		}
	}
	d.count(e)
}

// holds reports whether one of entries has e's value.
func holds(entries []aggEntry, e aggEntry) bool {
	for _, x := range entries {
		if x.h == e.h && keyOf(x.v) == keyOf(e.v) {
			return true
		}
	}
	return false
}

// count counts e's value in the map.
func (d *distinctSet) count(e aggEntry) {
	k := keyOf(e.v)
	if n, ok := d.clash[k]; ok {
		d.clash[k] = n + 1
		return
	}
	i := d.byHash.find(e.h)
	switch {
	case i < 0:
		d.byHash.add(e.h, k)
	case d.byHash.slots[i].key == k:
		d.byHash.slots[i].n++
	default:
		if d.clash == nil {
			d.clash = map[aggKey]int{}
		}
		d.clash[k] = 1
	}
}

// remove forgets one occurrence of e's value (counted by add), which
// left the window's live entries.
func (d *distinctSet) remove(e aggEntry, live []aggEntry) {
	switch {
	case !d.mapped:
		if !holds(live, e) {
			d.small--
		}
		return
	case len(live) <= distinctSmall/2:
		d.byHash, d.clash, d.mapped, d.small = distinctTable{}, nil, false, 0
		for i, x := range live {
			if !holds(live[:i], x) {
				d.small++
			}
		}
		return
	}
	if len(d.clash) > 0 {
		k := keyOf(e.v)
		if n, ok := d.clash[k]; ok {
			if n <= 1 {
				delete(d.clash, k)
			} else {
				d.clash[k] = n - 1
			}
			return
		}
	}
	switch i := d.byHash.find(e.h); {
	case i < 0:
	case d.byHash.slots[i].n <= 1:
		d.byHash.remove(i)
	default:
		d.byHash.slots[i].n--
	}
}

// len is the number of distinct values.
func (d *distinctSet) len() int {
	if !d.mapped {
		return int(d.small)
	}
	return d.byHash.len() + len(d.clash)
}

// floorDiv is t/d rounded towards minus infinity.
func floorDiv(t, d event.Time) event.Time {
	q := t / d
	if t%d != 0 && t < 0 {
		q--
	}
	return q
}

// exactSum is a sum of float64 values without rounding: every finite
// float64 is an integer multiple of 2^-1074, so the sum is kept as that
// integer; NaN and infinities are counted apart.
type exactSum struct {
	n               big.Int
	term            big.Int
	nan, pinf, ninf int
	f               big.Float
}

// addValue adds sign*v, a number (sign 1 or -1). An int beyond 2^53,
// which a float64 cannot hold, is added in two parts that it can: the
// sum of ints is exact too.
func (s *exactSum) addValue(v event.Value, sign int) {
	if i, ok := v.AsInt(); ok && v.Kind() == event.KindInt && (i > 1<<53 || i < -(1<<53)) {
		hi := i &^ (1<<11 - 1) // at most 52 significant bits: exact in a float64
		s.add(float64(hi), sign)
		s.add(float64(i-hi), sign)
		return
	}
	f, _ := v.AsFloat()
	s.add(f, sign)
}

// add adds sign*x (sign 1 or -1).
func (s *exactSum) add(x float64, sign int) {
	switch {
	case math.IsNaN(x):
		s.nan += sign
		return
	case math.IsInf(x, 1):
		s.pinf += sign
		return
	case math.IsInf(x, -1):
		s.ninf += sign
		return
	case x == 0:
		return
	}
	mant, exp := math.Frexp(x) // x = mant * 2^exp, 0.5 <= |mant| < 1
	m := int64(mant * (1 << 53))
	shift := exp - 53 + 1074
	s.term.SetInt64(m)
	if shift >= 0 {
		s.term.Lsh(&s.term, uint(shift))
	} else {
		s.term.Rsh(&s.term, uint(-shift)) // subnormals: exact (the low bits are 0)
	}
	if sign < 0 {
		s.n.Sub(&s.n, &s.term)
	} else {
		s.n.Add(&s.n, &s.term)
	}
}

// value is the sum rounded to the nearest float64.
func (s *exactSum) value() float64 {
	switch {
	case s.nan > 0 || s.pinf > 0 && s.ninf > 0:
		return math.NaN()
	case s.pinf > 0:
		return math.Inf(1)
	case s.ninf > 0:
		return math.Inf(-1)
	}
	s.f.SetPrec(0).SetInt(&s.n)
	f, _ := new(big.Float).SetMantExp(&s.f, -1074).Float64()
	return f
}

// pendingEvent is a held event and its arrival number.
type pendingEvent struct {
	ev      *event.Event
	arrival uint64
}

// pendingHeap is the held events in arrival order; take orders them by
// time, then arrival (sorting a slice that is mostly in order costs
// little: the events come within the out-of-orderness bound).
type pendingHeap []pendingEvent

func comparePending(x, y pendingEvent) int {
	if c := cmp.Compare(x.ev.Time, y.ev.Time); c != 0 {
		return c
	}
	return cmp.Compare(x.arrival, y.arrival)
}

// filter keeps the events for which f holds, in their order.
func (h *pendingHeap) filter(f func(*event.Event) bool) {
	p, n := *h, 0
	for _, e := range p {
		if f(e.ev) {
			p[n] = e
			n++
		}
	}
	clear(p[n:])
	*h = p[:n]
}

// take removes the events at or before wm and returns them in order,
// reusing into.
func (h *pendingHeap) take(wm event.Watermark, into []pendingEvent) []pendingEvent {
	p := *h
	if !slices.IsSortedFunc(p, comparePending) {
		slices.SortFunc(p, comparePending)
	}
	n, _ := slices.BinarySearchFunc(p, wm, func(e pendingEvent, t event.Time) int {
		if e.ev.Time <= t {
			return -1
		}
		return 1
	})
	into = append(into[:0], p[:n]...)
	rest := copy(p, p[n:])
	clear(p[rest:])
	*h = p[:rest]
	return into
}

// aggregatorFormat is the version of AppendBinary's encoding: 2 names
// each spec's windows (AggregateSpec.Name); 1, an earlier build's, did
// not.
const aggregatorFormat = 2

// AppendBinary appends the aggregator's state: the watermark, the events
// held (in order) and, per spec, its name and each key's window entries.
// The events an Advance kept are among those held, before the others: at
// or before the watermark, where no other is (Add refuses them), so that
// a restore tells them apart.
func (a *Aggregator) AppendBinary(b []byte) []byte { return a.appendState(b, aggregatorFormat) }

// appendState is AppendBinary in format f (1: without the names, as an
// earlier build wrote it; for the tests).
func (a *Aggregator) appendState(b []byte, f uint64) []byte {
	b = binary.AppendUvarint(b, f)
	b = binary.AppendVarint(b, int64(a.wm))
	held := append(slices.Clone(a.kept), a.pending...)
	slices.SortFunc(held, comparePending)
	b = binary.AppendUvarint(b, uint64(len(held)))
	for _, p := range held {
		b = p.ev.AppendBinary(b)
	}
	for si := range a.specs {
		if f >= 2 {
			b = binary.AppendUvarint(b, uint64(len(a.specs[si].Name)))
			b = append(b, a.specs[si].Name...)
		}
		b = binary.AppendUvarint(b, a.dropped[si])
		b = binary.AppendUvarint(b, uint64(len(a.keys[si])))
		for k, w := range a.keys[si] {
			b = appendKey(b, k)
			live := w.live()
			b = binary.AppendUvarint(b, uint64(len(live)))
			for _, e := range live {
				b = binary.AppendVarint(b, int64(e.t))
				b = e.v.AppendBinary(b)
			}
		}
	}
	return b
}

// errAggregatorState is the error of a state that does not decode.
var errAggregatorState = errors.New("runtime: aggregator state does not decode")

// Restore replaces the aggregator's state with one AppendBinary wrote (an
// aggregator of the same specifications: a state that names other ones is
// an error).
func (a *Aggregator) Restore(b []byte) error {
	_, err := a.restore(b, false)
	return err
}

// RestoreMatching replaces the aggregator's state with one AppendBinary
// wrote under other specifications: the watermark and the events held,
// and for each spec the windows of the spec of its Name in the state (a
// spec the state does not name starts empty). A state of an earlier build
// (format 1) names no spec: every window starts empty. No event held is
// lost. (The events an Advance kept are restored kept, their values as
// they were: a spec the state does not name has none in them.) kept
// says, by spec, which took windows from the state.
func (a *Aggregator) RestoreMatching(b []byte) (kept []bool, err error) { return a.restore(b, true) }

func (a *Aggregator) restore(b []byte, matching bool) ([]bool, error) {
	d := event.Reader{B: b, Corrupt: errAggregatorState}
	f := d.Uvarint()
	if d.Err == nil && f > aggregatorFormat {
		return nil, state.LaterRecord("the aggregator's state", f, aggregatorFormat)
	}
	if d.Err == nil && f < 1 {
		return nil, fmt.Errorf("runtime: aggregator state of format %d, this build reads 1 to %d", f, aggregatorFormat)
	}
	wm, n := d.Varint(), d.Count()
	if d.Err != nil {
		return nil, d.Err
	}
	fresh, err := NewAggregator(a.specs)
	if err != nil {
		return nil, err
	}
	kept := make([]bool, len(a.specs))
	*a = *fresh
	a.wm = event.Watermark(wm)
	for range n {
		ev, rest, err := event.DecodeEvent(d.B)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", errAggregatorState, err)
		}
		d.B = rest
		a.arrival++
		if ev.Time <= a.wm {
			// Released by an Advance whose out failed (AppendBinary).
			a.kept = append(a.kept, pendingEvent{ev: ev, arrival: a.arrival})
			continue
		}
		a.pending = append(a.pending, pendingEvent{ev: ev, arrival: a.arrival})
	}
	if f == 1 && matching {
		return kept, nil // its windows cannot be told apart
	}
	// The windows of each spec of the state, in order: those of the same
	// specifications, or, matching, of the spec of the same name here.
	si := 0
	for ; d.Err == nil && (f == 1 && si < len(a.specs) || f >= 2 && len(d.B) > 0); si++ {
		to := si
		if f >= 2 {
			name := string(d.Bytes(d.Count()))
			switch {
			case matching:
				to = slices.IndexFunc(a.specs, func(s AggregateSpec) bool { return s.Name != "" && s.Name == name })
			case si >= len(a.specs) || a.specs[si].Name != name:
				return nil, fmt.Errorf("runtime: the aggregator state holds the windows of aggregate %q, which the aggregator does not have there", name)
			}
		}
		a.restoreWindows(&d, to)
		if to >= 0 {
			kept[to] = true
		}
	}
	if d.Err == nil && !matching && si != len(a.specs) {
		return nil, fmt.Errorf("runtime: the aggregator state holds the windows of %d aggregates, the aggregator has %d", si, len(a.specs))
	}
	if d.Err == nil && len(d.B) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the state", errAggregatorState, len(d.B))
	}
	if d.Err != nil {
		return nil, d.Err
	}
	return kept, nil
}

// restoreWindows reads one spec's windows from d into spec si (-1: read
// and dropped).
func (a *Aggregator) restoreWindows(d *event.Reader, si int) {
	var s *AggregateSpec
	if dropped := d.Uvarint(); si >= 0 {
		s = &a.specs[si]
		a.dropped[si] = dropped
	}
	for range d.Count() {
		if d.Err != nil {
			return
		}
		k, rest, ok := decodeKey(d.B)
		if !ok {
			d.Fail()
			return
		}
		d.B = rest
		m := d.Count()
		// A window of more than MaxPerKey entries (a salted
		// ParallelAggregator's before its bound was per key: up to
		// MaxPerKey in each partial; or a bound lowered) keeps its newest,
		// as the bound does, the others counted as dropped.
		over := 0
		if s != nil && m > s.MaxPerKey {
			over = m - s.MaxPerKey
			a.dropped[si] += uint64(over)
		}
		w := &aggWindow{}
		for j := range m {
			t := d.Varint()
			if d.Err != nil {
				return
			}
			v, rest, err := event.DecodeValue(d.B)
			if err != nil {
				d.Fail()
				return
			}
			d.B = rest
			if s != nil && j >= over {
				w.insert(s, aggEntry{t: event.Time(t), v: v})
			}
		}
		if s != nil {
			a.keys[si][k] = w
		}
	}
}
