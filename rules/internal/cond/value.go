package rules

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

// condOp is a binary operator of the compiled form.
type condOp uint8

const (
	condOpEq condOp = iota
	condOpNe
	condOpLt
	condOpLe
	condOpGt
	condOpGe
	condOpAdd
	condOpSub
	condOpMul
	condOpDiv
	condOpMod
	condOpPow
)

var condOpNames = [...]string{"==", "!=", "<", "<=", ">", ">=", "+", "-", "*", "/", "%", "**"}

func (op condOp) String() string { return condOpNames[op] }

// condBinaryOps maps expr's operator spelling to a condOp.
var condBinaryOps = map[string]condOp{
	"==": condOpEq, "!=": condOpNe, "<": condOpLt, "<=": condOpLe, ">": condOpGt, ">=": condOpGe,
	"+": condOpAdd, "-": condOpSub, "*": condOpMul, "/": condOpDiv, "%": condOpMod, "**": condOpPow, "^": condOpPow,
}

// flip returns the operator that gives the same answer with the operands
// swapped (a < b is b > a).
func (op condOp) flip() condOp {
	switch op {
	case condOpLt:
		return condOpGt
	case condOpLe:
		return condOpGe
	case condOpGt:
		return condOpLt
	case condOpGe:
		return condOpLe
	}
	return op
}

func condIsNum(k event.Kind) bool { return k == event.KindInt || k == event.KindFloat }

