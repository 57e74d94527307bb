package cond

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"sync/atomic"

	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/parser"

	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/nfa"
)

// This file is the package's API: what the rule-language front end
// (package rules) calls.

// Env is what an expression of a rule may reference.
type Env struct {
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
	// Lookups are the names of the ruleset's lookups: lookup.field reads
	// the schema field named "lookup.field" (and stage.lookup.field that
	// field of the stage's event).
	Lookups []string
}

// Error is an error inside an expression. Compile errors and run-time
// errors ([BoolExpr.LastError], [ValueExpr.Eval]) both have this type, and
// every error of [CompileBoolExpr], [CompileValueExpr], [Identifiers] and
// [MemberNames] is one, so a front end places it in its file from Offset
// and prints Msg as it is.
type Error struct {
	// Offset is the byte offset of the fault in the expression source, in
	// [0, len(src)] (the front end adds the expression's position).
	Offset int
	// End is the byte offset just past the fault when known, 0 otherwise.
	End int
	// Msg is the message: one line, without the position (neither the
	// "(line:col)" nor the snippet that expr's own errors print).
	Msg string
}

// Error returns "offset N: " and the message.
func (e *Error) Error() string { return fmt.Sprintf("offset %d: %s", e.Offset, e.Msg) }

// BoolExpr is a compiled condition; it implements [nfa.Condition]. It is
// immutable apart from its error counter and safe for concurrent use.
type BoolExpr struct {
	src     string
	sig     string // see Signature
	test    boolFn // prog.test, nil on the VM: called directly on the hot path
	prog    *compiledProgram
	errs    atomic.Uint64
	lastErr atomic.Pointer[Error]
}

// CompileBoolExpr compiles a condition. Errors are *Error.
func CompileBoolExpr(src string, env *Env) (*BoolExpr, error) {
	p, err := compileCond(src, env, false, false)
	if err != nil {
		return nil, err
	}
	if env == nil {
		env = &Env{}
	}
	sig := fmt.Sprintf("%s %t %q %q %s", schemaSignature(env.Schema), env.Declared, env.Stages, env.Lookups, src)
	return &BoolExpr{src: src, sig: sig, test: p.test, prog: p}, nil
}

// Signature implements [nfa.Signer]: the source and what it was compiled
// against (the schema's fields and kinds in slot order, the stage names
// and the lookups), so two conditions with one signature compute the same
// predicate.
func (b *BoolExpr) Signature() string { return b.sig }

func schemaSignature(s *event.Schema) string {
	if s == nil {
		return "nil"
	}
	var b []byte
	for i := range s.Len() {
		f := s.Field(i)
		b = fmt.Appendf(b, "%q:%d,", f.Name, f.Kind)
	}
	return string(b)
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
		ev = &noEvent
	}
	fr := frame{ev: ev, stages: ctx}
	var ok bool
	var err *Error
	if b.test != nil { // not through eval, which does not inline: the hot path
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

// eval evaluates the condition on fr: natively, or on expr's VM (Eval
// does it itself).
func (b *BoolExpr) eval(fr frame) (bool, *Error) {
	if b.test != nil {
		return b.test(fr)
	}
	return b.prog.vm.evalBool(fr)
}

// Errors returns the number of evaluations that failed at run time.
func (b *BoolExpr) Errors() uint64 { return b.errs.Load() }

// LastError returns the most recent run-time error (an *Error), or
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
	prog    *compiledProgram
	errs    atomic.Uint64
	lastErr atomic.Pointer[Error]
}

// CompileValueExpr compiles an emit expression. It reads stages only (a
// bare field name is an error: there is no event under test) and yields a
// single value (bool, int, float, string or null). Errors are *Error.
func CompileValueExpr(src string, env *Env) (*ValueExpr, error) {
	p, err := compileCond(src, env, true, false)
	if err != nil {
		return nil, err
	}
	return &ValueExpr{src: src, prog: p}, nil
}

// Eval evaluates the expression over a match (events by stage position).
// A run-time error is returned as an *Error and counted by Errors.
func (v *ValueExpr) Eval(match [][]*event.Event) (event.Value, error) {
	val, err := v.prog.evalValue(frame{ev: &noEvent, stages: matchStages(match)})
	if f, ok := val.AsFloat(); err == nil && ok && val.Kind() == event.KindFloat && (math.IsInf(f, 0) || math.IsNaN(f)) {
		// JSON holds no infinity and no NaN: the alert's field would
		// be null while cepheus test showed +Inf, and no error counted.
		err = &Error{End: len(v.src), Msg: fmt.Sprintf("the value is %v, which an alert cannot hold (a division by zero?)", f)}
	}
	if err != nil {
		v.errs.Add(1)
		v.lastErr.Store(err)
		return event.Null, err
	}
	return val, nil
}

