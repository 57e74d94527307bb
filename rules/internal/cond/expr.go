package cond

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/types"
	"github.com/expr-lang/expr/vm"

	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/nfa"
)

// ctxFunc is the name under which conditions read the events of a stage.
const ctxFunc = "ctx"

// ctxFuncType is the Go type of the ctx function in the environment. expr
// calls functions of exactly this type without reflection (OpCallFast).
type ctxFuncType = func(args ...any) any

// disabledBuiltins read the wall clock: a condition that called them would
// give another answer when a stream is replayed.
var disabledBuiltins = []string{"now", "date", "duration"}

// Cond is a compiled condition; it implements [nfa.Condition]. A Cond is
// safe for concurrent use: the compiled program is shared, and every
// evaluation borrows an expr VM and an environment from a pool.
//
// A Cond must not be copied after its first use.
type Cond struct {
	src     string
	program *vm.Program
	fields  []schemaField
	pool    sync.Pool // of *evalState
	errs    atomic.Uint64
	lastErr atomic.Pointer[error]
}

// schemaField is one field of the schema: its name in expressions and its
// slot in [event.Event.Fields].
type schemaField struct {
	name string
	slot int
}

// evalState is the scratch space of one evaluation at a time.
type evalState struct {
	vm     vm.VM
	env    map[string]any
	fields []schemaField
	// ctx is the nfa context of the evaluation in progress; nil between
	// evaluations, because a context is valid only during its Eval call.
	ctx *nfa.Context
}

// CompileCondition compiles src, an expr-lang boolean expression over the
// fields of schema, into a condition. The returned condition is a *[Cond].
//
// The expression may call ctx("X"), the events that stage X has already
// accepted in the current partial match (not including the event under
// test), in the order it accepted them. The argument must be a string
// literal naming one of stages; with no stages, ctx cannot be used. The
// elements of the list have the same fields as the event (ctx("a")[0].price).
//
// Field names come from schema. Values are read by slot from
// [event.Event.Fields]: int fields are expr ints, float fields float64,
// null values nil. The expression is type-checked against the declared kinds
// of the fields (a field of kind null may hold anything), but evaluated as if
// every field could be nil: name == "a" is false, not an error, when name is
// null. The wall-clock builtins now, date and duration are not available.
//
// Errors: an expression that does not parse, names an unknown field, calls
// ctx wrongly or does not yield a bool is rejected. The error wraps expr's
// *file.Error where there is one (find it with errors.As).
func CompileCondition(src string, schema *event.Schema, stages []string) (nfa.Condition, error) {
	if schema == nil {
		return nil, fmt.Errorf("rules: condition %q: no schema", src)
	}
	fields := make([]schemaField, schema.Len())
	typed := make(types.Map, schema.Len()+1)
	untyped := make(types.Map, schema.Len()+1)
	for i := range schema.Len() {
		f := schema.Field(i)
		if f.Name == ctxFunc {
			return nil, fmt.Errorf("rules: condition %q: schema field %q hides the ctx function", src, f.Name)
		}
		fields[i] = schemaField{name: f.Name, slot: i}
		typed[f.Name] = kindType(f.Kind)
		untyped[f.Name] = types.Any
	}
	ctxType := types.TypeOf(ctxFuncType(nil))
	typed[ctxFunc], untyped[ctxFunc] = ctxType, ctxType

	// Two passes. The first type-checks against the declared kinds, so that
	// name > 3 is a compile error. The program actually run comes from the
	// second, where every field is typed any: a program compiled with typed
	// fields uses specialised instructions (string equality, for one) that
	// fail on a null value instead of treating it as nil.
	check := &ctxChecker{stages: stages}
	if _, err := expr.Compile(src, options(typed, expr.Patch(check))...); err != nil {
		return nil, fmt.Errorf("rules: condition %q: %w", src, err)
	}
	if check.err != nil {
		return nil, fmt.Errorf("rules: condition %q: %w", src, check.err.Bind(file.NewSource(src)))
	}
	program, err := expr.Compile(src, options(untyped)...)
	if err != nil {
		return nil, fmt.Errorf("rules: condition %q: %w", src, err)
	}
	c := &Cond{src: src, program: program, fields: fields}
	c.pool.New = c.newState
	return c, nil
}

// options returns the expr options shared by both compilation passes.
func options(env types.Map, extra ...expr.Option) []expr.Option {
	opts := []expr.Option{expr.Env(env), expr.AsBool()}
	for _, name := range disabledBuiltins {
		opts = append(opts, expr.DisableBuiltin(name))
	}
	return append(opts, extra...)
}

