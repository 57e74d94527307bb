// Package benchmarks will hold Cepheus's end-to-end benchmarks (throughput in
// events/s, latency, allocations, checkpoint cost) and the side-by-side
// comparison with Flink CEP.
//
// This is a placeholder: there are no benchmarks yet. They arrive with later
// issues. Micro-benchmarks live beside the code they measure, not here.
//
// # Invariants
//
//   - Benchmarks go through the public API of package cep only.
//   - Inputs are built before the timed loop from fixed seeds; benchmarks
//     report allocations and use b.Loop.
//   - Results are compared with benchstat, not eyeballed.
//
// # Imports
//
// Package benchmarks may import, of ours, cep, event, internal/gen and
// rulesets. internal/lint enforces this.
package benchmarks
