package nfa

// table is a map that keeps its first entries in two slices, searched
// linearly, and moves them to a Go map once it holds more than
// tableSlots: most runs hold a handful of events, nodes and event counters,
// for which a Go map costs an allocation of a few hundred bytes per run
// and a hash on every access. Iteration order is unspecified, as a map's.
type table[K comparable, V any] struct {
	keys []K
	vals []V
	m    map[K]V // nil while the entries fit in the slices
}

const tableSlots = 8

func (t *table[K, V]) len() int {
	if t.m != nil {
		return len(t.m)
	}
	return len(t.keys)
}

func (t *table[K, V]) get(k K) (V, bool) {
	if t.m != nil {
		v, ok := t.m[k]
		return v, ok
	}
	for i := range t.keys {
		if t.keys[i] == k {
			return t.vals[i], true
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
	for i := range t.keys {
		if t.keys[i] == k {
			t.vals[i] = v
			return
		}
	}
	if len(t.keys) < tableSlots {
		t.keys = append(t.keys, k)
		t.vals = append(t.vals, v)
		return
	}
	t.m = make(map[K]V, 2*tableSlots)
	for i := range t.keys {
		t.m[t.keys[i]] = t.vals[i]
	}
	t.m[k] = v
	clear(t.vals)
	t.keys, t.vals = t.keys[:0], t.vals[:0]
}

func (t *table[K, V]) del(k K) {
	if t.m != nil {
		delete(t.m, k)
		return
	}
	for i := range t.keys {
		if t.keys[i] == k {
			last := len(t.keys) - 1
			t.keys[i], t.vals[i] = t.keys[last], t.vals[last]
			var zero V
			t.vals[last] = zero
			t.keys, t.vals = t.keys[:last], t.vals[:last]
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
	for i := len(t.keys) - 1; i >= 0; i-- {
		f(t.keys[i], t.vals[i])
	}
}

// reset empties t, keeping the slices' storage.
func (t *table[K, V]) reset() {
	clear(t.vals)
	t.keys, t.vals, t.m = t.keys[:0], t.vals[:0], nil
}
