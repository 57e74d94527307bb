package runtime

import (
	"cmp"
	"hash/maphash"
	goruntime "runtime"
	"slices"
	"sync/atomic"

	"github.com/cepheus-cep/cepheus/event"
)

// This file is the velocity aggregates spread over workers, with salted
// two-phase aggregation for hot keys: a key's window is split into
// partial windows keyed by (key, salt), each owned by one worker; the
// events the watermark releases are counted in the partials of their
// worker (phase one, all workers at once), and each event's value is the
// merge of its key's partials at its time (phase two). A key is salted
// once it is hot: more than a share of the events of a release. The
// merge is exact (counts and sums add, exact sums included; min and max
// take the least and largest; a distinct count's partials hold disjoint
// values, the salt being the value's), so the values are those of the
// serial Aggregator, whatever the workers, salts and hot keys.

// ParallelAggregator is an Aggregator whose windows are spread over
// workers (goroutines, during Advance). Its state's encoding is the
// serial Aggregator's, so one restores the other's.
type ParallelAggregator struct {
	specs   []AggregateSpec
	workers []*aggWorker
	crew    *crew
	index   map[*aggWorker]int
	salts   int
	// hotShare: a key with more than this share of a release's events
	// (and at least hotMin of them) is salted from then on.
	hotShare float64
	hotMin   int
	hot      []map[aggKey]bool // by spec
	pending  pendingHeap
	taken    []pendingEvent
	arrival  uint64
	wm       event.Watermark
	seed     maphash.Seed

	batch []*event.Event
	keys  [][]aggKey // by spec, the batch's keys
	oks   [][]bool
	// By spec, by event: its key's hash and whether the key is salted
	// (plan); base: by spec, each worker's first answer of the spec.
	hashes  [][]uint64
	hots    [][]bool
	base    [][]int
	saltsOf []int // by event: the salt of an event of a hot key (plan)
	buckets [1024]struct {
		key aggKey
		n   int
	}
	dropped  []uint64
	hotCount int
	sweepAt  int // releases until the next sweep of empty windows
}

// sweep forgets the partial windows that hold nothing at the watermark.
func (a *ParallelAggregator) sweep() {
	n := 0
	for si := range a.specs {
		s := &a.specs[si]
		for _, w := range a.workers {
			for k, win := range w.partials[si] {
				win.evict(s, a.wm)
				if len(win.entries) == win.head {
					delete(w.partials[si], k)
				}
				n++
			}
		}
	}
	a.sweepAt = max(64, n/8)
}

// defaultHotMin is the least number of a release's events that makes a
// key hot.
const defaultHotMin = 64

// NewParallelAggregator returns an aggregator of specs over workers
// workers, salting a hot key over salts partials (at most workers;
// salts 1: no salting).
func NewParallelAggregator(specs []AggregateSpec, workers, salts int) (*ParallelAggregator, error) {
	serial, err := NewAggregator(specs) // checks the specifications
	if err != nil {
		return nil, err
	}
	workers, salts = max(workers, 1), min(max(salts, 1), max(workers, 1))
	a := &ParallelAggregator{specs: serial.specs, salts: salts, hotShare: 0.2, hotMin: defaultHotMin, wm: event.MinTime, seed: maphash.MakeSeed()}
	a.crew = newCrew(workers)
	a.index = map[*aggWorker]int{}
	for i := range workers {
		w := &aggWorker{a: a}
		a.index[w] = i
		for range specs {
			w.partials = append(w.partials, map[partialKey]*aggWindow{})
		}
		a.workers = append(a.workers, w)
	}
	for range specs {
		a.hot = append(a.hot, map[aggKey]bool{})
	}
	a.keys = make([][]aggKey, len(specs))
	a.oks = make([][]bool, len(specs))
	a.hashes = make([][]uint64, len(specs))
	a.hots = make([][]bool, len(specs))
	a.base = make([][]int, len(specs))
	for i := range a.base {
		a.base[i] = make([]int, workers)
	}
	a.dropped = make([]uint64, len(specs))
	return a, nil
}

