package cep

import "github.com/cepheus-cep/cepheus/event"

// The operator keeps one timer per key that has something to do later: its
// earliest buffered element or its run's next window deadline. All timers
// sit in one binary min-heap ordered by (due time, the key's rank, the key
// bytes), so a watermark pops exactly the keys it concerns and never scans
// all keys (Flink keeps one timer per buffered timestamp in its timer
// service; one per key is enough because firing a key drains everything
// due).
//
// Re-arming a key does not search the heap: it pushes a new entry and
// bumps the key's generation, which makes the old entry stale; stale
// entries are skipped when popped and swept out when they pile up.

// timerRef is a key's view of its timer.
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
}

func (e *timerEntry) live() bool { return e.ks.timer.armed && e.ks.timer.gen == e.gen }

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
	h     []timerEntry
	stale int // entries in h that are no longer live
}

// arm sets ks's timer to due, replacing any previous one.
func (t *timerHeap) arm(ks *keyState, due event.Time) {
	if ks.timer.armed {
		t.stale++
	}
	ks.timer.gen++
	ks.timer.due, ks.timer.armed = due, true
	t.push(timerEntry{due: due, order: ks.order, key: ks.key, gen: ks.timer.gen, ks: ks})
	t.maybeCompact()
}

// disarm cancels ks's timer, if any.
func (t *timerHeap) disarm(ks *keyState) {
	if ks.timer.armed {
		ks.timer.armed = false
		t.stale++
		t.maybeCompact()
	}
}

// popDue removes and returns the key with the earliest live timer if it is
// due at or before now, else nil. The returned key is disarmed.
func (t *timerHeap) popDue(now event.Time) *keyState {
	for len(t.h) > 0 {
		e := &t.h[0]
		if !e.live() {
			t.pop()
			t.stale--
			continue
		}
		if e.due > now {
			return nil
		}
		ks := e.ks
		t.pop()
		ks.timer.armed = false
		return ks
	}
	return nil
}

func (t *timerHeap) len() int { return len(t.h) - t.stale }

// maybeCompact drops the stale entries once they are most of the heap.
func (t *timerHeap) maybeCompact() {
	if t.stale < 64 || t.stale <= len(t.h)/2 {
		return
	}
	live := t.h[:0]
	for _, e := range t.h {
		if e.live() {
			live = append(live, e)
		}
	}
	clear(t.h[len(live):])
	t.h, t.stale = live, 0
	for i := len(t.h)/2 - 1; i >= 0; i-- {
		t.down(i)
	}
}

func (t *timerHeap) push(e timerEntry) {
	t.h = append(t.h, e)
	t.up(len(t.h) - 1)
}

func (t *timerHeap) pop() {
	n := len(t.h) - 1
	t.h[0] = t.h[n]
	t.h[n] = timerEntry{}
	t.h = t.h[:n]
	if n > 0 {
		t.down(0)
	}
}

func (t *timerHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !t.h[i].less(&t.h[p]) {
			return
		}
		t.h[i], t.h[p] = t.h[p], t.h[i]
		i = p
	}
}

func (t *timerHeap) down(i int) {
	n := len(t.h)
	for {
		c := 2*i + 1
		if c >= n {
			return
		}
		if r := c + 1; r < n && t.h[r].less(&t.h[c]) {
			c = r
		}
		if !t.h[c].less(&t.h[i]) {
			return
		}
		t.h[i], t.h[c] = t.h[c], t.h[i]
		i = c
	}
}
