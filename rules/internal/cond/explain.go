package cond

import (
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/parser"

	"github.com/cepheus-cep/cepheus/event"
)

// This file serves explanations (why a test's expected match was not
// produced): a condition evaluated over given events rather than a run's
// partial match, and the parts of a conjunction.

// EvalStages reports whether ev satisfies the condition when the stages
// before it hold the events of stages (by stage index, as [nfa.Context]
// would give them), and the run-time error that made it false, if any.
// Unlike [BoolExpr.Eval] it counts no error.
func (b *BoolExpr) EvalStages(ev *event.Event, stages [][]*event.Event) (bool, error) {
	if ev == nil {
		ev = &noEvent
	}
	ok, err := b.eval(frame{ev: ev, stages: matchStages(stages)})
	if err != nil {
		return false, err
	}
	return ok, nil
}

// Conjuncts returns the sources of the terms src ANDs at its top (a && b
// && c gives a, b and c; parentheses group a term), in source order: src
// alone when it is no conjunction. Errors are *Error. (The terms are cut
// from the tree as parsed, before lookups' fields are rewritten, whose
// nodes no longer span their source: customer.home_country.)
func Conjuncts(src string) ([]string, error) {
	s := newCondSource(src)
	tree, err := parser.Parse(src)
	if err != nil {
		return nil, s.fromFileError(err)
	}
	var out []string
	forConjuncts(tree.Node, func(n ast.Node) {
		loc := span(n)
		out = append(out, closed(src, s.byteOffset(loc.From), s.byteOffset(loc.To), n))
	})
	if len(out) < 2 {
		return []string{src}, nil
	}
	return out, nil
}

// forConjuncts calls fn with each term n ANDs at its top, in order (n
// itself when it is no conjunction).
func forConjuncts(n ast.Node, fn func(ast.Node)) {
	if b, ok := n.(*ast.BinaryNode); ok && (b.Operator == "&&" || b.Operator == "and") {
		forConjuncts(b.Left, fn)
		forConjuncts(b.Right, fn)
		return
	}
	fn(n)
}
