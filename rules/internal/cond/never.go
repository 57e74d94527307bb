package cond

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/expr-lang/expr/ast"
)

// This file finds conditions that can never hold: comparisons of one
// field with constants, ANDed, that exclude each other (amount > 1000 &&
// amount < 100, type == "auth" && type == "capture"), for the front end's
// warnings. It is exact on what it reads and reads little: the
// comparisons (==, !=, <, <=, >, >=, in a list) of a field, a stage's
// field or a lookup's field with a number, a string or a bool, at the top
// level of a conjunction; anything else is left out, so it never warns of
// a condition that can hold. A null field fails every comparison but !=,
// and a set of != alone never excludes anything, so nulls change nothing.

// Never is a conjunction that can never hold: the comparisons Terms (their
// source, in source order) exclude each other, and no fewer of them do.
type Never struct {
	Terms []string
	// Clause is the index, in the sources given to [NeverHolds], of the
	// last of Terms, Offset its byte offset there.
	Clause, Offset int
	// Swapped: two bounds the other way round (x > 1000 && x < 100),
	// which x > 100 && x < 1000 would not exclude.
	Swapped bool
	// Equal: two equalities to different values (a stage takes one event:
	// events of two types are two stages).
	Equal bool
}

// NeverHolds returns the comparisons of the conjunction of srcs (each a
// condition, ANDed) that exclude each other, or nil when it finds none.
// Errors are *Error.
func NeverHolds(srcs []string, lookups ...string) (*Never, error) {
	var terms []term
	for i, src := range srcs {
		tree, err := parseNames(src, lookups)
		if err != nil {
			return nil, err
		}
		s := newCondSource(src)
		forConjuncts(tree.Node, func(n ast.Node) {
			if t, ok := comparison(n); ok {
				loc := span(n)
				t.clause, t.offset = i, s.byteOffset(loc.From)
				t.text = closed(src, t.offset, s.byteOffset(loc.To), n)
				terms = append(terms, t)
			}
		})
	}
	for j := range terms {
		var same []int // the terms before j of its subject
		for i := range j {
			if terms[i].subject == terms[j].subject {
				same = append(same, i)
			}
		}
		if len(same) == 0 || !excluded(terms, append(same, j)) {
			continue
		}
		// The fewest: a term before j that excludes it alone, else all.
		set := append(same, j)
		for _, i := range same {
			if excluded(terms, []int{i, j}) {
				set = []int{i, j}
				break
			}
		}
		n := &Never{Clause: terms[j].clause, Offset: terms[j].offset}
		for _, i := range set {
			n.Terms = append(n.Terms, terms[i].text)
		}
		if len(set) == 2 {
			a, b := terms[set[0]], terms[set[1]]
			n.Swapped = a.num && b.num && swapped(a, b)
			n.Equal = a.op == "==" && b.op == "=="
		}
		return n, nil
	}
	return nil, nil
}

// closed is the source of n, src[off:end], with the closing brackets
// expr's locations leave out (of a list: x in ["a", "b"]); expr's
// printing of n when they do not follow.
func closed(src string, off, end int, n ast.Node) string {
	if off >= end || end > len(src) {
		return n.String()
	}
	depth := 0
	for _, r := range src[off:end] {
		switch r {
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			depth--
		}
	}
	for ; depth > 0 && end < len(src); end++ {
		switch src[end] {
		case ')', ']', '}':
			depth--
		case ' ', '\t':
		default:
			return n.String()
		}
	}
	if depth != 0 {
		return n.String()
	}
	return src[off:end]
}

// term is a comparison of a subject with a constant: subject op value.
type term struct {
	subject string // expr's printing of the field read
	op      string // ==, !=, <, <=, >, >=, in
	num     bool   // value is a number (x), else a string or bool (s)
	x       float64
	s       string
	list    []constant // of in
	text    string
	clause  int
	offset  int
}

// constant is a number or a string or bool constant.
type constant struct {
	num bool
	x   float64
	s   string
}

// comparison returns n as a term, if it is one.
func comparison(n ast.Node) (term, bool) {
	b, ok := n.(*ast.BinaryNode)
	if !ok {
		return term{}, false
	}
	op := b.Operator
	switch op {
	case "==", "!=", "<", "<=", ">", ">=":
	case "in":
		subj, ok := subject(b.Left)
		arr, isArr := b.Right.(*ast.ArrayNode)
		if !ok || !isArr || len(arr.Nodes) == 0 {
			return term{}, false
		}
		t := term{subject: subj, op: op}
		for _, e := range arr.Nodes {
			c, ok := constantOf(e)
			if !ok {
				return term{}, false
			}
			t.list = append(t.list, c)
		}
		return t, true
	default:
		return term{}, false
	}
	subj, ok := subject(b.Left)
	c, isConst := constantOf(b.Right)
	if !ok || !isConst {
		// 5 < x is x > 5.
		if subj, ok = subject(b.Right); !ok {
			return term{}, false
		}
		if c, isConst = constantOf(b.Left); !isConst {
			return term{}, false
		}
		op = map[string]string{"==": "==", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}[op]
	}
	if !c.num && op != "==" && op != "!=" {
		return term{}, false // no ordering of strings here
	}
	return term{subject: subj, op: op, num: c.num, x: c.x, s: c.s}, true
}

