package cond

import (
	"fmt"
	"math"
	"regexp"
	"regexp/syntax"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/expr-lang/expr/ast"

	"github.com/cepheus-cep/cepheus/event"
)

// This file compiles a parsed, folded and scanned expression (see
// check.go) into Go closures over a flat event record: field names are
// slots, stage names are stage indexes, and each node is type-checked
// against the schema as it is compiled. What the compiler does not handle
// natively it reports as *unsupportedError, and the expression falls back to
// expr's VM (vm.go). This file holds the machinery and the operators;
// stages.go the stage references, lists and builtins (the package doc
// lists the files).

// frame is what one evaluation reads: the event under test (an empty
// event in emit expressions), the events of the stages, and the element of
// the innermost predicate over a stage (map(x, .f), any(x, ...)). It is
// passed by value, so an evaluation allocates nothing.
type frame struct {
	ev     *event.Event
	stages stageSource
	elem   *event.Event
}

// stageSource gives the events of a stage by index: *nfa.Context in a
// condition, matchStages in an emit expression. LastAt is the last of
// EventsAt, nil when there is none.
type stageSource interface {
	EventsAt(stage int) []*event.Event
	LastAt(stage int) *event.Event
}

// matchStages is a complete match, as the stages of an emit expression.
type matchStages [][]*event.Event

// EventsAt implements stageSource.
func (m matchStages) EventsAt(i int) []*event.Event {
	if i < 0 || i >= len(m) {
		return nil
	}
	return m[i]
}

// LastAt implements stageSource.
func (m matchStages) LastAt(i int) *event.Event {
	if evs := m.EventsAt(i); len(evs) > 0 {
		return evs[len(evs)-1]
	}
	return nil
}

// noEvent stands for a missing event under test: every field is null.
var noEvent event.Event

type (
	valueFn func(fr frame) (event.Value, *Error)
	boolFn  func(fr frame) (bool, *Error)
	eventFn func(fr frame) (*event.Event, *Error) // nil: no event
)

// nodeType is the static type of a compiled node.
type nodeType uint8

const (
	tyAny nodeType = iota // a scalar whose kind is known only at run time
	tyNil                 // the nil literal
	tyBool
	tyInt
	tyFloat
	tyString
	tyList   // a list of scalars: an array literal, map(x, ...)
	tyEvents // the events of a stage
	tyEvent  // one event of a stage, or none
)

var typeNames = [...]string{"any", "nil", "bool", "int", "float", "string", "list", "stage", "event"}

func (t nodeType) String() string { return typeNames[t] }

func (t nodeType) scalar() bool  { return t <= tyString }
func (t nodeType) numeric() bool { return t == tyInt || t == tyFloat }

// numLike and strLike report whether a value of type t may be a number or
// a string at run time.
func (t nodeType) numLike() bool { return t.numeric() || t == tyAny }
func (t nodeType) strLike() bool { return t == tyString || t == tyAny }

// typeOfKind is the static type of a value of kind k.
func typeOfKind(k event.Kind) nodeType {
	switch k {
	case event.KindBool:
		return tyBool
	case event.KindInt:
		return tyInt
	case event.KindFloat:
		return tyFloat
	case event.KindString:
		return tyString
	}
	return tyNil
}

// leafKind says how a scalar node is read.
type leafKind uint8

const (
	leafFn    leafKind = iota // call fn
	leafConst                 // the constant c
	leafField                 // field slot of the event under test
	leafElem                  // field slot of the predicate element
)

// leafNode reads a scalar. Constants and fields are read inline by the
// parent node, without a call.
type leafNode struct {
	kind leafKind
	slot int
	c    event.Value
	fn   valueFn
}

func (l *leafNode) get(fr frame) (event.Value, *Error) {
	switch l.kind {
	case leafField:
		return fr.ev.Field(l.slot), nil
	case leafConst:
		return l.c, nil
	case leafElem:
		return fr.elem.Field(l.slot), nil
	}
	return l.fn(fr)
}

// compiledNode is a compiled node.
type compiledNode struct {
	src ast.Node
	typ nodeType
	// Scalars: how to read the value, and optionally a direct boolean form
	// (comparisons and logic), built for the context it is used in.
	leaf leafNode
	test func(nullOK bool) boolFn
	// tyEvents: the stage.
	stage int
	// tyEvent.
	event eventFn
	// tyList.
	list *scalarList
	// chain is set on && and || nodes.
	chain *logicChain
	// geo is set on distance_km calls: their arguments, in degrees, for
	// a comparison with a constant that bounds the distance first.
	geo func(fr frame) ([4]float64, *Error)
}

