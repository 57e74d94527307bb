package cond

import (
	"fmt"
	"reflect"
	"strings"
	"sync"

	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/checker"
	exprcompiler "github.com/expr-lang/expr/compiler"
	"github.com/expr-lang/expr/conf"
	"github.com/expr-lang/expr/optimizer"
	"github.com/expr-lang/expr/parser"
	"github.com/expr-lang/expr/types"
	"github.com/expr-lang/expr/vm"

	"github.com/cepheus-cep/cepheus/event"
)

// This file is the slow path: an expression with a construct the native
// compiler does not handle (see unsupportedError and compiler.scan) runs
// on expr's VM, like [CompileCondition]. Stage references, which expr does
// not know, are first rewritten into calls of helper functions that share
// their code with the native path:
//
//	x, stage("x"), ctx("x")       -> _cepheus_events(i)        (rows: maps of field values)
//	x.f                           -> _cepheus_last(i, slot)
//	sum(x.f), avg(x.f), ...       -> _cepheus_agg(kind, i, slot)
//	avg(list)                     -> mean(list)
//	count(list)                   -> len(list)
//
// In the program run (not the tree expr's checker types), a matches whose
// pattern is not a string constant becomes a helper call, which has the
// native path's cache and bounds (regexpCache): expr's VM compiled the
// pattern at every evaluation, whatever its size.
//
//	a matches b                   -> _cepheus_matches(a, b)

const (
	vmEvents  = "_cepheus_events"
	vmLast    = "_cepheus_last"
	vmAgg     = "_cepheus_agg"
	vmMatches = "_cepheus_matches"
)

// exprVM is an expression compiled for expr's VM. It is safe for
// concurrent use: every evaluation borrows a VM and an environment from a
// pool.
type exprVM struct {
	source
	program *vm.Program
	env     []schemaField // the fields set in the environment (none in emit expressions)
	all     []schemaField // every field, for the rows of stage events
	pool    sync.Pool     // of *vmState
	regexps regexpCache   // of _cepheus_matches
}

// vmState is the scratch space of one evaluation at a time.
type vmState struct {
	vm  vm.VM
	env map[string]any
	all []schemaField
	fr  frame // valid during an evaluation only
}

// newCondVM compiles the expression of c for expr's VM. When the ruleset
// declares its schema, expr's checker first checks it against the declared
// kinds; the program run is compiled with every field typed any, as
// [CompileCondition] does, so that a null field is nil.
func newCondVM(c *compiler) (*exprVM, error) {
	v := &exprVM{source: c.source}
	helper := types.TypeOf(func(...any) any { return nil })
	typed, untyped := types.Map{}, types.Map{}
	for _, name := range []string{vmEvents, vmLast, vmAgg, vmMatches} {
		typed[name], untyped[name] = helper, helper
	}
	if s := c.env.Schema; s != nil {
		for i := range s.Len() {
			f := s.Field(i)
			if _, clash := typed[f.Name]; clash {
				return nil, &Error{End: len(c.src), Msg: fmt.Sprintf("field %s hides a function of the expression compiler", f.Name)}
			}
			v.all = append(v.all, schemaField{name: f.Name, slot: i})
			if c.emit {
				continue
			}
			v.env = append(v.env, schemaField{name: f.Name, slot: i})
			typed[f.Name], untyped[f.Name] = types.Any, types.Any
			if c.env.Declared {
				typed[f.Name] = kindType(f.Kind)
			}
		}
	}
	if c.env.Declared {
		tree, err := c.vmTree()
		if err != nil {
			return nil, err
		}
		if _, err := checker.Check(tree, c.vmConfig(typed)); err != nil {
			return nil, c.fromFileError(err)
		}
	}
	tree, err := c.vmTree()
	if err != nil {
		return nil, err
	}
	rewriteMatches(&tree.Node)
	cfg := c.vmConfig(untyped)
	if _, err := checker.Check(tree, cfg); err != nil {
		return nil, c.fromFileError(err)
	}
	if err := optimizer.Optimize(&tree.Node, cfg); err != nil {
		return nil, c.fromFileError(err)
	}
	if v.program, err = exprcompiler.Compile(tree, cfg); err != nil {
		return nil, c.fromFileError(err)
	}
	v.pool.New = v.newState
	return v, nil
}

// vmConfig is expr's configuration for env: the wall-clock builtins
// disabled, and a bool expected from a condition.
func (c *compiler) vmConfig(env types.Map) *conf.Config {
	cfg := conf.CreateNew()
	cfg.WithEnv(env)
	if !c.emit {
		cfg.Expect, cfg.ExpectAny = reflect.Bool, true
	}
	for name := range refusedBuiltins {
		cfg.Disabled[name] = true
		delete(cfg.Builtins, name)
	}
	return cfg
}

// vmTree parses the source again and rewrites its stage references.
func (c *compiler) vmTree() (*parser.Tree, error) {
	tree, err := parser.Parse(c.src)
	if err != nil {
		return nil, c.fromFileError(err)
	}
	rewriteLookups(&tree.Node, lookupSet(c.env.Lookups), c.stages)
	c.rewrite(&tree.Node)
	return tree, nil
}

