package cond

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/cepheus-cep/cepheus/event"
)

// This file holds the run-time semantics of compiled expressions on
// [event.Value]s. Each function follows what expr's VM does when every
// field is typed any (expr's vm/runtime and builtin packages), because that
// VM, through [CompileCondition], is the reference the differential test
// compares against. Where expr has a Go type, read the matching kind: int
// for int, float64 for float, nil for null.

// binOp is a binary operator of the compiled form.
type binOp uint8

const (
	opEq binOp = iota
	opNe
	opLt
	opLe
	opGt
	opGe
	opAdd
	opSub
	opMul
	opDiv
	opMod
	opPow
)

var opNames = [...]string{"==", "!=", "<", "<=", ">", ">=", "+", "-", "*", "/", "%", "**"}

func (op binOp) String() string { return opNames[op] }

// binaryOps maps expr's operator spelling to a binOp.
var binaryOps = map[string]binOp{
	"==": opEq, "!=": opNe, "<": opLt, "<=": opLe, ">": opGt, ">=": opGe,
	"+": opAdd, "-": opSub, "*": opMul, "/": opDiv, "%": opMod, "**": opPow, "^": opPow,
}

// flip returns the operator that gives the same answer with the operands
// swapped (a < b is b > a).
func (op binOp) flip() binOp {
	switch op {
	case opLt:
		return opGt
	case opLe:
		return opGe
	case opGt:
		return opLt
	case opGe:
		return opLe
	}
	return op
}

func isNum(k event.Kind) bool { return k == event.KindInt || k == event.KindFloat }

// equal is expr's ==: an int and a float compare as numbers, null
// equals only null, and values of other different kinds are unequal (never
// an error).
func equal(a, b event.Value) bool {
	switch a.Kind() {
	case event.KindInt:
		x, _ := a.AsInt()
		switch b.Kind() {
		case event.KindInt:
			y, _ := b.AsInt()
			return x == y
		case event.KindFloat:
			y, _ := b.AsFloat()
			return float64(x) == y
		}
		return false
	case event.KindFloat:
		x, _ := a.AsFloat()
		if y, ok := b.AsFloat(); ok {
			return x == y
		}
		return false
	}
	return a.Equal(b)
}

// cmpOrdered applies comparison op to x and y (IEEE semantics for
// floats: every comparison with NaN but != is false).
func cmpOrdered[T int64 | float64 | string](op binOp, x, y T) bool {
	switch op {
	case opLt:
		return x < y
	case opLe:
		return x <= y
	case opGt:
		return x > y
	case opGe:
		return x >= y
	case opEq:
		return x == y
	}
	return x != y
}

// compareOrder evaluates an ordering operator (< <= > >=). ok is false when
// expr refuses the pair: anything but two numbers or two strings, null
// included.
func compareOrder(op binOp, a, b event.Value) (res, ok bool) {
	switch a.Kind() {
	case event.KindInt:
		x, _ := a.AsInt()
		switch b.Kind() {
		case event.KindInt:
			y, _ := b.AsInt()
			return cmpOrdered(op, x, y), true
		case event.KindFloat:
			y, _ := b.AsFloat()
			return cmpOrdered(op, float64(x), y), true
		}
	case event.KindFloat:
		x, _ := a.AsFloat()
		if y, ok := b.AsFloat(); ok {
			return cmpOrdered(op, x, y), true
		}
	case event.KindString:
		x, _ := a.AsString()
		if y, ok := b.AsString(); ok {
			return cmpOrdered(op, x, y), true
		}
	}
	return false, false
}

// opFault is why an operation on values failed.
type opFault uint8

const (
	faultNone     opFault = iota
	faultMismatch         // the operand kinds do not fit the operator
	faultDivZero          // integer % by zero
)

