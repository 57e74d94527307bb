package cond

import (
	"github.com/expr-lang/expr/ast"

	"github.com/cepheus-cep/cepheus/event"
)

// This file compiles what reads lists: stage references (x, x.f, x[i],
// stage("x"), ctx("x")), array literals, and the builtins (aggregates,
// predicates over the events of a stage, the scalar functions of
// value.go).

// array compiles a list literal of scalars.
func (c *compiler) array(n *ast.ArrayNode) (*compiledNode, error) {
	elems := make([]*compiledNode, len(n.Nodes))
	leaves := make([]leafNode, len(n.Nodes))
	consts := make([]event.Value, 0, len(n.Nodes))
	pure := true
	for i, e := range n.Nodes {
		x, err := c.compile(e)
		if err != nil {
			return nil, err
		}
		if !x.typ.scalar() {
			return nil, unsupported("a list of %s", x.typ)
		}
		elems[i], leaves[i] = x, x.leaf
		if x.isConst() {
			consts = append(consts, x.leaf.c)
		}
		pure = pure && (x.leaf.kind == leafConst || x.leaf.kind == leafField)
	}
	list := &scalarList{
		elem: listElem(elems),
		n:    func(frame) int { return len(leaves) },
		at:   func(fr frame, i int) (event.Value, *Error) { return leaves[i].get(fr) },
		pure: pure,
	}
	if len(consts) == len(elems) {
		list.consts = consts
	}
	return &compiledNode{src: n, typ: tyList, list: list}, nil
}

// listElem is the element type of a list of the given nodes.
func listElem(elems []*compiledNode) nodeType {
	if len(elems) == 0 {
		return tyAny
	}
	t := elems[0].typ
	for _, e := range elems[1:] {
		if e.typ != t {
			return tyAny
		}
	}
	if t == tyNil {
		return tyAny
	}
	return t
}

// member compiles x.f (the last event of stage x), e.f (a field of one
// event), .f in a predicate (a field of the element), and indexing of
// lists.
func (c *compiler) member(n *ast.MemberNode) (*compiledNode, error) {
	if n.Method {
		return nil, unsupported("method call")
	}
	if p, ok := n.Node.(*ast.PointerNode); ok && p.Name == "" {
		slot, err := c.memberField(n)
		if err != nil {
			return nil, err
		}
		if c.preds == 0 {
			return nil, unsupported("# outside a predicate over a stage")
		}
		return &compiledNode{src: n, typ: c.fieldType(slot), leaf: leafNode{kind: leafElem, slot: slot}}, nil
	}
	obj, err := c.compile(n.Node)
	if err != nil {
		return nil, err
	}
	_, byName := n.Property.(*ast.StringNode)
	switch {
	case obj.typ == tyEvents && byName:
		slot, err := c.memberField(n)
		if err != nil {
			return nil, err
		}
		stage := obj.stage
		return c.scalar(n, c.fieldType(slot), func(fr frame) (event.Value, *Error) {
			if e := fr.stages.LastAt(stage); e != nil {
				return e.Field(slot), nil
			}
			return event.Null, nil
		}), nil
	case obj.typ == tyEvent && byName:
		slot, err := c.memberField(n)
		if err != nil {
			return nil, err
		}
		get, optional := obj.event, n.Optional
		errNone := c.errorf(n, "cannot read %s: %s is no event", c.text(n), c.text(n.Node))
		return c.scalar(n, c.fieldType(slot), func(fr frame) (event.Value, *Error) {
			e, err := get(fr)
			switch {
			case err != nil:
				return event.Null, err
			case e != nil:
				return e.Field(slot), nil
			case optional:
				return event.Null, nil
			}
			return event.Null, errNone
		}), nil
	case obj.typ == tyEvents:
		return c.indexEvents(n, obj)
	case obj.typ == tyList:
		return c.indexList(n, obj)
	case obj.typ == tyAny:
		return nil, unsupported("member of a value of unknown type")
	}
	return nil, c.errorf(n, "cannot read %s: %s is a %s", c.text(n), c.text(n.Node), obj.typ)
}

// memberField resolves the property of a member node as a field name.
func (c *compiler) memberField(n *ast.MemberNode) (int, error) {
	s, ok := n.Property.(*ast.StringNode)
	if !ok {
		return 0, unsupported("computed member")
	}
	slot, err := c.field(n.Property, s.Value)
	if err != nil {
		return 0, err
	}
	return slot, nil
}

