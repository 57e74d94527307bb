package nfa

// compQueue is a binary min-heap of computations ordered by the start event
// (timestamp, then per-timestamp id), with computations that have no start
// event last. Its sift rules, iteration order (array order) and bulk removal
// follow java.util.PriorityQueue exactly: Flink iterates its partial matches
// in that order, and the order decides which of several simultaneous matches
// is emitted first.
type compQueue struct {
	q []*computation
}

func compLess(a, b *computation) int {
	at, ai := a.orderKey()
	bt, bi := b.orderKey()
	switch {
	case at < bt:
		return -1
	case at > bt:
		return 1
	case ai < bi:
		return -1
	case ai > bi:
		return 1
	}
	return 0
}

func (h *compQueue) len() int { return len(h.q) }

func (h *compQueue) reset() {
	clear(h.q)
	h.q = h.q[:0]
}

func (h *compQueue) peek() *computation {
	if len(h.q) == 0 {
		return nil
	}
	return h.q[0]
}

// isHeap reports whether no element of the array sorts before its parent.
// A decoded queue is taken in its array order (the order is part of the
// semantics), so DecodeRun checks it: whatever trusts the root, such as
// prune's shortcut, would be misled by a damaged record.
func (h *compQueue) isHeap() bool {
	for i := 1; i < len(h.q); i++ {
		if compLess(h.q[i], h.q[(i-1)>>1]) < 0 {
			return false
		}
	}
	return true
}

// offer is PriorityQueue.offer: append, then sift up.
func (h *compQueue) offer(x *computation) {
	h.q = append(h.q, nil)
	k := len(h.q) - 1
	for k > 0 {
		parent := (k - 1) >> 1
		e := h.q[parent]
		if compLess(x, e) >= 0 {
			break
		}
		h.q[k] = e
		k = parent
	}
	h.q[k] = x
}

// poll is PriorityQueue.poll.
func (h *compQueue) poll() *computation {
	n := len(h.q)
	if n == 0 {
		return nil
	}
	result := h.q[0]
	n--
	x := h.q[n]
	h.q[n] = nil
	h.q = h.q[:n]
	if n > 0 {
		h.siftDown(0, x)
	}
	return result
}

func (h *compQueue) siftDown(k int, x *computation) {
	n := len(h.q)
	half := n >> 1
	for k < half {
		child := 2*k + 1
		c := h.q[child]
		right := child + 1
		if right < n && compLess(c, h.q[right]) > 0 {
			child = right
			c = h.q[child]
		}
		if compLess(x, c) <= 0 {
			break
		}
		h.q[k] = c
		k = child
	}
	h.q[k] = x
}

// removeIf is PriorityQueue.removeIf/removeAll (bulkRemove): survivors keep
// their relative array order, then the heap is rebuilt with heapify.
func (h *compQueue) removeIf(dead func(*computation) bool) bool {
	w := 0
	for _, x := range h.q {
		if !dead(x) {
			h.q[w] = x
			w++
		}
	}
	if w == len(h.q) {
		return false
	}
	clear(h.q[w:])
	h.q = h.q[:w]
	for i := (w >> 1) - 1; i >= 0; i-- {
		h.siftDown(i, h.q[i])
	}
	return true
}
