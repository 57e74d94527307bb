package rules

import (
	"errors"

	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/nfa"
	"github.com/cepheus-cep/cepheus/rules/internal/cond"
)

// ValueExpr is a compiled emit expression ([Emit]), evaluated over a
// complete match. It is immutable apart from its error counter and safe for
// concurrent use.
type ValueExpr struct{ x *cond.ValueExpr }

// Eval evaluates the expression over a match (events by stage position, as
// [nfa.Match] holds them). A run-time error is returned, with the value
// null, and counted by Errors.
func (v *ValueExpr) Eval(match [][]*event.Event) (event.Value, error) { return v.x.Eval(match) }

// Errors returns the number of evaluations that failed at run time.
func (v *ValueExpr) Errors() uint64 { return v.x.Errors() }

// LastError returns the most recent run-time error, or nil.
func (v *ValueExpr) LastError() error { return v.x.LastError() }

// ExprErrorMessage is the message of a run-time error of a condition or an
// emit field, without the offset in its expression that its Error gives
// (the message quotes the part of the expression that failed, "b.amount is
// null (in c.amount - b.amount)", which a reader finds where the offset,
// counted from the expression's start, says nothing to a reader of the file).
func ExprErrorMessage(err error) string {
	var ce *cond.Error
	if errors.As(err, &ce) {
		return ce.Msg
	}
	return err.Error()
}

// Source returns the expression source.
func (v *ValueExpr) Source() string { return v.x.Source() }

// CompileCondition compiles src, an expr-lang boolean expression over the
// fields of schema, into a condition that runs on expr's VM: the reference
// implementation that the expression compiler of rule files is tested
// against, and the conditions of patterns built with the nfa builder
// (internal/conformance's builder mode). stages are the stage names that
// ctx("X") may name. The rules of the expression, its errors and its
// run-time behaviour are those of the expression compiler's
// CompileCondition (rules/internal/cond/expr.go).
func CompileCondition(src string, schema *event.Schema, stages []string) (nfa.Condition, error) {
	return cond.CompileCondition(src, schema, stages)
}
