package rules

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/expr-lang/expr/ast"

	"github.com/cepheus-cep/cepheus/event"
)

// This file compiles a parsed, folded and scanned expression (see
// condcheck.go) into Go closures over a flat event record: field names are
// slots, stage names are stage indexes, and each node is type-checked
// against the schema as it is compiled. What the compiler does not handle
// natively it reports as *condUnsupported, and the expression falls back to
// expr's VM (condvm.go). This file holds the machinery and the operators;
// condstages.go the stage references, lists and builtins.
//
// The files of the expression compiler:
//
//	exprapi.go    the contract with the front end, and the semantics
//	cond.go       compile: native, else the VM
//	condcheck.go  parsing, expr's rewrites, names, errors, the scan
//	condcompile.go, condstages.go   closures
//	condvalue.go  operations on values (expr's semantics)
//	condvm.go     the slow path on expr's VM

// condFrame is what one evaluation reads: the event under test (an empty
// event in emit expressions), the events of the stages, and the element of
// the innermost predicate over a stage (map(x, .f), any(x, ...)). It is
// passed by value, so an evaluation allocates nothing.
type condFrame struct {
	ev     *event.Event
	stages condStages
	elem   *event.Event
}

// condStages gives the events of a stage by index: *nfa.Context in a
// condition, condMatch in an emit expression.
type condStages interface {
	EventsAt(stage int) []*event.Event
}

// condMatch is a complete match, as the stages of an emit expression.
type condMatch [][]*event.Event

// EventsAt implements condStages.
func (m condMatch) EventsAt(i int) []*event.Event {
	if i < 0 || i >= len(m) {
		return nil
	}
	return m[i]
}

// condNoEvent stands for a missing event under test: every field is null.
var condNoEvent event.Event

type (
	condValueFn func(fr condFrame) (event.Value, *ExprError)
	condBoolFn  func(fr condFrame) (bool, *ExprError)
	condEventFn func(fr condFrame) (*event.Event, *ExprError) // nil: no event
)

// condType is the static type of a compiled node.
type condType uint8

const (
	condTyAny condType = iota // a scalar whose kind is known only at run time
	condTyNil                 // the nil literal
	condTyBool
	condTyInt
	condTyFloat
	condTyString
	condTyList   // a list of scalars: an array literal, map(x, ...)
	condTyEvents // the events of a stage
	condTyEvent  // one event of a stage, or none
)

var condTypeNames = [...]string{"any", "nil", "bool", "int", "float", "string", "list", "stage", "event"}

func (t condType) String() string { return condTypeNames[t] }

func (t condType) scalar() bool  { return t <= condTyString }
func (t condType) numeric() bool { return t == condTyInt || t == condTyFloat }

// numLike and strLike report whether a value of type t may be a number or
// a string at run time.
func (t condType) numLike() bool { return t.numeric() || t == condTyAny }
func (t condType) strLike() bool { return t == condTyString || t == condTyAny }

// condKindType is the static type of a value of kind k.
func condKindType(k event.Kind) condType {
	switch k {
	case event.KindBool:
		return condTyBool
	case event.KindInt:
		return condTyInt
	case event.KindFloat:
		return condTyFloat
	case event.KindString:
		return condTyString
	}
	return condTyNil
}

// condLeafKind says how a scalar node is read.
type condLeafKind uint8

const (
	condLeafFn    condLeafKind = iota // call fn
	condLeafConst                     // the constant c
	condLeafField                     // field slot of the event under test
	condLeafElem                      // field slot of the predicate element
)

// condLeaf reads a scalar. Constants and fields are read inline by the
// parent node, without a call.
type condLeaf struct {
	kind condLeafKind
	slot int
	c    event.Value
	fn   condValueFn
}

func (l *condLeaf) get(fr condFrame) (event.Value, *ExprError) {
	switch l.kind {
	case condLeafField:
		return fr.ev.Field(l.slot), nil
	case condLeafConst:
		return l.c, nil
	case condLeafElem:
		return fr.elem.Field(l.slot), nil
	}
	return l.fn(fr)
}