// Errors returns the number of evaluations that failed at run time.
func (v *ValueExpr) Errors() uint64 { return v.errs.Load() }

// LastError returns the most recent run-time error (an *Error), or
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

// Suggest returns " (did you mean x?)" for the candidate closest to name,
// as the errors of unknown fields say it, or "" when none is close.
func Suggest(name string, candidates []string) string { return suggest(name, candidates) }

// Closest returns the candidate that Suggest names, or "".
func Closest(name string, candidates []string) string { return closest(name, candidates) }

// Identifiers returns the free identifiers an expression reads (field or
// stage names), sorted and unique, so that the front end can build the
// schema of a ruleset that declares none. Builtin function names, closure
// members (.price in map(xs, .price)), the names of let declarations and
// ctx/stage arguments are not identifiers. Errors are *Error.
//
// The reads of lookups' fields (lookup.field, see [Env].Lookups) count as
// the identifier "lookup.field".
func Identifiers(src string, lookups ...string) ([]string, error) {
	tree, err := parseNames(src, lookups)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var visit func(n ast.Node, bound map[string]bool) bool
	visit = func(n ast.Node, bound map[string]bool) bool {
		switch n := n.(type) {
		case *ast.IdentifierNode:
			if !bound[n.Value] {
				seen[n.Value] = true
			}
		}
		return true
	}
	walkScoped(tree.Node, nil, visit)
	return sortedKeys(seen), nil
}

// MemberNames returns the names an expression reads as members (f in
// x.f, .f, x[0].f), sorted and unique. In the rule language these are
// fields of stage events, so a front end that infers the schema of a
// ruleset without one must add them to the identifiers of
// [Identifiers] (minus the stage names). A lookup's field read through a
// stage (x.lookup.field) counts as the member "lookup.field". Errors are
// *Error.
func MemberNames(src string, lookups ...string) ([]string, error) {
	tree, err := parseNames(src, lookups)
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
		for _, k := range childrenOf(n) {
			if k != nil {
				walk(k)
			}
		}
	}
	walk(tree.Node)
	return sortedKeys(seen), nil
}