// arithmetic evaluates an arithmetic operator: int op int stays int (with
// Go's wrap-around), a float on either side makes a float, / and ** always
// make a float, % takes ints only, + also joins two strings.
func arithmetic(op binOp, a, b event.Value) (event.Value, opFault) {
	ak, bk := a.Kind(), b.Kind()
	if ak == event.KindInt && bk == event.KindInt {
		x, _ := a.AsInt()
		y, _ := b.AsInt()
		switch op {
		case opAdd:
			return event.Int(x + y), faultNone
		case opSub:
			return event.Int(x - y), faultNone
		case opMul:
			return event.Int(x * y), faultNone
		case opDiv:
			return event.Float(float64(x) / float64(y)), faultNone
		case opMod:
			if y == 0 {
				return event.Null, faultDivZero
			}
			return event.Int(x % y), faultNone
		case opPow:
			return event.Float(math.Pow(float64(x), float64(y))), faultNone
		}
	}
	if isNum(ak) && isNum(bk) {
		x, _ := a.AsFloat()
		y, _ := b.AsFloat()
		switch op {
		case opAdd:
			return event.Float(x + y), faultNone
		case opSub:
			return event.Float(x - y), faultNone
		case opMul:
			return event.Float(x * y), faultNone
		case opDiv:
			return event.Float(x / y), faultNone
		case opPow:
			return event.Float(math.Pow(x, y)), faultNone
		}
		return event.Null, faultMismatch // % on a float
	}
	if op == opAdd && ak == event.KindString && bk == event.KindString {
		x, _ := a.AsString()
		y, _ := b.AsString()
		return event.String(x + y), faultNone
	}
	return event.Null, faultMismatch
}

// negate is unary minus.
func negate(v event.Value) (event.Value, bool) {
	switch v.Kind() {
	case event.KindInt:
		x, _ := v.AsInt()
		return event.Int(-x), true
	case event.KindFloat:
		x, _ := v.AsFloat()
		return event.Float(-x), true
	}
	return event.Null, false
}

// toIndex converts a list index the way expr does (floats truncate).
func toIndex(v event.Value) (int, bool) {
	switch v.Kind() {
	case event.KindInt:
		x, _ := v.AsInt()
		return int(x), true
	case event.KindFloat:
		x, _ := v.AsFloat()
		return int(x), true
	}
	return 0, false
}

// resolveIndex applies expr's indexing rule: a negative index counts
// from the end; ok is false when the index is out of range.
func resolveIndex(i, n int) (int, bool) {
	if i < 0 {
		i += n
	}
	return i, i >= 0 && i < n
}

// scalarFn is a builtin of one scalar argument v, plus for the trim
// family an optional string argument arg (hasArg). It reports false when v
// does not fit.
type scalarFn func(v event.Value, arg string, hasArg bool) (event.Value, bool)

// scalarFuncs are the builtins of one scalar argument the compiler
// evaluates natively, by expr's name.
var scalarFuncs = map[string]scalarFn{
	"len": func(v event.Value, _ string, _ bool) (event.Value, bool) {
		if s, ok := v.AsString(); ok {
			return event.Int(int64(utf8.RuneCountInString(s))), true
		}
		return event.Null, false
	},
	"abs": func(v event.Value, _ string, _ bool) (event.Value, bool) {
		switch v.Kind() {
		case event.KindInt:
			if x, _ := v.AsInt(); x < 0 {
				return event.Int(-x), true
			}
			return v, true
		case event.KindFloat:
			if x, _ := v.AsFloat(); x < 0 {
				return event.Float(-x), true
			}
			return v, true
		}
		return event.Null, false
	},
	"ceil":  rounder(math.Ceil),
	"floor": rounder(math.Floor),
	"round": rounder(math.Round),
	"int": func(v event.Value, _ string, _ bool) (event.Value, bool) {
		switch v.Kind() {
		case event.KindInt:
			return v, true
		case event.KindFloat:
			x, _ := v.AsFloat()
			return event.Int(int64(x)), true
		case event.KindString:
			s, _ := v.AsString()
			i, err := strconv.Atoi(s)
			if err != nil {
				return event.Null, false
			}
			return event.Int(int64(i)), true
		}
		return event.Null, false
	},
	"float": func(v event.Value, _ string, _ bool) (event.Value, bool) {
		switch v.Kind() {
		case event.KindInt, event.KindFloat:
			x, _ := v.AsFloat()
			return event.Float(x), true
		case event.KindString:
			s, _ := v.AsString()
			f, err := strconv.ParseFloat(s, 64)
			if err != nil {
				return event.Null, false
			}
			return event.Float(f), true
		}
		return event.Null, false
	},
	"string": func(v event.Value, _ string, _ bool) (event.Value, bool) {
		return event.String(fmt.Sprintf("%v", v.Any())), true
	},
	"lower": stringFunc(func(s, _ string, _ bool) string { return strings.ToLower(s) }),
	"upper": stringFunc(func(s, _ string, _ bool) string { return strings.ToUpper(s) }),
	"trim": stringFunc(func(s, cut string, hasCut bool) string {
		if hasCut {
			return strings.Trim(s, cut)
		}
		return strings.TrimSpace(s)
	}),
	"trimPrefix": stringFunc(func(s, prefix string, hasPrefix bool) string {
		if !hasPrefix {
			prefix = " "
		}
		return strings.TrimPrefix(s, prefix)
	}),
	"trimSuffix": stringFunc(func(s, suffix string, hasSuffix bool) string {
		if !hasSuffix {
			suffix = " "
		}
		return strings.TrimSuffix(s, suffix)
	}),
}

