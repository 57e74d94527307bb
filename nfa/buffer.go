package nfa

import "github.com/cepheus-cep/cepheus/event"

// The shared buffer stores each event that some partial match has taken once,
// however many partial matches share it (Flink's SharedBuffer). A node is one
// (event, stage) pair; its edges point to the node of the previously taken
// event, each labelled with the Dewey version of the partial match that
// created it. Reference counts on events, nodes and edges follow Flink's
// Lockable rules exactly, because an edge released too early changes what a
// later extraction finds.

// eventID is Flink's EventId: the event's timestamp and a counter of the
// events registered with that timestamp. It orders partial matches and
// decides after-match pruning.
type eventID struct {
	ts event.Time
	id int32
}

func (a eventID) cmp(b eventID) int {
	switch {
	case a.ts < b.ts:
		return -1
	case a.ts > b.ts:
		return 1
	case a.id < b.id:
		return -1
	case a.id > b.id:
		return 1
	}
	return 0
}

type bufEvent struct {
	ev   *event.Event
	id   eventID
	key  uint64 // run-local identity, stable across snapshots
	refs int32
}

// A node leaves the buffer when its last lock is released, but Flink's
// locking lets edges and partial matches still name it then (Flink would
// fail looking it up: we skip such references, as before). Nodes are
// recycled through the Result's free list, so a reference is a pointer and
// the generation the node had when the reference was made: the node
// bumps its generation when it leaves the buffer, which makes every
// reference made before stale at once.
type node struct {
	ev    *bufEvent
	edges []*edge
	gen   uint64
	stage int32
	refs  int32
}

// nodeRef names a node of the buffer; the zero nodeRef is nil (the start
// of a match).
type nodeRef struct {
	n   *node
	gen uint64
}

func (n *node) ref() nodeRef { return nodeRef{n: n, gen: n.gen} }

// isNil reports whether x names no node at all (the start of a match), as
// opposed to a node that left the buffer.
func (x nodeRef) isNil() bool { return x.n == nil }

// live reports whether x names a node that is still in the buffer.
func (x nodeRef) live() bool { return x.n != nil && x.n.gen == x.gen }

// removed reports whether x names a node that has left the buffer:
// lookups by its NodeId would fail in Flink.
func (x nodeRef) removed() bool { return x.n != nil && x.n.gen != x.gen }

type edge struct {
	target  nodeRef // nil: the start of the match
	version dewey
	refs    int32
	seq     int32 // its node has an edgeIndex: its order among the node's edges; -1: released
}

type nodeKey struct {
	ev    uint64
	stage int32
}

// release is Flink's Lockable.release: it reports whether nothing holds the
// entry any more.
func release(refs *int32) bool {
	if *refs <= 0 {
		return true
	}
	*refs--
	return *refs == 0
}

func (r *Run) registerEvent(ev *event.Event, ts event.Time) *bufEvent {
	if r.counts.len() == 0 || ts < r.countsMin {
		r.countsMin = ts
	}
	id, _ := r.counts.get(ts)
	r.counts.put(ts, id+1)
	r.nextKey++
	b := r.newBufEvent()
	*b = bufEvent{ev: ev, id: eventID{ts: ts, id: id}, key: r.nextKey, refs: 1}
	r.events.put(b.key, b)
	return b
}

func (r *Run) releaseEvent(b *bufEvent) {
	if _, ok := r.events.get(b.key); !ok {
		return
	}
	if release(&b.refs) {
		r.events.del(b.key)
		// Only the buffer's nodes and the event being processed hold a
		// bufEvent, and each holds one lock: none is left.
		r.freeBufEvent(b)
	}
}

// put stores ev as taken by stage after prev with the given version.
func (r *Run) put(stage int, ev *bufEvent, prev nodeRef, version *dewey) nodeRef {
	if !prev.isNil() {
		r.lockNode(prev, version)
	}
	k := nodeKey{ev: ev.key, stage: int32(stage)}
	n, _ := r.nodes.get(k)
	if n == nil {
		n = r.newNode()
		n.ev, n.stage = ev, int32(stage)
		r.nodes.put(k, n)
		ev.refs++
	}
	e := r.newEdge(prev, version)
	ix := r.indexed(n)
	n.edges = append(n.edges, e)
	if ix != nil {
		ix.add(e)
	}
	return n.ref()
}

func (r *Run) lockNode(x nodeRef, version *dewey) {
	if !x.live() {
		return
	}
	n := x.n
	n.refs++
	if ix := r.indexed(n); ix != nil {
		r.cands = ix.compatible(r.cands[:0], version, false)
		for _, e := range r.cands {
			e.refs++
		}
		clear(r.cands)
		return
	}
	for _, e := range n.edges {
		if version.compatible(&e.version) {
			e.refs++
		}
	}
}

type releaseItem struct {
	n nodeRef
	v dewey // a copy: the released edge goes back to the free list
}

// releaseNode releases the lock version holds on x and, through the edges
// that lock no longer holds, on the nodes before it.
func (r *Run) releaseNode(x nodeRef, version *dewey) {
	if x.isNil() {
		return
	}
	stack := append(r.releaseStack[:0], releaseItem{x, *version})
	for len(stack) > 0 {
		it := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if !it.n.live() {
			break // as Flink: a missing entry ends the whole release
		}
		cur := it.n.n
		if ix := r.indexed(cur); ix != nil {
			r.cands = ix.compatible(r.cands[:0], &it.v, true)
			for _, e := range r.cands {
				if release(&e.refs) {
					if !e.target.isNil() {
						stack = append(stack, releaseItem{e.target, e.version})
					}
					ix.drop(e) // freed by compact (or freeNode)
				}
			}
			clear(r.cands)
			if ix.dead > 0 && 2*ix.dead >= len(cur.edges) {
				r.compact(cur, ix)
			}
		} else {
			stack = r.releaseEdges(cur, &it.v, stack)
		}
		if release(&cur.refs) {
			r.nodes.del(nodeKey{ev: cur.ev.key, stage: cur.stage})
			r.releaseEvent(cur.ev)
			r.freeNode(cur)
		}
	}
	clear(stack)
	r.releaseStack = stack[:0]
}

