package nfa

import (
	"math/rand/v2"
	"testing"
)

// TestTable checks table against a Go map over random operations that
// cross the move from slices to a map and back through reset.
func TestTable(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var tb table[int, int]
	want := map[int]int{}
	for step := range 20000 {
		k := rng.IntN(24)
		switch op := rng.IntN(10); {
		case op < 5:
			tb.put(k, step)
			want[k] = step
		case op < 8:
			tb.del(k)
			delete(want, k)
		case op == 8:
			// each may delete the entry it is given.
			tb.each(func(k, v int) {
				if v%3 == 0 {
					tb.del(k)
					delete(want, k)
				}
			})
		default:
			if rng.IntN(50) == 0 {
				tb.reset()
				clear(want)
			}
		}
		if tb.len() != len(want) {
			t.Fatalf("step %d: len %d, want %d", step, tb.len(), len(want))
		}
		for k := range 24 {
			v, ok := tb.get(k)
			if wv, wok := want[k]; ok != wok || v != wv {
				t.Fatalf("step %d: get(%d) = %d, %v; want %d, %v", step, k, v, ok, wv, wok)
			}
		}
		seen := 0
		tb.each(func(k, v int) {
			seen++
			if want[k] != v {
				t.Fatalf("step %d: each gives %d=%d, want %d", step, k, v, want[k])
			}
		})
		if seen != len(want) {
			t.Fatalf("step %d: each gives %d entries, want %d", step, seen, len(want))
		}
	}
}
