// Package benchmarks holds Cepheus's end-to-end benchmarks and the
// side-by-side comparison with Flink CEP (make bench-compare; README.md in
// this directory says what each workload is and how both engines run it).
//
// The workloads ([Workloads]) are rulesets in workloads/, compiled through
// the public API (cep.CompileRuleset), over data from a seeded generator
// (internal/gen's ChainWorkload, SequenceWorkload and VelocityWorkload)
// written once as CSV and read into memory by both engines before any
// timing. [Run] drives one rule's keyed operator over the events in event
// time, counts the matches and hashes their signatures ([SignatureHash]);
// the Flink job in flinkcep/ computes the same hash, and the report
// ([Summarize], [Table]) fails when the two disagree. cmd/cepbench is the
// command the script scripts/bench-compare.sh drives.
//
// # Invariants
//
//   - Benchmarks go through the public API of package cep only.
//   - Inputs are built before the timed loop from fixed seeds; Go
//     benchmarks report allocations and use b.Loop.
//   - Both engines see the same events in the same order, with the same
//     warm-up and watermark bound, and must find the same matches.
//   - Results are compared with benchstat, not eyeballed.
//
// # Imports
//
// Package benchmarks may import, of ours, cep, event, internal/gen and
// rulesets; cmd/cepbench only benchmarks. internal/lint enforces this.
package benchmarks