// subject returns the field n reads (x, s.x, lookup.x as the lookups'
// rewriting leaves it), or false.
func subject(n ast.Node) (string, bool) {
	switch n := n.(type) {
	case *ast.IdentifierNode:
		return n.String(), true
	case *ast.MemberNode:
		if _, ok := n.Property.(*ast.StringNode); !ok {
			return "", false
		}
		if _, ok := subject(n.Node); !ok {
			return "", false
		}
		return n.String(), true
	}
	return "", false
}

// constantOf returns n as a constant, if it is a number, a negated one,
// a string or a bool.
func constantOf(n ast.Node) (constant, bool) {
	switch n := n.(type) {
	case *ast.IntegerNode:
		return constant{num: true, x: float64(n.Value)}, true
	case *ast.FloatNode:
		return constant{num: true, x: n.Value}, !math.IsNaN(n.Value)
	case *ast.StringNode:
		return constant{s: "s" + n.Value}, true
	case *ast.BoolNode:
		return constant{s: fmt.Sprint("b", n.Value)}, true
	case *ast.UnaryNode:
		if c, ok := constantOf(n.Node); ok && c.num && (n.Operator == "-" || n.Operator == "+") {
			if n.Operator == "-" {
				c.x = -c.x
			}
			return c, true
		}
	}
	return constant{}, false
}

// excluded says whether no value satisfies every term of idx (of one
// subject).
func excluded(terms []term, idx []int) bool {
	// The numbers: an interval, the values it must be one of (==, in) and
	// those it must not be (!=). The strings and bools alike, without the
	// interval.
	lo, hi := math.Inf(-1), math.Inf(1)
	loOpen, hiOpen := false, false
	var must []constant // nil: any value
	mustSet := false
	var not []constant
	for _, i := range idx {
		t := &terms[i]
		c := constant{num: t.num, x: t.x, s: t.s}
		switch t.op {
		case "<", "<=":
			if t.x < hi || t.x == hi && t.op == "<" {
				hi, hiOpen = t.x, t.op == "<"
			}
		case ">", ">=":
			if t.x > lo || t.x == lo && t.op == ">" {
				lo, loOpen = t.x, t.op == ">"
			}
		case "!=":
			not = append(not, c)
		case "==", "in":
			list := []constant{c}
			if t.op == "in" {
				list = t.list
			}
			if !mustSet {
				must, mustSet = slices.Clone(list), true
				continue
			}
			must = slices.DeleteFunc(must, func(m constant) bool { return !slices.Contains(list, m) })
		}
	}
	ordered := !math.IsInf(lo, -1) || !math.IsInf(hi, 1)
	if ordered && (lo > hi || lo == hi && (loOpen || hiOpen)) {
		return true
	}
	if !mustSet {
		// Only an interval and exclusions: a point excluded.
		return lo == hi && slices.Contains(not, constant{num: true, x: lo})
	}
	for _, m := range must {
		if slices.Contains(not, m) {
			continue
		}
		if !ordered {
			return false
		}
		if m.num && (m.x > lo || m.x == lo && !loOpen) && (m.x < hi || m.x == hi && !hiOpen) {
			return false
		}
	}
	return true
}

// swapped says whether a and b are an upper and a lower bound that exclude
// each other only because they are the other way round.
func swapped(a, b term) bool {
	up := func(t term) bool { return t.op == "<" || t.op == "<=" }
	down := func(t term) bool { return t.op == ">" || t.op == ">=" }
	switch {
	case up(a) && down(b):
		return b.x > a.x
	case down(a) && up(b):
		return a.x > b.x
	}
	return false
}

// NeverText is the warning of n: the terms, and what may have been meant.
func NeverText(n *Never) string {
	var terms string
	switch len(n.Terms) {
	case 2:
		terms = n.Terms[0] + " and " + n.Terms[1]
	default:
		terms = strings.Join(n.Terms[:len(n.Terms)-1], ", ") + " and " + n.Terms[len(n.Terms)-1]
	}
	msg := "this condition can never hold: " + terms + " exclude each other"
	switch {
	case n.Swapped:
		msg += " (are the bounds the other way round?)"
	case n.Equal:
		msg += " (a stage tests one event at a time: events of each value are a stage each)"
	}
	return msg
}