// condNode is a compiled node.
type condNode struct {
	src ast.Node
	typ condType
	// Scalars: how to read the value, and optionally a direct boolean form
	// (comparisons and logic), built for the context it is used in.
	leaf condLeaf
	test func(nullOK bool) condBoolFn
	// condTyEvents: the stage.
	stage int
	// condTyEvent.
	event condEventFn
	// condTyList.
	list *condList
	// chain is set on && and || nodes.
	chain *condChain
}

func (n *condNode) isConst() bool { return n.leaf.kind == condLeafConst && n.typ.scalar() }

// value returns a function that evaluates a scalar node.
func (n *condNode) value() condValueFn {
	switch l := n.leaf; l.kind {
	case condLeafConst:
		return func(condFrame) (event.Value, *ExprError) { return l.c, nil }
	case condLeafField:
		return func(fr condFrame) (event.Value, *ExprError) { return fr.ev.Field(l.slot), nil }
	case condLeafElem:
		return func(fr condFrame) (event.Value, *ExprError) { return fr.elem.Field(l.slot), nil }
	}
	return n.leaf.fn
}

// condList is a list of scalars, read by index so that nothing is
// materialised.
type condList struct {
	elem condType
	n    func(fr condFrame) int
	at   func(fr condFrame, i int) (event.Value, *ExprError)
	// pure lists never fail to produce an element; the others (map with a
	// failing predicate, an array of failing expressions) are evaluated in
	// full before one element is used, as expr does.
	pure bool
	// consts holds the elements of a list of constants.
	consts []event.Value
}

// check evaluates every element of an impure list and returns the first
// error.
func (l *condList) check(fr condFrame) *ExprError {
	if l.pure {
		return nil
	}
	for i, n := 0, l.n(fr); i < n; i++ {
		if _, err := l.at(fr, i); err != nil {
			return err
		}
	}
	return nil
}

// condUnsupported is returned by the compiler for a construct it leaves
// to expr's VM.
type condUnsupported struct{ what string }

func (u *condUnsupported) Error() string { return "not compiled natively: " + u.what }

func unsupported(format string, args ...any) error {
	return &condUnsupported{what: fmt.Sprintf(format, args...)}
}

// constant returns a constant node.
func (c *condCompiler) constant(src ast.Node, v event.Value) *condNode {
	return &condNode{src: src, typ: condKindType(v.Kind()), leaf: condLeaf{kind: condLeafConst, c: v}}
}

// scalar returns a computed node of type typ. When it has operands and
// every one is a constant, it evaluates fn once and returns the result as
// a constant (unless that fails: the failure then happens at run time, as
// in expr).
func (c *condCompiler) scalar(src ast.Node, typ condType, fn condValueFn, operands ...*condNode) *condNode {
	folded := len(operands) > 0
	for _, o := range operands {
		folded = folded && o.isConst()
	}
	if folded {
		if v, err := fn(condFrame{ev: &condNoEvent, stages: condMatch(nil)}); err == nil {
			return c.constant(src, v)
		}
	}
	return &condNode{src: src, typ: typ, leaf: condLeaf{kind: condLeafFn, fn: fn}}
}

// boolean returns a node of type bool with a direct boolean form.
func (c *condCompiler) boolean(src ast.Node, t condBoolFn, operands ...*condNode) *condNode {
	n := c.scalar(src, condTyBool, func(fr condFrame) (event.Value, *ExprError) {
		b, err := t(fr)
		return event.Bool(b), err
	}, operands...)
	if !n.isConst() {
		n.test = func(bool) condBoolFn { return t }
	}
	return n
}

