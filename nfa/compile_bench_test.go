package nfa

import "testing"

// BenchmarkCompileTimes compiles a stage with a large exact count, which
// unrolls into that many states.
func BenchmarkCompileTimes(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		p := Begin("a").Where(nameIs("a")).Times(2000).FollowedBy("b").Where(nameIs("b"))
		if _, err := Compile(p); err != nil {
			b.Fatal(err)
		}
	}
}
