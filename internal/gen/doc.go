// Package gen will generate seeded synthetic event streams with labelled
// fraud scenarios, for tests, benchmarks and the CLI's gen command.
//
// This is a placeholder: the package has no code yet. Its code arrives with a
// later issue.
//
// # Invariants
//
//   - The output is a pure function of the seed and the options: the same
//     seed gives the same events, byte for byte, on every machine and run.
//   - Generated events carry their fraud labels, so that backtests can report
//     precision and recall.
//
// # Imports
//
// Package gen may import, of ours, only event. internal/lint enforces this.
package gen
