package nfa

import (
	"strconv"
	"strings"
	"unsafe"
)

// dewey is a Dewey decimal version number (Flink's DeweyNumber). It tells
// apart the partial matches that share events in the shared buffer: an edge
// of the buffer may be followed by a partial match only when their versions
// are compatible.
//
// A dewey is a value of 32 bytes: up to deweyInline digits live inside
// it, so the versions a step makes allocate nothing; a longer one (a
// partial match that took more than deweyInline-1 events) keeps its
// digits on the heap, never modified once made, so copies may share them.
type dewey struct {
	in [deweyInline]int32
	n  int32 // number of digits
	// ext points to the first of the n digits when n > deweyInline; nil
	// otherwise. A pointer, not a slice, keeps the value small (the
	// buffer holds one per edge and computation); digits makes the slice.
	ext *int32
}

const deweyInline = 5

func newDewey(start int32) dewey { return dewey{in: [deweyInline]int32{start}, n: 1} }

// deweyOf returns the version with the given digits (copied).
func deweyOf(digits []int32) dewey {
	var d dewey
	d.n = int32(len(digits))
	if len(digits) > deweyInline {
		d.ext = &append([]int32(nil), digits...)[0]
	} else {
		copy(d.in[:], digits)
	}
	return d
}

// digits returns d's digits; the caller must not modify them.
func (d *dewey) digits() []int32 {
	if d.ext != nil {
		return unsafe.Slice(d.ext, d.n)
	}
	return d.in[:d.n]
}

func (d dewey) len() int { return int(d.n) }

// increase returns d with the last digit increased by n.
func (d dewey) increase(n int) dewey {
	if n == 0 {
		return d
	}
	if d.ext != nil {
		ext := make([]int32, d.n)
		copy(ext, d.digits())
		ext[len(ext)-1] += int32(n)
		d.ext = &ext[0]
		return d
	}
	d.in[d.n-1] += int32(n)
	return d
}

// addStage returns d with a new stage 0 appended.
func (d dewey) addStage() dewey {
	switch {
	case d.ext != nil:
		ext := make([]int32, d.n+1)
		copy(ext, d.digits())
		d.ext = &ext[0]
	case d.n == deweyInline:
		ext := make([]int32, deweyInline+1)
		copy(ext, d.in[:])
		d.ext, d.in = &ext[0], [deweyInline]int32{}
	default:
		d.in[d.n] = 0
	}
	d.n++
	return d
}

// increaseAndStage returns d.increase(n) and its addStage(); when both
// are longer than deweyInline they share one allocation (neither is ever
// modified).
func (d dewey) increaseAndStage(n int) (cur, next dewey) {
	if d.ext == nil {
		cur = d.increase(n)
		return cur, cur.addStage()
	}
	l := int(d.n)
	buf := make([]int32, 2*l+1)
	copy(buf, d.digits())
	buf[l-1] += int32(n)
	copy(buf[l:], buf[:l])
	cur, next = d, d
	cur.ext = &buf[0]
	next.ext, next.n = &buf[l], d.n+1
	return cur, next
}

// compatible reports whether d is compatible with o: o is a proper prefix of
// d, or both have the same length, equal leading digits and d's last digit
// is >= o's.
func (d *dewey) compatible(o *dewey) bool {
	dd, od := d.digits(), o.digits()
	switch {
	case len(dd) > len(od):
		for i := range od {
			if dd[i] != od[i] {
				return false
			}
		}
		return true
	case len(dd) == len(od):
		last := len(dd) - 1
		for i := 0; i < last; i++ {
			if dd[i] != od[i] {
				return false
			}
		}
		return dd[last] >= od[last]
	}
	return false
}

func (d *dewey) equal(o *dewey) bool {
	dd, od := d.digits(), o.digits()
	if len(dd) != len(od) {
		return false
	}
	for i := range dd {
		if dd[i] != od[i] {
			return false
		}
	}
	return true
}

func (d dewey) String() string {
	ds := d.digits()
	parts := make([]string, len(ds))
	for i, x := range ds {
		parts[i] = strconv.Itoa(int(x))
	}
	return strings.Join(parts, ".")
}