func (n *compiledNode) isConst() bool { return n.leaf.kind == leafConst && n.typ.scalar() }

// value returns a function that evaluates a scalar node.
func (n *compiledNode) value() valueFn {
	switch l := n.leaf; l.kind {
	case leafConst:
		return func(frame) (event.Value, *Error) { return l.c, nil }
	case leafField:
		return func(fr frame) (event.Value, *Error) { return fr.ev.Field(l.slot), nil }
	case leafElem:
		return func(fr frame) (event.Value, *Error) { return fr.elem.Field(l.slot), nil }
	}
	return n.leaf.fn
}

// scalarList is a list of scalars, read by index so that nothing is
// materialised.
type scalarList struct {
	elem nodeType
	n    func(fr frame) int
	at   func(fr frame, i int) (event.Value, *Error)
	// pure lists never fail to produce an element; the others (map with a
	// failing predicate, an array of failing expressions) are evaluated in
	// full before one element is used, as expr does.
	pure bool
	// consts holds the elements of a list of constants.
	consts []event.Value
}

// check evaluates every element of an impure list and returns the first
// error.
func (l *scalarList) check(fr frame) *Error {
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

// unsupportedError is returned by the compiler for a construct it leaves
// to expr's VM.
type unsupportedError struct{ what string }

func (u *unsupportedError) Error() string { return "not compiled natively: " + u.what }

func unsupported(format string, args ...any) error {
	return &unsupportedError{what: fmt.Sprintf(format, args...)}
}

// constant returns a constant node.
func (c *compiler) constant(src ast.Node, v event.Value) *compiledNode {
	return &compiledNode{src: src, typ: typeOfKind(v.Kind()), leaf: leafNode{kind: leafConst, c: v}}
}

// scalar returns a computed node of type typ. When it has operands and
// every one is a constant, it evaluates fn once and returns the result as
// a constant (unless that fails: the failure then happens at run time, as
// in expr).
func (c *compiler) scalar(src ast.Node, typ nodeType, fn valueFn, operands ...*compiledNode) *compiledNode {
	folded := len(operands) > 0
	for _, o := range operands {
		folded = folded && o.isConst()
	}
	if folded {
		if v, err := fn(frame{ev: &noEvent, stages: matchStages(nil)}); err == nil {
			return c.constant(src, v)
		}
	}
	return &compiledNode{src: src, typ: typ, leaf: leafNode{kind: leafFn, fn: fn}}
}

// boolean returns a node of type bool with a direct boolean form.
func (c *compiler) boolean(src ast.Node, t boolFn, operands ...*compiledNode) *compiledNode {
	n := c.scalar(src, tyBool, func(fr frame) (event.Value, *Error) {
		b, err := t(fr)
		return event.Bool(b), err
	}, operands...)
	if !n.isConst() {
		n.test = func(bool) boolFn { return t }
	}
	return n
}

// boolOf returns the boolean form of a scalar node. A value that is not a
// bool is an error, except null when nullOK (at the top of a condition,
// where expr's final cast turns nil into false).
func (c *compiler) boolOf(n *compiledNode, nullOK bool) boolFn {
	if n.test != nil {
		return n.test(nullOK)
	}
	errNull := c.errorf(n.src, "%s is null", c.text(n.src))
	errNotBool := c.errorf(n.src, "%s is not a bool", c.text(n.src))
	if n.leaf.kind == leafConst {
		v := n.leaf.c
		return func(frame) (bool, *Error) { return asBool(v, nullOK, errNull, errNotBool) }
	}
	if n.leaf.kind == leafField {
		slot := n.leaf.slot
		return func(fr frame) (bool, *Error) {
			return asBool(fr.ev.Field(slot), nullOK, errNull, errNotBool)
		}
	}
	v := n.value()
	return func(fr frame) (bool, *Error) {
		x, err := v(fr)
		if err != nil {
			return false, err
		}
		return asBool(x, nullOK, errNull, errNotBool)
	}
}

func asBool(v event.Value, nullOK bool, errNull, errNotBool *Error) (bool, *Error) {
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
func (c *compiler) compile(n ast.Node) (*compiledNode, error) {
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
func (c *compiler) compileScalar(n ast.Node) (*compiledNode, error) {
	x, err := c.compile(n)
	if err != nil {
		return nil, err
	}
	switch x.typ {
	case tyEvents:
		t := c.text(n)
		return nil, c.errorf(n, "%s is the list of events of a stage: read a field (%s.field), or count(%s)", t, t, t)
	case tyEvent:
		t := c.text(n)
		return nil, c.errorf(n, "%s is an event: read one of its fields (%s.field)", t, t)
	case tyList:
		return nil, c.errorf(n, "%s is a list, not a single value", c.text(n))
	}
	return x, nil
}

func (c *compiler) ident(n *ast.IdentifierNode) (*compiledNode, error) {
	r, err := c.resolve(n)
	if err != nil {
		return nil, err
	}
	if r.stage >= 0 {
		return &compiledNode{src: n, typ: tyEvents, stage: r.stage}, nil
	}
	return &compiledNode{src: n, typ: c.fieldType(r.slot), leaf: leafNode{kind: leafField, slot: r.slot}}, nil
}

// fieldType is the static type of the field in slot: its declared kind,
// or any when the ruleset declares no schema or the field no kind.
func (c *compiler) fieldType(slot int) nodeType {
	if !c.env.Declared {
		return tyAny
	}
	if t := typeOfKind(c.env.Schema.Field(slot).Kind); t != tyNil {
		return t
	}
	return tyAny
}

func (c *compiler) unary(n *ast.UnaryNode) (*compiledNode, error) {
	x, err := c.compileScalar(n.Node)
	if err != nil {
		return nil, err
	}
	switch n.Operator {
	case "!", "not":
		if x.typ != tyBool && x.typ != tyAny {
			return nil, c.errorf(n, "%s needs a bool, got %s", n.Operator, x.typ)
		}
		t := c.boolOf(x, false)
		return c.boolean(n, func(fr frame) (bool, *Error) {
			b, err := t(fr)
			return !b, err
		}, x), nil
	case "-":
		if !x.typ.numLike() {
			return nil, c.errorf(n, "cannot negate %s", x.typ)
		}
		l := x.leaf
		site := c.site(n)
		return c.scalar(n, x.typ, func(fr frame) (event.Value, *Error) {
			v, err := l.get(fr)
			if err != nil {
				return event.Null, err
			}
			if r, ok := negate(v); ok {
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

func (c *compiler) binary(n *ast.BinaryNode) (*compiledNode, error) {
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
	op, ok := binaryOps[n.Operator]
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
	case opEq, opNe:
		if !comparable(l.typ, r.typ) {
			return nil, c.errorf(n, "cannot compare %s with %s%s", l.typ, r.typ, c.literalHint(l, r))
		}
		return c.equality(n, op == opNe, l, r), nil
	case opLt, opLe, opGt, opGe:
		if !(l.typ.numLike() && r.typ.numLike() || l.typ.strLike() && r.typ.strLike()) {
			return nil, c.errorf(n, "cannot compare %s with %s%s", l.typ, r.typ, c.literalHint(l, r))
		}
		return c.order(n, op, l, r), nil
	}
	typ, ok := arithType(op, l.typ, r.typ)
	if !ok {
		if op == opMod {
			return nil, c.errorf(n, "%% needs integers, got %s and %s", l.typ, r.typ)
		}
		return nil, c.errorf(n, "cannot apply %s to %s and %s", n.Operator, l.typ, r.typ)
	}
	return c.arith(n, op, typ, l, r), nil
}

// literalHint says how to write the literal of a comparison whose sides
// have types that do not compare, when one can tell: a number or a bool
// written in quotes against a number or a bool field (amount > "500": write
// 500), a number against a string field (mcc == 5411: write "5411", the
// commonest slip with codes held as text), a time written as text against
// an int (ts > "2026-01-01T00:00:00Z": write its epoch milliseconds, what
// a time field holds). It is "" otherwise.
func (c *compiler) literalHint(l, r *compiledNode) string {
	if l.isConst() {
		l, r = r, l
	}
	if l.isConst() || !r.isConst() {
		return ""
	}
	side := c.text(l.src)
	switch lit := r.src.(type) {
	case *ast.StringNode:
		s := lit.Value
		switch {
		case l.typ.numeric() && isNumberLiteral(s):
			return fmt.Sprintf(": %s is %s, so write %s without quotes", side, article(l.typ), s)
		case l.typ == tyBool && (s == "true" || s == "false"):
			return fmt.Sprintf(": %s is a bool, so write %s without quotes", side, s)
		case l.typ == tyInt:
			if ms, utc, ok := timeLiteral(s); ok {
				return fmt.Sprintf(": times are ints of epoch milliseconds, so write %d for %s", ms, utc)
			}
		}
	case *ast.IntegerNode, *ast.FloatNode:
		if l.typ == tyString {
			return fmt.Sprintf(": %s is a string, so write %q", side, c.text(r.src))
		}
	}
	return ""
}

// timeLiteral reads s, a time written as text in a condition (ts >
// "2026-01-01T00:00:00Z"), for the hint that says the number to write:
// an RFC 3339 time, or a date alone (its UTC midnight). It returns the
// epoch milliseconds (the fraction beyond them dropped towards the past,
// as the decoder of events drops it) and the time in UTC.
func timeLiteral(s string) (ms int64, utc string, ok bool) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		if t, err = time.Parse(time.DateOnly, s); err != nil {
			return 0, "", false
		}
	}
	ms = t.UnixMilli()
	return ms, time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.999Z07:00"), true
}

// quotedListHint says how to write a list of number literals that a string
// is looked for in (mcc in [5411, 5732]: write ["5411", "5732"]); "" for
// any other list.
func (c *compiler) quotedListHint(l *compiledNode, list ast.Node) string {
	arr, ok := list.(*ast.ArrayNode)
	if !ok || l.typ != tyString || len(arr.Nodes) == 0 {
		return ""
	}
	quoted := make([]string, len(arr.Nodes))
	for i, e := range arr.Nodes {
		switch e.(type) {
		case *ast.IntegerNode, *ast.FloatNode:
			quoted[i] = strconv.Quote(c.text(e))
		default:
			return ""
		}
	}
	return fmt.Sprintf(": %s is a string, so write [%s]", c.text(l.src), strings.Join(quoted, ", "))
}

// article is a type's name after "a" or "an": "an int", "a float".
func article(t nodeType) string {
	if t == tyInt || t == tyAny {
		return "an " + t.String()
	}
	return "a " + t.String()
}

// isNumberLiteral reports whether s reads as a number literal of expr:
// digits, with an optional sign, fraction and exponent.
func isNumberLiteral(s string) bool {
	_, err := strconv.ParseFloat(s, 64)
	return err == nil && strings.IndexFunc(s, func(r rune) bool {
		return !strings.ContainsRune("0123456789.eE+-", r)
	}) < 0
}

// comparable reports whether == may compare values of types a and b
// (expr's checker: numbers with numbers, equal types, or anything with
// any or nil).
func comparable(a, b nodeType) bool {
	if a == tyAny || b == tyAny || a == tyNil || b == tyNil {
		return true
	}
	return a.numeric() && b.numeric() || a == b
}

// arithType is the static type of an arithmetic operation, false when
// the operand types cannot fit.
func arithType(op binOp, a, b nodeType) (nodeType, bool) {
	switch op {
	case opAdd, opSub, opMul:
		switch {
		case a.numeric() && b.numeric():
			if a == tyInt && b == tyInt {
				return tyInt, true
			}
			return tyFloat, true
		case op == opAdd && a == tyString && b == tyString:
			return tyString, true
		case a == tyAny && (b.numLike() || op == opAdd && b == tyString),
			b == tyAny && (a.numLike() || op == opAdd && a == tyString):
			return tyAny, true
		}
	case opDiv, opPow:
		if a.numLike() && b.numLike() {
			return tyFloat, true
		}
	case opMod:
		if (a == tyInt || a == tyAny) && (b == tyInt || b == tyAny) {
			return tyInt, true
		}
	}
	return tyAny, false
}

// equality compiles == and != (never an error: values of different kinds
// are unequal). The common shape, a field against a constant, reads the
// slot directly.
func (c *compiler) equality(n ast.Node, neg bool, l, r *compiledNode) *compiledNode {
	if l.isConst() && !r.isConst() {
		l, r = r, l
	}
	if l.leaf.kind == leafField && r.isConst() {
		slot, k := l.leaf.slot, r.leaf.c
		switch k.Kind() {
		case event.KindString:
			s, _ := k.AsString()
			return c.boolean(n, func(fr frame) (bool, *Error) {
				x, ok := fr.ev.Field(slot).AsString()
				return (ok && x == s) != neg, nil
			})
		case event.KindInt, event.KindFloat:
			ci, isInt := k.AsInt()
			cf, _ := k.AsFloat()
			return c.boolean(n, func(fr frame) (bool, *Error) {
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
	return c.boolean(n, func(fr frame) (bool, *Error) {
		a, err := ll.get(fr)
		if err != nil {
			return false, err
		}
		b, err := rl.get(fr)
		if err != nil {
			return false, err
		}
		return equal(a, b) != neg, nil
	}, l, r)
}

// order compiles < <= > >=: two numbers or two strings, anything else
// (null included) is a run-time error. A field against a numeric or string
// constant, the commonest condition, gets its own closure.
func (c *compiler) order(n ast.Node, op binOp, l, r *compiledNode) *compiledNode {
	if l.isConst() && !r.isConst() {
		l, r, op = r, l, op.flip()
	}
	errL := c.errorf(l.src, "%s is null (in %s)", c.text(l.src), c.text(n))
	errR := c.errorf(r.src, "%s is null (in %s)", c.text(r.src), c.text(n))
	site := c.site(n)
	mismatch := func(a, b event.Value) *Error {
		switch {
		case a.IsNull():
			return errL
		case b.IsNull():
			return errR
		}
		return site.fail("cannot compare %s with %s", a.Kind(), b.Kind())
	}
	if l.leaf.kind == leafField && r.isConst() {
		slot, k := l.leaf.slot, r.leaf.c
		switch k.Kind() {
		case event.KindInt, event.KindFloat:
			ci, isInt := k.AsInt()
			cf, _ := k.AsFloat()
			return c.boolean(n, func(fr frame) (bool, *Error) {
				v := fr.ev.Field(slot)
				switch v.Kind() {
				case event.KindFloat:
					x, _ := v.AsFloat()
					return cmpOrdered(op, x, cf), nil
				case event.KindInt:
					x, _ := v.AsInt()
					if isInt {
						return cmpOrdered(op, x, ci), nil
					}
					return cmpOrdered(op, float64(x), cf), nil
				}
				return false, mismatch(v, k)
			})
		case event.KindString:
			s, _ := k.AsString()
			return c.boolean(n, func(fr frame) (bool, *Error) {
				v := fr.ev.Field(slot)
				if x, ok := v.AsString(); ok {
					return cmpOrdered(op, x, s), nil
				}
				return false, mismatch(v, k)
			})
		}
	}
	ll, rl := l.leaf, r.leaf
	if kf, ok := rl.c.AsFloat(); ok && l.geo != nil && rl.kind == leafConst && !math.IsInf(kf, 0) && !math.IsNaN(kf) { // distance_km(...) > 2000
		return c.boolean(n, distanceOrder(op, l.geo, kf))
	}
	if ll.kind == leafFn && rl.kind == leafConst { // f(x) < 10
		lf, k := ll.fn, rl.c
		return c.boolean(n, func(fr frame) (bool, *Error) {
			a, err := lf(fr)
			if err != nil {
				return false, err
			}
			if res, ok := compareOrder(op, a, k); ok {
				return res, nil
			}
			return false, mismatch(a, k)
		})
	}
	return c.boolean(n, func(fr frame) (bool, *Error) {
		a, err := ll.get(fr)
		if err != nil {
			return false, err
		}
		b, err := rl.get(fr)
		if err != nil {
			return false, err
		}
		if res, ok := compareOrder(op, a, b); ok {
			return res, nil
		}
		return false, mismatch(a, b)
	}, l, r)
}

func (c *compiler) arith(n ast.Node, op binOp, typ nodeType, l, r *compiledNode) *compiledNode {
	errL := c.errorf(l.src, "%s is null (in %s)", c.text(l.src), c.text(n))
	errR := c.errorf(r.src, "%s is null (in %s)", c.text(r.src), c.text(n))
	errZero := c.errorf(n, "integer divide by zero (in %s)", c.text(n))
	site := c.site(n)
	fail := func(a, b event.Value, fault opFault) *Error {
		switch {
		case fault == faultDivZero:
			return errZero
		case a.IsNull():
			return errL
		case b.IsNull():
			return errR
		}
		return site.fail("cannot apply %s to %s and %s", op, a.Kind(), b.Kind())
	}
	ll, rl := l.leaf, r.leaf
	if ll.kind == leafField && rl.kind == leafConst { // amount * 2
		slot, k := ll.slot, rl.c
		return c.scalar(n, typ, func(fr frame) (event.Value, *Error) {
			a := fr.ev.Field(slot)
			v, fault := arithmetic(op, a, k)
			if fault != faultNone {
				return event.Null, fail(a, k, fault)
			}
			return v, nil
		})
	}
	return c.scalar(n, typ, func(fr frame) (event.Value, *Error) {
		a, err := ll.get(fr)
		if err != nil {
			return event.Null, err
		}
		b, err := rl.get(fr)
		if err != nil {
			return event.Null, err
		}
		v, fault := arithmetic(op, a, b)
		if fault != faultNone {
			return event.Null, fail(a, b, fault)
		}
		return v, nil
	}, l, r)
}

// logic compiles && and ||. The left operand must be a bool (null is an
// error, as in expr's jump instructions); the right operand is the value of
// the whole expression when the left one does not decide it, whatever its
// kind: expr does not check it either.
func (c *compiler) logic(n *ast.BinaryNode) (*compiledNode, error) {
	and := n.Operator == "&&" || n.Operator == "and"
	l, err := c.compileScalar(n.Left)
	if err != nil {
		return nil, err
	}
	r, err := c.compileScalar(n.Right)
	if err != nil {
		return nil, err
	}
	if !(l.typ == tyBool || l.typ == tyAny) || !(r.typ == tyBool || r.typ == tyAny) {
		return nil, c.errorf(n, "%s needs bools, got %s and %s", n.Operator, l.typ, r.typ)
	}
	lt := c.boolOf(l, false)
	rv := r.value()
	out := c.scalar(n, tyBool, func(fr frame) (event.Value, *Error) {
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
	ops := []*compiledNode{l, r}
	if l.chain != nil && l.chain.and == and {
		ops = append(append([]*compiledNode(nil), l.chain.ops...), r)
	}
	out.chain = &logicChain{and: and, ops: ops}
	out.test = func(nullOK bool) boolFn {
		ts := make([]boolFn, len(ops)-1)
		for i, o := range ops[:len(ops)-1] {
			ts[i] = c.boolOf(o, false)
		}
		last := c.boolOf(ops[len(ops)-1], nullOK)
		if len(ts) == 1 {
			first := ts[0]
			return func(fr frame) (bool, *Error) {
				x, err := first(fr)
				if err != nil || x != and {
					return x, err
				}
				return last(fr)
			}
		}
		return func(fr frame) (bool, *Error) {
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

// logicChain holds the operands of a chain of && (or of ||).
type logicChain struct {
	and bool
	ops []*compiledNode
}

// coalesce compiles a ?? b: a unless it is null, then b.
func (c *compiler) coalesce(n *ast.BinaryNode) (*compiledNode, error) {
	l, err := c.compileScalar(n.Left)
	if err != nil {
		return nil, err
	}
	r, err := c.compileScalar(n.Right)
	if err != nil {
		return nil, err
	}
	typ := tyAny
	switch {
	case l.typ == tyNil:
		typ = r.typ
	case l.typ == r.typ:
		typ = l.typ
	}
	ll, rl := l.leaf, r.leaf
	out := c.scalar(n, typ, func(fr frame) (event.Value, *Error) {
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
	out.test = func(nullOK bool) boolFn {
		rt := c.boolOf(r, nullOK)
		return func(fr frame) (bool, *Error) {
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
func (c *compiler) conditional(n *ast.ConditionalNode) (*compiledNode, error) {
	cond, err := c.compileScalar(n.Cond)
	if err != nil {
		return nil, err
	}
	if cond.typ != tyBool && cond.typ != tyAny {
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
	typ := tyAny
	if a.typ == b.typ {
		typ = a.typ
	}
	ct := c.boolOf(cond, false)
	al, bl := a.leaf, b.leaf
	out := c.scalar(n, typ, func(fr frame) (event.Value, *Error) {
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
	out.test = func(nullOK bool) boolFn {
		at, bt := c.boolOf(a, nullOK), c.boolOf(b, nullOK)
		return func(fr frame) (bool, *Error) {
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

// regexpCache holds the compiled patterns of a matches whose pattern is
// not a constant (an event's field): each pattern compiles once, not at
// every event (an 80 KB pattern took 0.1 s an event), for the callers of
// the condition (the subtasks, concurrently). It holds at most
// maxDynRegexps patterns, of a cost (progCost) of maxDynCached in all,
// emptied when full. A pattern over maxDynPattern bytes, or whose cost
// passes maxDynCost, is an error, not compiled: its repetitions multiply
// its instructions (4,095 bytes of a{1000} compile into 585,000, 0.3 s
// and 27 MB), and each class holds its ranges (4 KB of \pL: 7 MB).
type regexpCache struct {
	mu   sync.Mutex
	m    map[string]regexpEntry
	cost int // of m's patterns
}

type regexpEntry struct {
	re    *regexp.Regexp
	insts int // progSize's
	err   error
}

const (
	maxDynRegexps = 256
	maxDynPattern = 4096
	maxDynCost    = 10_000
	maxDynCached  = 100_000
	maxDynSteps   = 25_000_000
)

// match reports whether s matches the pattern p. A match takes up to a
// step per instruction of the pattern and byte of s (RE2 runs the
// instructions in step over the input, linear in each: 9,000 instructions
// against 100 KB took 19 s): more than maxDynSteps is an error, not run,
// but for a pattern that is a literal string (a search for it).
// oneLine writes the newlines of s as \n.
func oneLine(s string) string { return strings.ReplaceAll(s, "\n", `\n`) }

func (c *regexpCache) match(s, p string) (bool, error) {
	re, insts, err := c.get(p)
	if err != nil {
		// regexp quotes the pattern, which may hold a newline: a run-time
		// error's message (a log line, a counter's last error) is one line.
		return false, fmt.Errorf("bad regular expression: %s", oneLine(err.Error()))
	}
	if steps := int64(insts) * int64(len(s)); steps > maxDynSteps {
		if _, literal := re.LiteralPrefix(); literal {
			return re.MatchString(s), nil
		}
		return false, fmt.Errorf("a pattern of about %d instructions against %d bytes: more than the %d steps (instructions times bytes) a match of a pattern from an event may take", insts, len(s), maxDynSteps)
	}
	return re.MatchString(s), nil
}

func (c *regexpCache) get(p string) (*regexp.Regexp, int, error) {
	if len(p) > maxDynPattern {
		return nil, 0, fmt.Errorf("a pattern of %d bytes, more than the %d a pattern from an event may have", len(p), maxDynPattern)
	}
	c.mu.Lock()
	e, ok := c.m[p]
	c.mu.Unlock()
	if ok {
		return e.re, e.insts, e.err
	}
	// regexp.Compile parses as syntax.Perl does; the parse is cheap, the
	// program is not.
	cost, insts := 1, 1
	parsed, err := syntax.Parse(p, syntax.Perl)
	if err == nil {
		if cost, insts = progCost(parsed); cost > maxDynCost {
			return nil, 0, fmt.Errorf("a pattern of a compiled size of about %d, more than the %d a pattern from an event may have (a repetition multiplies what it repeats, and a class such as \\pL counts its ranges)", cost, maxDynCost)
		}
	}
	re, err := regexp.Compile(p)
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxDynRegexps || c.cost+cost > maxDynCached {
		c.m, c.cost = map[string]regexpEntry{}, 0
	}
	if _, ok := c.m[p]; !ok { // another caller may have put it meanwhile
		c.m[strings.Clone(p)] = regexpEntry{re, insts, err} // p may share an event's buffer
		c.cost += cost
	}
	c.mu.Unlock()
	return re, insts, err
}

// progCost is about the size of the program of a parsed pattern, in
// instructions (about 50 bytes each): a repetition counts what it repeats
// as often as it may repeat it, as the compiler writes it out (an optional
// copy with a branch of its own), and a class its ranges (8 runes an
// instruction's worth), once: the copies share them. insts are the
// instructions alone, which a match steps through.
func progCost(re *syntax.Regexp) (cost, insts int) {
	insts, runes := progSize(re)
	return insts + runes/8, insts
}

func progSize(re *syntax.Regexp) (insts, runes int) {
	insts = 1
	switch re.Op {
	case syntax.OpLiteral:
		insts = max(1, len(re.Rune))
	case syntax.OpCharClass:
		runes = len(re.Rune)
	case syntax.OpCapture:
		insts = 2
	case syntax.OpRepeat:
		k := re.Max
		if k < 0 {
			k = re.Min + 1
		}
		sub, subRunes := progSize(re.Sub[0])
		return 1 + re.Min*sub + max(0, k-re.Min)*(sub+1), subRunes
	}
	for _, sub := range re.Sub {
		i, r := progSize(sub)
		insts, runes = insts+i, runes+r
	}
	return insts, runes
}

// stringOp compiles matches, contains, startsWith and endsWith: a null on
// either side makes false, anything else but two strings is an error.
func (c *compiler) stringOp(n *ast.BinaryNode) (*compiledNode, error) {
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
	var match func(s, pattern string) (bool, *Error)
	switch n.Operator {
	case "contains":
		match = func(s, p string) (bool, *Error) { return strings.Contains(s, p), nil }
	case "startsWith":
		match = func(s, p string) (bool, *Error) { return strings.HasPrefix(s, p), nil }
	case "endsWith":
		match = func(s, p string) (bool, *Error) { return strings.HasSuffix(s, p), nil }
	case "matches":
		if r.isConst() {
			p, _ := r.leaf.c.AsString()
			re, err := regexp.Compile(p)
			if err != nil {
				// regexp quotes the pattern, which may hold a newline:
				// an Error's message is one line.
				return nil, c.errorf(n.Right, "bad regular expression: %s", oneLine(err.Error()))
			}
			match = func(s, _ string) (bool, *Error) { return re.MatchString(s), nil }
			break
		}
		cache := &regexpCache{}
		match = func(s, p string) (bool, *Error) {
			ok, err := cache.match(s, p)
			if err != nil {
				return false, site.fail("%v", err)
			}
			return ok, nil
		}
	}
	mismatch := func(a, b event.Value) *Error {
		return site.fail("%s needs strings, got %s and %s", n.Operator, a.Kind(), b.Kind())
	}
	if l.leaf.kind == leafField && r.isConst() {
		slot, k := l.leaf.slot, r.leaf.c
		p, _ := k.AsString()
		return c.boolean(n, func(fr frame) (bool, *Error) {
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
	return c.boolean(n, func(fr frame) (bool, *Error) {
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
func (c *compiler) in(n *ast.BinaryNode) (*compiledNode, error) {
	l, err := c.compileScalar(n.Left)
	if err != nil {
		return nil, err
	}
	r, err := c.compile(n.Right)
	if err != nil {
		return nil, err
	}
	if r.typ != tyList {
		if r.typ == tyAny {
			return nil, unsupported("in on a value of unknown type")
		}
		return nil, c.errorf(n.Right, "in needs a list on its right, got %s", r.typ)
	}
	list := r.list
	if !comparable(l.typ, list.elem) {
		return nil, c.errorf(n, "cannot look for a %s in a list of %s%s", l.typ, list.elem, c.quotedListHint(l, n.Right))
	}
	ll := l.leaf
	if list.consts != nil {
		set := newCondSet(list.consts)
		return c.boolean(n, func(fr frame) (bool, *Error) {
			v, err := ll.get(fr)
			if err != nil {
				return false, err
			}
			return set.has(v), nil
		}, l), nil
	}
	return c.boolean(n, func(fr frame) (bool, *Error) {
		v, err := ll.get(fr)
		if err != nil {
			return false, err
		}
		if err := list.check(fr); err != nil {
			return false, err
		}
		for i, k := 0, list.n(fr); i < k; i++ {
			e, _ := list.at(fr, i)
			if equal(v, e) {
				return true, nil
			}
		}
		return false, nil
	}), nil
}

// constSet is a list of constants prepared for membership tests.
type constSet struct {
	strs  []string
	index map[string]struct{} // strs as a set, for longer lists
	other []event.Value
}

func newCondSet(vals []event.Value) *constSet {
	s := &constSet{}
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

func (s *constSet) has(v event.Value) bool {
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
		if equal(v, o) {
			return true
		}
	}
	return false
}