// SetHot sets when a key is salted: more than share of a release's
// events, and at least least of them (default 0.2 and 64; tests lower
// them).
func (a *ParallelAggregator) SetHot(share float64, least int) { a.hotShare, a.hotMin = share, least }

// HotKeys returns, per aggregate, the keys salted so far (the metric of
// skew).
func (a *ParallelAggregator) HotKeys() []int {
	out := make([]int, len(a.specs))
	for i, m := range a.hot {
		out[i] = len(m)
	}
	return out
}

// Len is the number of events held.
func (a *ParallelAggregator) Len() int { return len(a.pending) }

// Dropped returns, per aggregate, the events forgotten at MaxPerKey (a
// salted key's partials hold up to MaxPerKey each).
func (a *ParallelAggregator) Dropped() []uint64 {
	out := append([]uint64(nil), a.dropped...)
	for _, w := range a.workers {
		for i, d := range w.dropped {
			out[i] += d
		}
	}
	return out
}

// KeyCounts returns, per aggregate, the keys with a window (a salted
// key counts once).
func (a *ParallelAggregator) KeyCounts() []int {
	out := make([]int, len(a.specs))
	for si := range a.specs {
		seen := map[aggKey]bool{}
		for _, w := range a.workers {
			for pk := range w.partials[si] {
				seen[pk.key] = true
			}
		}
		out[si] = len(seen)
	}
	return out
}

// Add is Aggregator.Add.
func (a *ParallelAggregator) Add(ev *event.Event) bool {
	return hold(a.specs, a.wm, &a.pending, &a.arrival, ev)
}

// partialKey is a partial window's key: the aggregate key and the salt.
type partialKey struct {
	key  aggKey
	salt int
}

// aggOp is one step of a worker: count an event in a partial, or read a
// partial for an event (answer: its index in the worker's answers).
type aggOp struct {
	t      event.Time
	spec   int
	query  bool
	key    partialKey
	v      event.Value
	answer int
}

// aggAnswer is a partial's figures at an event's time, or their merge.
type aggAnswer struct {
	n, nums, distinct int
	sum               exactSum
	best              float64
	hasBest           bool
}

// aggWorker owns the partial windows of some (key, salt) pairs.
type aggWorker struct {
	a        *ParallelAggregator
	partials []map[partialKey]*aggWindow // by spec
	ops      []aggOp
	answers  []aggAnswer
	nAnswers int
	dropped  []uint64
}

// workerOf is the worker of a partial: the salts of a key on distinct
// workers.
func (a *ParallelAggregator) workerOf(k partialKey) *aggWorker {
	h := maphash.Comparable(a.seed, k.key)
	P := uint64(len(a.workers))
	return a.workers[(h%P+uint64(k.salt))%P]
}

// saltOf is the partial an entry of a hot key goes to: for distinct, the
// value's (disjoint values in the partials); else the arrival's.
func (a *ParallelAggregator) saltOf(s *AggregateSpec, v event.Value, n uint64) int {
	if s.Func == AggDistinct {
		return int(maphash.Comparable(a.seed, keyOf(v)) % uint64(a.salts))
	}
	return int(n % uint64(a.salts))
}

// Advance is Aggregator.Advance: the released events counted by the
// workers at once, then merged.
func (a *ParallelAggregator) Advance(wm event.Watermark, out func(*event.Event) error) error {
	if wm <= a.wm {
		return nil
	}
	a.wm = wm
	a.taken = a.pending.take(wm, a.taken)
	a.batch = a.batch[:0]
	for _, p := range a.taken {
		a.batch = append(a.batch, p.ev)
	}
	clear(a.taken)
	if len(a.batch) == 0 {
		return nil
	}
	a.plan()
	a.merge()
	if a.sweepAt--; a.sweepAt <= 0 {
		a.sweep()
	}
	for _, ev := range a.batch {
		if err := out(ev); err != nil {
			return err
		}
	}
	clear(a.batch)
	return nil
}

