package rules

import (
	"errors"

	"github.com/cepheus-cep/cepheus/event"
)

// condProgram is a compiled expression: native closures, or expr's VM
// when the expression uses a construct the compiler leaves to it.
type condProgram struct {
	test     condBoolFn  // a native condition
	value    condValueFn // a native emit expression
	vm       *condVM     // the slow path
	fallback string      // why the slow path ("" when native)
}

// compileCond compiles src for env: a condition, or an emit expression
// when emit is set. forceVM compiles for expr's VM even when the native
// compiler could (tests compare the two).
func compileCond(src string, env *ExprEnv, emit, forceVM bool) (*condProgram, error) {
	if env == nil {
		env = &ExprEnv{}
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
		var u *condUnsupported
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
	return &condProgram{vm: v, fallback: fallback}, nil
}

// finish checks the type of the whole expression and returns its native
// program.
func (c *condCompiler) finish(root *condNode) (*condProgram, error) {
	if c.emit {
		return &condProgram{value: root.value()}, nil
	}
	if root.typ != condTyBool && root.typ != condTyAny {
		return nil, c.errorf(root.src, "a condition must be a bool, not a %s", root.typ)
	}
	// At the top, as after expr's final cast, null is false.
	return &condProgram{test: c.boolOf(root, true)}, nil
}

// evalBool evaluates a condition program.
func (p *condProgram) evalBool(fr condFrame) (bool, *ExprError) {
	if p.test != nil {
		return p.test(fr)
	}
	return p.vm.evalBool(fr)
}

// evalValue evaluates an emit program.
func (p *condProgram) evalValue(fr condFrame) (event.Value, *ExprError) {
	if p.value != nil {
		return p.value(fr)
	}
	return p.vm.evalValue(fr)
}