// index compiles the index of n and returns a function giving the
// resolved position in a list of length size.
func (c *compiler) index(n *ast.MemberNode) (func(fr frame, size int) (int, *Error), error) {
	ix, err := c.compileScalar(n.Property)
	if err != nil {
		return nil, err
	}
	if !ix.typ.numLike() {
		return nil, c.errorf(n.Property, "an index must be a number, got %s", ix.typ)
	}
	site := c.site(n.Property)
	l := ix.leaf
	return func(fr frame, size int) (int, *Error) {
		v, err := l.get(fr)
		if err != nil {
			return 0, err
		}
		i, ok := toIndex(v)
		if !ok {
			return 0, site.fail("an index must be a number, got %s", v.Kind())
		}
		j, ok := resolveIndex(i, size)
		if !ok {
			return 0, site.fail("index out of range: %d (length %d)", i, size)
		}
		return j, nil
	}, nil
}

func (c *compiler) indexEvents(n *ast.MemberNode, obj *compiledNode) (*compiledNode, error) {
	at, err := c.index(n)
	if err != nil {
		return nil, err
	}
	stage := obj.stage
	return &compiledNode{src: n, typ: tyEvent, event: func(fr frame) (*event.Event, *Error) {
		evs := fr.stages.EventsAt(stage)
		i, err := at(fr, len(evs))
		if err != nil {
			return nil, err
		}
		return evs[i], nil
	}}, nil
}

func (c *compiler) indexList(n *ast.MemberNode, obj *compiledNode) (*compiledNode, error) {
	at, err := c.index(n)
	if err != nil {
		return nil, err
	}
	list := obj.list
	return c.scalar(n, list.elem, func(fr frame) (event.Value, *Error) {
		if err := list.check(fr); err != nil {
			return event.Null, err
		}
		i, err := at(fr, list.n(fr))
		if err != nil {
			return event.Null, err
		}
		return list.at(fr, i)
	}), nil
}

// pointer compiles # in a predicate over a stage: the element event.
func (c *compiler) pointer(n *ast.PointerNode) (*compiledNode, error) {
	if n.Name != "" || c.preds == 0 {
		return nil, unsupported("#%s", n.Name)
	}
	return &compiledNode{src: n, typ: tyEvent, event: func(fr frame) (*event.Event, *Error) {
		return fr.elem, nil
	}}, nil
}

// call compiles the functions that are not expr builtins: stage and its
// alias ctx, and avg.
func (c *compiler) call(n *ast.CallNode) (*compiledNode, error) {
	id, ok := n.Callee.(*ast.IdentifierNode)
	if !ok {
		return nil, unsupported("call of %s", n.Callee)
	}
	switch id.Value {
	case "stage", "ctx":
		stage, err := c.stageArg(n)
		if err != nil {
			return nil, err
		}
		return &compiledNode{src: n, typ: tyEvents, stage: stage}, nil
	case "avg":
		return c.aggregate(n, aggMean, "avg", n.Arguments)
	case "distance_km":
		return c.distanceKm(n)
	}
	return nil, c.unknownFunc(id)
}

// nativeBuiltins are the expr builtins the compiler handles itself
// (besides scalarFuncs).
var nativeBuiltins = map[string]bool{
	"len": true, "count": true, "sum": true, "mean": true, "min": true, "max": true,
	"first": true, "last": true, "map": true, "all": true, "any": true, "none": true, "one": true,
}

func (c *compiler) builtin(n *ast.BuiltinNode) (*compiledNode, error) {
	if err := c.refused(n, n.Name); err != nil {
		return nil, err
	}
	switch n.Name {
	case "len":
		return c.length(n)
	case "map":
		return c.mapEvents(n)
	case "all", "any", "none", "one":
		return c.quantifier(n)
	}
	if kind, ok := aggKinds[n.Name]; ok {
		return c.aggregate(n, kind, n.Name, n.Arguments)
	}
	if f, ok := scalarFuncs[n.Name]; ok {
		return c.scalarFunc(n, f)
	}
	return nil, unsupported("builtin %s", n.Name)
}