// plan finds the batch's hot keys (salting them), and has each worker
// take its steps, in time order: at each time, every event counted before
// any is read.
func (a *ParallelAggregator) plan() {
	for _, w := range a.workers {
		w.ops, w.nAnswers, w.answers = w.ops[:0], 0, w.answers[:0]
	}
	n := len(a.batch)
	P := uint64(len(a.workers))
	for si := range a.specs {
		s := &a.specs[si]
		// Each event's key, hashed once, and whether it is hot, by the
		// workers, a share each.
		ks, oks := slices.Grow(a.keys[si][:0], n)[:n], slices.Grow(a.oks[si][:0], n)[:n]
		hs := slices.Grow(a.hashes[si][:0], n)[:n]
		hots := slices.Grow(a.hots[si][:0], n)[:n]
		salts := slices.Grow(a.saltsOf[:0], n)[:n] // of a hot key's events
		chunk := (n + len(a.workers) - 1) / len(a.workers)
		hot := a.hot[si]
		saltOf := func(e int) int {
			v := event.Null
			if s.ValueSlot >= 0 {
				v = a.batch[e].Field(s.ValueSlot)
			}
			return a.saltOf(s, v, uint64(e))
		}
		a.crew.do(func(i int) {
			var kb Aggregator
			for e := i * chunk; e < min((i+1)*chunk, n); e++ {
				k, ok := kb.key(a.batch[e], s.KeySlots)
				ks[e], oks[e], hots[e] = k, ok, false
				if ok {
					hs[e] = maphash.Comparable(a.seed, k)
					if hots[e] = len(hot) > 0 && hot[k]; hots[e] {
						salts[e] = saltOf(e)
					}
				}
			}
		})
		a.saltsOf = salts
		a.keys[si], a.oks[si], a.hashes[si], a.hots[si] = ks, oks, hs, hots
		// The keys of many events, found by counting per bucket of the
		// hash (a collision can only salt a key that need not be:
		// harmless), are salted.
		clear(a.buckets[:])
		for e := range n {
			if !oks[e] {
				continue
			}
			b := &a.buckets[hs[e]%uint64(len(a.buckets))]
			if b.n == 0 {
				b.key = ks[e]
			}
			b.n++
		}
		if a.salts > 1 {
			for i := range a.buckets {
				b := &a.buckets[i]
				if b.n >= a.hotMin && float64(b.n) > a.hotShare*float64(n) && !a.hot[si][b.key] {
					a.salt(si, b.key)
					// Its events of this release are hot too.
					for e := range n {
						if oks[e] && hs[e]%uint64(len(a.buckets)) == uint64(i) && ks[e] == b.key {
							hots[e], salts[e] = true, saltOf(e)
						}
					}
				}
			}
		}
		for i, w := range a.workers {
			a.base[si][i] = w.nAnswers
		}
		// Each worker takes its steps from the batch: at each time, its
		// events' counts, then its reads; a worker numbers its answers
		// in event order (merge walks them so).
		a.crew.do(func(wi int) {
			w := a.workers[wi]
			from := len(w.ops)
			defer func() { w.run(from) }()
			for i := 0; i < n; {
				t := a.batch[i].Time
				j := i
				for j < n && a.batch[j].Time == t {
					j++
				}
				for e := i; e < j; e++ {
					if !oks[e] {
						continue
					}
					ev := a.batch[e]
					v := event.Null
					if s.ValueSlot >= 0 {
						v = ev.Field(s.ValueSlot)
					}
					salt := 0
					if hots[e] {
						salt = salts[e]
					}
					if int((hs[e]%P+uint64(salt))%P) != wi || s.Accepts != nil && !s.Accepts(ev) || !counts(s.Func, v) {
						continue
					}
					w.ops = append(w.ops, aggOp{t: t, spec: si, key: partialKey{key: ks[e], salt: salt}, v: v})
				}
				for e := i; e < j; e++ {
					if !oks[e] {
						continue
					}
					salts := 1
					if hots[e] {
						salts = a.salts
					}
					for salt := range salts {
						if int((hs[e]%P+uint64(salt))%P) != wi {
							continue
						}
						w.ops = append(w.ops, aggOp{t: t, spec: si, query: true, key: partialKey{key: ks[e], salt: salt}, answer: w.nAnswers})
						w.nAnswers++
					}
				}
				i = j
			}
		})
	}
}