// kindType is the expr type of a field of kind k.
func kindType(k event.Kind) types.Type {
	switch k {
	case event.KindBool:
		return types.Bool
	case event.KindInt:
		return types.Int
	case event.KindFloat:
		return types.Float64
	case event.KindString:
		return types.String
	}
	return types.Any
}

// ctxChecker is an expr AST visitor that checks every ctx call: one string
// literal argument naming a stage. It keeps the first problem found.
type ctxChecker struct {
	stages []string
	err    *file.Error
}

// Visit implements ast.Visitor.
func (c *ctxChecker) Visit(node *ast.Node) {
	call, ok := (*node).(*ast.CallNode)
	if !ok || c.err != nil {
		return
	}
	if id, ok := call.Callee.(*ast.IdentifierNode); !ok || id.Value != ctxFunc {
		return
	}
	if len(call.Arguments) != 1 {
		c.fail(call, "ctx takes one argument, a stage name")
		return
	}
	name, ok := call.Arguments[0].(*ast.StringNode)
	if !ok {
		c.fail(call.Arguments[0], "the argument of ctx must be a string literal naming a stage")
		return
	}
	for _, s := range c.stages {
		if s == name.Value {
			return
		}
	}
	c.fail(name, fmt.Sprintf("ctx: unknown stage %q", name.Value))
}

func (c *ctxChecker) fail(n ast.Node, msg string) {
	c.err = &file.Error{Location: n.Location(), Message: msg}
}

// Source returns the expression the condition was compiled from.
func (c *Cond) Source() string { return c.src }

// Errors returns how many evaluations failed at run time (and counted as
// false) since the condition was compiled.
func (c *Cond) Errors() uint64 { return c.errs.Load() }

// LastError returns the most recent run-time error, or nil.
func (c *Cond) LastError() error {
	if p := c.lastErr.Load(); p != nil {
		return *p
	}
	return nil
}

func (c *Cond) fail(err error) {
	c.errs.Add(1)
	c.lastErr.Store(&err)
}

// errPanic reports a panic that escaped the expr VM (which recovers its
// own), so a bug in the glue code rather than in the expression.
var errPanic = errors.New("rules: condition panicked")

// Eval implements [nfa.Condition]. It reports whether ev satisfies the
// condition; a run-time error, or a result that is not a bool, counts as
// false and is counted by [Cond.Errors]. ctx may be nil (ctx(...) is then
// empty).
func (c *Cond) Eval(ev *event.Event, ctx *nfa.Context) (ok bool) {
	st := c.pool.Get().(*evalState)
	defer func() {
		if r := recover(); r != nil {
			// The state may be half updated: leave it to the garbage collector.
			c.fail(fmt.Errorf("%w: %v", errPanic, r))
			ok = false
		}
	}()
	for _, f := range c.fields {
		st.env[f.name] = exprValue(ev.Field(f.slot))
	}
	st.ctx = ctx
	out, err := st.vm.Run(c.program, st.env)
	st.ctx = nil
	c.pool.Put(st)
	if err != nil {
		c.fail(err)
		return false
	}
	b, isBool := out.(bool)
	if !isBool {
		c.fail(fmt.Errorf("rules: condition %q yielded %T, not bool", c.src, out))
		return false
	}
	return b
}

// newState is the constructor of the pool. The ctx function is bound to its
// state once, so evaluations do not allocate a closure.
func (c *Cond) newState() any {
	st := &evalState{env: make(map[string]any, len(c.fields)+1), fields: c.fields}
	st.env[ctxFunc] = ctxFuncType(st.stageEvents)
	return st
}

// stageEvents implements ctx(stage): the events the stage has accepted so
// far, each as a map from field name to value. It panics on a bad argument,
// which the VM turns into an error (CompileCondition already rules that out).
func (st *evalState) stageEvents(args ...any) any {
	if len(args) != 1 {
		panic(fmt.Sprintf("ctx takes one argument, got %d", len(args)))
	}
	stage, ok := args[0].(string)
	if !ok {
		panic(fmt.Sprintf("ctx: stage name must be a string, got %T", args[0]))
	}
	var evs []*event.Event
	if st.ctx != nil {
		evs = st.ctx.Events(stage)
	}
	rows := make([]any, len(evs))
	for i, e := range evs {
		row := make(map[string]any, len(st.fields))
		for _, f := range st.fields {
			row[f.name] = exprValue(e.Field(f.slot))
		}
		rows[i] = row
	}
	return rows
}

// exprValue converts a field value to the Go value expr works with: int64
// becomes int, expr's integer type; null becomes nil.
func exprValue(v event.Value) any {
	if i, ok := v.AsInt(); ok {
		return int(i)
	}
	return v.Any()
}