// scalarFunc compiles a builtin of one scalar argument (plus the optional
// string argument of the trim family).
func (c *compiler) scalarFunc(n *ast.BuiltinNode, f scalarFn) (*compiledNode, error) {
	maxArgs := 1
	if takesArg[n.Name] {
		maxArgs = 2
	}
	if len(n.Arguments) < 1 || len(n.Arguments) > maxArgs {
		return nil, c.errorf(n, "wrong number of arguments to %s", n.Name)
	}
	x, err := c.compileScalar(n.Arguments[0])
	if err != nil {
		return nil, err
	}
	typ, ok := funcType(n.Name, x.typ)
	if !ok {
		return nil, c.errorf(n.Arguments[0], "invalid argument for %s (type %s)", n.Name, x.typ)
	}
	operands := []*compiledNode{x}
	var arg leafNode
	hasArg := len(n.Arguments) == 2
	if hasArg {
		a, err := c.compileScalar(n.Arguments[1])
		if err != nil {
			return nil, err
		}
		if !a.typ.strLike() {
			return nil, c.errorf(n.Arguments[1], "invalid argument for %s (type %s)", n.Name, a.typ)
		}
		operands = append(operands, a)
		arg = a.leaf
	}
	site := c.site(n)
	name, l := n.Name, x.leaf
	return c.scalar(n, typ, func(fr frame) (event.Value, *Error) {
		v, err := l.get(fr)
		if err != nil {
			return event.Null, err
		}
		var s string
		if hasArg {
			a, err := arg.get(fr)
			if err != nil {
				return event.Null, err
			}
			var ok bool
			if s, ok = a.AsString(); !ok {
				return event.Null, site.fail("invalid argument for %s (type %s)", name, a.Kind())
			}
		}
		r, ok := f(v, s, hasArg)
		if !ok {
			if v.Kind() == event.KindString && (name == "int" || name == "float") {
				return event.Null, site.fail("invalid operation: %s(%q)", name, v.Any())
			}
			return event.Null, site.fail("invalid argument for %s (type %s)", name, v.Kind())
		}
		return r, nil
	}, operands...), nil
}

// funcType is the result type of the scalar builtin name applied to a
// value of type t, false when expr's checker refuses t.
func funcType(name string, t nodeType) (nodeType, bool) {
	switch name {
	case "len":
		return tyInt, t.strLike()
	case "abs":
		if t.numeric() {
			return t, true
		}
		return tyAny, t == tyAny
	case "ceil", "floor", "round":
		return tyFloat, t.numLike()
	case "int":
		return tyInt, t.numLike() || t == tyString
	case "float":
		return tyFloat, t.numLike() || t == tyString
	case "string":
		return tyString, true
	}
	return tyString, t.strLike() // the string functions
}

// length compiles len: the runes of a string, the events of a stage, the
// elements of a list.
func (c *compiler) length(n *ast.BuiltinNode) (*compiledNode, error) {
	if len(n.Arguments) != 1 {
		return nil, c.errorf(n, "len takes one argument")
	}
	x, err := c.compile(n.Arguments[0])
	if err != nil {
		return nil, err
	}
	switch x.typ {
	case tyEvents, tyList:
		return c.count(n, x), nil
	}
	return c.scalarFunc(n, scalarFuncs["len"])
}

// count is the number of events of a stage or elements of a list.
func (c *compiler) count(src ast.Node, x *compiledNode) *compiledNode {
	if x.typ == tyEvents {
		stage := x.stage
		return c.scalar(src, tyInt, func(fr frame) (event.Value, *Error) {
			return event.Int(int64(len(fr.stages.EventsAt(stage)))), nil
		})
	}
	list := x.list
	return c.scalar(src, tyInt, func(fr frame) (event.Value, *Error) {
		if err := list.check(fr); err != nil {
			return event.Null, err
		}
		return event.Int(int64(list.n(fr))), nil
	})
}

// stageField recognises x.f where x names a stage (x, stage("x") or
// ctx("x")): in an aggregate it means the field over all events of x.
func (c *compiler) stageField(n ast.Node) (stage, slot int, ok bool, err error) {
	m, isMember := n.(*ast.MemberNode)
	if !isMember || m.Method {
		return 0, 0, false, nil
	}
	if _, byName := m.Property.(*ast.StringNode); !byName {
		return 0, 0, false, nil
	}
	stage, isStage, err := c.stageRef(m.Node)
	if err != nil || !isStage {
		return 0, 0, false, err
	}
	slot, err = c.memberField(m)
	return stage, slot, err == nil, err
}