// salt makes key k of spec si hot: its window's entries move to the
// partials of their salts.
func (a *ParallelAggregator) salt(si int, k aggKey) {
	a.hot[si][k] = true
	a.hotCount++
	s := &a.specs[si]
	pk := partialKey{key: k}
	w := a.workerOf(pk)
	old := w.partials[si][pk]
	if old == nil {
		return
	}
	delete(w.partials[si], pk)
	for _, e := range old.live() {
		a.arrival++
		to := partialKey{key: k, salt: a.saltOf(s, e.v, a.arrival)}
		tw := a.workerOf(to)
		win := tw.partials[si][to]
		if win == nil {
			win = &aggWindow{}
			tw.partials[si][to] = win
		}
		win.insert(s, e)
	}
}

// run takes the worker's steps.
// run takes the worker's steps from step from on (the steps of one
// aggregate).
func (w *aggWorker) run(from int) {
	if n := w.nAnswers - len(w.answers); n > 0 {
		w.answers = slices.Grow(w.answers, n)[:w.nAnswers]
	}
	if w.dropped == nil {
		w.dropped = make([]uint64, len(w.a.specs))
	}
	// The window of the last step, for the next: a hot key's steps come
	// in runs.
	lastSpec, lastKey, lastWin := -1, partialKey{}, (*aggWindow)(nil)
	for i := from; i < len(w.ops); i++ {
		op := &w.ops[i]
		s := &w.a.specs[op.spec]
		var win *aggWindow
		if op.spec == lastSpec && op.key == lastKey && lastWin != nil {
			win = lastWin
		} else {
			win = w.partials[op.spec][op.key]
		}
		lastSpec, lastKey, lastWin = op.spec, op.key, win
		if !op.query {
			if win == nil {
				win = &aggWindow{}
				w.partials[op.spec][op.key] = win
				lastWin = win
			}
			win.evict(s, op.t)
			if len(win.entries)-win.head >= s.MaxPerKey {
				win.drop(s)
				w.dropped[op.spec]++
			}
			win.insert(s, aggEntry{t: op.t, v: op.v})
			continue
		}
		ans := &w.answers[op.answer]
		ans.n, ans.nums, ans.distinct, ans.hasBest = 0, 0, 0, false
		ans.sum.reset()
		if win == nil {
			continue
		}
		win.evict(s, op.t)
		if len(win.entries) == win.head {
			delete(w.partials[op.spec], op.key)
			lastWin = nil
			continue
		}
		ans.n = len(win.entries) - win.head
		switch s.Func {
		case AggSum, AggAvg:
			ans.nums = win.nums
			ans.sum.set(&win.sum)
		case AggMin, AggMax:
			if win.mhead < len(win.mono) {
				ans.best, _ = win.mono[win.mhead].v.AsFloat()
				ans.hasBest = true
			}
		case AggDistinct:
			ans.distinct = len(win.seen)
		}
	}
}

