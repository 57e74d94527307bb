package runtime

// distinctTable holds a distinct set's values by the hash of their key:
// open addressing with linear probing over a power-of-two array, an entry
// removed by shifting back the entries of its cluster after it. A
// window's values come and go at every event: a table that marks removed
// entries (as Go's maps do) probes ever longer runs of them between two
// rehashes, which was half of a distinct count's time on a hot key.
type distinctTable struct {
	slots []distinctSlot // len a power of two (or 0), at most 3/4 used
	n     int
}

// distinctSlot is a slot of a distinctTable: empty while n is 0.
type distinctSlot struct {
	h uint64
	distinctValue
}

// distinctTableMin is the fewest slots of a table that has any.
const distinctTableMin = 32

// len is the number of values in t.
func (t *distinctTable) len() int { return t.n }

// find returns the index of the slot of hash h (-1: none).
func (t *distinctTable) find(h uint64) int {
	if t.n == 0 {
		return -1
	}
	mask := uint64(len(t.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		switch s := &t.slots[i]; {
		case s.n == 0:
			return -1
		case s.h == h:
			return int(i)
		}
	}
}

// add puts value k of hash h, counted once, into t, which has no value of
// that hash.
func (t *distinctTable) add(h uint64, k aggKey) {
	if (t.n+1)*4 > len(t.slots)*3 {
		t.resize(max(distinctTableMin, 2*len(t.slots)))
	}
	t.put(h, distinctValue{key: k, n: 1})
	t.n++
}

// put puts v of hash h into the first free slot from its home.
func (t *distinctTable) put(h uint64, v distinctValue) {
	mask := uint64(len(t.slots) - 1)
	i := h & mask
	for t.slots[i].n != 0 {
		i = (i + 1) & mask
	}
	t.slots[i] = distinctSlot{h: h, distinctValue: v}
}

// remove removes the value in slot i of t, then shrinks t when it is
// mostly empty (a window that was long once keeps no large table).
func (t *distinctTable) remove(i int) {
	mask := len(t.slots) - 1
	// Each entry of the cluster after i moves back to i when i lies on its
	// way from its home (cyclically in [home, j)), which leaves j free.
	for j := (i + 1) & mask; t.slots[j].n != 0; j = (j + 1) & mask {
		home := int(t.slots[j].h) & mask
		if (j-home)&mask >= (j-i)&mask {
			t.slots[i] = t.slots[j]
			i = j
		}
	}
	t.slots[i] = distinctSlot{}
	t.n--
	if len(t.slots) > distinctTableMin && t.n*8 < len(t.slots) {
		t.resize(len(t.slots) / 2)
	}
}

// resize moves t's values to n slots.
func (t *distinctTable) resize(n int) {
	old := t.slots
	t.slots = make([]distinctSlot, n)
	for i := range old {
		if s := &old[i]; s.n != 0 {
			t.put(s.h, s.distinctValue)
		}
	}
}