// aggregate compiles sum, mean (avg), min, max, first, last and count.
func (c *compiler) aggregate(src ast.Node, kind aggKind, name string, args []ast.Node) (*compiledNode, error) {
	if len(args) == 0 {
		return nil, c.errorf(src, "not enough arguments to call %s", name)
	}
	if len(args) == 2 {
		if p, ok := args[1].(*ast.PredicateNode); ok {
			return c.aggregatePredicate(src, kind, name, args[0], p)
		}
	}
	if len(args) > 1 {
		if kind != aggMin && kind != aggMax && kind != aggMean {
			return nil, c.errorf(src, "wrong number of arguments to %s", name)
		}
		return c.aggregateScalars(src, kind, name, args)
	}
	if stage, slot, ok, err := c.stageField(args[0]); err != nil {
		return nil, err
	} else if ok {
		return c.aggregateStageField(src, kind, name, stage, slot), nil
	}
	if arr, ok := args[0].(*ast.ArrayNode); ok && kind == aggSum && len(arr.Nodes) >= 2 && !allLiterals(arr.Nodes) {
		return c.sumArray(src, arr)
	}
	x, err := c.compile(args[0])
	if err != nil {
		return nil, err
	}
	switch x.typ {
	case tyEvents:
		switch kind {
		case aggCount:
			return c.count(src, x), nil
		case aggFirst, aggLast:
			stage, first := x.stage, kind == aggFirst
			return &compiledNode{src: src, typ: tyEvent, event: func(fr frame) (*event.Event, *Error) {
				evs := fr.stages.EventsAt(stage)
				switch {
				case len(evs) == 0:
					return nil, nil
				case first:
					return evs[0], nil
				}
				return evs[len(evs)-1], nil
			}}, nil
		}
		return nil, c.errorf(args[0], "%s needs values, not events: write %s(%s.field)", name, name, c.text(args[0]))
	case tyList:
		return c.aggregateList(src, kind, name, x.list), nil
	}
	if !x.typ.scalar() {
		return nil, unsupported("%s of %s", name, x.typ)
	}
	return c.aggregateScalars(src, kind, name, args)
}

// allLiterals reports whether every node is a literal, which expr's
// optimizer folds into a constant array.
func allLiterals(nodes []ast.Node) bool {
	for _, n := range nodes {
		switch n.(type) {
		case *ast.IntegerNode, *ast.FloatNode, *ast.StringNode, *ast.BoolNode:
		default:
			return false
		}
	}
	return true
}

func (c *compiler) aggregateStageField(src ast.Node, kind aggKind, name string, stage, slot int) *compiledNode {
	typ := c.aggType(kind, c.fieldType(slot))
	site := c.site(src)
	return c.scalar(src, typ, func(fr frame) (event.Value, *Error) {
		v, bad, ok := aggEvents(kind, fr.stages.EventsAt(stage), slot)
		if !ok {
			return event.Null, site.fail("invalid argument for %s (type %s)", name, bad.Kind())
		}
		return v, nil
	})
}

// aggEvents aggregates field slot over evs; when a value does not fit
// it returns that value and false.
func aggEvents(kind aggKind, evs []*event.Event, slot int) (v, bad event.Value, ok bool) {
	switch kind {
	case aggCount:
		return event.Int(int64(len(evs))), event.Null, true
	case aggFirst:
		if len(evs) == 0 {
			return event.Null, event.Null, true
		}
		return evs[0].Field(slot), event.Null, true
	case aggLast:
		if len(evs) == 0 {
			return event.Null, event.Null, true
		}
		return evs[len(evs)-1].Field(slot), event.Null, true
	}
	g := newCondAgg(kind)
	for _, e := range evs {
		if x := e.Field(slot); !g.add(x) {
			return event.Null, x, false
		}
	}
	return g.result(), event.Null, true
}

// aggType is the static type of an aggregate of values of type elem.
func (c *compiler) aggType(kind aggKind, elem nodeType) nodeType {
	switch kind {
	case aggMean:
		return tyFloat
	case aggCount:
		return tyInt
	case aggSum:
		if elem == tyInt {
			return tyInt
		}
	case aggFirst, aggLast, aggMin, aggMax:
		if elem.scalar() && elem != tyNil {
			return elem
		}
	}
	return tyAny
}

