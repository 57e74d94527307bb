package cep

import (
	"cmp"
	"slices"

	"github.com/cepheus-cep/cepheus/event"
)

// Most elements that reach a key holding no state start no rule there:
// buffered, timed and fired, they are found inert for every rule's idle
// run (the relevance filter, docs/decisions.md), and the key is dropped
// again. An element that arrives at a key with no state (none in memory,
// none cold) and that every start group finds inert for an idle run at
// its timestamp is held aside instead, as the key's ghost: no key state,
// no buffer, no timer (docs/decisions.md, "Ghost elements").
//
// This is exact because a ghost becomes the element it stands for
// whenever anything could tell the difference:
//   - When the watermark passes it, the operator would have fired the key
//     with that element alone at idle runs, which releases and emits
//     nothing and drops the key: the ghost is forgotten.
//   - When another element reaches the key before that, the ghost is
//     buffered first, as it arrived (with its Seq, which ranks the key),
//     and the new element goes on as usual: from then on the key is what
//     it would have been, and an element with an earlier timestamp that
//     starts a run there meets the ghost's element as it would have.
//   - A snapshot, a rule added or removed, or a watermark lower than the
//     last (by which the ghosts would no longer tell what the watermark
//     passed) buffers every ghost first.
//
// Stats and RuleStats count a ghost as a key holding its pending elements,
// as the key would. Ghosts are made in event time only, while no rule
// has failed and no snapshot is in progress.

// ghost is what is held aside for a key with no state: elements that
// every start group finds inert for an idle run, in arrival order (the
// first inline, the others in more: most keys have one). Elements the
// watermark has passed stay until the whole ghost is forgotten or
// buffered; only those it has not passed count (pending).
type ghost struct {
	first ghostElem
	more  []ghostElem
	// rank is the Seq of the first element held, the key's rank while
	// any of them would still be buffered; maxTs is the latest timestamp.
	rank  uint64
	maxTs event.Time
}

type ghostElem struct {
	ev *event.Event
	ts event.Time
}

// maxGhostMore bounds a ghost's elements: a key that gets more before the
// watermark passes them is buffered as usual.
const maxGhostMore = 15

// pending returns the number of g's elements that the watermark w has
// not passed (those it passed would have been fired).
func (g *ghost) pending(w event.Time) int {
	n := 0
	if g.first.ts > w {
		n++
	}
	for _, e := range g.more {
		if e.ts > w {
			n++
		}
	}
	return n
}

// ghostEntry is a ghost in the queue of them in arrival order, by which
// forgetGhosts finds the ghosts the watermark passes: ts is a timestamp
// of one of its elements when queued. An entry may outlive its ghost, and
// a ghost have several (they are checked against the map).
type ghostEntry struct {
	key event.Key
	ts  event.Time
}

// mayGhost reports whether ev at ts, reaching a key with no state, can be
// held as a ghost: every start group finds it inert for an idle run. The
// group that last found an element not inert is asked first, so that an
// element that starts a rule costs one evaluation more than before, not
// one per group.
func (o *SharedOperator) mayGhost(ev *event.Event, ts event.Time) bool {
	if o.cfg.TimeMode != EventTime || o.snap != nil || o.noGhosts {
		return false
	}
	if o.ghostGroups == nil {
		for _, r := range o.rules {
			if !slices.Contains(o.ghostGroups, r.start) {
				o.ghostGroups = append(o.ghostGroups, r.start)
			}
		}
	}
	for _, r := range o.rules {
		if r.err != nil {
			return false
		}
	}
	for i, g := range o.ghostGroups {
		if !g.probe.Inert(ev, ts, &o.res) {
			copy(o.ghostGroups[1:i+1], o.ghostGroups[:i])
			o.ghostGroups[0] = g
			return false
		}
	}
	return true
}

// ghostOf returns the ghost of k with an element the watermark has not
// passed (nil: none; one whose elements it all passed is forgotten).
func (o *SharedOperator) ghostOf(k event.Key) *ghost {
	g := o.ghosts[k]
	if g != nil && g.maxTs <= o.watermark {
		o.dropGhost(k, g)
		return nil
	}
	return g
}

// addGhost holds ev at ts as a ghost element of k, which has no state;
// g is k's ghost (nil: it has none). A ghost is changed in place: a key
// given a second element costs no map assignment.
func (o *SharedOperator) addGhost(k event.Key, g *ghost, ev *event.Event, ts event.Time) {
	if g != nil {
		g.more = append(g.more, ghostElem{ev: ev, ts: ts})
		g.maxTs = max(g.maxTs, ts)
		return
	}
	if o.ghosts == nil {
		o.ghosts = map[event.Key]*ghost{}
	}
	if n := len(o.freeGhosts); n > 0 {
		g = o.freeGhosts[n-1]
		o.freeGhosts = o.freeGhosts[:n-1]
	} else {
		g = &ghost{}
	}
	g.first, g.rank, g.maxTs = ghostElem{ev: ev, ts: ts}, ev.Seq, ts
	o.ghosts[k] = g
	o.ghostQ = append(o.ghostQ, ghostEntry{key: k, ts: ts})
}

