package nfa

import (
	"math/bits"
	"slices"
)

// A node's edges are scanned for those compatible with a version when a
// partial match locks the node, releases it, or reads its events. Patterns
// of nested loops (a looping group inside a looping group, followedByAny)
// give a node tens of thousands of edges, each of another partial match,
// while a version is compatible with one or two of them: the scans made
// such a case run minutes on 11 events, in Flink as here. From
// edgeIndexMin edges a node's edges are also kept in an edgeIndex, by the
// hash of their version without its last digit: a version of n digits is
// compatible only with edges of at most n digits that agree with it on all
// but their last (dewey.compatible), so n lookups find them all.
//
// A node with an index drops its released edges lazily: they stay in its
// list, marked (seq -1) and out of the index, until they are half of it,
// and every reader of the list skips them.

// edgeIndexMin is the number of edges from which a node's edges are found
// through an index (small nodes, the usual ones, are scanned as before). A
// variable for the tests, which index every node or none.
var edgeIndexMin = 64

// edgeIndex is a node's edges by the hash of their version's digits but
// the last (parentHash).
type edgeIndex struct {
	byParent map[uint64][]*edge
	next     int32 // the seq of the next edge of the node
	dead     int   // released edges still in the node's list
}

// indexed returns n's edge index, made now if n has edgeIndexMin edges or
// more; nil: n's edges are scanned.
func (r *Run) indexed(n *node) *edgeIndex {
	if r.edgeIdx != nil {
		if x := r.edgeIdx[n]; x != nil {
			return x
		}
	}
	if len(n.edges) < edgeIndexMin {
		return nil
	}
	x := &edgeIndex{byParent: make(map[uint64][]*edge, len(n.edges))}
	for _, e := range n.edges {
		x.add(e)
	}
	if r.edgeIdx == nil {
		r.edgeIdx = map[*node]*edgeIndex{}
	}
	r.edgeIdx[n] = x
	return x
}

// parentHash is the hash of ds but its last digit.
func parentHash(ds []int32) uint64 {
	h := uint64(edgeHashSeed)
	for _, d := range ds[:len(ds)-1] {
		h = mixDigit(h, d)
	}
	return h
}

const edgeHashSeed = 0x9e3779b97f4a7c15

func mixDigit(h uint64, d int32) uint64 {
	return bits.RotateLeft64((h^uint64(uint32(d)))*0xff51afd7ed558ccd, 29) * 0xc4ceb9fe1a85ec53
}

// add indexes e, the node's newest edge.
func (x *edgeIndex) add(e *edge) {
	e.seq = x.next
	x.next++
	h := parentHash(e.version.digits())
	x.byParent[h] = append(x.byParent[h], e)
}

// drop takes released edge e out of the index and marks it.
func (x *edgeIndex) drop(e *edge) {
	h := parentHash(e.version.digits())
	l := x.byParent[h]
	i := slices.Index(l, e)
	l[i] = l[len(l)-1]
	l[len(l)-1] = nil
	if l = l[:len(l)-1]; len(l) == 0 {
		delete(x.byParent, h)
	} else {
		x.byParent[h] = l
	}
	e.seq = -1
	x.dead++
}

// compatible appends to dst the edges compatible with v (v.compatible of
// their version), in the node's order when ordered.
func (x *edgeIndex) compatible(dst []*edge, v *dewey, ordered bool) []*edge {
	from := len(dst)
	ds := v.digits()
	h := uint64(edgeHashSeed)
	for j := range ds {
		// The edges of j+1 digits whose first j are v's.
		for _, e := range x.byParent[h] {
			if e.version.len() == j+1 && v.compatible(&e.version) {
				dst = append(dst, e)
			}
		}
		h = mixDigit(h, ds[j])
	}
	if ordered && len(dst)-from > 1 {
		slices.SortFunc(dst[from:], func(a, b *edge) int { return int(a.seq) - int(b.seq) })
	}
	return dst
}

// edgesFor returns the edges of n a reader looking for those compatible
// with v scans (testing each): all of them, or, when n is indexed, only
// the compatible ones, in the node's order.
func (r *Run) edgesFor(n *node, v *dewey) []*edge {
	ix := r.indexed(n)
	if ix == nil {
		return n.edges
	}
	r.cands = ix.compatible(r.cands[:0], v, true)
	return r.cands
}

// compact frees the released edges still in n's list.
func (r *Run) compact(n *node, x *edgeIndex) {
	kept := n.edges[:0]
	for _, e := range n.edges {
		if e.seq < 0 {
			r.freeEdge(e)
			continue
		}
		kept = append(kept, e)
	}
	clear(n.edges[len(kept):])
	n.edges = kept
	x.dead = 0
}

// liveEdges is the number of n's edges not released.
func (r *Run) liveEdges(n *node) int {
	if x := r.edgeIdx[n]; x != nil {
		return len(n.edges) - x.dead
	}
	return len(n.edges)
}