// boolOf returns the boolean form of a scalar node. A value that is not a
// bool is an error, except null when nullOK (at the top of a condition,
// where expr's final cast turns nil into false).
func (c *condCompiler) boolOf(n *condNode, nullOK bool) condBoolFn {
	if n.test != nil {
		return n.test(nullOK)
	}
	errNull := c.errorf(n.src, "%s is null", c.text(n.src))
	errNotBool := c.errorf(n.src, "%s is not a bool", c.text(n.src))
	if n.leaf.kind == condLeafConst {
		v := n.leaf.c
		return func(condFrame) (bool, *ExprError) { return condAsBool(v, nullOK, errNull, errNotBool) }
	}
	if n.leaf.kind == condLeafField {
		slot := n.leaf.slot
		return func(fr condFrame) (bool, *ExprError) {
			return condAsBool(fr.ev.Field(slot), nullOK, errNull, errNotBool)
		}
	}
	v := n.value()
	return func(fr condFrame) (bool, *ExprError) {
		x, err := v(fr)
		if err != nil {
			return false, err
		}
		return condAsBool(x, nullOK, errNull, errNotBool)
	}
}

func condAsBool(v event.Value, nullOK bool, errNull, errNotBool *ExprError) (bool, *ExprError) {
	if b, ok := v.AsBool(); ok {
		return b, nil
	}
	if v.IsNull() {
		if nullOK {
			return false, nil
		}
		return false, errNull
	}
	return false, errNotBool
}

// compile compiles one node.
func (c *condCompiler) compile(n ast.Node) (*condNode, error) {
	switch n := n.(type) {
	case *ast.NilNode:
		return c.constant(n, event.Null), nil
	case *ast.BoolNode:
		return c.constant(n, event.Bool(n.Value)), nil
	case *ast.IntegerNode:
		return c.constant(n, event.Int(int64(n.Value))), nil
	case *ast.FloatNode:
		return c.constant(n, event.Float(n.Value)), nil
	case *ast.StringNode:
		return c.constant(n, event.String(n.Value)), nil
	case *ast.IdentifierNode:
		return c.ident(n)
	case *ast.UnaryNode:
		return c.unary(n)
	case *ast.BinaryNode:
		return c.binary(n)
	case *ast.ChainNode:
		return c.compile(n.Node)
	case *ast.MemberNode:
		return c.member(n)
	case *ast.CallNode:
		return c.call(n)
	case *ast.BuiltinNode:
		return c.builtin(n)
	case *ast.PointerNode:
		return c.pointer(n)
	case *ast.ConditionalNode:
		return c.conditional(n)
	case *ast.ArrayNode:
		return c.array(n)
	}
	return nil, unsupported("%T", n)
}

// compileScalar compiles a node that must be a scalar.
func (c *condCompiler) compileScalar(n ast.Node) (*condNode, error) {
	x, err := c.compile(n)
	if err != nil {
		return nil, err
	}
	switch x.typ {
	case condTyEvents:
		t := c.text(n)
		return nil, c.errorf(n, "%s is the list of events of a stage: read a field (%s.field), or count(%s)", t, t, t)
	case condTyEvent:
		t := c.text(n)
		return nil, c.errorf(n, "%s is an event: read one of its fields (%s.field)", t, t)
	case condTyList:
		return nil, c.errorf(n, "%s is a list, not a single value", c.text(n))
	}
	return x, nil
}

func (c *condCompiler) ident(n *ast.IdentifierNode) (*condNode, error) {
	r, err := c.resolve(n)
	if err != nil {
		return nil, err
	}
	if r.stage >= 0 {
		return &condNode{src: n, typ: condTyEvents, stage: r.stage}, nil
	}
	return &condNode{src: n, typ: c.fieldType(r.slot), leaf: condLeaf{kind: condLeafField, slot: r.slot}}, nil
}

// fieldType is the static type of the field in slot: its declared kind,
// or any when the ruleset declares no schema or the field no kind.
func (c *condCompiler) fieldType(slot int) condType {
	if !c.env.Declared {
		return condTyAny
	}
	if t := condKindType(c.env.Schema.Field(slot).Kind); t != condTyNil {
		return t
	}
	return condTyAny
}

