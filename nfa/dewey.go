package nfa

import (
	"strconv"
	"strings"
)

// dewey is a Dewey decimal version number (Flink's DeweyNumber). It tells
// apart the partial matches that share events in the shared buffer: an edge
// of the buffer may be followed by a partial match only when their versions
// are compatible.
//
// A dewey is a value: up to deweyInline digits live inside it, so the
// versions a step makes allocate nothing; a longer one (a partial match
// that took more than deweyInline-1 events) keeps its digits in ext, which
// is never modified once made, so copies may share it.
type dewey struct {
	in  [deweyInline]int32
	n   int32   // number of digits
	ext []int32 // the digits when n > deweyInline; nil otherwise
}

const deweyInline = 6

func newDewey(start int32) dewey { return dewey{in: [deweyInline]int32{start}, n: 1} }

// deweyOf returns the version with the given digits (copied).
func deweyOf(digits []int32) dewey {
	var d dewey
	d.n = int32(len(digits))
	if len(digits) > deweyInline {
		d.ext = append([]int32(nil), digits...)
	} else {
		copy(d.in[:], digits)
	}
	return d
}

// digits returns d's digits; the caller must not modify them.
func (d *dewey) digits() []int32 {
	if d.ext != nil {
		return d.ext
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
		ext := make([]int32, len(d.ext))
		copy(ext, d.ext)
		ext[len(ext)-1] += int32(n)
		d.ext = ext
		return d
	}
	d.in[d.n-1] += int32(n)
	return d
}

// addStage returns d with a new stage 0 appended.
func (d dewey) addStage() dewey {
	switch {
	case d.ext != nil:
		ext := make([]int32, len(d.ext)+1)
		copy(ext, d.ext)
		d.ext = ext
	case d.n == deweyInline:
		ext := make([]int32, deweyInline+1)
		copy(ext, d.in[:])
		d.ext, d.in = ext, [deweyInline]int32{}
	default:
		d.in[d.n] = 0
	}
	d.n++
	return d
}

// increaseAndStage returns d.increase(n) and its addStage(); when both
// are longer than deweyInline they share one allocation (neither grows in
// place: each has its length as capacity).
func (d dewey) increaseAndStage(n int) (cur, next dewey) {
	if d.ext == nil {
		cur = d.increase(n)
		return cur, cur.addStage()
	}
	l := len(d.ext)
	buf := make([]int32, 2*l+1)
	copy(buf, d.ext)
	buf[l-1] += int32(n)
	copy(buf[l:], buf[:l])
	cur, next = d, d
	cur.ext = buf[:l:l]
	next.ext, next.n = buf[l:2*l+1:2*l+1], d.n+1
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