// dropGhost forgets g, the ghost of k.
func (o *SharedOperator) dropGhost(k event.Key, g *ghost) {
	delete(o.ghosts, k)
	o.freeGhost(g)
}

// freeGhost keeps g, which is no key's ghost any more, for another key:
// its elements are cleared, the room of its more kept, so that a ghost
// given more elements seldom allocates.
func (o *SharedOperator) freeGhost(g *ghost) {
	clear(g.more)
	*g = ghost{more: g.more[:0]}
	o.freeGhosts = append(o.freeGhosts, g)
}

// unghost buffers ghost g of k, which it no longer is: its elements the
// watermark has not passed, in arrival order, k ranked by g.rank.
func (o *SharedOperator) unghost(k event.Key, g *ghost, out *Output) {
	delete(o.ghosts, k)
	w := o.watermark
	if g.first.ts > w {
		o.bufferRanked(k, g.first.ev, g.first.ts, g.rank, out)
	}
	for _, e := range g.more {
		if e.ts > w {
			o.bufferRanked(k, e.ev, e.ts, g.rank, out)
		}
	}
	o.freeGhost(g)
}

// unghostAll buffers every ghost (in the order of their ranks: it
// decides nothing, each key is new, but keeps the arming of timers as
// it was).
func (o *SharedOperator) unghostAll() {
	if len(o.ghosts) == 0 {
		return
	}
	keys := make([]event.Key, 0, len(o.ghosts))
	for k := range o.ghosts {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b event.Key) int { return cmp.Compare(o.ghosts[a].rank, o.ghosts[b].rank) })
	var out Output
	for _, k := range keys {
		if g := o.ghostOf(k); g != nil {
			o.unghost(k, g, &out)
		}
	}
	clear(o.ghostQ)
	o.ghostQ, o.ghostHead = o.ghostQ[:0], 0
}

// forgetGhosts forgets the ghosts the watermark w passes, found from the
// front of the queue: the operator would fire their elements now, at idle
// runs, and emit nothing. A ghost with a later element is queued again
// for it; one behind an entry the watermark has not passed waits (ghostOf
// and pending tell it apart).
//
// When the entries the watermark passes are at least half as many as the
// ghosts, the ghosts are rebuilt instead (rebuildGhosts): one pass over
// them costs less than a lookup and a deletion for each one forgotten.
func (o *SharedOperator) forgetGhosts(w event.Time) {
	q := o.ghostQ
	i := o.ghostHead
	passed := i
	for passed < len(q) && q[passed].ts <= w {
		passed++
	}
	if n := len(o.ghosts); n > 0 && 2*(passed-i) >= n {
		o.rebuildGhosts(w)
		return
	}
	again := o.ghostAgain[:0]
	for ; i < len(q) && q[i].ts <= w; i++ {
		e := q[i]
		q[i] = ghostEntry{}
		switch g := o.ghosts[e.key]; {
		case g == nil:
		case g.maxTs <= w:
			o.dropGhost(e.key, g)
		case e.ts < g.maxTs:
			again = append(again, ghostEntry{key: e.key, ts: g.maxTs})
		}
	}
	switch {
	case i == len(q):
		q, i = q[:0], 0
	case i >= 1024 && i >= len(q)/2:
		n := copy(q, q[i:])
		clear(q[n:])
		q, i = q[:n], 0
	}
	o.ghostQ, o.ghostHead = append(q, again...), i
	clear(again)
	o.ghostAgain = again[:0]
}

// rebuildGhosts forgets every ghost the watermark w passes and keeps the
// others in the spare map, which then takes the place of the ghosts' (the
// old one, cleared, is the next spare: neither is made again), and queues
// each ghost kept once, at its latest timestamp, in the order of those.
func (o *SharedOperator) rebuildGhosts(w event.Time) {
	kept := o.ghostSpare
	if kept == nil {
		kept = map[event.Key]*ghost{}
	}
	q := o.ghostQ
	clear(q)
	q = q[:0]
	for k, g := range o.ghosts {
		if g.maxTs <= w {
			o.freeGhost(g)
			continue
		}
		kept[k] = g
		q = append(q, ghostEntry{key: k, ts: g.maxTs})
	}
	slices.SortFunc(q, func(a, b ghostEntry) int { return cmp.Compare(a.ts, b.ts) })
	clear(o.ghosts)
	o.ghosts, o.ghostSpare = kept, o.ghosts
	o.ghostQ, o.ghostHead = q, 0
}

// pendingGhosts counts the keys with ghost elements the watermark has not
// passed, and those elements.
func (o *SharedOperator) pendingGhosts() (keys, elems int) {
	for _, g := range o.ghosts {
		if n := g.pending(o.watermark); n > 0 {
			keys++
			elems += n
		}
	}
	return keys, elems
}
