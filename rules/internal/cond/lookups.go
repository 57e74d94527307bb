package cond

import "github.com/expr-lang/expr/ast"

// This file turns the reads of a lookup's fields into field names. A
// ruleset's lookups put their fields in the events under dotted names
// (customer.home_country); in an expression they read as members of the
// lookup's name, which is neither a field nor a stage. The rewrite runs
// right after parsing, so everything after it (name resolution, the native
// compiler, the VM) sees one field name:
//
//	customer.home_country          -> the identifier "customer.home_country"
//	first.customer.home_country    -> the member "customer.home_country" of first
//	.customer.home_country         -> the same, of a predicate's element
//
// A name that is also a stage stays a stage (the front end rejects such a
// stage name).

// rewriteLookups applies the rewrite to the tree under node.
func rewriteLookups(node *ast.Node, lookups map[string]bool, stages map[string]int) {
	if len(lookups) == 0 {
		return
	}
	for _, child := range childPtrs(*node) {
		rewriteLookups(child, lookups, stages)
	}
	m, ok := (*node).(*ast.MemberNode)
	if !ok || m.Method {
		return
	}
	prop, ok := m.Property.(*ast.StringNode)
	if !ok {
		return
	}
	switch inner := m.Node.(type) {
	case *ast.IdentifierNode:
		if _, isStage := stages[inner.Value]; lookups[inner.Value] && !isStage {
			id := &ast.IdentifierNode{Value: inner.Value + "." + prop.Value}
			id.SetLocation(inner.Location())
			*node = id
		}
	case *ast.MemberNode:
		ns, ok := inner.Property.(*ast.StringNode)
		if !ok || inner.Method || !lookups[ns.Value] {
			return
		}
		name := &ast.StringNode{Value: ns.Value + "." + prop.Value}
		name.SetLocation(ns.Location())
		out := &ast.MemberNode{Node: inner.Node, Property: name, Optional: inner.Optional || m.Optional}
		out.SetLocation(inner.Location())
		*node = out
	}
}

// lookupSet returns the names of env's lookups as a set (nil for none).
func lookupSet(names []string) map[string]bool {
	if len(names) == 0 {
		return nil
	}
	set := make(map[string]bool, len(names))
	for _, n := range names {
		set[n] = true
	}
	return set
}
