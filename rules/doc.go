// Package rules is the front end of Cepheus rules. The full rule language
// (lexer, parser, checker and compiler to nfa patterns) arrives with its own
// issue; today the package only compiles expr-lang conditions into
// [nfa.Condition] values ([CompileCondition]).
//
// # Conditions
//
// A condition is an expr-lang boolean expression over the fields of one
// event, named by an [event.Schema]. ctx("stage") is the list of events the
// named stage has already accepted in the current partial match (Flink's
// IterativeCondition.Context.getEventsForPattern); its elements expose the
// same fields (ctx("a")[0].price, sum(map(ctx("m"), .price))). Builtins that
// read the wall clock (now, date, duration) are disabled, so conditions
// replay deterministically.
//
// # Invariants
//
//   - A compiled condition is immutable apart from its error counter and
//     safe for concurrent use; per-evaluation scratch space (the expr VM and
//     its environment) is pooled.
//   - Evaluation never panics: a run-time error counts as false and is
//     counted ([Cond.Errors]).
//   - A null field value is expr's nil.
//
// # Imports
//
// Package rules imports event, nfa and github.com/expr-lang/expr.
package rules