func (c *condCompiler) unary(n *ast.UnaryNode) (*condNode, error) {
	x, err := c.compileScalar(n.Node)
	if err != nil {
		return nil, err
	}
	switch n.Operator {
	case "!", "not":
		if x.typ != condTyBool && x.typ != condTyAny {
			return nil, c.errorf(n, "%s needs a bool, got %s", n.Operator, x.typ)
		}
		t := c.boolOf(x, false)
		return c.boolean(n, func(fr condFrame) (bool, *ExprError) {
			b, err := t(fr)
			return !b, err
		}, x), nil
	case "-":
		if !x.typ.numLike() {
			return nil, c.errorf(n, "cannot negate %s", x.typ)
		}
		l := x.leaf
		site := c.site(n)
		return c.scalar(n, x.typ, func(fr condFrame) (event.Value, *ExprError) {
			v, err := l.get(fr)
			if err != nil {
				return event.Null, err
			}
			if r, ok := condNegate(v); ok {
				return r, nil
			}
			return event.Null, site.fail("cannot negate %s", v.Kind())
		}, x), nil
	case "+":
		// expr checks the type and otherwise does nothing.
		if !x.typ.numLike() {
			return nil, c.errorf(n, "unary + needs a number, got %s", x.typ)
		}
		return x, nil
	}
	return nil, unsupported("unary %s", n.Operator)
}

func (c *condCompiler) binary(n *ast.BinaryNode) (*condNode, error) {
	switch n.Operator {
	case "&&", "and", "||", "or":
		return c.logic(n)
	case "??":
		return c.coalesce(n)
	case "in":
		return c.in(n)
	case "matches", "contains", "startsWith", "endsWith":
		return c.stringOp(n)
	}
	op, ok := condBinaryOps[n.Operator]
	if !ok {
		return nil, unsupported("operator %s", n.Operator)
	}
	l, err := c.compileScalar(n.Left)
	if err != nil {
		return nil, err
	}
	r, err := c.compileScalar(n.Right)
	if err != nil {
		return nil, err
	}
	switch op {
	case condOpEq, condOpNe:
		if !condComparable(l.typ, r.typ) {
			return nil, c.errorf(n, "cannot compare %s with %s", l.typ, r.typ)
		}
		return c.equality(n, op == condOpNe, l, r), nil
	case condOpLt, condOpLe, condOpGt, condOpGe:
		if !(l.typ.numLike() && r.typ.numLike() || l.typ.strLike() && r.typ.strLike()) {
			return nil, c.errorf(n, "cannot compare %s with %s", l.typ, r.typ)
		}
		return c.order(n, op, l, r), nil
	}
	typ, ok := condArithType(op, l.typ, r.typ)
	if !ok {
		if op == condOpMod {
			return nil, c.errorf(n, "%% needs integers, got %s and %s", l.typ, r.typ)
		}
		return nil, c.errorf(n, "cannot apply %s to %s and %s", n.Operator, l.typ, r.typ)
	}
	return c.arith(n, op, typ, l, r), nil
}

// condComparable reports whether == may compare values of types a and b
// (expr's checker: numbers with numbers, equal types, or anything with
// any or nil).
func condComparable(a, b condType) bool {
	if a == condTyAny || b == condTyAny || a == condTyNil || b == condTyNil {
		return true
	}
	return a.numeric() && b.numeric() || a == b
}

// condArithType is the static type of an arithmetic operation, false when
// the operand types cannot fit.
func condArithType(op condOp, a, b condType) (condType, bool) {
	switch op {
	case condOpAdd, condOpSub, condOpMul:
		switch {
		case a.numeric() && b.numeric():
			if a == condTyInt && b == condTyInt {
				return condTyInt, true
			}
			return condTyFloat, true
		case op == condOpAdd && a == condTyString && b == condTyString:
			return condTyString, true
		case a == condTyAny && (b.numLike() || op == condOpAdd && b == condTyString),
			b == condTyAny && (a.numLike() || op == condOpAdd && a == condTyString):
			return condTyAny, true
		}
	case condOpDiv, condOpPow:
		if a.numLike() && b.numLike() {
			return condTyFloat, true
		}
	case condOpMod:
		if (a == condTyInt || a == condTyAny) && (b == condTyInt || b == condTyAny) {
			return condTyInt, true
		}
	}
	return condTyAny, false
}

