// Package cond is the expression compiler of the rule language: it compiles
// the expr-lang expressions of rules (where, or and until conditions, emit
// fields) for package rules, the front end, which calls only the API of
// api.go.
//
// Expressions are expr-lang source (https://expr-lang.org). They compile
// to Go closures over the flat event record: field names become slots and
// stage names stage indexes when the rule compiles, and each node is
// type-checked against the schema. The few constructs the compiler does
// not handle natively (see [BoolExpr.Fast]) run on expr's VM instead,
// with the same results. Evaluation follows expr's semantics with every
// field typed any, so a null field is expr's nil: name == "a" is false when
// name is null, and null > 1 or null + 1 is a run-time error.
//
// Inside a condition a stage name x means the events stage x has taken so
// far in the partial match under test (not the event under test):
//
//	x.f                   field f of the last event of x; null when x took none
//	count(x), len(x)      the number of events of x
//	sum(x.f), avg(x.f), min(x.f), max(x.f), first(x.f), last(x.f)
//	                      aggregates of field f over all events of x
//	x                     the list of events (stage("x") and ctx("x") too, for any name)
//	x[i].f, first(x).f    one event (a negative index counts from the end)
//	map(x, .f), any(x, .f > 1), all, none, one, count(x, .f > 1), sum(x, .f)
//
// Aggregates follow expr's: sum adds with + from int 0 (a null or a string
// is an error), avg (expr's mean) is 0.0 over no values, min and max are
// null over no values. count(list) is the number of elements (expr's count
// without a predicate counts the true elements; write count(list, #) for
// that). In an emit expression the same forms read the complete match;
// the fields of an event under test do not exist there, so a bare field
// name is an error.
//
// The wall-clock and time builtins (now, date, duration) are refused.
//
// The compiled closures follow expr's optimised programs, including the
// rewrites that decide results (x && false is false without evaluating x).
// Where expr's optimiser or checker depart from expr's own semantics, the
// closures keep the semantics (TestCondKnownDivergences lists the cases):
// x in a list of literals compares with ==, where expr looks a null x up as
// "" or 0, and == compares the values where expr's checker mistypes an
// operand and fails.
//
// # Files
//
//	api.go        the API: [Env], [Error], [BoolExpr], [ValueExpr], [Identifiers], [MemberNames]
//	cond.go       compile: native, else the VM
//	check.go      parsing, expr's rewrites, names, errors, the scan
//	compile.go, stages.go   closures
//	value.go      operations on values (expr's semantics)
//	vm.go         the slow path on expr's VM
//	geo.go        distance_km
//	expr.go       [CompileCondition]: conditions on expr's VM alone, the reference the tests compare with
//
// # Invariants
//
//   - Every error of the API is an [*Error]: a byte offset into the
//     expression and a one-line message without a position; the front end
//     maps the offset into its file.
//   - A natively compiled expression gives the results and the errors of
//     the same expression on expr's VM (TestCondDifferential,
//     FuzzCondCompile), apart from the divergences listed above.
//   - Compiled expressions are immutable apart from their error counters
//     and safe for concurrent use; evaluation never panics.
//
// # Imports
//
// Package cond imports event, nfa and github.com/expr-lang/expr.
package cond
