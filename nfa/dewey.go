package nfa

import (
	"strconv"
	"strings"
)

// dewey is a Dewey decimal version number (Flink's DeweyNumber). It tells
// apart the partial matches that share events in the shared buffer: an edge
// of the buffer may be followed by a partial match only when their versions
// are compatible. dewey values are immutable; every operation copies.
type dewey []int32

func newDewey(start int32) dewey { return dewey{start} }

// increase returns a copy with the last digit increased by n (d itself when
// n is 0: dewey values are never modified in place).
func (d dewey) increase(n int) dewey {
	if n == 0 {
		return d
	}
	out := make(dewey, len(d))
	copy(out, d)
	out[len(out)-1] += int32(n)
	return out
}

// addStage returns a copy with a new stage 0 appended.
func (d dewey) addStage() dewey {
	out := make(dewey, len(d)+1)
	copy(out, d)
	return out
}

// increaseAndStage returns d.increase(n) and its addStage(), in one
// allocation (the two never grow in place: each has its length as
// capacity).
func (d dewey) increaseAndStage(n int) (cur, next dewey) {
	buf := make([]int32, 2*len(d)+1)
	copy(buf, d)
	buf[len(d)-1] += int32(n)
	copy(buf[len(d):], buf[:len(d)])
	cur = dewey(buf[:len(d):len(d)])
	next = dewey(buf[len(d) : 2*len(d)+1 : 2*len(d)+1])
	return cur, next
}

// compatible reports whether d is compatible with o: o is a proper prefix of
// d, or both have the same length, equal leading digits and d's last digit
// is >= o's.
func (d dewey) compatible(o dewey) bool {
	switch {
	case len(d) > len(o):
		for i := range o {
			if d[i] != o[i] {
				return false
			}
		}
		return true
	case len(d) == len(o):
		last := len(d) - 1
		for i := 0; i < last; i++ {
			if d[i] != o[i] {
				return false
			}
		}
		return d[last] >= o[last]
	}
	return false
}

func (d dewey) equal(o dewey) bool {
	if len(d) != len(o) {
		return false
	}
	for i := range d {
		if d[i] != o[i] {
			return false
		}
	}
	return true
}

func (d dewey) String() string {
	parts := make([]string, len(d))
	for i, x := range d {
		parts[i] = strconv.Itoa(int(x))
	}
	return strings.Join(parts, ".")
}
