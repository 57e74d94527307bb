package nfa

import "testing"

// TestIncreaseAndStage: the pair equals increase then addStage, and
// neither grows into the other.
func TestIncreaseAndStage(t *testing.T) {
	for _, d := range []dewey{{1}, {1, 3}, {2, 0, 5}} {
		for _, n := range []int{0, 1, 3} {
			cur, next := d.increaseAndStage(n)
			if !cur.equal(d.increase(n)) || !next.equal(d.increase(n).addStage()) {
				t.Fatalf("%v.increaseAndStage(%d) = %v, %v; want %v, %v", d, n, cur, next, d.increase(n), d.increase(n).addStage())
			}
			grown := append(cur, 9)
			if !next.equal(d.increase(n).addStage()) || len(grown) != len(cur)+1 {
				t.Fatalf("appending to cur changed next: %v", next)
			}
			if n == 0 && len(d) > 0 && &cur[0] == &d[0] {
				t.Fatal("cur shares d's storage")
			}
		}
	}
}
