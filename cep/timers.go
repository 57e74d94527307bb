package cep

import "github.com/cepheus-cep/cepheus/event"

// The operator keeps timers for the keys that have something to do later:
// their earliest buffered element and their run's next window deadline.
// All timers sit in binary min-heaps and FIFO lanes ordered by (due time,
// the key's rank, the key bytes), so a watermark pops exactly the keys it
// concerns and never scans all keys (Flink keeps one timer per buffered
// timestamp in its timer service; one per key and kind is enough because
// firing a key drains everything due).
//
// Re-arming a key does not search the heap: it pushes a new entry and
// bumps the key's generation, which makes the old entry stale; stale
// entries are skipped when popped and swept out when they pile up.
//
// A key has two timers, one for its earliest buffered element
// (keyState.timer) and one for its run's (a SharedOperator: its rules')
// earliest window deadline (keyState.deadline); it fires once, when the
// earlier is due, and every one of its timers due by then is disarmed
// (popDue), so the keys fire exactly as with one timer at the earlier
// time. Two timers keep a deadline armed once instead of re-arming the key
// at every element that arrives before it and again at the deadline after
// the element fires: a deadline that is not due stays armed when the key
// fires for an element, and needs no new entry when the firing leaves it
// unchanged (most partial matches outlive many elements). And each kind
// is mostly armed in the order it comes due: a key's first element arms
// it at its timestamp, in arrival order up to the stream's disorder, and
// the deadlines armed in a time advance are its released elements'
// timestamps (ascending, and after those of the previous advance) plus a
// window. An entry that sorts
// after the last entry of one of its kind's FIFO lanes goes to the end of
// that lane (the one with the greatest such last entry; an empty one if
// none) instead of the heap: each lane stays sorted by the heap's order,
// and popDue takes the least of the lanes' heads and the heap's top, so
// keys fire in exactly the order the heap alone gives (two live entries
// of different keys are never equal: the key bytes break every other
// tie). A lane costs O(1) per timer against the heap's O(log n) swaps,
// and the heaps, one per kind, keep only the timers that came out of
// order: the buffer timers' heap stays small, as they are due within the
// stream's disorder, apart from the long-lived deadlines.

// timerRef is a key's view of one of its timers.
type timerRef struct {
	due   event.Time
	gen   uint64 // generation of the live heap entry
	armed bool
}

// timerEntry copies the key's rank and key: a stale entry's ks may have
// been recycled for another key, and the heap order must not change under
// it.
type timerEntry struct {
	due   event.Time
	order uint64
	key   event.Key
	gen   uint64
	ks    *keyState
	kind  timerKind
}

// timerKind says which of a key's timers an entry is.
type timerKind uint8

const (
	bufferTimer   timerKind = iota // keyState.timer
	deadlineTimer                  // keyState.deadline
	timerKinds
)

func (ks *keyState) timerOf(k timerKind) *timerRef {
	if k == deadlineTimer {
		return &ks.deadline
	}
	return &ks.timer
}

// armed reports whether one of ks's timers is armed.
func (ks *keyState) armed() bool { return ks.timer.armed || ks.deadline.armed }

func (e *timerEntry) live() bool {
	r := e.ks.timerOf(e.kind)
	return r.armed && r.gen == e.gen
}

func (e *timerEntry) less(b *timerEntry) bool {
	if e.due != b.due {
		return e.due < b.due
	}
	if e.order != b.order {
		return e.order < b.order
	}
	return e.key < b.key
}

type timerHeap struct {
	// h holds, by kind, the entries that came out of order: the buffer
	// timers' heap stays small (they are due within the stream's
	// disorder), the deadlines' holds the deadlines armed out of order.
	h     [timerKinds]timerPQ
	lanes [timerKinds][lanesPerKind]timerLane
	n     int // entries in h and the lanes, stale ones included
	stale int // entries in h and the lanes that are no longer live
}

const lanesPerKind = 2

// timerPQ is a binary min-heap of entries by less.
type timerPQ []timerEntry

// timerLane is a FIFO of entries sorted by less: q[head:]; q[:head] are
// popped (zeroed).
type timerLane struct {
	q    []timerEntry
	head int
}

func (l *timerLane) len() int { return len(l.q) - l.head }

// pop drops the head of l, moving what is left to the front of its array
// once the popped part is most of it.
func (l *timerLane) pop() {
	l.q[l.head] = timerEntry{}
	l.head++
	switch {
	case l.head == len(l.q):
		l.q, l.head = l.q[:0], 0
	case l.head >= 256 && l.head >= len(l.q)/2:
		n := copy(l.q, l.q[l.head:])
		clear(l.q[n:])
		l.q, l.head = l.q[:n], 0
	}
}

// arm sets ks's (buffer) timer to due, replacing any previous one.
func (t *timerHeap) arm(ks *keyState, due event.Time) { t.armKind(ks, bufferTimer, due) }

// armDeadline sets ks's deadline timer to due, replacing any previous one.
func (t *timerHeap) armDeadline(ks *keyState, due event.Time) { t.armKind(ks, deadlineTimer, due) }