// releaseEdges releases v's lock on the compatible edges of cur, a node
// with no index, pushing on stack the nodes before the edges that nothing
// holds any more, and returns stack.
func (r *Run) releaseEdges(cur *node, v *dewey, stack []releaseItem) []releaseItem {
	kept := cur.edges[:0]
	for _, e := range cur.edges {
		if v.compatible(&e.version) && release(&e.refs) {
			if !e.target.isNil() {
				stack = append(stack, releaseItem{e.target, e.version})
			}
			r.freeEdge(e) // only its node's edge list held it
			continue
		}
		kept = append(kept, e)
	}
	clear(cur.edges[len(kept):])
	cur.edges = kept
	return stack
}

// pathEntry is one taken event of an extracted match.
type pathEntry struct {
	stage int
	ev    *bufEvent
}

// path is an extracted (partial) match, earliest taken event first.
type path []pathEntry

// extractItem is a node the search of extract still has to visit, with the
// version that reached it and the path so far: the index in the scratch
// trail of the node visited before it (-1: none).
type extractItem struct {
	n    nodeRef
	v    dewey
	tail int32
}

// trailEntry is a visited node of extract's search and the index of the
// one visited before it on the same path (-1: none).
type trailEntry struct {
	n    *node
	prev int32
}

// extract reconstructs the matches ending in x that are compatible with
// version by a depth-first search over the versioned edges (Flink's
// extractPatterns). For a computation there is exactly one. The paths live
// in the Result's scratch storage: they are valid until the next extract.
func (r *Run) extract(x nodeRef, version *dewey) []path {
	if !x.live() {
		return nil
	}
	result := r.paths[:0]
	entries := r.pathEntries[:0]
	trail := r.trail[:0]
	stack := append(r.extractStack[:0], extractItem{n: x, v: *version, tail: -1})
	for len(stack) > 0 {
		it := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if it.n.isNil() {
			// The trail from it.tail back to the node extract started
			// at runs from the earliest taken event to the latest.
			from := len(entries)
			for i := it.tail; i >= 0; i = trail[i].prev {
				entries = append(entries, pathEntry{stage: int(trail[i].n.stage), ev: trail[i].n.ev})
			}
			result = append(result, path(entries[from:len(entries):len(entries)]))
			continue
		}
		cur := it.n.n
		trail = append(trail, trailEntry{n: cur, prev: it.tail})
		at := int32(len(trail) - 1)
		for _, e := range r.edgesFor(cur, &it.v) {
			if !it.v.compatible(&e.version) {
				continue
			}
			if e.target.removed() {
				continue // Flink would fail on the missing entry
			}
			stack = append(stack, extractItem{n: e.target, v: e.version, tail: at})
		}
	}
	clear(stack)
	r.extractStack = stack[:0]
	clear(trail)
	r.trail = trail[:0]
	// entries and result stay set until the next extract: the caller reads
	// them.
	r.pathEntries, r.paths = entries, result
	return result
}

// newEdge returns an edge to target, reusing a released one.
func (r *Run) newEdge(target nodeRef, version *dewey) *edge {
	e := reuse(&r.freeEdges)
	*e = edge{target: target, version: *version}
	return e
}

// freeEdge takes back an edge its node dropped.
func (r *Run) freeEdge(e *edge) {
	*e = edge{}
	keep(&r.freeEdges, e)
}

// maxFree bounds each free list of a Result.
const maxFree = 16384

// recycle turns the free lists on; tests turn it off to compare runs that
// reuse nothing with runs that do.
var recycle = true

// reuse takes the last value of a free list, or a new one when it is
// empty.
func reuse[T any](list *[]*T) *T {
	l := *list
	n := len(l)
	if n == 0 {
		return new(T)
	}
	x := l[n-1]
	l[n-1] = nil
	*list = l[:n-1]
	return x
}

// keep puts x, set to its zero state by the caller, on a free list,
// unless recycling is off or the list is full.
func keep[T any](list *[]*T, x *T) {
	if recycle && len(*list) < maxFree {
		*list = append(*list, x)
	}
}

// newNode returns an empty node, reusing one that left a buffer (its
// generation, bumped then, makes the references to its former self stale).
func (r *Run) newNode() *node { return reuse(&r.freeNodes) }

// freeNode takes back a node that left the buffer: its generation moves
// on, so every reference to it is stale from now on, and the edges it
// still holds (which only it held) go back to their free list.
func (r *Run) freeNode(n *node) {
	n.gen++
	if r.edgeIdx != nil {
		delete(r.edgeIdx, n)
	}
	for _, e := range n.edges {
		r.freeEdge(e)
	}
	clear(n.edges)
	n.edges, n.ev, n.stage, n.refs = n.edges[:0], nil, 0, 0
	keep(&r.freeNodes, n)
}

// newBufEvent returns a bufEvent to set, reusing a released one.
func (r *Run) newBufEvent() *bufEvent { return reuse(&r.freeEvents) }

// freeBufEvent takes back an event no node and no call holds any more.
func (r *Run) freeBufEvent(b *bufEvent) {
	*b = bufEvent{}
	keep(&r.freeEvents, b)
}
