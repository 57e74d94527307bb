// Package nfa is the pattern model and the matching automaton of Cepheus.
//
// A pattern is built with a Go API that mirrors Flink CEP's Pattern API
// ([Begin], [Pattern.Next], [Pattern.FollowedBy], [Pattern.FollowedByAny],
// [Pattern.NotNext], [Pattern.NotFollowedBy], quantifiers, groups, windows and
// after-match skip strategies). [Compile] validates it as Flink does and
// builds an immutable [NFA]; the matching state of one key is a [Run], fed
// with [Run.Process] (one event) and [Run.AdvanceTime] (time passes).
//
// # Semantics
//
// The automaton reproduces Flink CEP's stepping model (take, ignore and
// proceed transitions; Dewey-versioned partial matches over a shared event
// buffer; matches ordered by their start event before a skip strategy
// prunes). The state graph is built in the same order as Flink's
// NFACompiler, because match results depend on it. Known, deliberate
// differences are listed in docs/flink-differences.md.
//
// # Invariants
//
//   - An [NFA] is immutable after Compile and safe for concurrent use.
//   - A [Run] belongs to one goroutine; it keeps pointers to the events it
//     was given, which must not be modified afterwards.
//   - The runs given one [Result] share its free lists (a buffer node one run
//     released is reused by the next run that needs one), so they must all
//     be used by the goroutine that uses the Result.
//   - Conditions never panic: a failing condition evaluates to false.
//
// # Imports
//
// Package nfa is pure: no goroutines, clock, I/O or condition language. It
// imports only [github.com/cepheus-cep/cepheus/event].
package nfa