// rewrite replaces the stage references under node by helper calls.
func (c *compiler) rewrite(node *ast.Node) {
	at := (*node).Location()
	call := func(name string, args ...int) ast.Node {
		callee := &ast.IdentifierNode{Value: name}
		callee.SetLocation(at)
		nodes := make([]ast.Node, len(args))
		for i, a := range args {
			nodes[i] = &ast.IntegerNode{Value: a}
			nodes[i].SetLocation(at)
		}
		n := &ast.CallNode{Callee: callee, Arguments: nodes}
		n.SetLocation(at)
		return n
	}
	switch n := (*node).(type) {
	case *ast.IdentifierNode:
		if stage, ok, _ := c.stageRef(n); ok {
			*node = call(vmEvents, stage)
		}
		return
	case *ast.CallNode:
		if stage, ok, _ := c.stageRef(n); ok {
			*node = call(vmEvents, stage)
			return
		}
		if id, ok := n.Callee.(*ast.IdentifierNode); ok && id.Value == "avg" {
			mean := &ast.BuiltinNode{Name: "mean", Arguments: n.Arguments}
			mean.SetLocation(at)
			*node = mean
			c.rewrite(node)
			return
		}
	case *ast.MemberNode:
		if _, byName := n.Property.(*ast.StringNode); byName && !n.Method {
			if stage, ok, _ := c.stageRef(n.Node); ok {
				if slot, err := c.memberField(n); err == nil {
					*node = call(vmLast, stage, slot)
					return
				}
			}
		}
	case *ast.BuiltinNode:
		if kind, ok := aggKinds[n.Name]; ok && len(n.Arguments) == 1 {
			if stage, slot, ok, _ := c.stageField(n.Arguments[0]); ok {
				*node = call(vmAgg, int(kind), stage, slot)
				return
			}
			if kind == aggCount {
				n.Name = "len"
			}
		}
	}
	for _, child := range childPtrs(*node) {
		c.rewrite(child)
	}
}

// rewriteMatches replaces each matches under node whose pattern is not a
// string constant by a call of _cepheus_matches.
func rewriteMatches(node *ast.Node) {
	for _, child := range childPtrs(*node) {
		rewriteMatches(child)
	}
	n, ok := (*node).(*ast.BinaryNode)
	if !ok || n.Operator != "matches" {
		return
	}
	if _, constant := n.Right.(*ast.StringNode); constant {
		return
	}
	callee := &ast.IdentifierNode{Value: vmMatches}
	callee.SetLocation(n.Location())
	call := &ast.CallNode{Callee: callee, Arguments: []ast.Node{n.Left, n.Right}}
	call.SetLocation(n.Location())
	*node = call
}

// childPtrs returns pointers to the children of n.
func childPtrs(n ast.Node) []*ast.Node {
	switch n := n.(type) {
	case *ast.UnaryNode:
		return []*ast.Node{&n.Node}
	case *ast.BinaryNode:
		return []*ast.Node{&n.Left, &n.Right}
	case *ast.ChainNode:
		return []*ast.Node{&n.Node}
	case *ast.MemberNode:
		return []*ast.Node{&n.Node, &n.Property}
	case *ast.SliceNode:
		out := []*ast.Node{&n.Node}
		if n.From != nil {
			out = append(out, &n.From)
		}
		if n.To != nil {
			out = append(out, &n.To)
		}
		return out
	case *ast.CallNode:
		out := []*ast.Node{&n.Callee}
		for i := range n.Arguments {
			out = append(out, &n.Arguments[i])
		}
		return out
	case *ast.BuiltinNode:
		out := make([]*ast.Node, len(n.Arguments))
		for i := range n.Arguments {
			out[i] = &n.Arguments[i]
		}
		return out
	case *ast.PredicateNode:
		return []*ast.Node{&n.Node}
	case *ast.VariableDeclaratorNode:
		return []*ast.Node{&n.Value, &n.Expr}
	case *ast.SequenceNode:
		out := make([]*ast.Node, len(n.Nodes))
		for i := range n.Nodes {
			out[i] = &n.Nodes[i]
		}
		return out
	case *ast.ConditionalNode:
		return []*ast.Node{&n.Cond, &n.Exp1, &n.Exp2}
	case *ast.ArrayNode:
		out := make([]*ast.Node, len(n.Nodes))
		for i := range n.Nodes {
			out[i] = &n.Nodes[i]
		}
		return out
	case *ast.MapNode:
		out := make([]*ast.Node, len(n.Pairs))
		for i := range n.Pairs {
			out[i] = &n.Pairs[i]
		}
		return out
	case *ast.PairNode:
		return []*ast.Node{&n.Key, &n.Value}
	}
	return nil
}

// newState is the constructor of the pool. The helpers are bound to their
// state once, so evaluations do not allocate closures.
func (v *exprVM) newState() any {
	st := &vmState{env: make(map[string]any, len(v.env)+3), all: v.all}
	st.env[vmEvents] = st.events
	st.env[vmLast] = st.last
	st.env[vmAgg] = st.agg
	st.env[vmMatches] = v.matches
	return st
}

