// Package conformance runs the Flink CEP conformance cases
// (testdata/flink_cep_cases.json, transcribed from Flink's own Java tests;
// testdata/README.md describes the case format, the drivers, the compare
// modes and the results file) against the nfa package and the keyed
// operator of package cep, writes what the engine produced to a results
// file, and judges that file against the cases' expectations.
//
// The three steps are kept apart so that results can be checked by other
// tools too:
//
//  1. [LoadDir] reads every *.json case file of a directory. Each case is
//     decoded twice, into an [Input] (what to run) and an [Expectation] (what
//     the Java test asserts).
//  2. [Produce] runs the inputs through the engine and returns [Results];
//     [Results.WriteFile] writes them in the documented results format.
//     Producing never sees an Expectation: it is given Inputs only. Each
//     case's pattern is written as rule-language source ([CaseSource]) and
//     compiled by package rules, as a ruleset file would be ([ModeText],
//     the default); [ProduceMode] with [ModeBuilder] builds it with the nfa
//     Go builder instead. Both modes give the same results.
//  3. [ReadResults] reads a results file back and [Judge] compares each
//     case's result with its expectation, per the case's compare_mode.
//
// The command cmd/conformance (make conformance) runs the three steps;
// TestConformance does the same on testdata and enforces
// testdata/known-failing.txt.
//
// # Invariants
//
//   - Producing a result reads no expected_*, compare_mode, comparison or
//     notes field: [Input] has no such fields.
//   - The results file is always written, also when cases fail; a case that
//     cannot be built or panics gets its error set.
//   - Stage objects in the results file list their keys in pattern stage
//     order ([nfa.NFA.Stages]).
//
// # Imports
//
// Package conformance imports event, nfa, rules and cep.
package conformance
