package nfa

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"slices"

	"github.com/cepheus-cep/cepheus/event"
)

// ErrCorruptRun is returned by [NFA.DecodeRun] for truncated or inconsistent
// input.
var ErrCorruptRun = errors.New("nfa: corrupt run state")

const runEncodingVersion = 2

// AppendBinary appends a compact, deterministic encoding of the run's state
// to b: buffered events, buffer nodes and edges with their reference counts,
// partial and completed matches in queue (heap array) order, which
// [NFA.DecodeRun] keeps and checks. The encoding names states by
// their index in the compiled NFA, so it can only be decoded by an NFA with
// the same state graph ([NFA.DecodeRun] checks a fingerprint of the graph;
// conditions are not part of it).
func (r *Run) AppendBinary(b []byte) []byte {
	b = append(b, runEncodingVersion)
	b = binary.LittleEndian.AppendUint64(b, r.nfa.fingerprint)
	b = binary.AppendUvarint(b, r.nextKey)

	evs := make([]*bufEvent, 0, r.events.len())
	r.events.each(func(_ uint64, e *bufEvent) { evs = append(evs, e) })
	slices.SortFunc(evs, func(x, y *bufEvent) int { return cmpU64(x.key, y.key) })
	b = binary.AppendUvarint(b, uint64(len(evs)))
	for _, e := range evs {
		b = binary.AppendUvarint(b, e.key)
		b = binary.AppendVarint(b, int64(e.id.ts))
		b = binary.AppendVarint(b, int64(e.id.id))
		b = binary.AppendVarint(b, int64(e.refs))
		b = e.ev.AppendBinary(b)
	}

	nodes := make([]*node, 0, r.nodes.len())
	r.nodes.each(func(_ nodeKey, n *node) { nodes = append(nodes, n) })
	slices.SortFunc(nodes, func(x, y *node) int {
		if c := cmpU64(x.ev.key, y.ev.key); c != 0 {
			return c
		}
		return int(x.stage) - int(y.stage)
	})
	index := make(map[*node]uint64, len(nodes))
	for i, n := range nodes {
		index[n] = uint64(i) + 1 // 0 encodes nil
	}
	// A reference to a node that left the buffer encodes as nil, as it did
	// when such a node was never reused: its pointer may name another
	// node now.
	indexOf := func(x nodeRef) uint64 {
		if !x.live() {
			return 0
		}
		return index[x.n]
	}
	b = binary.AppendUvarint(b, uint64(len(nodes)))
	for _, n := range nodes {
		b = binary.AppendUvarint(b, n.ev.key)
		b = binary.AppendUvarint(b, uint64(n.stage))
		b = binary.AppendVarint(b, int64(n.refs))
		b = binary.AppendUvarint(b, uint64(r.liveEdges(n)))
		for _, e := range n.edges {
			if e.seq < 0 {
				continue // released (edgeIndex)
			}
			b = binary.AppendUvarint(b, indexOf(e.target))
			b = appendDewey(b, &e.version)
			b = binary.AppendVarint(b, int64(e.refs))
		}
	}

	counts := make([]event.Time, 0, r.counts.len())
	r.counts.each(func(t event.Time, _ int32) { counts = append(counts, t) })
	slices.Sort(counts)
	b = binary.AppendUvarint(b, uint64(len(counts)))
	for _, t := range counts {
		c, _ := r.counts.get(t)
		b = binary.AppendVarint(b, int64(t))
		b = binary.AppendVarint(b, int64(c))
	}

	for _, q := range []*compQueue{&r.partial, &r.completed} {
		b = binary.AppendUvarint(b, uint64(len(q.q)))
		for _, c := range q.q {
			b = binary.AppendUvarint(b, uint64(c.state.id))
			b = appendDewey(b, &c.version)
			b = binary.AppendVarint(b, int64(c.startTs))
			b = binary.AppendVarint(b, int64(c.prevTs))
			b = binary.AppendUvarint(b, indexOf(c.prev))
			b = binary.AppendVarint(b, int64(c.doneAt))
			if c.hasStart {
				b = append(b, 1)
				b = binary.AppendVarint(b, int64(c.startID.ts))
				b = binary.AppendVarint(b, int64(c.startID.id))
			} else {
				b = append(b, 0)
			}
		}
	}
	return b
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func appendDewey(b []byte, d *dewey) []byte {
	ds := d.digits()
	b = binary.AppendUvarint(b, uint64(len(ds)))
	for _, x := range ds {
		b = binary.AppendVarint(b, int64(x))
	}
	return b
}

type decoder struct {
	event.Reader
}

// int32 reads a signed varint that must fit an int32 (ids, counts and
// reference counts are int32s: a larger one is corrupt, not truncated).
func (d *decoder) int32() int32 {
	v := d.Varint()
	if v < math.MinInt32 || v > math.MaxInt32 {
		d.Fail()
		return 0
	}
	return int32(v)
}

func (d *decoder) dewey() dewey {
	n := d.Count()
	if n == 0 {
		if d.Err == nil {
			d.Err = ErrCorruptRun
		}
		return dewey{}
	}
	var buf [deweyInline]int32
	digits := buf[:0]
	for range n {
		digits = append(digits, d.int32())
	}
	return deweyOf(digits)
}

// DecodeRun decodes a run encoded by [Run.AppendBinary] for this NFA and
// returns the rest of b.
func (n *NFA) DecodeRun(b []byte) (*Run, []byte, error) {
	d := &decoder{event.Reader{B: b, Corrupt: ErrCorruptRun}}
	if v := d.Byte(); d.Err == nil && v != runEncodingVersion {
		return nil, nil, fmt.Errorf("%w: unknown encoding version %d", ErrCorruptRun, v)
	}
	if len(d.B) < 8 {
		return nil, nil, ErrCorruptRun
	}
	if fp := binary.LittleEndian.Uint64(d.B); d.Err == nil && fp != n.fingerprint {
		return nil, nil, fmt.Errorf("%w: encoded for another pattern (fingerprint %016x, this NFA has %016x)", ErrCorruptRun, fp, n.fingerprint)
	}
	d.B = d.B[8:]
	r := &Run{nfa: n}
	r.nextKey = d.Uvarint()
	var prevKey uint64

	// The events, the nodes and the counts come in ascending order, each
	// once (AppendBinary sorts them); an event's key is at most nextKey,
	// the last one given.
	ne := d.Count()
	for i := 0; i < ne && d.Err == nil; i++ {
		e := &bufEvent{key: d.Uvarint()}
		e.id.ts = event.Time(d.Varint())
		e.id.id = d.int32()
		e.refs = d.int32()
		if d.Err == nil && (e.key > r.nextKey || i > 0 && e.key <= prevKey) {
			d.Err = fmt.Errorf("%w: buffered event %d out of order", ErrCorruptRun, e.key)
		}
		if d.Err != nil {
			break
		}
		prevKey = e.key
		ev, rest, err := event.DecodeEvent(d.B)
		if err != nil {
			d.Err = fmt.Errorf("%w: %v", ErrCorruptRun, err)
			break
		}
		d.B = rest
		e.ev = ev
		r.events.put(e.key, e)
	}

	nn := d.Count()
	nodes := make([]*node, nn)
	for i := range nodes {
		nodes[i] = &node{}
	}
	lookup := func(i uint64) nodeRef {
		if i == 0 {
			return nodeRef{}
		}
		if i > uint64(len(nodes)) {
			d.Err = ErrCorruptRun
			return nodeRef{}
		}
		return nodes[i-1].ref()
	}
	for i, nd := range nodes {
		if d.Err != nil {
			break
		}
		key := d.Uvarint()
		stage := d.Uvarint()
		nd.refs = d.int32()
		ev, _ := r.events.get(key)
		if d.Err == nil && (ev == nil || stage >= uint64(len(n.stages))) {
			d.Err = ErrCorruptRun
		}
		if prev := nodes[max(i-1, 0)]; d.Err == nil && i > 0 && (key < prev.ev.key || key == prev.ev.key && int32(stage) <= prev.stage) {
			d.Err = fmt.Errorf("%w: buffer node (%d, %d) out of order", ErrCorruptRun, key, stage)
		}
		nd.ev, nd.stage = ev, int32(stage)
		nedges := d.Count()
		for j := 0; j < nedges && d.Err == nil; j++ {
			// An edge leads to the node of an earlier event: one
			// decoded before this node (nodes are in event order), so
			// the edges make no cycle.
			t := d.Uvarint()
			if d.Err == nil && t > 0 && (t > uint64(i) || nodes[t-1].ev.key >= key) {
				d.Err = fmt.Errorf("%w: buffer node (%d, %d) has an edge to a later event", ErrCorruptRun, key, stage)
				break
			}
			e := &edge{target: lookup(t)}
			e.version = d.dewey()
			e.refs = d.int32()
			nd.edges = append(nd.edges, e)
		}
		if d.Err == nil {
			r.nodes.put(nodeKey{ev: key, stage: int32(stage)}, nd)
		}
	}

	nc := d.Count()
	var prevTime event.Time
	for i := 0; i < nc && d.Err == nil; i++ {
		t := event.Time(d.Varint())
		if d.Err == nil && i > 0 && t <= prevTime {
			d.Err = fmt.Errorf("%w: event count at %d out of order", ErrCorruptRun, t)
		}
		prevTime = t
		r.counts.put(t, d.int32())
		if i == 0 || t < r.countsMin {
			r.countsMin = t
		}
	}

	for qi, q := range []*compQueue{&r.partial, &r.completed} {
		nq := d.Count()
		for i := 0; i < nq && d.Err == nil; i++ {
			sid := d.Uvarint()
			if d.Err == nil && sid >= uint64(len(n.states)) {
				d.Err = ErrCorruptRun
				break
			}
			c := &computation{state: n.states[sid]}
			c.version = d.dewey()
			c.startTs = event.Time(d.Varint())
			c.prevTs = event.Time(d.Varint())
			c.prev = lookup(d.Uvarint())
			c.doneAt = event.Time(d.Varint())
			if d.Bool() {
				c.hasStart = true
				c.startID.ts = event.Time(d.Varint())
				c.startID.id = d.int32()
			}
			// Append in encoded (array) order: it was a valid heap
			// (checked below) and its iteration order is part of the
			// semantics.
			q.q = append(q.q, c)
		}
		if d.Err == nil && !q.isHeap() {
			d.Err = fmt.Errorf("%w: %s queue out of heap order", ErrCorruptRun, [...]string{"partial", "completed"}[qi])
		}
	}
	if d.Err != nil {
		if errors.Is(d.Err, ErrCorruptRun) {
			return nil, nil, d.Err
		}
		return nil, nil, fmt.Errorf("%w: %v", ErrCorruptRun, d.Err)
	}
	r.summarize()
	return r, d.B, nil
}

// graphFingerprint hashes the shape of the state graph (names, types, gap
// windows, transitions), the window and the skip strategy with FNV-1a.
func graphFingerprint(n *NFA) uint64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "w%d s%s t%v|", n.windowTime, n.skip, n.handleTimeout)
	for _, s := range n.states {
		fmt.Fprintf(h, "%s/%d/%d/%d:", s.name, s.typ, s.stage, s.gap)
		for _, t := range s.trans {
			fmt.Fprintf(h, "%d>%d,", t.act, t.dst.id)
		}
		h.Write([]byte{'\n'})
	}
	return h.Sum64()
}