// equality compiles == and != (never an error: values of different kinds
// are unequal). The common shape, a field against a constant, reads the
// slot directly.
func (c *condCompiler) equality(n ast.Node, neg bool, l, r *condNode) *condNode {
	if l.isConst() && !r.isConst() {
		l, r = r, l
	}
	if l.leaf.kind == condLeafField && r.isConst() {
		slot, k := l.leaf.slot, r.leaf.c
		switch k.Kind() {
		case event.KindString:
			s, _ := k.AsString()
			return c.boolean(n, func(fr condFrame) (bool, *ExprError) {
				x, ok := fr.ev.Field(slot).AsString()
				return (ok && x == s) != neg, nil
			})
		case event.KindInt, event.KindFloat:
			ci, isInt := k.AsInt()
			cf, _ := k.AsFloat()
			return c.boolean(n, func(fr condFrame) (bool, *ExprError) {
				v := fr.ev.Field(slot)
				switch v.Kind() {
				case event.KindFloat:
					x, _ := v.AsFloat()
					return (x == cf) != neg, nil
				case event.KindInt:
					x, _ := v.AsInt()
					if isInt {
						return (x == ci) != neg, nil
					}
					return (float64(x) == cf) != neg, nil
				}
				return neg, nil
			})
		}
	}
	ll, rl := l.leaf, r.leaf
	return c.boolean(n, func(fr condFrame) (bool, *ExprError) {
		a, err := ll.get(fr)
		if err != nil {
			return false, err
		}
		b, err := rl.get(fr)
		if err != nil {
			return false, err
		}
		return condEqual(a, b) != neg, nil
	}, l, r)
}

// order compiles < <= > >=: two numbers or two strings, anything else
// (null included) is a run-time error. A field against a numeric or string
// constant, the commonest condition, gets its own closure.
func (c *condCompiler) order(n ast.Node, op condOp, l, r *condNode) *condNode {
	if l.isConst() && !r.isConst() {
		l, r, op = r, l, op.flip()
	}
	errL := c.errorf(l.src, "%s is null (in %s)", c.text(l.src), c.text(n))
	errR := c.errorf(r.src, "%s is null (in %s)", c.text(r.src), c.text(n))
	site := c.site(n)
	mismatch := func(a, b event.Value) *ExprError {
		switch {
		case a.IsNull():
			return errL
		case b.IsNull():
			return errR
		}
		return site.fail("cannot compare %s with %s", a.Kind(), b.Kind())
	}
	if l.leaf.kind == condLeafField && r.isConst() {
		slot, k := l.leaf.slot, r.leaf.c
		switch k.Kind() {
		case event.KindInt, event.KindFloat:
			ci, isInt := k.AsInt()
			cf, _ := k.AsFloat()
			return c.boolean(n, func(fr condFrame) (bool, *ExprError) {
				v := fr.ev.Field(slot)
				switch v.Kind() {
				case event.KindFloat:
					x, _ := v.AsFloat()
					return condCmpFloat(op, x, cf), nil
				case event.KindInt:
					x, _ := v.AsInt()
					if isInt {
						return condCmpInt(op, x, ci), nil
					}
					return condCmpFloat(op, float64(x), cf), nil
				}
				return false, mismatch(v, k)
			})
		case event.KindString:
			s, _ := k.AsString()
			return c.boolean(n, func(fr condFrame) (bool, *ExprError) {
				v := fr.ev.Field(slot)
				if x, ok := v.AsString(); ok {
					return condCmpString(op, x, s), nil
				}
				return false, mismatch(v, k)
			})
		}
	}
	ll, rl := l.leaf, r.leaf
	if ll.kind == condLeafFn && rl.kind == condLeafConst { // f(x) < 10
		lf, k := ll.fn, rl.c
		return c.boolean(n, func(fr condFrame) (bool, *ExprError) {
			a, err := lf(fr)
			if err != nil {
				return false, err
			}
			if res, ok := condOrder(op, a, k); ok {
				return res, nil
			}
			return false, mismatch(a, k)
		})
	}
	return c.boolean(n, func(fr condFrame) (bool, *ExprError) {
		a, err := ll.get(fr)
		if err != nil {
			return false, err
		}
		b, err := rl.get(fr)
		if err != nil {
			return false, err
		}
		if res, ok := condOrder(op, a, b); ok {
			return res, nil
		}
		return false, mismatch(a, b)
	}, l, r)
}

