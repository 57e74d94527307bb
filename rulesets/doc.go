// Package rulesets holds the example rulesets of Cepheus (*.cep files in
// the rule language of docs/rules.md), each with the tests written inside
// it (events in, expected matches out), and exposes them as [FS] for the
// command and the benchmarks.
//
// # Invariants
//
//   - Every example ruleset in this directory compiles, is in canonical
//     form (`cepheus fmt` leaves it unchanged), and passes its own tests:
//     this package's tests check all three, so that the examples cannot
//     rot.
//
// # Imports
//
// Package rulesets imports nothing of ours. Its tests may import cep,
// event, rules and internal/rulestest. internal/lint enforces both rules.
package rulesets
