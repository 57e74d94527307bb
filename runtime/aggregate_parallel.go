package runtime

import (
	"cmp"
	"fmt"
	"hash/maphash"
	"math/bits"
	goruntime "runtime"
	"slices"
	"sync/atomic"
	"time"

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
//
// A release is one round of the workers, in phases with a barrier
// between two: (1) each finds the keys of a share of the release's
// events, their hashes, whether they are salted and their salts; (2)
// each counts and reads the partials it owns in time order, sets the
// values of the events whose key is not salted (their one partial is
// its own), keeps its answers for the salted ones, and counts the events
// of the keys it owns (hot keys); (3) with salts, each merges the
// answers of a share of the salted events. After the round the caller
// salts the keys found hot, from the next release on. One round per
// release, the waits spinning on atomics: a release is some 100 us of
// work, less than waking a parked goroutine costs.
//
// MaxPerKey bounds a key's window, salted or not. The serial window of a
// key holds, of its events that count up to a time, the last MaxPerKey
// that are in the window of that time. A salted key far from its bound
// (its partials' entries and the release's events at most MaxPerKey) has
// nothing to forget. Near it (ParallelAggregator.near, evNear), its
// partials' entries are numbered in release order (workerSalted.seqs,
// made when the key comes near: the partials merged by time, and of
// several events of one time, which only one release has, by their
// order there, which the partials mark: workerSalted.ties); its events
// that count then take the next numbers (ranked by the keys phase within
// each worker's share, the shares' counts added up from hotNext), and a
// partial read at a time, once evicted, forgets the entries numbered
// MaxPerKey or more before the key's next: the union of the partials is
// the serial window, and the events forgotten by the bound are the
// serial ones, counted once. A key far from its bound costs nothing more
// (but a mark for an event of a time other events share).

// ParallelAggregator is an Aggregator whose windows are spread over
// workers (goroutines, during Advance). Its state's encoding is the
// serial Aggregator's, so one restores the other's. It is used by one
// goroutine; Close stops its workers.
type ParallelAggregator struct {
	specs   []AggregateSpec
	workers []*aggWorker
	crew    *crew
	phases  []func(i int) // of a release's round: keys, release, merge (with salts)
	rel     []releaseSpec // by spec
	salts   int
	// hotShare: a key with more than this share of a release's events
	// (and at least hotMin of them) is salted from the next release on.
	hotShare float64
	hotMin   int
	hot      []map[aggKey]bool // by spec: the salted keys
	hotList  [][]hotKey        // by spec: the same, read by the workers
	// hotNext are, by spec, by salted key (as hotList), the number of its
	// next event that counts, while it is near its bound (evNear: its
	// partials' entries numbered, workerSalted.seqs).
	hotNext  [][]uint64
	hotCount int
	// recent are, by spec, the keys found hot since hotSince (the metric,
	// as Aggregator.HotKeys).
	recent   []map[aggKey]bool
	hotSince event.Watermark
	pending  pendingHeap
	taken    []pendingEvent
	kept     []pendingEvent // as Aggregator.kept
	arrival  uint64
	moved    uint64 // entries moved by salt (their salts)
	wm       event.Watermark
	seed     maphash.Seed
	batch    []*event.Event
	dropped  []uint64
	sweepAt  int  // releases until the next sweep of empty windows
	sweeping bool // this release's round sweeps
}

// setPhases sets the phases of a release's round.
func (a *ParallelAggregator) setPhases() {
	a.phases = []func(int){
		func(i int) { a.workers[i].keys() },
		func(i int) { a.workers[i].release() },
	}
	if a.salts > 1 {
		a.phases = append(a.phases, func(i int) { a.workers[i].merge() })
	}
}

// hotKey is a salted key, its hash and its events' flags (evHot, and
// evNear while it is near its bound: ParallelAggregator.near).
type hotKey struct {
	h    uint64
	k    aggKey
	flag uint8
}

// MaxAggregateWorkers is the most workers of a ParallelAggregator (a
// release's events name their key's worker in a byte).
const MaxAggregateWorkers = 64

// NewParallelAggregator returns an aggregator of specs over workers
// workers, salting a hot key over salts partials (at most workers;
// salts 1: no salting). At most MaxAggregateWorkers workers.
func NewParallelAggregator(specs []AggregateSpec, workers, salts int) (*ParallelAggregator, error) {
	serial, err := NewAggregator(specs) // checks the specifications
	if err != nil {
		return nil, err
	}
	if workers > MaxAggregateWorkers {
		return nil, fmt.Errorf("runtime: %d aggregate workers: at most %d", workers, MaxAggregateWorkers)
	}
	workers, salts = max(workers, 1), min(max(salts, 1), max(workers, 1))
	a := &ParallelAggregator{specs: serial.specs, salts: salts, hotShare: HotShare, hotMin: HotMin, wm: event.MinTime, seed: maphash.MakeSeed()}
	a.crew = newCrew(workers)
	// An aggregator dropped without Close stops its goroutines once it is
	// collected (they hold the crew, not it).
	goruntime.AddCleanup(a, (*crew).close, a.crew)
	for i := range workers {
		w := &aggWorker{a: a, i: i, dropped: make([]uint64, len(specs)), answers: make([][]aggAnswer, len(specs)),
			sums: make([][]exactSum, len(specs)), found: make([][]aggKey, len(specs)), salted: make([][]workerSalted, len(specs))}
		for range specs {
			w.partials = append(w.partials, partialTable{})
		}
		a.workers = append(a.workers, w)
	}
	a.setPhases()
	a.rel = make([]releaseSpec, len(specs))
	for range specs {
		a.hot = append(a.hot, map[aggKey]bool{})
		a.recent = append(a.recent, map[aggKey]bool{})
	}
	a.hotList = make([][]hotKey, len(specs))
	a.hotNext = make([][]uint64, len(specs))
	a.dropped = make([]uint64, len(specs))
	return a, nil
}

// SetHot sets when a key is salted: more than share of a release's
// events, and at least least of them (default HotShare and HotMin; tests
// lower them).
func (a *ParallelAggregator) SetHot(share float64, least int) { a.hotShare, a.hotMin = share, least }

// HotKeys returns, per aggregate, the number of keys hot recently, as
// Aggregator.HotKeys (with the thresholds of SetHot).
func (a *ParallelAggregator) HotKeys() []int {
	out := make([]int, len(a.specs))
	for i, m := range a.recent {
		out[i] = len(m)
	}
	return out
}

// Len is the number of events held, those an Advance kept included.
func (a *ParallelAggregator) Len() int { return len(a.pending) + len(a.kept) }

// Dropped returns, per aggregate, the events forgotten at MaxPerKey (a
// key's, salted or not: the serial Aggregator's figures).
func (a *ParallelAggregator) Dropped() []uint64 {
	out := append([]uint64(nil), a.dropped...)
	for _, w := range a.workers {
		for i, d := range w.dropped {
			out[i] += d
		}
	}
	return out
}

// KeyCounts is Aggregator.KeyCounts: a salted key counts once, when one
// of its partials holds an event at the watermark. It changes nothing.
func (a *ParallelAggregator) KeyCounts() []int {
	out := make([]int, len(a.specs))
	if a.wm == event.MinTime {
		return out
	}
	for si := range a.specs {
		s, hot := &a.specs[si], a.hot[si]
		// A key not salted has one partial, of salt 0 (salting is for
		// good, until a restore puts every window back at salt 0).
		for _, w := range a.workers {
			w.partials[si].each(func(p *partial) {
				if p.key.salt == 0 && !hot[p.key.key] && p.holdsAt(s, a.wm) {
					out[si]++
				}
			})
		}
		for _, hk := range a.hotList[si] {
			for salt := range a.salts {
				p := a.workers[a.workerOf(hk.h, salt)].partials[si].get(hk.h, partialKey{key: hk.k, salt: salt})
				if p != nil && p.holdsAt(s, a.wm) {
					out[si]++
					break
				}
			}
		}
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

// partial is a partial window and its key, chained to the other partials
// of its key's hash in a partialTable. A short key's string is copied
// into name, so that finding a partial compares the event's key with
// bytes beside the partial's other fields: the key's own string is in
// the event the partial was made for, long gone from the cache (a miss
// at every event of a key whose partial is not in the cache, the tail's).
type partial struct {
	key  partialKey
	next *partial
	name [partialName]byte
	aggWindow
}

// seqList is the numbers of the entries of a salted key's partial in the
// key's events that count (ParallelAggregator.hotNext), in order, while
// the key is near its bound: the last len(live()) of them are the live
// entries' (entries leave from the front, so the live ones are the last
// pushed). Beside the partial, not in it: a partial 8 bytes larger took
// 32 more (Go's size classes), for every key.
type seqList []uint64

// push notes n, the number of the entry just inserted in a partial of
// live entries (that one included). The numbers of entries gone are
// dropped once they are half of the slice.
func (l *seqList) push(n uint64, live int) {
	if c := len(*l); c == cap(*l) && c >= 64 && live-1 <= c/2 {
		*l = (*l)[:copy(*l, (*l)[c-(live-1):])]
	}
	*l = append(*l, n)
}

// bound forgets the entries of p, the worker's partial of salted key hi
// of spec s, that the key's window no longer holds once its events of a
// time are all counted (steps, after evict: those numbered MaxPerKey or
// more before the key's next), and returns how many.
func (w *aggWorker) bound(s *AggregateSpec, p *partial, hi uint32) int {
	next, limit, l := w.nb.next[hi], w.nb.limit, w.nb.salted[hi].seqs
	live := len(p.entries) - p.head
	if next <= limit || live == 0 {
		return 0
	}
	seqs, n := l[len(l)-live:], 0
	for n < live && seqs[n] < next-limit {
		n++
	}
	if n > 0 {
		p.drop(s, n)
	}
	return n
}

// partialName is the longest key string a partial holds a copy of.
const partialName = 16

// is reports whether p is the partial of pk.
func (p *partial) is(pk partialKey) bool {
	k, s := &p.key.key, pk.key.s
	if p.key.salt != pk.salt || k.kind != pk.key.kind || k.n != pk.key.n || len(k.s) != len(s) {
		return false
	}
	if len(s) <= partialName {
		return string(p.name[:len(s)]) == s
	}
	return k.s == s
}

// partialTable is a worker's partial windows of one aggregate by the hash
// of their key (ParallelAggregator.hash), in a table of its own (open
// addressing, linear probing) whose slots hold a hash and its partials.
// The keys phase hashes each event's key once; a lookup then reads a
// slot and compares the partial's key. A map by partialKey hashed the
// key's string and each field of the struct again at every lookup (a
// fifth of a release's time); a Go map by the hash read its directory,
// a table and a group's control word before the slot, lines the cache
// no longer held for a tail key. Partials whose keys share a hash (other
// keys, or other salts of one key) are chained.
type partialTable struct {
	slots []partialSlot // a power of two of them, at most 3/4 used; nil: none
	used  int
}

// partialSlot is a hash and its partials (nil: a free slot).
type partialSlot struct {
	h uint64
	p *partial
}

// home is the slot where the probe for hash h starts: its top bits (a
// worker's keys share the top bits of their hash's low half,
// ParallelAggregator.workerOf, and a hot bucket's its lowest bits).
func (t *partialTable) home(h uint64) int {
	return int(h >> (64 - bits.TrailingZeros(uint(len(t.slots)))))
}

// find returns the slot of hash h (ok false: the free slot where it
// would go). REQUIRES: slots.
func (t *partialTable) find(h uint64) (int, bool) {
	mask := len(t.slots) - 1
	for i := t.home(h); ; i = (i + 1) & mask {
		switch {
		case t.slots[i].p == nil:
			return i, false
		case t.slots[i].h == h:
			return i, true
		}
	}
}

// get returns the partial of pk, of hash h (nil: none).
func (t *partialTable) get(h uint64, pk partialKey) *partial {
	if t.used == 0 {
		return nil
	}
	i, ok := t.find(h)
	if !ok {
		return nil
	}
	for p := t.slots[i].p; p != nil; p = p.next {
		if p.is(pk) {
			return p
		}
	}
	return nil
}

// add adds an empty partial of pk, of hash h (none there yet), and
// returns it.
func (t *partialTable) add(h uint64, pk partialKey) *partial {
	p := &partial{key: pk}
	copy(p.name[:], pk.key.s)
	t.put(h, p)
	return p
}

// put chains partial p (of hash h) in the table.
func (t *partialTable) put(h uint64, p *partial) {
	if (t.used+1)*4 > len(t.slots)*3 {
		t.resize(max(8, 2*len(t.slots)))
	}
	i, ok := t.find(h)
	if ok {
		p.next = t.slots[i].p
	} else {
		t.used++
	}
	t.slots[i] = partialSlot{h: h, p: p}
}

// resize moves the slots to n slots (a power of two, more than used).
func (t *partialTable) resize(n int) {
	old := t.slots
	t.slots = make([]partialSlot, n)
	for _, s := range old {
		if s.p != nil {
			i, _ := t.find(s.h)
			t.slots[i] = s
		}
	}
}

// remove removes partial p, of hash h.
func (t *partialTable) remove(h uint64, p *partial) {
	i, _ := t.find(h)
	if t.slots[i].p != p {
		for q := t.slots[i].p; q != nil; q = q.next {
			if q.next == p {
				q.next = p.next
				return
			}
		}
		return
	}
	if t.slots[i].p = p.next; p.next != nil {
		return
	}
	// Free slot i, moving back the slots after it that their probes
	// would no longer reach (no tombstones).
	t.used--
	mask := len(t.slots) - 1
	for j := (i + 1) & mask; t.slots[j].p != nil; j = (j + 1) & mask {
		if (j-t.home(t.slots[j].h))&mask >= (j-i)&mask {
			t.slots[i] = t.slots[j]
			i = j
		}
	}
	t.slots[i] = partialSlot{}
}

// each calls f with every partial.
func (t *partialTable) each(f func(p *partial)) {
	for _, s := range t.slots {
		for p := s.p; p != nil; p = p.next {
			f(p)
		}
	}
}

// removeEmpty removes the partials that hold no entry once evicted at
// time t, and returns how many there were before. The slots left move to
// a table of their size, a quarter to three eighths full (a sweep after a
// burst of keys gives their slots back).
func (t *partialTable) removeEmpty(s *AggregateSpec, at event.Time) int {
	n, left := 0, 0
	for i := range t.slots {
		live := &t.slots[i].p
		for p := *live; p != nil; p = p.next {
			n++
			p.evict(s, at)
			if len(p.entries) == p.head {
				*live = p.next
			} else {
				live = &p.next
			}
		}
		if t.slots[i].p != nil {
			left++
		}
	}
	size := 8
	for size*3 < left*8 {
		size *= 2
	}
	t.used = left
	t.resize(size)
	return n
}

// aggAnswer is a partial's figures at an event's time, or their merge.
// The exact sum of a sum or an average is apart (aggWorker.sums), so that
// the answers of the other functions are 40 bytes, not 170: the merge
// reads two an event.
type aggAnswer struct {
	n, nums, distinct int
	best              float64
	hasBest           bool
}

// aggWorker owns the partial windows of some (key, salt) pairs. Between
// rounds only the caller touches it; during one, only its goroutine.
type aggWorker struct {
	a        *ParallelAggregator
	i        int
	partials []partialTable // by spec
	answers  [][]aggAnswer  // by spec, by event: of the salted events whose partial it reads
	sums     [][]exactSum   // by spec, by event: the answers' exact sums (sum and avg)
	found    [][]aggKey     // by spec: the keys found hot in the release
	buckets  [hotBuckets]hotBucket
	touched  []uint16 // buckets counted in
	dropped  []uint64
	kb       Aggregator // key's buffer
	swept    int        // windows seen by the last sweep
	merged   aggAnswer  // merge's
	sum      exactSum   // merge's
	// salted are, by spec, by salted key (as hotList), the worker's.
	salted [][]workerSalted
	nb     numbering // steps'
}

// workerSalted is a worker's of a salted key, whose partial on that
// worker (a salted key has one on each of salts workers) it describes. A
// cache line of its own: the worker writes it at the key's events, and
// the workers' were side by side (small allocations, made one after the
// other), each write a cache miss on the other's core.
type workerSalted struct {
	// seqs are the numbers of the partial's entries, while the key is
	// near its bound.
	seqs seqList
	// ties mark the partial's entries of a time other events of the
	// release share, in order: ParallelAggregator.inOrder.
	ties []tieMark
	// ranked is its events that count in the worker's share of the
	// release (keys; near its bound).
	ranked uint32
	_      [64 - 2*24 - 4]byte
}

// tieMark is an entry's time and the index in its release of its event:
// of a key's events of one time (all in one release), their order.
type tieMark struct {
	t event.Time
	e uint32
}

// mark notes that p's newest entry, of time t, is event e of a release in
// which other events have time t. The marks of entries gone are dropped
// once the slice is full.
func (ws *workerSalted) mark(p *partial, t event.Time, e int) {
	if c := len(ws.ties); c == cap(ws.ties) && c >= 16 {
		gone, _ := slices.BinarySearchFunc(ws.ties, p.first, func(m tieMark, t event.Time) int { return cmp.Compare(m.t, t) })
		ws.ties = ws.ties[:copy(ws.ties, ws.ties[gone:])]
	}
	ws.ties = append(ws.ties, tieMark{t: t, e: uint32(e)})
}

// liveTies returns, for each of p's live entries in order, the index of
// its event in its release (marks: p's, workerSalted.ties), 0 for an
// entry no other of its key has the time of; reusing into.
func liveTies(p *partial, marks []tieMark, into []uint32) []uint32 {
	live := p.live()
	into = slices.Grow(into[:0], len(live))[:len(live)]
	if len(live) == 0 {
		return into
	}
	t0 := live[0].t
	k, _ := slices.BinarySearchFunc(marks, t0, func(m tieMark, t event.Time) int { return cmp.Compare(m.t, t) })
	// The oldest time's entries may be gone in part (the bound forgets
	// the oldest): its live ones are its last.
	m0, c0 := 0, 0
	for k+m0 < len(marks) && marks[k+m0].t == t0 {
		m0++
	}
	for c0 < len(live) && live[c0].t == t0 {
		c0++
	}
	k += max(0, m0-c0)
	for i, x := range live {
		into[i] = 0
		if k < len(marks) && marks[k].t == x.t {
			into[i] = marks[k].e
			k++
		}
	}
	return into
}

// numbering numbers the salted events that count of a release, for one
// aggregate, in steps (in the fields of the worker, not in variables of
// steps: its loop's registers are taken).
type numbering struct {
	// base are, by share, by salted key, the number of the share's first:
	// the key's hotNext and the ranked of the shares before.
	base  []uint64
	cur   []uint64 // base's of share, that of the last event numbered
	keys  int      // salted keys
	chunk int      // events of a share (aggWorker.share)
	share int
	end   int // share's end
	// next are, by salted key, the number after its last event numbered
	// (kept for the keys near their bound: those evNear).
	next   []uint64
	limit  uint64         // MaxPerKey
	salted []workerSalted // the worker's
}

// start readies nb for spec si of the release, on worker w.
func (nb *numbering) start(w *aggWorker, si int) {
	a := w.a
	P, keys := len(a.workers), len(a.hotList[si])
	nb.keys, nb.chunk, nb.limit = keys, (len(a.batch)+P-1)/P, uint64(a.specs[si].MaxPerKey)
	nb.base = slices.Grow(nb.base[:0], P*keys)[:P*keys]
	nb.cur, nb.share, nb.end = nb.base[:keys], 0, nb.chunk
	for hi, n := range a.hotNext[si] {
		for k, o := range a.workers {
			nb.base[k*keys+hi] = n
			n += uint64(o.salted[si][hi].ranked)
		}
	}
	nb.next = append(nb.next[:0], a.hotNext[si]...)
	nb.salted = w.salted[si]
}

// of is the number of salted event e that counts, of key hi. REQUIRES:
// e not before the last numbered (the share is followed along).
func (nb *numbering) of(r *releaseSpec, e int, hi uint32) uint64 {
	for e >= nb.end {
		nb.share, nb.end = nb.share+1, nb.end+nb.chunk
		nb.cur = nb.base[nb.share*nb.keys:][:nb.keys]
	}
	return nb.cur[hi] + uint64(r.rank[e])
}

// releaseSpec is the release's events for one aggregate, by event: found
// by the workers a share each (the round's first phase), read by all.
type releaseSpec struct {
	keys  []aggKey
	hash  []uint64
	owner []uint8  // the worker of the key's partial of salt 0
	flag  []uint8  // evNull, evHot, evCounts, evNear
	salt  []uint8  // a hot event's partial, when it counts
	vhash []uint64 // a hot event's value's distinctHash (distinct), its salt's
	hot   []uint32 // a hot event's key's index in hotList
	rank  []uint32 // a hot event's that counts: its key's before it in its share
}

// The flags of a release's event.
const (
	evNull   uint8 = 1 << iota // a null key: no value, no count
	evHot                      // its key is salted
	evCounts                   // it counts (Accepts, and a value that counts)
	evNear                     // its key is salted, and may cross its bound in the release
)

// hotBuckets is the number of buckets keys are counted in per release.
const hotBuckets = 1024

// hotBucket counts a release's events of the keys of one hash bucket
// (at: the event of the first one). 8 bytes, not 40 with the key: a tail
// key's event counts in a bucket out of the cache (a release holds fewer
// than 2^31 events).
type hotBucket struct {
	at, n int32
}

// workerOf is the worker index of a partial of a key of hash h: the salts
// of a key on distinct workers.
func (a *ParallelAggregator) workerOf(h uint64, salt int) int {
	return a.workerAt(int(uint64(uint32(h))*uint64(len(a.workers))>>32), salt)
}

// workerAt is the worker of the partial of salt salt of a key whose
// partial of salt 0 is worker owner's. Neither it nor workerOf divides:
// a division per event and worker made the keys phase 15-20 % slower.
func (a *ParallelAggregator) workerAt(owner, salt int) int {
	if w := owner + salt; w < len(a.workers) {
		return w
	}
	return owner + salt - len(a.workers)
}

// hash is k's hash: of its string, or of its number (equal keys, equal
// hashes; cheaper than hashing the struct).
func (a *ParallelAggregator) hash(k aggKey) uint64 {
	if k.s != "" {
		return maphash.String(a.seed, k.s) ^ uint64(k.kind)
	}
	return maphash.Comparable(a.seed, k.n) ^ uint64(k.kind)
}

// saltOf is the partial an entry of a hot key goes to: for distinct, the
// value's (vh, its distinctHash: disjoint values in the partials), from
// the hash's high half, as a distinctTable's slots are from its low bits
// (salted by vh's lowest bit, a partial's values all had homes of one
// parity); else the arrival's (n).
func (a *ParallelAggregator) saltOf(s *AggregateSpec, vh, n uint64) int {
	if s.Func == AggDistinct {
		return int((vh >> 32) * uint64(a.salts) >> 32)
	}
	return int(n % uint64(a.salts))
}

// Advance is Aggregator.Advance: the released events counted, read and
// merged by the workers at once (one round), then the keys found hot
// salted; an error of out keeps the events after the one it failed on,
// for the next Advance to hand out first.
func (a *ParallelAggregator) Advance(wm event.Watermark, out func(*event.Event) error) error {
	if err := handOut(&a.kept, out); err != nil {
		return err
	}
	if wm <= a.wm {
		return nil
	}
	a.wm = wm
	a.taken = a.pending.take(wm, a.taken)
	a.batch = a.batch[:0]
	for _, p := range a.taken {
		a.batch = append(a.batch, p.ev)
	}
	if len(a.batch) == 0 {
		return nil
	}
	n := len(a.batch)
	for si := range a.rel {
		r := &a.rel[si]
		r.keys = slices.Grow(r.keys[:0], n)[:n]
		r.hash = slices.Grow(r.hash[:0], n)[:n]
		r.owner = slices.Grow(r.owner[:0], n)[:n]
		r.flag = slices.Grow(r.flag[:0], n)[:n]
		r.salt = slices.Grow(r.salt[:0], n)[:n]
		r.vhash = slices.Grow(r.vhash[:0], n)[:n]
		r.hot = slices.Grow(r.hot[:0], n)[:n]
		r.rank = slices.Grow(r.rank[:0], n)[:n]
		a.near(si)
	}
	a.sweepAt--
	a.sweeping = a.sweepAt <= 0
	a.crew.do(a.phases)
	for si, next := range a.hotNext {
		for _, w := range a.workers {
			for hi := range w.salted[si] {
				next[hi] += uint64(w.salted[si][hi].ranked) // 0 far from the bound
			}
		}
	}
	a.noteHot()
	if a.sweeping {
		n := 0
		for _, w := range a.workers {
			n += w.swept
		}
		a.sweepAt = max(64, n/8)
	}
	var failed error
	for i, ev := range a.batch {
		if err := out(ev); err != nil {
			a.kept = append(a.kept, a.taken[i+1:]...) // in a.batch's order
			failed = err
			break
		}
	}
	clear(a.taken)
	clear(a.batch)
	return failed
}

// near sets evNear in the flag of the salted keys of spec si near their
// bound for the release, and numbers the entries of those coming near
// (number); between rounds (it reads every worker's partials). A key is
// near when its partials' entries and the release's events are more than
// MaxPerKey (else the bound forgets nothing), and stays near until they
// are at most half of it: numbering it again costs its entries, once for
// at least MaxPerKey/2 of its events.
func (a *ParallelAggregator) near(si int) {
	limit := a.specs[si].MaxPerKey
	for hi := range a.hotList[si] {
		hk := &a.hotList[si][hi]
		n := len(a.batch)
		for salt := range a.salts {
			if p := a.workers[a.workerOf(hk.h, salt)].partials[si].get(hk.h, partialKey{key: hk.k, salt: salt}); p != nil {
				n += len(p.entries) - p.head
			}
		}
		switch {
		case hk.flag&evNear == 0 && n > limit:
			hk.flag |= evNear
			a.number(si, hi)
		case hk.flag&evNear != 0 && n <= limit/2:
			hk.flag &^= evNear
			for _, w := range a.workers {
				w.salted[si][hi].seqs = nil
			}
		}
	}
}

// ordered is an entry of a salted key's partial, its tie (liveTies) and
// where it is: the partial of its salt, its index in the live entries.
type ordered struct {
	e       aggEntry
	tie     uint32
	salt, i int
}

// inOrder returns the live entries of salted key hi of spec si, of all
// its partials, in release order: by time, and of one time (one
// release's events) by their marks. Between rounds.
func (a *ParallelAggregator) inOrder(si, hi int) []ordered {
	hk := a.hotList[si][hi]
	var out []ordered
	var ties []uint32
	for salt := range a.salts {
		w := a.workers[a.workerOf(hk.h, salt)]
		p := w.partials[si].get(hk.h, partialKey{key: hk.k, salt: salt})
		if p == nil {
			continue
		}
		ties = liveTies(p, w.salted[si][hi].ties, ties)
		for i, e := range p.live() {
			out = append(out, ordered{e: e, tie: ties[i], salt: salt, i: i})
		}
	}
	slices.SortStableFunc(out, func(x, y ordered) int { return cmp.Or(cmp.Compare(x.e.t, y.e.t), cmp.Compare(x.tie, y.tie)) })
	return out
}

// number numbers the entries of salted key hi of spec si, coming near its
// bound, in release order (inOrder), and makes the next its hotNext.
func (a *ParallelAggregator) number(si, hi int) {
	hk := a.hotList[si][hi]
	order := a.inOrder(si, hi)
	seqs := make([]seqList, a.salts)
	for salt := range a.salts {
		w := a.workers[a.workerOf(hk.h, salt)]
		if p := w.partials[si].get(hk.h, partialKey{key: hk.k, salt: salt}); p != nil {
			seqs[salt] = make(seqList, len(p.entries)-p.head)
		}
		w.salted[si][hi].seqs = seqs[salt]
	}
	for n, o := range order {
		seqs[o.salt][o.i] = uint64(n)
	}
	a.hotNext[si][hi] = uint64(len(order))
}

// keys is the worker's share of the round's first phase: the keys of a
// share of the release's events, their hashes, flags and salts, and the
// ranks of the salted ones that count.
func (w *aggWorker) keys() {
	a := w.a
	from, to := w.share()
	for si := range a.specs {
		s := &a.specs[si]
		r := &a.rel[si]
		hotList := a.hotList[si]
		salted := w.salted[si]
		for hi := range salted {
			salted[hi].ranked = 0
		}
		for e := from; e < to; e++ {
			ev := a.batch[e]
			k, ok := w.kb.key(ev, s.KeySlots)
			if !ok {
				r.keys[e], r.flag[e] = aggKey{}, evNull
				if s.Slot < len(ev.Fields) {
					ev.Fields[s.Slot] = event.Null
				}
				continue
			}
			h := a.hash(k)
			r.keys[e], r.hash[e], r.owner[e] = k, h, uint8(a.workerOf(h, 0))
			var flag uint8
			hi := 0
			for i := range hotList {
				if hk := &hotList[i]; hk.h == h && hk.k == k {
					flag, hi = hk.flag, i
					r.hot[e] = uint32(i)
					break
				}
			}
			var v event.Value
			if s.ValueSlot >= 0 {
				v = ev.Field(s.ValueSlot)
			}
			if (s.Accepts == nil || s.Accepts(ev)) && counts(s.Func, v) {
				flag |= evCounts
				if flag&evHot != 0 {
					var vh uint64
					if s.Func == AggDistinct {
						vh = distinctHash(keyOf(v))
						r.vhash[e] = vh
					}
					r.salt[e] = uint8(a.saltOf(s, vh, uint64(e)))
					if flag&evNear != 0 {
						r.rank[e] = salted[hi].ranked
						salted[hi].ranked++
					}
				}
			}
			r.flag[e] = flag
		}
	}
}

// share is the worker's share of the release's events, [from, to).
func (w *aggWorker) share() (from, to int) {
	n := len(w.a.batch)
	chunk := (n + len(w.a.workers) - 1) / len(w.a.workers)
	return min(w.i*chunk, n), min((w.i+1)*chunk, n)
}

// release is the worker's part of a release, after keys: for each
// aggregate, the steps of the partials it owns in time order (at each
// time every event counted before any is read), the values of its
// unsalted events, its answers for the salted ones, and the counts of
// the keys it owns (hot keys).
func (w *aggWorker) release() {
	a := w.a
	for si := range a.specs {
		w.steps(si)
		w.findHot(si)
	}
	if a.sweeping {
		w.sweep()
	}
}

// findHot sets w.found[si] to the keys the worker owns with more than
// the hot share of the release's events (at least hotMin), exactly: a
// bucket over the thresholds has its keys counted one by one.
func (w *aggWorker) findHot(si int) {
	a := w.a
	r := &a.rel[si]
	n := len(a.batch)
	found := w.found[si][:0]
	hot := func(c int) bool { return c >= a.hotMin && float64(c) > a.hotShare*float64(n) }
	in := func(e, bi int) bool {
		return r.flag[e]&evNull == 0 && int(r.owner[e]) == w.i && r.hash[e]%hotBuckets == uint64(bi)
	}
	for _, bi := range w.touched {
		b := &w.buckets[bi]
		if hot(int(b.n)) {
			// Mostly one key has them all: count it; the others (if they
			// could be hot) one by one.
			key, first := r.keys[b.at], 0
			for e, k := range r.keys {
				if in(e, int(bi)) && k == key {
					first++
				}
			}
			if hot(first) {
				found = append(found, key)
			}
			if int(b.n)-first >= a.hotMin {
				counts := map[aggKey]int{}
				for e, k := range r.keys {
					if in(e, int(bi)) && k != key {
						counts[k]++
					}
				}
				for k, c := range counts {
					if hot(c) {
						found = append(found, k)
					}
				}
			}
		}
		*b = hotBucket{}
	}
	w.touched = w.touched[:0]
	w.found[si] = found
}

// steps counts and reads the worker's partials for aggregate si, and
// counts the keys it owns in their buckets.
func (w *aggWorker) steps(si int) {
	a := w.a
	s := &a.specs[si]
	r := &a.rel[si]
	batch := a.batch
	parts := &w.partials[si]
	if len(w.answers[si]) < len(batch) {
		w.answers[si] = append(w.answers[si], make([]aggAnswer, len(batch)-len(w.answers[si]))...)
	}
	answers := w.answers[si]
	var sums []exactSum
	if s.Func == AggSum || s.Func == AggAvg {
		if len(w.sums[si]) < len(batch) {
			w.sums[si] = append(w.sums[si], make([]exactSum, len(batch)-len(w.sums[si]))...)
		}
		sums = w.sums[si]
	}
	P, me := len(a.workers), w.i
	w.nb.start(w, si)
	// The partial of the last step, for the next: a hot key's steps come
	// in runs.
	var last *partial
	find := func(h uint64, pk partialKey, create bool) *partial {
		p := parts.get(h, pk)
		if p == nil && create {
			p = parts.add(h, pk)
		}
		if p != nil {
			last = p
		}
		return p
	}
	// window is inlined: a closure holding the compare of the last
	// partial's key was not (a call per step).
	window := func(h uint64, pk partialKey, create bool) *partial {
		if last != nil && last.is(pk) {
			return last
		}
		return find(h, pk, create)
	}
	for i := 0; i < len(batch); {
		t := batch[i].Time
		j := i + 1
		for j < len(batch) && batch[j].Time == t {
			j++
		}
		for e := i; e < j; e++ {
			flag, owner := r.flag[e], int(r.owner[e])
			if flag&evNull != 0 {
				continue
			}
			if owner == me {
				bi := r.hash[e] % hotBuckets
				b := &w.buckets[bi]
				if b.n == 0 {
					b.at = int32(e)
					w.touched = append(w.touched, uint16(bi))
				}
				b.n++
			}
			if flag&evCounts == 0 {
				continue
			}
			salt := 0
			if flag&evHot != 0 {
				salt = int(r.salt[e])
				if flag&evNear != 0 {
					hi := r.hot[e]
					w.nb.next[hi] = w.nb.of(r, e, hi) + 1 // every worker: read below
				}
			}
			if a.workerAt(owner, salt) != me {
				continue
			}
			var v event.Value
			if s.ValueSlot >= 0 {
				v = batch[e].Field(s.ValueSlot)
			}
			win := window(r.hash[e], partialKey{key: r.keys[e], salt: salt}, true)
			win.evict(s, t)
			if flag&evHot != 0 {
				if s.Func == AggDistinct {
					win.insertHashed(s, aggEntry{t: t, v: v, h: r.vhash[e]})
				} else {
					win.insert(s, aggEntry{t: t, v: v})
				}
				if flag&evNear != 0 {
					// Its number; its key's bound is kept as its partials
					// are read, below, once its events of time t are all
					// counted.
					hi := r.hot[e]
					w.nb.salted[hi].seqs.push(w.nb.of(r, e, hi), len(win.entries)-win.head)
				}
				if j-i > 1 {
					w.nb.salted[r.hot[e]].mark(win, t, e) // of several of time t
				}
				continue
			}
			// A key not salted has this one partial: its bound is the key's.
			if len(win.entries)-win.head >= s.MaxPerKey {
				win.drop(s, 1)
				w.dropped[si]++
			}
			win.insert(s, aggEntry{t: t, v: v})
		}
		for e := i; e < j; e++ {
			flag, owner := r.flag[e], int(r.owner[e])
			if flag&evNull != 0 {
				continue
			}
			salt := me - owner // of the partial it would read here
			if salt < 0 {
				salt += P
			}
			if flag&evHot == 0 && salt != 0 || salt >= a.salts {
				continue
			}
			var win *aggWindow // nil: no entry
			if p := window(r.hash[e], partialKey{key: r.keys[e], salt: salt}, false); p != nil {
				p.evict(s, t)
				if flag&evNear != 0 {
					w.dropped[si] += uint64(w.bound(s, p, r.hot[e]))
				}
				if len(p.entries) == p.head {
					parts.remove(r.hash[e], p)
					last = nil
				} else {
					win = &p.aggWindow
				}
			}
			if flag&evHot != 0 {
				var sum *exactSum
				if sums != nil {
					sum = &sums[e]
				}
				win.answer(s, &answers[e], sum)
				continue
			}
			if ev := batch[e]; s.Slot < len(ev.Fields) {
				ev.Fields[s.Slot] = win.value(s)
			}
		}
		i = j
	}
}

// answer sets ans to the window's figures (nil: no event), and sum to
// its exact sum (sum and avg; nil for the others).
func (w *aggWindow) answer(s *AggregateSpec, ans *aggAnswer, sum *exactSum) {
	ans.n, ans.nums, ans.distinct, ans.hasBest = 0, 0, 0, false
	if sum != nil {
		sum.reset()
	}
	if w == nil {
		return
	}
	ans.n = len(w.entries) - w.head
	switch s.Func {
	case AggSum, AggAvg:
		ans.nums = w.nums
		sum.set(&w.sum)
	case AggMin, AggMax:
		if w.mhead < len(w.mono) {
			ans.best, _ = w.mono[w.mhead].v.AsFloat()
			ans.hasBest = true
		}
	case AggDistinct:
		ans.distinct = w.seen.len()
	}
}

// sweep forgets the worker's partial windows that hold nothing at the
// watermark.
func (w *aggWorker) sweep() {
	w.swept = 0
	for si := range w.a.specs {
		w.swept += w.partials[si].removeEmpty(&w.a.specs[si], w.a.wm)
	}
}

// merge is the worker's share of the round's last phase (with salts):
// the values of a share of the salted events, from their partials'
// answers.
func (w *aggWorker) merge() {
	a := w.a
	m := &w.merged
	from, to := w.share()
	for si := range a.specs {
		s := &a.specs[si]
		r := &a.rel[si]
		for e := from; e < to; e++ {
			ev := a.batch[e]
			if r.flag[e]&(evHot|evNull) != evHot || s.Slot >= len(ev.Fields) {
				continue
			}
			m.n, m.nums, m.distinct, m.hasBest = 0, 0, 0, false
			sums := s.Func == AggSum || s.Func == AggAvg
			if sums {
				w.sum.reset()
			}
			for salt := range a.salts {
				pw := a.workers[a.workerAt(int(r.owner[e]), salt)]
				p := &pw.answers[si][e]
				m.n += p.n
				m.nums += p.nums
				m.distinct += p.distinct
				if sums {
					w.sum.merge(&pw.sums[si][e])
				}
				if p.hasBest && (!m.hasBest || s.Func == AggMin && p.best < m.best || s.Func == AggMax && p.best > m.best) {
					m.best, m.hasBest = p.best, true
				}
			}
			ev.Fields[s.Slot] = m.value(s, &w.sum)
		}
	}
}

// noteHot takes the keys the workers found hot: the metric's, and salted
// from the next release on.
func (a *ParallelAggregator) noteHot() {
	if len(a.batch) < a.hotMin {
		return // as Aggregator.noteHot: nothing could be hot
	}
	if a.wm > a.hotSince+HotPeriod {
		for _, m := range a.recent {
			clear(m)
		}
		a.hotSince = a.wm
	}
	for _, w := range a.workers {
		for si := range a.specs {
			for _, k := range w.found[si] {
				a.recent[si][k] = true
				if a.salts > 1 && !a.hot[si][k] {
					a.salt(si, k)
				}
			}
		}
	}
}

// salt makes key k of spec si hot: its window's entries move to the
// partials of their salts.
func (a *ParallelAggregator) salt(si int, k aggKey) {
	h := a.hash(k)
	a.hot[si][k] = true
	a.hotList[si] = append(a.hotList[si], hotKey{h: h, k: k, flag: evHot})
	a.hotNext[si] = append(a.hotNext[si], 0) // numbered when near its bound (near)
	for _, w := range a.workers {
		w.salted[si] = append(w.salted[si], workerSalted{})
	}
	hi := len(a.hotList[si]) - 1
	a.hotCount++
	s := &a.specs[si]
	w := a.workers[a.workerOf(h, 0)]
	old := w.partials[si].get(h, partialKey{key: k})
	if old == nil {
		return
	}
	w.partials[si].remove(h, old)
	live := old.live()
	for i, e := range live {
		a.moved++
		to := partialKey{key: k, salt: a.saltOf(s, e.h, a.moved)}
		tw := a.workers[a.workerOf(h, to.salt)]
		p := tw.partials[si].get(h, to)
		if p == nil {
			p = tw.partials[si].add(h, to)
		}
		p.insertHashed(s, e)
		if i > 0 && live[i-1].t == e.t || i+1 < len(live) && live[i+1].t == e.t {
			tw.salted[si][hi].mark(p, e.t, i) // of several of one time, in order
		}
	}
}

// value is the merged answer as the aggregate's value (sum: its exact
// sum, for sum and avg).
func (m *aggAnswer) value(s *AggregateSpec, sum *exactSum) event.Value {
	switch s.Func {
	case AggCount:
		return event.Int(int64(m.n))
	case AggDistinct:
		return event.Int(int64(m.distinct))
	case AggSum:
		return event.Float(sum.value())
	case AggAvg:
		if m.nums == 0 {
			return event.Null
		}
		return event.Float(sum.value() / float64(m.nums))
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
	RestoreMatching(b []byte) (kept []bool, err error)
	EachHeld(f func(ev *event.Event) (keep bool))
	// Close stops the goroutines of a ParallelAggregator (nothing for an
	// Aggregator); the aggregation must not be used after.
	Close()
}

var (
	_ Aggregation = (*Aggregator)(nil)
	_ Aggregation = (*ParallelAggregator)(nil)
)

// serial is the aggregator's state as a serial Aggregator's, for its
// encoding: a key's one partial, or a salted key's partials merged in
// release order (inOrder: the order the serial window has them in, of
// events of one time too, which of them the bound forgets first).
func (a *ParallelAggregator) serial() *Aggregator {
	s, _ := NewAggregator(a.specs)
	s.wm, s.arrival = a.wm, a.arrival
	s.pending = append(pendingHeap(nil), a.pending...)
	s.kept = slices.Clone(a.kept)
	s.dropped = a.Dropped()
	for si := range a.specs {
		spec, hot := &a.specs[si], a.hot[si]
		for _, w := range a.workers {
			w.partials[si].each(func(p *partial) {
				p.evict(spec, a.wm)
				if live := p.live(); len(live) > 0 && !hot[p.key.key] {
					s.keys[si][p.key.key] = &aggWindow{entries: slices.Clone(live)}
				}
			})
		}
		for hi, hk := range a.hotList[si] {
			order := a.inOrder(si, hi)
			if len(order) == 0 {
				continue
			}
			win := &aggWindow{entries: make([]aggEntry, len(order))}
			for i, o := range order {
				win.entries[i] = o.e
			}
			s.keys[si][hk.k] = win
		}
	}
	return s
}

// AppendBinary is Aggregator.AppendBinary.
func (a *ParallelAggregator) AppendBinary(b []byte) []byte { return a.serial().AppendBinary(b) }

// Restore is Aggregator.Restore: every key's window goes to its partial
// of salt 0 (no key is hot until a release says so again).
func (a *ParallelAggregator) Restore(b []byte) error {
	_, err := a.restore(b, false)
	return err
}

// RestoreMatching is Aggregator.RestoreMatching.
func (a *ParallelAggregator) RestoreMatching(b []byte) (kept []bool, err error) {
	return a.restore(b, true)
}

// EachHeld is Aggregator.EachHeld.
func (a *ParallelAggregator) EachHeld(f func(ev *event.Event) (keep bool)) {
	a.pending.filter(f)
	keepIf(&a.kept, f)
}

func (a *ParallelAggregator) restore(b []byte, matching bool) ([]bool, error) {
	s, err := NewAggregator(a.specs)
	if err != nil {
		return nil, err
	}
	kept, err := s.restore(b, matching)
	if err != nil {
		return nil, err
	}
	fresh, err := NewParallelAggregator(a.specs, len(a.workers), a.salts)
	if err != nil {
		return nil, err
	}
	fresh.hotShare, fresh.hotMin, fresh.seed = a.hotShare, a.hotMin, a.seed
	fresh.crew = a.crew // a's goroutines, stopped by a's cleanup (fresh's stops its unused crew)
	*a = *fresh
	for _, w := range a.workers {
		w.a = a
	}
	a.setPhases()
	a.wm, a.arrival, a.pending, a.kept = s.wm, s.arrival, s.pending, s.kept
	copy(a.dropped, s.dropped)
	for si := range a.specs {
		for k, win := range s.keys[si] {
			h := a.hash(k)
			a.workers[a.workerOf(h, 0)].partials[si].add(h, partialKey{key: k}).aggWindow = *win
		}
	}
	return kept, nil
}

// The crew's waits: a goroutine waiting for the next task (or the caller
// for the workers' end) first spins on an atomic (crewBusy loads, about
// 20 us here: more than a release's gap on a busy stream), then yields
// until it has waited crewYield, then (a worker) parks until woken: an
// idle aggregator's worker burns about crewYield of CPU per watermark.
// Waking a parked goroutine costs more than a release's work (measured:
// goroutines started per task of 50 us gave no speedup on 2 cores), and
// the caller pays for it: a worker whose share is light waits for the
// heavy one's release and the caller's next events, some 100 us with one
// key of 60% on 2 workers; when it parked within that (after 500 yields,
// about 60 us, before), the caller woke it at one release in six and took
// its first task, and when the hot key was the caller's that stream's
// releases took 47-49 ms instead of 37-42 per 200,000 events
// (BenchmarkSaltedAggregate's wakes/release). Yielding alone
// (runtime.Gosched) contends on the scheduler's lock.
const (
	crewBusy  = 1 << 15
	crewYield = 500 * time.Microsecond
)

// crew runs a task on every worker at once, in phases: worker 0 on the
// caller's goroutine, the others on goroutines of their own that wait for
// the next task (crewBusy, crewYield), then park. Each worker's task of
// a phase is claimed once, by its goroutine or by the caller: a caller
// done with its own task takes a task no goroutine has begun (one not
// scheduled: the machine busy), so a round never waits for a goroutine
// that does not run, and on a loaded machine the crew degrades to the
// caller doing the work alone.
type crew struct {
	n int
	// pub is the round being run: its first task's number << 4 | its
	// phases; phases its phases (nil between rounds). Tasks are numbered
	// on from 1, one a phase, the same for every worker.
	pub    atomic.Int64
	phases atomic.Pointer[[]func(i int)]
	next   int64 // the next round's first task (the caller's)
	// claimed and done: by worker, the last task claimed and done.
	claimed []paddedCounter
	done    []paddedCounter
	parked  []atomic.Bool
	wake    []chan struct{}
	stop    atomic.Bool
	started bool
	wakes   int // parked workers woken by do (the benchmark's figure)
}

// paddedCounter is an atomic counter alone on its cache line (each worker
// writes its own).
type paddedCounter struct {
	atomic.Int64
	_ [56]byte
}

func newCrew(n int) *crew {
	return &crew{n: n, next: 1, claimed: make([]paddedCounter, n), done: make([]paddedCounter, n),
		parked: make([]atomic.Bool, n), wake: make([]chan struct{}, n)}
}

// do runs the phases for every worker i, each phase once every worker is
// done with the one before, and returns when all are done.
// REQUIRES: at most 15 phases.
func (c *crew) do(phases []func(i int)) {
	if c.n == 1 {
		for _, f := range phases {
			f(0)
		}
		return
	}
	if !c.started {
		c.started = true
		for i := 1; i < c.n; i++ {
			c.wake[i] = make(chan struct{}, 1)
			go c.loop(i)
		}
	}
	start, np := c.next, int64(len(phases))
	c.next += np
	c.phases.Store(&phases)
	c.pub.Store(start<<4 | np)
	for i := 1; i < c.n; i++ {
		if c.parked[i].Load() {
			c.wakes++
			select {
			case c.wake[i] <- struct{}{}:
			default:
			}
		}
	}
	for p, f := range phases {
		t := start + int64(p)
		c.barrier(t - 1)
		c.claimed[0].Store(t)
		f(0)
		c.done[0].Store(t)
		for j := 1; j < c.n; j++ {
			if c.claimed[j].Load() == t-1 && c.claimed[j].CompareAndSwap(t-1, t) {
				f(j) // worker j's goroutine has not begun it
				c.done[j].Store(t)
			}
		}
	}
	c.barrier(start + np - 1)
	c.phases.Store(nil) // the goroutines keep no aggregator alive (NewParallelAggregator's cleanup)
}

// barrier waits until every worker is done with task t.
func (c *crew) barrier(t int64) {
	for j := range c.n {
		for spins := 0; c.done[j].Load() < t; spins++ {
			if spins >= crewBusy {
				goruntime.Gosched()
			}
		}
	}
}

// loop is worker i's goroutine: its tasks of each round it sees.
func (c *crew) loop(i int) {
	var seen int64
	for {
		var pub int64
		var yielding time.Time // since when
		for spins := 0; ; spins++ {
			if c.stop.Load() {
				return
			}
			if pub = c.pub.Load(); pub != seen {
				break
			}
			if spins < crewBusy {
				continue
			}
			if spins == crewBusy {
				yielding = time.Now()
			}
			if spins&63 != 0 || time.Since(yielding) < crewYield {
				goruntime.Gosched()
				continue
			}
			c.parked[i].Store(true)
			if c.pub.Load() == seen && !c.stop.Load() {
				<-c.wake[i]
			}
			c.parked[i].Store(false)
			spins = 0
		}
		seen = pub
		phases := c.phases.Load()
		if phases == nil {
			continue // that round is over
		}
		start, np := pub>>4, pub&15
		for p := range np {
			t := start + p
			c.barrier(t - 1)
			// A task of another round (phases read late) is never free:
			// claimed[i] is past t-1 once that round is over.
			if !c.claimed[i].CompareAndSwap(t-1, t) {
				continue // the caller took it, or the round is over
			}
			(*phases)[p](i)
			c.done[i].Store(t)
		}
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
// after); a dropped aggregator's stop when it is collected.
func (a *ParallelAggregator) Close() { a.crew.close() }
