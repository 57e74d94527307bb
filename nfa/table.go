package nfa

// table is a map that keeps its first entries in one slice of pairs,
// searched linearly, and moves them to a Go map once it holds more than
// tableSlots: most runs hold a handful of events, nodes and event counters,
// for which a Go map costs an allocation of a few hundred bytes per run
// and a hash on every access. Iteration order is unspecified, as a map's.
type table[K comparable, V any] struct {
	pairs []tablePair[K, V]
	m     map[K]V // nil while the entries fit in pairs
}

type tablePair[K comparable, V any] struct {
	k K
	v V
}

const tableSlots = 8

func (t *table[K, V]) len() int {
	if t.m != nil {
		return len(t.m)
	}
	return len(t.pairs)
}

func (t *table[K, V]) get(k K) (V, bool) {
	if t.m != nil {
		v, ok := t.m[k]
		return v, ok
	}
	for i := range t.pairs {
		if t.pairs[i].k == k {
			return t.pairs[i].v, true
		}
	}
	var zero V
	return zero, false
}

func (t *table[K, V]) put(k K, v V) {
	if t.m != nil {
		t.m[k] = v
		return
	}
	for i := range t.pairs {
		if t.pairs[i].k == k {
			t.pairs[i].v = v
			return
		}
	}
	if len(t.pairs) < tableSlots {
		t.pairs = append(t.pairs, tablePair[K, V]{k, v})
		return
	}
	t.m = make(map[K]V, 2*tableSlots)
	for _, p := range t.pairs {
		t.m[p.k] = p.v
	}
	t.m[k] = v
	clear(t.pairs)
	t.pairs = t.pairs[:0]
}

func (t *table[K, V]) del(k K) {
	if t.m != nil {
		delete(t.m, k)
		return
	}
	for i := range t.pairs {
		if t.pairs[i].k == k {
			last := len(t.pairs) - 1
			t.pairs[i] = t.pairs[last]
			t.pairs[last] = tablePair[K, V]{}
			t.pairs = t.pairs[:last]
			return
		}
	}
}

// each calls f for every entry; f may delete the entry it is given.
func (t *table[K, V]) each(f func(K, V)) {
	if t.m != nil {
		for k, v := range t.m {
			f(k, v)
		}
		return
	}
	for i := len(t.pairs) - 1; i >= 0; i-- {
		f(t.pairs[i].k, t.pairs[i].v)
	}
}

// reset empties t, keeping the slice's storage.
func (t *table[K, V]) reset() {
	clear(t.pairs)
	t.pairs, t.m = t.pairs[:0], nil
}