func (c *condCompiler) arith(n ast.Node, op condOp, typ condType, l, r *condNode) *condNode {
	errL := c.errorf(l.src, "%s is null (in %s)", c.text(l.src), c.text(n))
	errR := c.errorf(r.src, "%s is null (in %s)", c.text(r.src), c.text(n))
	errZero := c.errorf(n, "integer divide by zero (in %s)", c.text(n))
	site := c.site(n)
	fail := func(a, b event.Value, fault condFault) *ExprError {
		switch {
		case fault == condDivZero:
			return errZero
		case a.IsNull():
			return errL
		case b.IsNull():
			return errR
		}
		return site.fail("cannot apply %s to %s and %s", op, a.Kind(), b.Kind())
	}
	ll, rl := l.leaf, r.leaf
	if ll.kind == condLeafField && rl.kind == condLeafConst { // amount * 2
		slot, k := ll.slot, rl.c
		return c.scalar(n, typ, func(fr condFrame) (event.Value, *ExprError) {
			a := fr.ev.Field(slot)
			v, fault := condArith(op, a, k)
			if fault != condOK {
				return event.Null, fail(a, k, fault)
			}
			return v, nil
		})
	}
	return c.scalar(n, typ, func(fr condFrame) (event.Value, *ExprError) {
		a, err := ll.get(fr)
		if err != nil {
			return event.Null, err
		}
		b, err := rl.get(fr)
		if err != nil {
			return event.Null, err
		}
		v, fault := condArith(op, a, b)
		if fault != condOK {
			return event.Null, fail(a, b, fault)
		}
		return v, nil
	}, l, r)
}

// logic compiles && and ||. The left operand must be a bool (null is an
// error, as in expr's jump instructions); the right operand is the value of
// the whole expression when the left one does not decide it, whatever its
// kind: expr does not check it either.
func (c *condCompiler) logic(n *ast.BinaryNode) (*condNode, error) {
	and := n.Operator == "&&" || n.Operator == "and"
	l, err := c.compileScalar(n.Left)
	if err != nil {
		return nil, err
	}
	r, err := c.compileScalar(n.Right)
	if err != nil {
		return nil, err
	}
	if !(l.typ == condTyBool || l.typ == condTyAny) || !(r.typ == condTyBool || r.typ == condTyAny) {
		return nil, c.errorf(n, "%s needs bools, got %s and %s", n.Operator, l.typ, r.typ)
	}
	lt := c.boolOf(l, false)
	rv := r.value()
	out := c.scalar(n, condTyBool, func(fr condFrame) (event.Value, *ExprError) {
		x, err := lt(fr)
		if err != nil {
			return event.Null, err
		}
		if x != and {
			return event.Bool(x), nil
		}
		return rv(fr)
	}, l, r)
	if out.isConst() {
		return out, nil
	}
	// a && b && c is one closure over the operands: all but the last must
	// be bools; the last one decides, in the context of the whole.
	ops := []*condNode{l, r}
	if l.chain != nil && l.chain.and == and {
		ops = append(append([]*condNode(nil), l.chain.ops...), r)
	}
	out.chain = &condChain{and: and, ops: ops}
	out.test = func(nullOK bool) condBoolFn {
		ts := make([]condBoolFn, len(ops)-1)
		for i, o := range ops[:len(ops)-1] {
			ts[i] = c.boolOf(o, false)
		}
		last := c.boolOf(ops[len(ops)-1], nullOK)
		if len(ts) == 1 {
			first := ts[0]
			return func(fr condFrame) (bool, *ExprError) {
				x, err := first(fr)
				if err != nil || x != and {
					return x, err
				}
				return last(fr)
			}
		}
		return func(fr condFrame) (bool, *ExprError) {
			for _, t := range ts {
				x, err := t(fr)
				if err != nil || x != and {
					return x, err
				}
			}
			return last(fr)
		}
	}
	return out, nil
}