// takesArg are the builtins of scalarFuncs that take an optional
// second (string) argument.
var takesArg = map[string]bool{"trim": true, "trimPrefix": true, "trimSuffix": true}

func rounder(f func(float64) float64) scalarFn {
	return func(v event.Value, _ string, _ bool) (event.Value, bool) {
		switch v.Kind() {
		case event.KindInt:
			x, _ := v.AsFloat()
			return event.Float(x), true
		case event.KindFloat:
			x, _ := v.AsFloat()
			return event.Float(f(x)), true
		}
		return event.Null, false
	}
}

func stringFunc(f func(s, arg string, hasArg bool) string) scalarFn {
	return func(v event.Value, arg string, hasArg bool) (event.Value, bool) {
		s, ok := v.AsString()
		if !ok {
			return event.Null, false
		}
		return event.String(f(s, arg, hasArg)), true
	}
}

// aggKind is an aggregate over a list of values.
type aggKind uint8

const (
	aggSum aggKind = iota
	aggMean
	aggMin
	aggMax
	aggFirst
	aggLast
	aggCount
)

// aggKinds maps the names of the aggregate builtins to their kind;
// avg is our alias of expr's mean.
var aggKinds = map[string]aggKind{
	"sum": aggSum, "mean": aggMean, "avg": aggMean, "min": aggMin, "max": aggMax,
	"first": aggFirst, "last": aggLast, "count": aggCount,
}

var aggNames = [...]string{"sum", "mean", "min", "max", "first", "last", "count"}

// aggSpec accumulates an aggregate, one value at a time; the zero value of
// a given kind is the aggregate of no values. It lives on the stack of
// the evaluation (no allocation).
//
// Semantics (expr's, over a list): sum starts from int 0 and adds each
// value with + (so a null or a string is an error); mean is a float (0
// for no values) and needs numbers; min and max need numbers and yield
// null for no values; first and last yield null for no values; count is
// the number of values.
type aggSpec struct {
	kind  aggKind
	n     int
	acc   event.Value
	total float64
}

func newCondAgg(kind aggKind) aggSpec {
	g := aggSpec{kind: kind}
	if kind == aggSum {
		g.acc = event.Int(0)
	}
	return g
}

// add folds v into the aggregate; it reports false when v does not fit.
func (g *aggSpec) add(v event.Value) bool {
	g.n++
	switch g.kind {
	case aggSum:
		// expr adds the element to the accumulator (element on the left).
		acc, fault := arithmetic(opAdd, v, g.acc)
		if fault != faultNone {
			return false
		}
		g.acc = acc
	case aggMean:
		f, ok := v.AsFloat()
		if !ok {
			return false
		}
		g.total += f
	case aggMin, aggMax:
		if !isNum(v.Kind()) {
			return false
		}
		op := opLt // max replaces the running value when it is less
		if g.kind == aggMin {
			op = opGt
		}
		if g.n == 1 {
			g.acc = v
		} else if less, _ := compareOrder(op, g.acc, v); less {
			g.acc = v
		}
	case aggFirst:
		if g.n == 1 {
			g.acc = v
		}
	case aggLast:
		g.acc = v
	}
	return true
}

// result returns the aggregate of the values added so far.
func (g *aggSpec) result() event.Value {
	switch g.kind {
	case aggMean:
		if g.n == 0 {
			return event.Float(0)
		}
		return event.Float(g.total / float64(g.n))
	case aggCount:
		return event.Int(int64(g.n))
	}
	return g.acc
}