func parseNames(src string, lookups []string) (*parser.Tree, error) {
	tree, err := parser.Parse(src)
	if err != nil {
		s := newCondSource(src)
		return nil, s.fromFileError(err)
	}
	rewriteLookups(&tree.Node, lookupSet(lookups), nil)
	return tree, nil
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// StageRef is a reference of an expression to a stage: x, x.f, x[i].f,
// stage("x") or ctx("x").
type StageRef struct {
	// Stage is the stage's index in the stages given to [StageRefs].
	Stage int
	// Field is f when the reference reads a field of the stage's last
	// event (x.f); "" otherwise.
	Field string
	// Offset is the byte offset of the reference in the source.
	Offset int
	// NullFails is set on a field reference (x.f) whose null makes the
	// expression around it fail at run time: an operand of arithmetic, of
	// an ordering comparison or of a unary sign, or the argument of a
	// builtin of one argument that takes no null (abs, len, upper...). A
	// reference under ?? (x.f ?? 0), compared with == or passed to string
	// is not.
	NullFails bool
}

// StageRefs returns the references of an expression to stages (names in
// stages, in nfa.Stages() order), in source order, for a front end's
// checks of what a condition can see. A let-bound name is not a stage.
// Errors are *Error.
func StageRefs(src string, stages []string, lookups ...string) ([]StageRef, error) {
	tree, err := parseNames(src, lookups)
	if err != nil {
		return nil, err
	}
	index := map[string]int{}
	for i, s := range stages {
		index[s] = i
	}
	s := newCondSource(src)
	strict := nullFailingOperands(tree.Node)
	var refs []StageRef
	ref := func(stage int, field string, n ast.Node) {
		refs = append(refs, StageRef{Stage: stage, Field: field, Offset: s.byteOffset(span(n).From), NullFails: field != "" && strict[n]})
	}
	var visit func(n ast.Node, bound map[string]bool) bool
	visit = func(n ast.Node, bound map[string]bool) bool {
		switch n := n.(type) {
		case *ast.IdentifierNode:
			if i, ok := stageOf(n, index, bound); ok {
				ref(i, "", n)
			}
		case *ast.MemberNode:
			prop, isProp := n.Property.(*ast.StringNode)
			if i, ok := stageOf(n.Node, index, bound); ok && isProp {
				ref(i, prop.Value, n)
				return false
			}
		case *ast.CallNode:
			if i, ok := stageOf(n, index, bound); ok {
				ref(i, "", n)
				return false
			}
		}
		return true
	}
	walkScoped(tree.Node, nil, visit)
	slices.SortStableFunc(refs, func(a, b StageRef) int { return a.Offset - b.Offset })
	return refs, nil
}

// nullFailingOps are the operators that fail on a null operand (== and
// != compare it, ?? replaces it, and, or and not read it as false).
var nullFailingOps = map[string]bool{
	"+": true, "-": true, "*": true, "/": true, "%": true, "**": true, "^": true,
	"<": true, ">": true, "<=": true, ">=": true,
}

// nullFailingOperands returns the nodes of the tree at n whose null value
// makes their parent fail: operands of nullFailingOps (and of a unary
// sign), and the argument of a builtin of scalarFuncs that refuses null.
func nullFailingOperands(n ast.Node) map[ast.Node]bool {
	out := map[ast.Node]bool{}
	var walk func(n ast.Node)
	walk = func(n ast.Node) {
		switch n := n.(type) {
		case *ast.BinaryNode:
			if nullFailingOps[n.Operator] {
				out[n.Left], out[n.Right] = true, true
			}
		case *ast.UnaryNode:
			if n.Operator == "-" || n.Operator == "+" {
				out[n.Node] = true
			}
		case *ast.BuiltinNode:
			if len(n.Arguments) == 1 && refusesNull(n.Name) {
				out[n.Arguments[0]] = true
			}
		case *ast.CallNode:
			if id, ok := n.Callee.(*ast.IdentifierNode); ok && len(n.Arguments) == 1 && refusesNull(id.Value) {
				out[n.Arguments[0]] = true
			}
		}
		for _, k := range childrenOf(n) {
			if k != nil {
				walk(k)
			}
		}
	}
	walk(n)
	return out
}

// refusesNull reports whether the builtin name of scalarFuncs gives no
// value for null (every one but string, which prints it).
func refusesNull(name string) bool {
	f, ok := scalarFuncs[name]
	if !ok {
		return false
	}
	_, ok = f(event.Null, "", false)
	return !ok
}

// walkScoped calls visit with n and, while visit returns true, with its
// children, depth first, with the names let declarations bind where each
// node is (a declaration's name is bound in its expression, not in its
// value; the declaration node itself is not visited). The name of a
// called function is not visited, its arguments are.
func walkScoped(n ast.Node, bound map[string]bool, visit func(n ast.Node, bound map[string]bool) bool) {
	switch d := n.(type) {
	case nil:
		return
	case *ast.VariableDeclaratorNode:
		walkScoped(d.Value, bound, visit)
		inner := maps.Clone(bound)
		if inner == nil {
			inner = map[string]bool{}
		}
		inner[d.Name] = true
		walkScoped(d.Expr, inner, visit)
		return
	}
	if !visit(n, bound) {
		return
	}
	kids := childrenOf(n)
	if c, ok := n.(*ast.CallNode); ok {
		if _, named := c.Callee.(*ast.IdentifierNode); named {
			kids = c.Arguments
		}
	}
	for _, k := range kids {
		walkScoped(k, bound, visit)
	}
}

// stageOf returns the index of the stage n names: an identifier in index
// and not bound, or stage("x") or ctx("x") with x in index.
func stageOf(n ast.Node, index map[string]int, bound map[string]bool) (int, bool) {
	switch n := n.(type) {
	case *ast.IdentifierNode:
		i, ok := index[n.Value]
		return i, ok && !bound[n.Value]
	case *ast.CallNode:
		id, ok := n.Callee.(*ast.IdentifierNode)
		if !ok || id.Value != "stage" && id.Value != "ctx" || len(n.Arguments) != 1 {
			return 0, false
		}
		if s, ok := n.Arguments[0].(*ast.StringNode); ok {
			i, ok := index[s.Value]
			return i, ok
		}
	}
	return 0, false
}

// InOverField finds in the condition src a membership test whose right
// side is a name isField says is an event field of no declared type (x in
// tags): such a field holds a string, a number or a bool, never a list,
// and an event with a JSON array there does not decode, so the test never
// holds. It returns the name and its byte offset in src ("" when there is
// none). Errors are *Error.
func InOverField(src string, isField func(string) bool, lookups ...string) (field string, offset int, err error) {
	tree, err := parseNames(src, lookups)
	if err != nil {
		return "", 0, err
	}
	v := &inFinder{isField: isField}
	ast.Walk(&tree.Node, v)
	if v.found == nil {
		return "", 0, nil
	}
	s := newCondSource(src)
	return v.found.Value, s.byteOffset(span(v.found).From), nil
}

type inFinder struct {
	isField func(string) bool
	found   *ast.IdentifierNode
}

func (v *inFinder) Visit(n *ast.Node) {
	b, ok := (*n).(*ast.BinaryNode)
	if !ok || b.Operator != "in" || v.found != nil {
		return
	}
	if id, ok := b.Right.(*ast.IdentifierNode); ok && v.isField(id.Value) {
		v.found = id
	}
}
