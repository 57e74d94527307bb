package rules

import (
	"fmt"
	"sort"
	"sync/atomic"

	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/parser"

	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/nfa"
)

// This file is the contract between the rule-language front end (lexer,
// parser, checker, compiler) and the expression compiler. The front end
// calls only what is declared here.
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

// ExprEnv is what an expression of a rule may reference.
type ExprEnv struct {
	// Schema gives the fields in slot order. A field of kind KindNull is
	// untyped (any value).
	Schema *event.Schema
	// Declared is true when the ruleset declared its schema; field types
	// are then checked.
	Declared bool
	// Stages are the stage names of the rule's pattern in nfa.Stages()
	// order. Conditions and emit expressions may refer to them. A name that
	// is both a field and a stage is an error where an expression uses it.
	Stages []string
}

// ExprError is an error inside an expression: Offset is a byte offset into
// the expression source (the front end adds the expression's position in the
// file), End the byte offset just past the fault when known (0 otherwise).
// Compile errors and run-time errors ([BoolExpr.LastError]) both have this
// type.
type ExprError struct {
	Offset int
	End    int
	Msg    string
}

func (e *ExprError) Error() string { return fmt.Sprintf("offset %d: %s", e.Offset, e.Msg) }

// BoolExpr is a compiled condition; it implements [nfa.Condition]. It is
// immutable apart from its error counter and safe for concurrent use.
type BoolExpr struct {
	src     string
	test    condBoolFn // prog.test, nil on the VM: called directly on the hot path
	prog    *condProgram
	errs    atomic.Uint64
	lastErr atomic.Pointer[ExprError]
}

// CompileBoolExpr compiles a condition. Errors are *ExprError.
func CompileBoolExpr(src string, env *ExprEnv) (*BoolExpr, error) {
	p, err := compileCond(src, env, false, false)
	if err != nil {
		return nil, err
	}
	return &BoolExpr{src: src, test: p.test, prog: p}, nil
}

// Condition returns the expression as an nfa.Condition. A run-time error
// counts as false and is counted by Errors.
func (b *BoolExpr) Condition() nfa.Condition { return b }

// Eval implements [nfa.Condition]: it reports whether ev satisfies the
// condition, reading earlier stages from ctx (nil reads them as empty). A
// run-time error counts as false and is counted by [BoolExpr.Errors].
// Natively compiled conditions do not allocate, except to report a
// run-time error whose message depends on the values.
func (b *BoolExpr) Eval(ev *event.Event, ctx *nfa.Context) bool {
	if ev == nil {
		ev = &condNoEvent
	}
	fr := condFrame{ev: ev, stages: ctx}
	var ok bool
	var err *ExprError
	if b.test != nil {
		ok, err = b.test(fr)
	} else {
		ok, err = b.prog.vm.evalBool(fr)
	}
	if err != nil {
		b.errs.Add(1)
		b.lastErr.Store(err)
		return false
	}
	return ok
}

// Errors returns the number of evaluations that failed at run time.
func (b *BoolExpr) Errors() uint64 { return b.errs.Load() }

// LastError returns the most recent run-time error (an *ExprError), or
// nil.
func (b *BoolExpr) LastError() error {
	if e := b.lastErr.Load(); e != nil {
		return e
	}
	return nil
}

// Source returns the expression source.
func (b *BoolExpr) Source() string { return b.src }

// Fast reports whether the condition was compiled to native closures;
// false means it runs on expr's VM (correct, but some 10 to 50 times
// slower), see Fallback. What falls back: builtins other than len, abs,
// ceil, floor, round, int, float, string, lower, upper, trim, trimPrefix,
// trimSuffix, count, sum, avg (mean), min, max, first, last, map, all, any,
// none and one; predicates over lists of values (any([a, b], # > 1)) rather
// than over the events of a stage; let, ranges (1..5), slices, map
// literals, #index and #acc, method calls, and in or member access on a
// value of unknown type.
func (b *BoolExpr) Fast() bool { return b.prog.vm == nil }

// Fallback says which construct made the condition run on expr's VM (for
// instance "builtin split"); it is empty when Fast.
func (b *BoolExpr) Fallback() string { return b.prog.fallback }

