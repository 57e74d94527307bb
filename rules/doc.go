// Package rules is the front end of Cepheus rules: it reads ruleset files
// (*.cep, the language of docs/rules.md) and compiles them to NFAs.
//
// # Pipeline
//
// One file per stage, as in text/template/parse and expr:
//
//   - lex.go: a state-function lexer, run synchronously one token at a
//     time. Expressions and JSON events are not tokenised: the parser asks
//     for each as a raw span of source (ruleLexer.scanRaw).
//   - parse.go: a recursive-descent parser with one token of lookahead,
//     line oriented, that keeps going after an error; [ParseFile].
//   - ast.go, print.go: the syntax tree, comments included; every node
//     prints its canonical source (String), [Format] prints a file.
//   - check.go: names, the event time field, the schema (declared, or
//     inferred from the identifiers expressions read), the shape of
//     patterns.
//   - compile.go: conditions and emits through the expression compiler
//     (rules/internal/cond), patterns through the nfa builder, errors of
//     both mapped back into the file; [Compile], [Load].
//   - filetests.go, decode.go: the tests written in a file, and the
//     decoding of JSON events by a ruleset's schema.
//   - pos.go, errors.go: positions, [Error] and [ErrorList].
//
// The expression compiler, package rules/internal/cond, turns expr-lang
// expressions into closures over the flat event record; the front end calls
// only its API (cond's api.go), and places its errors (*cond.Error: an
// offset into the expression and a message) in the file. expr.go holds
// what package rules exports of it: [ValueExpr] and [CompileCondition].
//
// # Invariants
//
//   - Every error of a file is an [*Error] at a position in the file
//     (file:line:col), also the errors inside expressions; a file reports
//     at most [MaxErrors] errors, sorted, one per line.
//   - Parsing the canonical source of a tree gives the same tree
//     (positions aside), and formatting is idempotent (FuzzParse).
//   - The stages of a rule, as the front end orders them for the
//     expressions' environment, are those of the compiled NFA in
//     nfa.NFA.Stages order (checked at every compile).
//   - A compiled [Ruleset] and its rules are immutable (apart from
//     condition error counters) and safe for concurrent use.
//   - Conditions never panic: a run-time error counts as false and is
//     counted.
//
// # Imports
//
// Package rules imports event, event/jsonev, nfa and rules/internal/cond,
// which alone imports github.com/expr-lang/expr.
package rules