// merge sets each event's values from its partials' answers.
func (a *ParallelAggregator) merge() {
	var m aggAnswer
	P := uint64(len(a.workers))
	next := make([]int, len(a.workers))
	for si := range a.specs {
		s := &a.specs[si]
		copy(next, a.base[si])
		hs, hots := a.hashes[si], a.hots[si]
		for e, ev := range a.batch {
			if !a.oks[si][e] {
				if s.Slot < len(ev.Fields) {
					ev.Fields[s.Slot] = event.Null
				}
				continue
			}
			m.n, m.nums, m.distinct, m.hasBest = 0, 0, 0, false
			m.sum.reset()
			salts := 1
			if hots[e] {
				salts = a.salts
			}
			for salt := range salts {
				wi := int((hs[e]%P + uint64(salt)) % P)
				p := &a.workers[wi].answers[next[wi]]
				next[wi]++
				m.n += p.n
				m.nums += p.nums
				m.distinct += p.distinct
				if s.Func == AggSum || s.Func == AggAvg {
					m.sum.merge(&p.sum)
				}
				if p.hasBest && (!m.hasBest || s.Func == AggMin && p.best < m.best || s.Func == AggMax && p.best > m.best) {
					m.best, m.hasBest = p.best, true
				}
			}
			if s.Slot < len(ev.Fields) {
				ev.Fields[s.Slot] = m.value(s)
			}
		}
	}
}

// value is the merged answer as the aggregate's value.
func (m *aggAnswer) value(s *AggregateSpec) event.Value {
	switch s.Func {
	case AggCount:
		return event.Int(int64(m.n))
	case AggDistinct:
		return event.Int(int64(m.distinct))
	case AggSum:
		return event.Float(m.sum.value())
	case AggAvg:
		if m.nums == 0 {
			return event.Null
		}
		return event.Float(m.sum.value() / float64(m.nums))
	}
	if !m.hasBest {
		return event.Null
	}
	return event.Float(m.best)
}

// reset empties the sum.
func (s *exactSum) reset() {
	s.n.SetInt64(0)
	s.nan, s.pinf, s.ninf = 0, 0, 0
}

// set makes s a copy of o.
func (s *exactSum) set(o *exactSum) {
	s.n.Set(&o.n)
	s.nan, s.pinf, s.ninf = o.nan, o.pinf, o.ninf
}

// merge adds o to s.
func (s *exactSum) merge(o *exactSum) {
	s.n.Add(&s.n, &o.n)
	s.nan += o.nan
	s.pinf += o.pinf
	s.ninf += o.ninf
}

// Aggregation is what runs the velocity aggregates: an Aggregator or a
// ParallelAggregator (the same values, the same state encoding).
type Aggregation interface {
	Add(ev *event.Event) bool
	Advance(wm event.Watermark, out func(*event.Event) error) error
	Len() int
	Dropped() []uint64
	KeyCounts() []int
	HotKeys() []int
	AppendBinary(b []byte) []byte
	Restore(b []byte) error
	RestoreHeld(b []byte) error
}

var (
	_ Aggregation = (*Aggregator)(nil)
	_ Aggregation = (*ParallelAggregator)(nil)
)

// serial is the aggregator's state as a serial Aggregator's (each key's
// partials merged in time order), for its encoding.
func (a *ParallelAggregator) serial() *Aggregator {
	s, _ := NewAggregator(a.specs)
	s.wm, s.arrival = a.wm, a.arrival
	s.pending = append(pendingHeap(nil), a.pending...)
	s.dropped = a.Dropped()
	for si := range a.specs {
		spec := &a.specs[si]
		for _, w := range a.workers {
			for pk, win := range w.partials[si] {
				win.evict(spec, a.wm)
				to := s.keys[si][pk.key]
				if to == nil {
					to = &aggWindow{}
					s.keys[si][pk.key] = to
				}
				to.entries = append(to.entries, win.live()...)
			}
		}
		for _, win := range s.keys[si] {
			slices.SortStableFunc(win.entries, func(x, y aggEntry) int { return cmp.Compare(x.t, y.t) })
		}
	}
	return s
}

// AppendBinary is Aggregator.AppendBinary.
func (a *ParallelAggregator) AppendBinary(b []byte) []byte { return a.serial().AppendBinary(b) }