// condEqual is expr's ==: an int and a float compare as numbers, null
// equals only null, and values of other different kinds are unequal (never
// an error).
func condEqual(a, b event.Value) bool {
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

func condCmpInt(op condOp, x, y int64) bool {
	switch op {
	case condOpLt:
		return x < y
	case condOpLe:
		return x <= y
	case condOpGt:
		return x > y
	case condOpGe:
		return x >= y
	case condOpEq:
		return x == y
	}
	return x != y
}

func condCmpFloat(op condOp, x, y float64) bool {
	switch op {
	case condOpLt:
		return x < y
	case condOpLe:
		return x <= y
	case condOpGt:
		return x > y
	case condOpGe:
		return x >= y
	case condOpEq:
		return x == y
	}
	return x != y
}

func condCmpString(op condOp, x, y string) bool {
	switch op {
	case condOpLt:
		return x < y
	case condOpLe:
		return x <= y
	case condOpGt:
		return x > y
	case condOpGe:
		return x >= y
	case condOpEq:
		return x == y
	}
	return x != y
}

// condOrder evaluates an ordering operator (< <= > >=). ok is false when
// expr refuses the pair: anything but two numbers or two strings, null
// included.
func condOrder(op condOp, a, b event.Value) (res, ok bool) {
	switch a.Kind() {
	case event.KindInt:
		x, _ := a.AsInt()
		switch b.Kind() {
		case event.KindInt:
			y, _ := b.AsInt()
			return condCmpInt(op, x, y), true
		case event.KindFloat:
			y, _ := b.AsFloat()
			return condCmpFloat(op, float64(x), y), true
		}
	case event.KindFloat:
		x, _ := a.AsFloat()
		if y, ok := b.AsFloat(); ok {
			return condCmpFloat(op, x, y), true
		}
	case event.KindString:
		x, _ := a.AsString()
		if y, ok := b.AsString(); ok {
			return condCmpString(op, x, y), true
		}
	}
	return false, false
}

// condFault is why an operation on values failed.
type condFault uint8

const (
	condOK       condFault = iota
	condMismatch           // the operand kinds do not fit the operator
	condDivZero            // integer % by zero
)

// condArith evaluates an arithmetic operator: int op int stays int (with
// Go's wrap-around), a float on either side makes a float, / and ** always
// make a float, % takes ints only, + also joins two strings.
func condArith(op condOp, a, b event.Value) (event.Value, condFault) {
	ak, bk := a.Kind(), b.Kind()
	if ak == event.KindInt && bk == event.KindInt {
		x, _ := a.AsInt()
		y, _ := b.AsInt()
		switch op {
		case condOpAdd:
			return event.Int(x + y), condOK
		case condOpSub:
			return event.Int(x - y), condOK
		case condOpMul:
			return event.Int(x * y), condOK
		case condOpDiv:
			return event.Float(float64(x) / float64(y)), condOK
		case condOpMod:
			if y == 0 {
				return event.Null, condDivZero
			}
			return event.Int(x % y), condOK
		case condOpPow:
			return event.Float(math.Pow(float64(x), float64(y))), condOK
		}
	}
	if condIsNum(ak) && condIsNum(bk) {
		x, _ := a.AsFloat()
		y, _ := b.AsFloat()
		switch op {
		case condOpAdd:
			return event.Float(x + y), condOK
		case condOpSub:
			return event.Float(x - y), condOK
		case condOpMul:
			return event.Float(x * y), condOK
		case condOpDiv:
			return event.Float(x / y), condOK
		case condOpPow:
			return event.Float(math.Pow(x, y)), condOK
		}
		return event.Null, condMismatch // % on a float
	}
	if op == condOpAdd && ak == event.KindString && bk == event.KindString {
		x, _ := a.AsString()
		y, _ := b.AsString()
		return event.String(x + y), condOK
	}
	return event.Null, condMismatch
}

// condNegate is unary minus.
func condNegate(v event.Value) (event.Value, bool) {
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

// condToIndex converts a list index the way expr does (floats truncate).
func condToIndex(v event.Value) (int, bool) {
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

// condResolveIndex applies expr's indexing rule: a negative index counts
// from the end; ok is false when the index is out of range.
func condResolveIndex(i, n int) (int, bool) {
	if i < 0 {
		i += n
	}
	return i, i >= 0 && i < n
}

// condScalarFunc is a builtin of one scalar argument v, plus for the trim
// family an optional string argument arg (hasArg). It reports false when v
// does not fit.
type condScalarFunc func(v event.Value, arg string, hasArg bool) (event.Value, bool)

// condScalarFuncs are the builtins of one scalar argument the compiler
// evaluates natively, by expr's name.
var condScalarFuncs = map[string]condScalarFunc{
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
	"ceil":  condRounder(math.Ceil),
	"floor": condRounder(math.Floor),
	"round": condRounder(math.Round),
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
	"lower": condStringFunc(func(s, _ string, _ bool) string { return strings.ToLower(s) }),
	"upper": condStringFunc(func(s, _ string, _ bool) string { return strings.ToUpper(s) }),
	"trim": condStringFunc(func(s, cut string, hasCut bool) string {
		if hasCut {
			return strings.Trim(s, cut)
		}
		return strings.TrimSpace(s)
	}),
	"trimPrefix": condStringFunc(func(s, prefix string, hasPrefix bool) string {
		if !hasPrefix {
			prefix = " "
		}
		return strings.TrimPrefix(s, prefix)
	}),
	"trimSuffix": condStringFunc(func(s, suffix string, hasSuffix bool) string {
		if !hasSuffix {
			suffix = " "
		}
		return strings.TrimSuffix(s, suffix)
	}),
}

// condTakesArg are the builtins of condScalarFuncs that take an optional
// second (string) argument.
var condTakesArg = map[string]bool{"trim": true, "trimPrefix": true, "trimSuffix": true}

func condRounder(f func(float64) float64) condScalarFunc {
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

func condStringFunc(f func(s, arg string, hasArg bool) string) condScalarFunc {
	return func(v event.Value, arg string, hasArg bool) (event.Value, bool) {
		s, ok := v.AsString()
		if !ok {
			return event.Null, false
		}
		return event.String(f(s, arg, hasArg)), true
	}
}

// condAggKind is an aggregate over a list of values.
type condAggKind uint8

const (
	condAggSum condAggKind = iota
	condAggMean
	condAggMin
	condAggMax
	condAggFirst
	condAggLast
	condAggCount
)

// condAggKinds maps the names of the aggregate builtins to their kind;
// avg is our alias of expr's mean.
var condAggKinds = map[string]condAggKind{
	"sum": condAggSum, "mean": condAggMean, "avg": condAggMean, "min": condAggMin, "max": condAggMax,
	"first": condAggFirst, "last": condAggLast, "count": condAggCount,
}

var condAggNames = [...]string{"sum", "mean", "min", "max", "first", "last", "count"}

// condAgg accumulates an aggregate, one value at a time; the zero value of
// a given kind is the aggregate of no values. It lives on the stack of
// the evaluation (no allocation).
//
// Semantics (expr's, over a list): sum starts from int 0 and adds each
// value with + (so a null or a string is an error); mean is a float (0
// for no values) and needs numbers; min and max need numbers and yield
// null for no values; first and last yield null for no values; count is
// the number of values.
type condAgg struct {
	kind  condAggKind
	n     int
	acc   event.Value
	total float64
}

func newCondAgg(kind condAggKind) condAgg {
	g := condAgg{kind: kind}
	if kind == condAggSum {
		g.acc = event.Int(0)
	}
	return g
}

// add folds v into the aggregate; it reports false when v does not fit.
func (g *condAgg) add(v event.Value) bool {
	g.n++
	switch g.kind {
	case condAggSum:
		// expr adds the element to the accumulator (element on the left).
		acc, fault := condArith(condOpAdd, v, g.acc)
		if fault != condOK {
			return false
		}
		g.acc = acc
	case condAggMean:
		f, ok := v.AsFloat()
		if !ok {
			return false
		}
		g.total += f
	case condAggMin, condAggMax:
		if !condIsNum(v.Kind()) {
			return false
		}
		op := condOpLt // max replaces the running value when it is less
		if g.kind == condAggMin {
			op = condOpGt
		}
		if g.n == 1 {
			g.acc = v
		} else if less, _ := condOrder(op, g.acc, v); less {
			g.acc = v
		}
	case condAggFirst:
		if g.n == 1 {
			g.acc = v
		}
	case condAggLast:
		g.acc = v
	}
	return true
}

// result returns the aggregate of the values added so far.
func (g *condAgg) result() event.Value {
	switch g.kind {
	case condAggMean:
		if g.n == 0 {
			return event.Float(0)
		}
		return event.Float(g.total / float64(g.n))
	case condAggCount:
		return event.Int(int64(g.n))
	}
	return g.acc
}
