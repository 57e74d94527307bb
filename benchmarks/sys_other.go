//go:build !linux

package benchmarks

// kernel names the kernel of the machine: the report says it on Linux
// only, where the benchmarks run.
func kernel() string { return "" }