func (c *compiler) aggregateList(src ast.Node, kind aggKind, name string, list *scalarList) *compiledNode {
	site := c.site(src)
	if list.pure && (kind == aggFirst || kind == aggLast) {
		first := kind == aggFirst
		return c.scalar(src, list.elem, func(fr frame) (event.Value, *Error) {
			n := list.n(fr)
			switch {
			case n == 0:
				return event.Null, nil
			case first:
				return list.at(fr, 0)
			}
			return list.at(fr, n-1)
		})
	}
	return c.scalar(src, c.aggType(kind, list.elem), func(fr frame) (event.Value, *Error) {
		g := newCondAgg(kind)
		for i, n := 0, list.n(fr); i < n; i++ {
			v, err := list.at(fr, i)
			if err != nil {
				return event.Null, err
			}
			if !g.add(v) {
				return event.Null, site.fail("invalid argument for %s (type %s)", name, v.Kind())
			}
		}
		return g.result(), nil
	})
}

// aggregateScalars compiles min, max and mean over scalar arguments
// (min(a, b)). With one argument, expr's min and max return it unchanged.
func (c *compiler) aggregateScalars(src ast.Node, kind aggKind, name string, args []ast.Node) (*compiledNode, error) {
	if kind != aggMin && kind != aggMax && kind != aggMean {
		return nil, c.errorf(args[0], "%s needs a list", name)
	}
	xs := make([]*compiledNode, len(args))
	leaves := make([]leafNode, len(args))
	for i, a := range args {
		x, err := c.compile(a)
		if err != nil {
			return nil, err
		}
		if !x.typ.scalar() {
			return nil, unsupported("%s of lists and values", name)
		}
		if !x.typ.numLike() {
			return nil, c.errorf(a, "invalid argument for %s (type %s)", name, x.typ)
		}
		xs[i], leaves[i] = x, x.leaf
	}
	if len(xs) == 1 && kind != aggMean {
		return xs[0], nil
	}
	site := c.site(src)
	return c.scalar(src, c.aggType(kind, listElem(xs)), func(fr frame) (event.Value, *Error) {
		g := newCondAgg(kind)
		for i := range leaves {
			v, err := leaves[i].get(fr)
			if err != nil {
				return event.Null, err
			}
			if !g.add(v) {
				return event.Null, site.fail("invalid argument for %s (type %s)", name, v.Kind())
			}
		}
		return g.result(), nil
	}, xs...), nil
}

// sumArray compiles sum([a, b, ...]) of non-literal elements as expr's
// optimizer rewrites it: a + (b + (...)).
func (c *compiler) sumArray(src ast.Node, arr *ast.ArrayNode) (*compiledNode, error) {
	xs := make([]*compiledNode, len(arr.Nodes))
	leaves := make([]leafNode, len(arr.Nodes))
	typ := tyAny
	for i, a := range arr.Nodes {
		x, err := c.compileScalar(a)
		if err != nil {
			return nil, err
		}
		if i == 0 {
			typ = x.typ
		} else if t, ok := arithType(opAdd, x.typ, typ); ok {
			typ = t
		} else {
			return nil, c.errorf(a, "cannot apply + to %s and %s", x.typ, typ)
		}
		xs[i], leaves[i] = x, x.leaf
	}
	site := c.site(src)
	return c.scalar(src, typ, func(fr frame) (event.Value, *Error) {
		var vals [8]event.Value
		vs := vals[:0]
		for i := range leaves {
			v, err := leaves[i].get(fr)
			if err != nil {
				return event.Null, err
			}
			vs = append(vs, v)
		}
		acc := vs[len(vs)-1]
		for i := len(vs) - 2; i >= 0; i-- {
			var fault opFault
			if acc, fault = arithmetic(opAdd, vs[i], acc); fault != faultNone {
				return event.Null, site.fail("cannot apply + to %s and %s", vs[i].Kind(), acc.Kind())
			}
		}
		return acc, nil
	}, xs...), nil
}

// predicate compiles the body of a predicate over the events of a stage.
func (c *compiler) predicate(p *ast.PredicateNode) (*compiledNode, error) {
	c.preds++
	defer func() { c.preds-- }()
	return c.compileScalar(p.Node)
}

// predicateArgs compiles the two arguments of a predicate builtin: a
// stage and a predicate over its events.
func (c *compiler) predicateArgs(name string, list ast.Node, p ast.Node) (int, *compiledNode, error) {
	x, err := c.compile(list)
	if err != nil {
		return 0, nil, err
	}
	pred, ok := p.(*ast.PredicateNode)
	if !ok {
		return 0, nil, unsupported("%s without a predicate", name)
	}
	if x.typ != tyEvents {
		return 0, nil, unsupported("%s over a %s", name, x.typ)
	}
	body, err := c.predicate(pred)
	if err != nil {
		return 0, nil, err
	}
	return x.stage, body, nil
}

