package gen

// queue is a min-heap of records by (key, seq). The generator uses two: the
// pending events in ts order, and the out-of-order window keyed by ts plus
// a random delay. Items are small so that sifting moves little memory; the
// records stay put.
type queue struct {
	items []item
}

type item struct {
	key int64
	seq uint64
	r   *Record
}

func (a item) less(b item) bool { return a.key < b.key || a.key == b.key && a.seq < b.seq }

func (q *queue) len() int { return len(q.items) }

// min returns the smallest item. REQUIRES: q.len() > 0.
func (q *queue) min() item { return q.items[0] }

func (q *queue) push(it item) {
	q.items = append(q.items, it)
	i := len(q.items) - 1
	for i > 0 {
		parent := (i - 1) / 2
		if !it.less(q.items[parent]) {
			break
		}
		q.items[i] = q.items[parent]
		i = parent
	}
	q.items[i] = it
}

// pop removes and returns the smallest item. REQUIRES: q.len() > 0.
func (q *queue) pop() item {
	top := q.items[0]
	n := len(q.items) - 1
	last := q.items[n]
	q.items[n] = item{}
	q.items = q.items[:n]
	if n > 0 {
		i := 0
		for {
			c := 2*i + 1
			if c >= n {
				break
			}
			if c+1 < n && q.items[c+1].less(q.items[c]) {
				c++
			}
			if !q.items[c].less(last) {
				break
			}
			q.items[i] = q.items[c]
			i = c
		}
		q.items[i] = last
	}
	return top
}