// Restore is Aggregator.Restore: every key's window goes to its partial
// of salt 0 (no key is hot until a release says so again).
func (a *ParallelAggregator) Restore(b []byte) error { return a.restore(b, false) }

// RestoreHeld is Aggregator.RestoreHeld.
func (a *ParallelAggregator) RestoreHeld(b []byte) error { return a.restore(b, true) }

func (a *ParallelAggregator) restore(b []byte, heldOnly bool) error {
	s, err := NewAggregator(a.specs)
	if err != nil {
		return err
	}
	if err := s.restore(b, heldOnly); err != nil {
		return err
	}
	fresh, err := NewParallelAggregator(a.specs, len(a.workers), a.salts)
	if err != nil {
		return err
	}
	fresh.hotShare, fresh.hotMin, fresh.seed = a.hotShare, a.hotMin, a.seed
	a.crew.close()
	*a = *fresh
	a.index = map[*aggWorker]int{}
	for i, w := range a.workers {
		w.a = a
		a.index[w] = i
	}
	a.wm, a.arrival, a.pending = s.wm, s.arrival, s.pending
	copy(a.dropped, s.dropped)
	for si := range a.specs {
		for k, win := range s.keys[si] {
			pk := partialKey{key: k}
			a.workerOf(pk).partials[si][pk] = win
		}
	}
	return nil
}

// crewSpins is how many times an idle crew goroutine yields, waiting for
// the next task, before it parks: waking a parked goroutine costs more
// than a release's work (measured: goroutines started per task of 50 us
// gave no speedup on 2 cores; waiting ones spinning, 1.9x).
const crewSpins = 20_000

// crew runs a task on every worker at once: worker 0 on the caller's
// goroutine, the others on goroutines of their own that wait for the next
// task, yielding a while, then parked.
type crew struct {
	n       int
	task    func(i int)
	round   atomic.Int64
	done    []atomic.Int64
	parked  []atomic.Bool
	wake    []chan struct{}
	stop    atomic.Bool
	started bool
}

func newCrew(n int) *crew {
	return &crew{n: n, done: make([]atomic.Int64, n), parked: make([]atomic.Bool, n), wake: make([]chan struct{}, n)}
}

// do runs f(i) for every worker i, and returns when all are done.
func (c *crew) do(f func(i int)) {
	if c.n == 1 {
		f(0)
		return
	}
	if !c.started {
		c.started = true
		for i := 1; i < c.n; i++ {
			c.wake[i] = make(chan struct{}, 1)
			go c.loop(i)
		}
	}
	c.task = f
	r := c.round.Add(1)
	for i := 1; i < c.n; i++ {
		if c.parked[i].Load() {
			select {
			case c.wake[i] <- struct{}{}:
			default:
			}
		}
	}
	f(0)
	for i := 1; i < c.n; i++ {
		for c.done[i].Load() < r {
			goruntime.Gosched()
		}
	}
}

// loop is worker i's goroutine: the tasks of rounds 1, 2, ...
func (c *crew) loop(i int) {
	for r := int64(1); ; r++ {
		for spins := 0; c.round.Load() < r; spins++ {
			if c.stop.Load() {
				return
			}
			if spins < crewSpins {
				goruntime.Gosched()
				continue
			}
			c.parked[i].Store(true)
			if c.round.Load() < r && !c.stop.Load() {
				<-c.wake[i]
			}
			c.parked[i].Store(false)
			spins = 0
		}
		c.task(i)
		c.done[i].Store(r)
	}
}

// close stops the crew's goroutines.
func (c *crew) close() {
	c.stop.Store(true)
	for i := 1; i < c.n; i++ {
		if c.wake[i] != nil {
			select {
			case c.wake[i] <- struct{}{}:
			default:
			}
		}
	}
}

// Close stops the aggregator's worker goroutines (it must not be used
// after).
func (a *ParallelAggregator) Close() { a.crew.close() }