// ValueExpr is a compiled emit expression, evaluated over a complete match.
// It is immutable apart from its error counter and safe for concurrent use.
type ValueExpr struct {
	src     string
	prog    *condProgram
	errs    atomic.Uint64
	lastErr atomic.Pointer[ExprError]
}

// CompileValueExpr compiles an emit expression. It reads stages only (a
// bare field name is an error: there is no event under test) and yields a
// single value (bool, int, float, string or null). Errors are *ExprError.
func CompileValueExpr(src string, env *ExprEnv) (*ValueExpr, error) {
	p, err := compileCond(src, env, true, false)
	if err != nil {
		return nil, err
	}
	return &ValueExpr{src: src, prog: p}, nil
}

// Eval evaluates the expression over a match (events by stage position).
// A run-time error is returned as an *ExprError and counted by Errors.
func (v *ValueExpr) Eval(match [][]*event.Event) (event.Value, error) {
	val, err := v.prog.evalValue(condFrame{ev: &condNoEvent, stages: condMatch(match)})
	if err != nil {
		v.errs.Add(1)
		v.lastErr.Store(err)
		return event.Null, err
	}
	return val, nil
}

// Errors returns the number of evaluations that failed at run time.
func (v *ValueExpr) Errors() uint64 { return v.errs.Load() }

// LastError returns the most recent run-time error (an *ExprError), or
// nil.
func (v *ValueExpr) LastError() error {
	if e := v.lastErr.Load(); e != nil {
		return e
	}
	return nil
}

// Source returns the expression source.
func (v *ValueExpr) Source() string { return v.src }

// Fast reports whether the expression was compiled to native closures.
func (v *ValueExpr) Fast() bool { return v.prog.vm == nil }

// Fallback says which construct made the expression run on expr's VM; it
// is empty when Fast.
func (v *ValueExpr) Fallback() string { return v.prog.fallback }

// ExprIdentifiers returns the free identifiers an expression reads (field or
// stage names), sorted and unique, so that the front end can build the
// schema of a ruleset that declares none. Builtin function names, closure
// members (.price in map(xs, .price)), the names of let declarations and
// ctx/stage arguments are not identifiers. Errors are *ExprError.
func ExprIdentifiers(src string) ([]string, error) {
	tree, err := condParseNames(src)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var walk func(n ast.Node, bound map[string]bool)
	walk = func(n ast.Node, bound map[string]bool) {
		switch n := n.(type) {
		case nil:
			return
		case *ast.IdentifierNode:
			if !bound[n.Value] {
				seen[n.Value] = true
			}
			return
		case *ast.CallNode:
			if _, ok := n.Callee.(*ast.IdentifierNode); ok {
				for _, a := range n.Arguments {
					walk(a, bound)
				}
				return
			}
		case *ast.VariableDeclaratorNode:
			walk(n.Value, bound)
			inner := map[string]bool{n.Name: true}
			for k := range bound {
				inner[k] = true
			}
			walk(n.Expr, inner)
			return
		}
		for _, k := range condChildren(n) {
			walk(k, bound)
		}
	}
	walk(tree.Node, nil)
	return condSortedKeys(seen), nil
}

// ExprMemberNames returns the names an expression reads as members (f in
// x.f, .f, x[0].f), sorted and unique. In the rule language these are
// fields of stage events, so a front end that infers the schema of a
// ruleset without one must add them to the identifiers of
// [ExprIdentifiers] (minus the stage names). Errors are *ExprError.
func ExprMemberNames(src string) ([]string, error) {
	tree, err := condParseNames(src)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var walk func(n ast.Node)
	walk = func(n ast.Node) {
		if m, ok := n.(*ast.MemberNode); ok {
			if s, ok := m.Property.(*ast.StringNode); ok {
				seen[s.Value] = true
			}
		}
		for _, k := range condChildren(n) {
			if k != nil {
				walk(k)
			}
		}
	}
	walk(tree.Node)
	return condSortedKeys(seen), nil
}

func condParseNames(src string) (*parser.Tree, error) {
	tree, err := parser.Parse(src)
	if err != nil {
		s := newCondSource(src)
		return nil, s.fromFileError(err)
	}
	return tree, nil
}

func condSortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
