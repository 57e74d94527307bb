//go:build !unix

package benchmarks

// cpuSeconds is the CPU time of the process so far: not measured off
// Unix, where the benchmarks do not run (the figures say 0).
func cpuSeconds() float64 { return 0 }
