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

type node struct {
	ev      *bufEvent
	stage   int
	edges   []*edge
	refs    int32
	removed bool // removed from the buffer: lookups by NodeId would fail
}

type edge struct {
	target  *node // nil: the start of the match
	version dewey
	refs    int32
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
	b := &bufEvent{ev: ev, id: eventID{ts: ts, id: id}, key: r.nextKey, refs: 1}
	r.events.put(b.key, b)
	return b
}

func (r *Run) releaseEvent(b *bufEvent) {
	if _, ok := r.events.get(b.key); !ok {
		return
	}
	if release(&b.refs) {
		r.events.del(b.key)
	}
}

// put stores ev as taken by stage after prev with the given version.
func (r *Run) put(stage int, ev *bufEvent, prev *node, version dewey) *node {
	if prev != nil {
		r.lockNode(prev, version)
	}
	k := nodeKey{ev: ev.key, stage: int32(stage)}
	n, _ := r.nodes.get(k)
	if n == nil {
		n = &node{ev: ev, stage: stage}
		r.nodes.put(k, n)
		ev.refs++
	}
	n.edges = append(n.edges, r.newEdge(prev, version))
	return n
}

func (r *Run) lockNode(n *node, version dewey) {
	if n == nil || n.removed {
		return
	}
	n.refs++
	for _, e := range n.edges {
		if version.compatible(e.version) {
			e.refs++
		}
	}
}

type releaseItem struct {
	n *node
	v dewey
}

func (r *Run) releaseNode(n *node, version dewey) {
	if n == nil {
		return
	}
	stack := append(r.releaseStack[:0], releaseItem{n, version})
	for len(stack) > 0 {
		it := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		cur := it.n
		if cur.removed {
			break // as Flink: a missing entry ends the whole release
		}
		kept := cur.edges[:0]
		for _, e := range cur.edges {
			if it.v.compatible(e.version) && release(&e.refs) {
				if e.target != nil {
					stack = append(stack, releaseItem{e.target, e.version})
				}
				r.freeEdge(e) // only its node's edge list held it
				continue
			}
			kept = append(kept, e)
		}
		clear(cur.edges[len(kept):])
		cur.edges = kept
		if release(&cur.refs) {
			cur.removed = true
			r.nodes.del(nodeKey{ev: cur.ev.key, stage: int32(cur.stage)})
			r.releaseEvent(cur.ev)
		}
	}
	clear(stack)
	r.releaseStack = stack[:0]
}

// pathEntry is one taken event of an extracted match.
type pathEntry struct {
	stage int
	ev    *bufEvent
}

// path is an extracted (partial) match, earliest taken event first.
type path []pathEntry

func (p path) byStage(n int) [][]*bufEvent {
	out := make([][]*bufEvent, n)
	for _, e := range p {
		out[e.stage] = append(out[e.stage], e.ev)
	}
	return out
}

type extractItem struct {
	n    *node
	v    dewey
	path []*node
}

// extract reconstructs the matches ending in n that are compatible with
// version by a depth-first search over the versioned edges (Flink's
// extractPatterns). For a computation there is exactly one.
func (r *Run) extract(n *node, version dewey) []path {
	if n == nil || n.removed {
		return nil
	}
	var result []path
	stack := []extractItem{{n: n, v: version}}
	for len(stack) > 0 {
		it := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if it.n == nil {
			p := make(path, len(it.path))
			for i, x := range it.path {
				p[len(it.path)-1-i] = pathEntry{stage: x.stage, ev: x.ev}
			}
			result = append(result, p)
			continue
		}
		cur := append(it.path, it.n)
		first := true
		for _, e := range it.n.edges {
			if !it.v.compatible(e.version) {
				continue
			}
			if e.target != nil && e.target.removed {
				continue // Flink would fail on the missing entry
			}
			np := cur
			if first {
				first = false
			} else {
				np = append([]*node(nil), cur...)
			}
			stack = append(stack, extractItem{n: e.target, v: e.version, path: np[:len(np):len(np)]})
		}
	}
	return result
}

// newEdge returns an edge to target, reusing a released one.
func (r *Run) newEdge(target *node, version dewey) *edge {
	if n := len(r.freeEdges); n > 0 {
		e := r.freeEdges[n-1]
		r.freeEdges[n-1] = nil
		r.freeEdges = r.freeEdges[:n-1]
		*e = edge{target: target, version: version}
		return e
	}
	return &edge{target: target, version: version}
}

// freeEdge takes back an edge its node dropped.
func (r *Run) freeEdge(e *edge) {
	if len(r.freeEdges) < 4096 {
		*e = edge{}
		r.freeEdges = append(r.freeEdges, e)
	}
}