// condChain holds the operands of a chain of && (or of ||).
type condChain struct {
	and bool
	ops []*condNode
}

// coalesce compiles a ?? b: a unless it is null, then b.
func (c *condCompiler) coalesce(n *ast.BinaryNode) (*condNode, error) {
	l, err := c.compileScalar(n.Left)
	if err != nil {
		return nil, err
	}
	r, err := c.compileScalar(n.Right)
	if err != nil {
		return nil, err
	}
	typ := condTyAny
	switch {
	case l.typ == condTyNil:
		typ = r.typ
	case l.typ == r.typ:
		typ = l.typ
	}
	ll, rl := l.leaf, r.leaf
	out := c.scalar(n, typ, func(fr condFrame) (event.Value, *ExprError) {
		v, err := ll.get(fr)
		if err != nil || !v.IsNull() {
			return v, err
		}
		return rl.get(fr)
	}, l, r)
	if out.isConst() {
		return out, nil
	}
	errNotBool := c.errorf(l.src, "%s is not a bool", c.text(l.src))
	out.test = func(nullOK bool) condBoolFn {
		rt := c.boolOf(r, nullOK)
		return func(fr condFrame) (bool, *ExprError) {
			v, err := ll.get(fr)
			if err != nil {
				return false, err
			}
			if v.IsNull() {
				return rt(fr)
			}
			if b, ok := v.AsBool(); ok {
				return b, nil
			}
			return false, errNotBool
		}
	}
	return out, nil
}

// conditional compiles c ? a : b (and if c { a } else { b }).
func (c *condCompiler) conditional(n *ast.ConditionalNode) (*condNode, error) {
	cond, err := c.compileScalar(n.Cond)
	if err != nil {
		return nil, err
	}
	if cond.typ != condTyBool && cond.typ != condTyAny {
		return nil, c.errorf(n.Cond, "the condition of ?: must be a bool, got %s", cond.typ)
	}
	a, err := c.compileScalar(n.Exp1)
	if err != nil {
		return nil, err
	}
	b, err := c.compileScalar(n.Exp2)
	if err != nil {
		return nil, err
	}
	typ := condTyAny
	if a.typ == b.typ {
		typ = a.typ
	}
	ct := c.boolOf(cond, false)
	al, bl := a.leaf, b.leaf
	out := c.scalar(n, typ, func(fr condFrame) (event.Value, *ExprError) {
		x, err := ct(fr)
		switch {
		case err != nil:
			return event.Null, err
		case x:
			return al.get(fr)
		}
		return bl.get(fr)
	}, cond, a, b)
	if out.isConst() {
		return out, nil
	}
	out.test = func(nullOK bool) condBoolFn {
		at, bt := c.boolOf(a, nullOK), c.boolOf(b, nullOK)
		return func(fr condFrame) (bool, *ExprError) {
			x, err := ct(fr)
			switch {
			case err != nil:
				return false, err
			case x:
				return at(fr)
			}
			return bt(fr)
		}
	}
	return out, nil
}