func (t *timerHeap) armKind(ks *keyState, k timerKind, due event.Time) {
	r := ks.timerOf(k)
	if r.armed {
		t.stale++
	}
	r.gen++
	r.due, r.armed = due, true
	e := timerEntry{due: due, order: ks.order, key: ks.key, gen: r.gen, ks: ks, kind: k}
	if l := t.laneFor(&e); l != nil {
		l.q = append(l.q, e)
	} else {
		t.h[k].push(e)
	}
	t.n++
	t.maybeCompact()
}

// laneFor returns the lane of e's kind that e can go to the end of, nil
// if none: of those whose last entry is not greater than e, the one with
// the greatest, else an empty one.
func (t *timerHeap) laneFor(e *timerEntry) *timerLane {
	var best, empty *timerLane
	for i := range t.lanes[e.kind] {
		l := &t.lanes[e.kind][i]
		if l.len() == 0 {
			if empty == nil {
				empty = l
			}
			continue
		}
		last := &l.q[len(l.q)-1]
		if !e.less(last) && (best == nil || best.q[len(best.q)-1].less(last)) {
			best = l
		}
	}
	if best != nil {
		return best
	}
	return empty
}

// disarm cancels ks's timers, if any.
func (t *timerHeap) disarm(ks *keyState) {
	t.disarmKind(ks, bufferTimer)
	t.disarmKind(ks, deadlineTimer)
}

// disarmKind cancels ks's timer of kind k, if armed.
func (t *timerHeap) disarmKind(ks *keyState, k timerKind) {
	if r := ks.timerOf(k); r.armed {
		r.armed = false
		t.stale++
		t.maybeCompact()
	}
}

// popDue removes and returns the key with the earliest live timer, and that
// timer's due time, if it is due at or before now, else nil. The returned
// key's timers that are due at or before now are disarmed (it fires once
// for both); its other timer, due later, stays armed, so that a window
// deadline that a firing does not change need not be armed again. Only
// the least entry is checked for being live (reading its key): a stale one
// is dropped and the next least taken.
func (t *timerHeap) popDue(now event.Time) (*keyState, event.Time) {
	for {
		var e *timerEntry
		var fromH *timerPQ
		var from *timerLane
		for k := range t.h {
			if h := &t.h[k]; len(*h) > 0 && (e == nil || (*h)[0].less(e)) {
				e, fromH = &(*h)[0], h
			}
		}
		for k := range t.lanes {
			for i := range t.lanes[k] {
				if l := &t.lanes[k][i]; l.len() > 0 && (e == nil || l.q[l.head].less(e)) {
					e, from = &l.q[l.head], l
				}
			}
		}
		if e == nil {
			return nil, 0
		}
		live := e.live()
		if live && e.due > now {
			return nil, 0
		}
		ks, kind, due := e.ks, e.kind, e.due
		if from != nil {
			from.pop()
		} else {
			fromH.pop()
		}
		t.n--
		if !live {
			t.stale--
			continue
		}
		for k := range timerKinds {
			if r := ks.timerOf(k); r.armed && r.due <= now {
				r.armed = false
				if k != kind {
					t.stale++ // the key's other timer
				}
			}
		}
		return ks, due
	}
}

func (t *timerHeap) len() int { return t.n - t.stale }

// entries counts the entries the heap and the lanes hold, stale ones
// included (t.n, which the hot paths keep instead).
func (t *timerHeap) entries() int {
	n := len(t.h[bufferTimer]) + len(t.h[deadlineTimer])
	for k := range t.lanes {
		for i := range t.lanes[k] {
			n += t.lanes[k][i].len()
		}
	}
	return n
}

// maybeCompact drops the stale entries once they are most of the entries.
func (t *timerHeap) maybeCompact() {
	if t.stale < 64 || t.stale <= t.n/2 {
		return
	}
	for k := range t.h {
		h := t.h[k]
		live := h[:0]
		for _, e := range h {
			if e.live() {
				live = append(live, e)
			}
		}
		clear(h[len(live):])
		t.h[k] = live
		for i := len(live)/2 - 1; i >= 0; i-- {
			live.down(i)
		}
	}
	// A lane stays sorted when entries are taken out of it.
	for k := range t.lanes {
		for i := range t.lanes[k] {
			l := &t.lanes[k][i]
			live := l.q[:0]
			for _, e := range l.q[l.head:] {
				if e.live() {
					live = append(live, e)
				}
			}
			clear(l.q[len(live):])
			l.q, l.head = live, 0
		}
	}
	t.n, t.stale = t.entries(), 0
}

func (h *timerPQ) push(e timerEntry) {
	*h = append(*h, e)
	h.up(len(*h) - 1)
}

func (h *timerPQ) pop() {
	n := len(*h) - 1
	(*h)[0] = (*h)[n]
	(*h)[n] = timerEntry{}
	*h = (*h)[:n]
	if n > 0 {
		h.down(0)
	}
}

func (h timerPQ) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h[i].less(&h[p]) {
			return
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func (h timerPQ) down(i int) {
	n := len(h)
	for {
		c := 2*i + 1
		if c >= n {
			return
		}
		if r := c + 1; r < n && h[r].less(&h[c]) {
			c = r
		}
		if !h[c].less(&h[i]) {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}