// mapEvents compiles map(x, predicate) over the events of a stage.
func (c *compiler) mapEvents(n *ast.BuiltinNode) (*compiledNode, error) {
	if len(n.Arguments) != 2 {
		return nil, c.errorf(n, "map takes a list and a predicate")
	}
	stage, body, err := c.predicateArgs("map", n.Arguments[0], n.Arguments[1])
	if err != nil {
		return nil, err
	}
	list := &scalarList{
		elem: body.typ,
		n:    func(fr frame) int { return len(fr.stages.EventsAt(stage)) },
		pure: body.leaf.kind == leafElem || body.isConst(),
	}
	l := body.leaf
	list.at = func(fr frame, i int) (event.Value, *Error) {
		fr.elem = fr.stages.EventsAt(stage)[i]
		return l.get(fr)
	}
	return &compiledNode{src: n, typ: tyList, list: list}, nil
}

// quantifier compiles all, any, none and one over the events of a stage.
func (c *compiler) quantifier(n *ast.BuiltinNode) (*compiledNode, error) {
	if len(n.Arguments) != 2 {
		return nil, c.errorf(n, "%s takes a list and a predicate", n.Name)
	}
	stage, body, err := c.predicateArgs(n.Name, n.Arguments[0], n.Arguments[1])
	if err != nil {
		return nil, err
	}
	if body.typ != tyBool && body.typ != tyAny {
		return nil, c.errorf(n.Arguments[1], "the predicate of %s must be a bool, got %s", n.Name, body.typ)
	}
	t := c.boolOf(body, false)
	// stop is the predicate value that decides the answer early, result
	// the answer then; one counts instead.
	var stop, result bool
	switch n.Name {
	case "all":
		stop, result = false, false
	case "any":
		stop, result = true, true
	case "none":
		stop, result = true, false
	case "one":
		return c.boolean(n, func(fr frame) (bool, *Error) {
			k, err := countEvents(fr, stage, t, -1)
			return k == 1, err
		}), nil
	}
	return c.boolean(n, func(fr frame) (bool, *Error) {
		inner := fr
		for _, e := range fr.stages.EventsAt(stage) {
			inner.elem = e
			b, err := t(inner)
			if err != nil {
				return false, err
			}
			if b == stop {
				return result, nil
			}
		}
		return !result, nil
	}), nil
}

// countEvents counts the events of stage that satisfy t, stopping at
// limit when it is not negative (expr's count threshold).
func countEvents(fr frame, stage int, t boolFn, limit int) (int, *Error) {
	k := 0
	inner := fr
	for _, e := range fr.stages.EventsAt(stage) {
		inner.elem = e
		b, err := t(inner)
		if err != nil {
			return 0, err
		}
		if b {
			if k++; k == limit {
				break
			}
		}
	}
	return k, nil
}

// aggregatePredicate compiles count(x, p) and sum(x, p) over a stage.
func (c *compiler) aggregatePredicate(src ast.Node, kind aggKind, name string, list ast.Node, p *ast.PredicateNode) (*compiledNode, error) {
	if kind != aggCount && kind != aggSum {
		return nil, c.errorf(src, "%s takes no predicate", name)
	}
	stage, body, err := c.predicateArgs(name, list, p)
	if err != nil {
		return nil, err
	}
	if kind == aggCount {
		if body.typ != tyBool && body.typ != tyAny {
			return nil, c.errorf(p, "the predicate of count must be a bool, got %s", body.typ)
		}
		t := c.boolOf(body, false)
		limit := -1
		if b, ok := src.(*ast.BuiltinNode); ok && b.Threshold != nil {
			limit = *b.Threshold
		}
		return c.scalar(src, tyInt, func(fr frame) (event.Value, *Error) {
			k, err := countEvents(fr, stage, t, limit)
			return event.Int(int64(k)), err
		}), nil
	}
	l := body.leaf
	site := c.site(src)
	return c.scalar(src, c.aggType(kind, body.typ), func(fr frame) (event.Value, *Error) {
		g := newCondAgg(kind)
		inner := fr
		for _, e := range fr.stages.EventsAt(stage) {
			inner.elem = e
			v, err := l.get(inner)
			if err != nil {
				return event.Null, err
			}
			if !g.add(v) {
				return event.Null, site.fail("invalid argument for %s (type %s)", name, v.Kind())
			}
		}
		return g.result(), nil
	}), nil
}
