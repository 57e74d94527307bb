package nfa

import (
	"slices"
	"testing"
)

// TestIncreaseAndStage: the pair equals increase then addStage, inline or
// not, and d is left as it was.
func TestIncreaseAndStage(t *testing.T) {
	long := []int32{1, 2, 3, 4, 5, 6, 7, 8}
	for _, digits := range [][]int32{{1}, {1, 3}, {2, 0, 5}, long[:deweyInline], long} {
		d := deweyOf(digits)
		for _, n := range []int{0, 1, 3} {
			cur, next := d.increaseAndStage(n)
			inc := d.increase(n)
			incStage := inc.addStage()
			if !cur.equal(&inc) || !next.equal(&incStage) {
				t.Fatalf("%v.increaseAndStage(%d) = %v, %v; want %v, %v", d, n, cur, next, inc, incStage)
			}
			if n > 0 && d.ext != nil && cur.ext == d.ext {
				t.Fatal("cur shares d's storage")
			}
			if !slices.Equal(d.digits(), digits) {
				t.Fatalf("d changed: %v, want %v", d, digits)
			}
		}
	}
}

// TestDeweyInlineAndLong: the same operations give the same digits
// whether a version is held inline or not.
func TestDeweyInlineAndLong(t *testing.T) {
	d := newDewey(1)
	want := []int32{1}
	for i := range 2 * deweyInline {
		d = d.increase(i).addStage()
		want[len(want)-1] += int32(i)
		want = append(want, 0)
		if !slices.Equal(d.digits(), want) || d.len() != len(want) {
			t.Fatalf("step %d: %v, want %v", i, d, want)
		}
		w := deweyOf(want)
		if !d.equal(&w) || !d.compatible(&w) {
			t.Fatalf("step %d: %v not equal to %v", i, d, w)
		}
		shorter := deweyOf(want[:len(want)-1])
		if !d.compatible(&shorter) || shorter.compatible(&d) {
			t.Fatalf("step %d: prefix compatibility of %v and %v", i, d, shorter)
		}
	}
}
