package rules

import (
	"fmt"
	"sort"

	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/parser"

	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/nfa"
)

// This file is the contract between the rule-language front end (lexer,
// parser, checker, compiler) and the expression compiler. The front end
// calls only what is declared here.

// ExprEnv is what an expression of a rule may reference.
type ExprEnv struct {
	// Schema gives the fields in slot order. A field of kind KindNull is
	// untyped (any value).
	Schema *event.Schema
	// Declared is true when the ruleset declared its schema; field types
	// are then checked.
	Declared bool
	// Stages are the stage names of the rule's pattern in nfa.Stages()
	// order. Conditions and emit expressions may refer to them.
	Stages []string
}

// ExprError is an error inside an expression: Offset is a byte offset into
// the expression source (the front end adds the expression's position in the
// file), End the byte offset just past the fault when known (0 otherwise).
type ExprError struct {
	Offset int
	End    int
	Msg    string
}

func (e *ExprError) Error() string { return fmt.Sprintf("offset %d: %s", e.Offset, e.Msg) }

// BoolExpr is a compiled condition. It is immutable and safe for concurrent
// use.
type BoolExpr struct {
	cond *Cond
}

// CompileBoolExpr compiles a condition. Errors are *ExprError.
func CompileBoolExpr(src string, env *ExprEnv) (*BoolExpr, error) {
	c, err := CompileCondition(src, env.Schema, env.Stages)
	if err != nil {
		return nil, &ExprError{Msg: err.Error()}
	}
	return &BoolExpr{cond: c.(*Cond)}, nil
}

// Condition returns the expression as an nfa.Condition. A run-time error
// counts as false and is counted by Errors.
func (b *BoolExpr) Condition() nfa.Condition { return b.cond }

// Errors returns the number of evaluations that failed at run time.
func (b *BoolExpr) Errors() uint64 { return b.cond.Errors() }

// ValueExpr is a compiled emit expression, evaluated over a complete match.
type ValueExpr struct {
	src string
}

// CompileValueExpr compiles an emit expression. Errors are *ExprError.
func CompileValueExpr(src string, env *ExprEnv) (*ValueExpr, error) {
	return nil, &ExprError{Msg: "emit expressions are not implemented yet"}
}

// Eval evaluates the expression over a match (events by stage position).
func (v *ValueExpr) Eval(match [][]*event.Event) (event.Value, error) {
	return event.Null, fmt.Errorf("rules: emit %q: not implemented", v.src)
}

// ExprIdentifiers returns the free identifiers an expression reads (field or
// stage names), sorted and unique, so that the front end can build the
// schema of a ruleset that declares none. Builtin function names, closure
// members (.price in map(xs, .price)) and ctx/stage arguments are not
// identifiers. Errors are *ExprError.
func ExprIdentifiers(src string) ([]string, error) {
	tree, err := parser.Parse(src)
	if err != nil {
		return nil, &ExprError{Msg: err.Error()}
	}
	v := &identVisitor{uses: map[string]int{}, calls: map[string]int{}}
	ast.Walk(&tree.Node, v)
	var out []string
	for name, n := range v.uses {
		if n > v.calls[name] {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out, nil
}

// identVisitor counts identifier uses and the uses that are the callee of
// a call (function names).
type identVisitor struct {
	uses, calls map[string]int
}

func (v *identVisitor) Visit(node *ast.Node) {
	switch n := (*node).(type) {
	case *ast.CallNode:
		if id, ok := n.Callee.(*ast.IdentifierNode); ok {
			v.calls[id.Value]++
		}
	case *ast.IdentifierNode:
		v.uses[n.Value]++
	}
}
