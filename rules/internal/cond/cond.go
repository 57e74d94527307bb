package cond

import (
	"errors"

	"github.com/cepheus-cep/cepheus/event"
)

// compiledProgram is a compiled expression: native closures, or expr's VM
// when the expression uses a construct the compiler leaves to it.
type compiledProgram struct {
	test     boolFn  // a native condition
	value    valueFn // a native emit expression
	vm       *exprVM // the slow path
	fallback string  // why the slow path ("" when native)
}

// compileCond compiles src for env: a condition, or an emit expression
// when emit is set. forceVM compiles for expr's VM even when the native
// compiler could (tests compare the two).
func compileCond(src string, env *Env, emit, forceVM bool) (*compiledProgram, error) {
	if env == nil {
		env = &Env{}
	}
	c := newCondCompiler(src, env, emit)
	tree, err := c.parse()
	if err != nil {
		return nil, err
	}
	fallback, err := c.scan(tree.Node, nil)
	if err != nil {
		return nil, err
	}
	if fallback == "" && !forceVM {
		root, err := c.compileScalar(tree.Node)
		var u *unsupportedError
		switch {
		case errors.As(err, &u):
			fallback = u.what
		case err != nil:
			return nil, err
		default:
			return c.finish(root)
		}
	}
	if fallback == "" {
		fallback = "forced"
	}
	v, err := newCondVM(c)
	if err != nil {
		return nil, err
	}
	return &compiledProgram{vm: v, fallback: fallback}, nil
}

// finish checks the type of the whole expression and returns its native
// program.
func (c *compiler) finish(root *compiledNode) (*compiledProgram, error) {
	if c.emit {
		return &compiledProgram{value: root.value()}, nil
	}
	if root.typ != tyBool && root.typ != tyAny {
		return nil, c.errorf(root.src, "a condition must be a bool, not a %s", root.typ)
	}
	// At the top, as after expr's final cast, null is false.
	return &compiledProgram{test: c.boolOf(root, true)}, nil
}

// evalBool evaluates a condition program.
func (p *compiledProgram) evalBool(fr frame) (bool, *Error) {
	if p.test != nil {
		return p.test(fr)
	}
	return p.vm.evalBool(fr)
}

// evalValue evaluates an emit program.
func (p *compiledProgram) evalValue(fr frame) (event.Value, *Error) {
	if p.value != nil {
		return p.value(fr)
	}
	return p.vm.evalValue(fr)
}