// eval runs the program on fr. A panic that escapes the VM (which
// recovers its own) is a bug in the helpers; it is reported as an error.
func (v *exprVM) eval(fr frame) (out any, fail *Error) {
	st := v.pool.Get().(*vmState)
	defer func() {
		if r := recover(); r != nil {
			// The state may be half updated: leave it to the garbage collector.
			out, fail = nil, &Error{End: len(v.src), Msg: fmt.Sprintf("expression panicked: %v", r)}
		}
	}()
	for _, f := range v.env {
		st.env[f.name] = exprValue(fr.ev.Field(f.slot))
	}
	st.fr = fr
	out, err := st.vm.Run(v.program, st.env)
	st.fr = frame{}
	v.pool.Put(st)
	if err != nil {
		e := v.fromFileError(err)
		e.Msg = vmMessage(e.Msg, v.src)
		return nil, e
	}
	return out, nil
}

// vmMessage rewrites a run-time error of expr's VM that is Go's message
// for a failed type assertion inside a builtin (join of a list that holds
// a null: "interface conversion: interface {} is nil, not string") into
// the words of the compiled closures' errors, with the expression: "a
// value is null where a string is needed (in join(...))". Other messages
// are returned as they are.
func vmMessage(msg, src string) string {
	rest, ok := strings.CutPrefix(msg, "interface conversion: interface {} is ")
	if !ok {
		return msg
	}
	got, want, ok := strings.Cut(rest, ", not ")
	if !ok {
		return msg
	}
	what := "a value is " + goTypeWords(got)
	if got == "nil" {
		what = "a value is null"
	}
	return fmt.Sprintf("%s where %s is needed (in %s)", what, goTypeWords(want), src)
}

// goTypeWords names the Go type of a value of expr's VM as the rule
// language does: "a float" for float64, "a list" for []interface {}.
func goTypeWords(t string) string {
	switch {
	case t == "int" || t == "int64":
		return "an int"
	case t == "float64":
		return "a float"
	case t == "string" || t == "bool":
		return "a " + t
	case strings.HasPrefix(t, "[]"):
		return "a list"
	case strings.HasPrefix(t, "map["):
		return "a map"
	}
	return "a " + t
}

// evalBool evaluates a condition (the program ends with expr's cast to
// bool).
func (v *exprVM) evalBool(fr frame) (bool, *Error) {
	out, err := v.eval(fr)
	if err != nil {
		return false, err
	}
	b, ok := out.(bool)
	if !ok {
		return false, &Error{End: len(v.src), Msg: fmt.Sprintf("the condition yielded %T, not a bool", out)}
	}
	return b, nil
}

// evalValue evaluates an emit expression.
func (v *exprVM) evalValue(fr frame) (event.Value, *Error) {
	out, err := v.eval(fr)
	if err != nil {
		return event.Null, err
	}
	val, ok := event.FromAny(out)
	if !ok {
		return event.Null, &Error{End: len(v.src), Msg: fmt.Sprintf("the value is a %T, not a single value", out)}
	}
	return val, nil
}

// events implements _cepheus_events(stage): the events of the stage as
// maps from field name to value, as [CompileCondition]'s ctx gives them.
func (st *vmState) events(args ...any) any {
	evs := st.fr.stages.EventsAt(args[0].(int))
	rows := make([]any, len(evs))
	for i, e := range evs {
		row := make(map[string]any, len(st.all))
		for _, f := range st.all {
			row[f.name] = exprValue(e.Field(f.slot))
		}
		rows[i] = row
	}
	return rows
}

// last implements _cepheus_last(stage, slot).
func (st *vmState) last(args ...any) any {
	evs := st.fr.stages.EventsAt(args[0].(int))
	if len(evs) == 0 {
		return nil
	}
	return exprValue(evs[len(evs)-1].Field(args[1].(int)))
}

// matches implements _cepheus_matches(s, pattern) as expr's matches: a
// null on either side is false. An error panics, which the VM reports.
func (v *exprVM) matches(args ...any) any {
	if args[0] == nil || args[1] == nil {
		return false
	}
	s, ok1 := args[0].(string)
	p, ok2 := args[1].(string)
	if !ok1 || !ok2 {
		panic(fmt.Sprintf("matches needs strings, got %s and %s", goTypeWords(fmt.Sprintf("%T", args[0])), goTypeWords(fmt.Sprintf("%T", args[1]))))
	}
	ok, err := v.regexps.match(s, p)
	if err != nil {
		panic(err.Error())
	}
	return ok
}

// agg implements _cepheus_agg(kind, stage, slot). A value that does not fit
// panics, which the VM reports as an error.
func (st *vmState) agg(args ...any) any {
	kind := aggKind(args[0].(int))
	v, bad, ok := aggEvents(kind, st.fr.stages.EventsAt(args[1].(int)), args[2].(int))
	if !ok {
		panic(fmt.Sprintf("invalid argument for %s (type %s)", aggNames[kind], bad.Kind()))
	}
	return exprValue(v)
}