// stringOp compiles matches, contains, startsWith and endsWith: a null on
// either side makes false, anything else but two strings is an error.
func (c *condCompiler) stringOp(n *ast.BinaryNode) (*condNode, error) {
	l, err := c.compileScalar(n.Left)
	if err != nil {
		return nil, err
	}
	r, err := c.compileScalar(n.Right)
	if err != nil {
		return nil, err
	}
	if !l.typ.strLike() || !r.typ.strLike() {
		return nil, c.errorf(n, "%s needs strings, got %s and %s", n.Operator, l.typ, r.typ)
	}
	site := c.site(n)
	var match func(s, pattern string) (bool, *ExprError)
	switch n.Operator {
	case "contains":
		match = func(s, p string) (bool, *ExprError) { return strings.Contains(s, p), nil }
	case "startsWith":
		match = func(s, p string) (bool, *ExprError) { return strings.HasPrefix(s, p), nil }
	case "endsWith":
		match = func(s, p string) (bool, *ExprError) { return strings.HasSuffix(s, p), nil }
	case "matches":
		if r.isConst() {
			p, _ := r.leaf.c.AsString()
			re, err := regexp.Compile(p)
			if err != nil {
				return nil, c.errorf(n.Right, "bad regular expression: %v", err)
			}
			match = func(s, _ string) (bool, *ExprError) { return re.MatchString(s), nil }
			break
		}
		match = func(s, p string) (bool, *ExprError) {
			ok, err := regexp.MatchString(p, s)
			if err != nil {
				return false, site.fail("bad regular expression: %v", err)
			}
			return ok, nil
		}
	}
	mismatch := func(a, b event.Value) *ExprError {
		return site.fail("%s needs strings, got %s and %s", n.Operator, a.Kind(), b.Kind())
	}
	if l.leaf.kind == condLeafField && r.isConst() {
		slot, k := l.leaf.slot, r.leaf.c
		p, _ := k.AsString()
		return c.boolean(n, func(fr condFrame) (bool, *ExprError) {
			v := fr.ev.Field(slot)
			if s, ok := v.AsString(); ok {
				return match(s, p)
			}
			if v.IsNull() {
				return false, nil
			}
			return false, mismatch(v, k)
		}), nil
	}
	ll, rl := l.leaf, r.leaf
	return c.boolean(n, func(fr condFrame) (bool, *ExprError) {
		a, err := ll.get(fr)
		if err != nil {
			return false, err
		}
		b, err := rl.get(fr)
		if err != nil {
			return false, err
		}
		if a.IsNull() || b.IsNull() {
			return false, nil
		}
		s, ok1 := a.AsString()
		p, ok2 := b.AsString()
		if !ok1 || !ok2 {
			return false, mismatch(a, b)
		}
		return match(s, p)
	}, l, r), nil
}

// in compiles x in list: true when an element equals x (==).
func (c *condCompiler) in(n *ast.BinaryNode) (*condNode, error) {
	l, err := c.compileScalar(n.Left)
	if err != nil {
		return nil, err
	}
	r, err := c.compile(n.Right)
	if err != nil {
		return nil, err
	}
	if r.typ != condTyList {
		if r.typ == condTyAny {
			return nil, unsupported("in on a value of unknown type")
		}
		return nil, c.errorf(n.Right, "in needs a list on its right, got %s", r.typ)
	}
	list := r.list
	if !condComparable(l.typ, list.elem) {
		return nil, c.errorf(n, "cannot look for a %s in a list of %s", l.typ, list.elem)
	}
	ll := l.leaf
	if list.consts != nil {
		set := newCondSet(list.consts)
		return c.boolean(n, func(fr condFrame) (bool, *ExprError) {
			v, err := ll.get(fr)
			if err != nil {
				return false, err
			}
			return set.has(v), nil
		}, l), nil
	}
	return c.boolean(n, func(fr condFrame) (bool, *ExprError) {
		v, err := ll.get(fr)
		if err != nil {
			return false, err
		}
		if err := list.check(fr); err != nil {
			return false, err
		}
		for i, k := 0, list.n(fr); i < k; i++ {
			e, _ := list.at(fr, i)
			if condEqual(v, e) {
				return true, nil
			}
		}
		return false, nil
	}), nil
}

// condSet is a list of constants prepared for membership tests.
type condSet struct {
	strs  []string
	index map[string]struct{} // strs as a set, for longer lists
	other []event.Value
}

func newCondSet(vals []event.Value) *condSet {
	s := &condSet{}
	for _, v := range vals {
		if x, ok := v.AsString(); ok {
			s.strs = append(s.strs, x)
		} else {
			s.other = append(s.other, v)
		}
	}
	if len(s.strs) > 8 {
		s.index = make(map[string]struct{}, len(s.strs))
		for _, x := range s.strs {
			s.index[x] = struct{}{}
		}
	}
	return s
}

func (s *condSet) has(v event.Value) bool {
	if x, ok := v.AsString(); ok {
		if s.index != nil {
			_, ok := s.index[x]
			return ok
		}
		for _, y := range s.strs {
			if x == y {
				return true
			}
		}
		return false
	}
	for _, o := range s.other {
		if condEqual(v, o) {
			return true
		}
	}
	return false
}
