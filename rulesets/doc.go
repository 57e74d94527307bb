// Package rulesets will hold example fraud rulesets (*.cep files), each with
// its own events and expected alerts, and tests that compile and run every
// example so that the examples cannot rot.
//
// This is a placeholder: there are no rulesets yet. They arrive with later
// issues, once the rule language exists.
//
// # Invariants
//
//   - Every example ruleset in this directory is compiled and run by this
//     package's tests.
//
// # Imports
//
// Package rulesets imports nothing of ours. Its tests may import cep, event
// and rules. internal/lint enforces both rules.
package rulesets
