package cond

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/conf"
	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/parser"

	"github.com/cepheus-cep/cepheus/event"
)

// This file is the front half of the expression compiler: parsing with
// expr's parser, expr's constant folding, name resolution (fields, stages,
// functions) with suggestions, the refusal of wall-clock builtins, and the
// scan that decides whether an expression compiles natively or falls back
// to expr's VM. Errors are *Error with byte offsets into the source.

// compiler holds the state of one compilation. It is discarded
// afterwards: the closures it builds capture only what they need.
type compiler struct {
	source
	env    *Env
	emit   bool           // an emit expression: no event under test
	stages map[string]int // stage name -> index
	preds  int            // depth of predicates over stage events
}

func newCondCompiler(src string, env *Env, emit bool) *compiler {
	c := &compiler{source: newCondSource(src), env: env, emit: emit, stages: make(map[string]int, len(env.Stages))}
	for i, s := range env.Stages {
		if _, dup := c.stages[s]; !dup {
			c.stages[s] = i
		}
	}
	return c
}

// source is the source of an expression, to convert expr's locations
// (rune indexes) to byte offsets.
type source struct {
	src   string
	runes []int // byte offset of each rune index; nil for ASCII
}

func newCondSource(src string) source {
	s := source{src: src}
	for i, r := range src {
		if r >= utf8.RuneSelf && s.runes == nil {
			s.runes = make([]int, 0, len(src))
			for j := range src[:i] {
				s.runes = append(s.runes, j)
			}
		}
		if s.runes != nil {
			s.runes = append(s.runes, i)
		}
	}
	return s
}

// byteOffset converts a rune index of expr's locations to a byte offset.
func (s *source) byteOffset(r int) int {
	switch {
	case r < 0:
		return 0
	case s.runes == nil:
		return min(r, len(s.src))
	case r >= len(s.runes):
		return len(s.src)
	}
	return s.runes[r]
}

// errSite is the source range of a node whose evaluation can fail.
type errSite struct{ off, end int }

func (s errSite) fail(format string, args ...any) *Error {
	return &Error{Offset: s.off, End: s.end, Msg: fmt.Sprintf(format, args...)}
}

// site is where errors about node n point: the operator of a binary
// node, the whole node otherwise.
func (c *compiler) site(n ast.Node) errSite {
	loc := n.Location()
	if _, ok := n.(*ast.BinaryNode); !ok {
		loc = span(n)
	}
	off, end := c.byteOffset(loc.From), c.byteOffset(loc.To)
	if end < off {
		end = 0
	}
	return errSite{off: off, end: end}
}

// span is the range of runes covered by n and its children (without
// enclosing parentheses, which have no node).
func span(n ast.Node) file.Location {
	loc := n.Location()
	for _, k := range childrenOf(n) {
		if k == nil {
			continue
		}
		kl := span(k)
		if kl.To <= kl.From {
			continue
		}
		if loc.To <= loc.From {
			loc = kl
			continue
		}
		loc.From, loc.To = min(loc.From, kl.From), max(loc.To, kl.To)
	}
	return loc
}

// text is the source of n for messages: the source text when it can be
// cut out cleanly, expr's printing of the node otherwise.
func (c *compiler) text(n ast.Node) string {
	loc := span(n)
	off, end := c.byteOffset(loc.From), c.byteOffset(loc.To)
	if off < end {
		t := c.src[off:end]
		depth := 0
		for _, r := range t {
			switch r {
			case '(', '[', '{':
				depth++
			case ')', ']', '}':
				depth--
			}
			if depth < 0 {
				break
			}
		}
		if depth == 0 {
			return t
		}
	}
	return n.String()
}

// errorf returns an error at node n. Run-time errors are made at compile
// time with it where their text is fixed, so that failing evaluations do
// not allocate.
func (c *compiler) errorf(n ast.Node, format string, args ...any) *Error {
	return c.site(n).fail(format, args...)
}

// fromFileError converts an error of expr (parser, checker, VM) to an
// *Error.
func (s *source) fromFileError(err error) *Error {
	var fe *file.Error
	if !errors.As(err, &fe) {
		return &Error{Offset: 0, End: len(s.src), Msg: firstLine(err.Error())}
	}
	site := errSite{off: s.byteOffset(fe.From), end: s.byteOffset(fe.To)}
	if site.end < site.off {
		site.end = 0
	}
	// fe.Message is expr's message without the location and the snippet
	// that fe.Error() adds: the offsets carry the position.
	return site.fail("%s", firstLine(fe.Message))
}

// exprNodeLimit is the message of expr's parser for an expression of more
// than conf.DefaultMaxNodes nodes, which names neither the bound nor a way
// out; parse says both, as the front end's bound on tokens does.
const exprNodeLimit = "compilation failed: expression exceeds maximum allowed nodes"

// firstLine is s up to its first newline: an [Error]'s message is one line.
func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// parse parses the source with expr's parser and applies the rewrites of
// expr's optimiser that change results: literal folding (x && false is
// false without evaluating x), the combination of predicates and the
// early end of count. The compiled closures then behave as expr's
// optimised program, errors included.
func (c *compiler) parse() (*parser.Tree, error) {
	tree, err := parser.Parse(c.src)
	if err != nil {
		e := c.fromFileError(err)
		if e.Msg == exprNodeLimit {
			e.Msg = fmt.Sprintf("an expression of more than %d nodes: split it (a long list of values is a lookup)", conf.DefaultMaxNodes)
		}
		return nil, e
	}
	rewriteLookups(&tree.Node, lookupSet(c.env.Lookups), c.stages)
	f := &folder{c: c}
	ast.Walk(&tree.Node, f)
	if f.err != nil {
		return nil, f.err
	}
	ast.Walk(&tree.Node, combinePredicates{})
	ast.Walk(&tree.Node, countRewrites{})
	return tree, nil
}

// nameRef is what an identifier names: a field slot or a stage index (the
// other is -1).
type nameRef struct{ slot, stage int }

func (c *compiler) slot(name string) (int, bool) {
	if c.env.Schema == nil {
		return 0, false
	}
	return c.env.Schema.Slot(name)
}

// resolve resolves an identifier.
func (c *compiler) resolve(n *ast.IdentifierNode) (nameRef, error) {
	slot, isField := c.slot(n.Value)
	stage, isStage := c.stages[n.Value]
	switch {
	case isField && isStage:
		return nameRef{}, c.errorf(n, "%s is both a field and a stage: rename one", n.Value)
	case isStage:
		return nameRef{slot: -1, stage: stage}, nil
	case isField && c.emit:
		return nameRef{}, c.errorf(n, "%s is a field of one event, but an emit expression reads the whole match: read it from a stage (%s.%s)",
			n.Value, c.someStage(), n.Value)
	case isField:
		return nameRef{slot: slot, stage: -1}, nil
	}
	what := "name"
	if l, _, ok := strings.Cut(n.Value, "."); c.env.Declared || ok && slices.Contains(c.env.Lookups, l) {
		// A lookup's fields are declared even where the event's are not.
		what = "field"
	}
	hint := suggest(n.Value, c.names())
	if hint == "" {
		hint = c.lookupFieldHint(n.Value)
	}
	if hint == "" && c.env.Declared && !c.emit {
		// Far from every name: most often a string left without quotes
		// (type == auth).
		hint = fmt.Sprintf(" (for the text %s, write %q)", n.Value, n.Value)
	}
	return nameRef{}, c.errorf(n, "unknown %s %s%s", what, n.Value, hint)
}

// unknownText reports x, an unknown name compared with other, a text
// (a string or a string field): most often a string left without its
// quotes (country == US). A suggestion is then a string field only, not
// any close name (US is not a misspelt ts).
func (c *compiler) unknownText(x, other ast.Node, bound map[string]bool) error {
	id, ok := x.(*ast.IdentifierNode)
	if !ok || bound[id.Value] || !c.env.Declared || c.emit {
		return nil
	}
	if _, isField := c.slot(id.Value); isField {
		return nil
	}
	if _, isStage := c.stages[id.Value]; isStage {
		return nil
	}
	if !c.isText(other, bound) {
		return nil
	}
	var texts []string
	for _, name := range c.env.Schema.Names() {
		if slot, _ := c.slot(name); c.fieldType(slot) == tyString {
			texts = append(texts, name)
		}
	}
	hint := suggest(id.Value, texts)
	if hint == "" {
		hint = c.lookupFieldHint(id.Value)
	}
	if hint == "" {
		hint = fmt.Sprintf(" (for the text %s, write %q)", id.Value, id.Value)
	}
	return c.errorf(id, "unknown field %s%s", id.Value, hint)
}

// isText says whether n is a string literal or a field of type string.
func (c *compiler) isText(n ast.Node, bound map[string]bool) bool {
	switch n := n.(type) {
	case *ast.StringNode:
		return true
	case *ast.IdentifierNode:
		if bound[n.Value] {
			return false
		}
		slot, ok := c.slot(n.Value)
		return ok && c.fieldType(slot) == tyString
	}
	return false
}

// nearestStage suggests a stage for the unknown name: " (did you mean
// x?)" for a close one, else " (the stages: a, b)"; "" when there are
// none.
func (c *compiler) nearestStage(name string) string {
	var stages []string
	for _, s := range c.env.Stages {
		if isExprIdent(s) {
			stages = append(stages, s)
		}
	}
	if s := suggest(name, stages); s != "" {
		return s
	}
	if len(stages) == 0 {
		return ""
	}
	return " (the stages: " + strings.Join(stages, ", ") + ")"
}

// someStage names a stage for the examples of error messages.
func (c *compiler) someStage() string {
	for _, s := range c.env.Stages {
		if isExprIdent(s) {
			return s
		}
	}
	return "stage"
}

// names are the identifiers an expression may use, for suggestions.
func (c *compiler) names() []string {
	var out []string
	if c.env.Schema != nil && !c.emit {
		out = append(out, c.env.Schema.Names()...)
	}
	for _, s := range c.env.Stages {
		if isExprIdent(s) {
			out = append(out, s)
		}
	}
	return out
}

// field resolves the name of a field read through an event (x.f, .f).
func (c *compiler) field(n ast.Node, name string) (int, error) {
	if slot, ok := c.slot(name); ok {
		return slot, nil
	}
	var names []string
	if c.env.Schema != nil {
		names = c.env.Schema.Names()
	}
	hint := suggest(name, names)
	if hint == "" {
		hint = c.lookupFieldHint(name)
	}
	return 0, c.errorf(n, "unknown field %s%s", name, hint)
}

// lookupFieldHint names the fields of the lookup an unknown name
// lookup.field reads (" (lookup customer has no field f; its fields: a,
// b)"); "" for another name.
func (c *compiler) lookupFieldHint(name string) string {
	l, f, ok := strings.Cut(name, ".")
	if !ok || !slices.Contains(c.env.Lookups, l) || c.env.Schema == nil {
		return ""
	}
	var fields []string
	for _, s := range c.env.Schema.Names() {
		if rest, ok := strings.CutPrefix(s, l+"."); ok {
			fields = append(fields, rest)
		}
	}
	return fmt.Sprintf(" (lookup %s has no field %s; its fields: %s)", l, f, strings.Join(fields, ", "))
}

// stageArg resolves the argument of stage("x") or ctx("x").
func (c *compiler) stageArg(n *ast.CallNode) (int, error) {
	callee := n.Callee.(*ast.IdentifierNode).Value
	if len(n.Arguments) != 1 {
		return 0, c.errorf(n, "%s takes one argument, a stage name", callee)
	}
	s, ok := n.Arguments[0].(*ast.StringNode)
	if !ok {
		return 0, c.errorf(n.Arguments[0], "the argument of %s must be a string literal naming a stage", callee)
	}
	stage, ok := c.stages[s.Value]
	if !ok {
		return 0, c.errorf(s, "unknown stage %q%s", s.Value, suggest(s.Value, c.env.Stages))
	}
	return stage, nil
}

// stageRef reports whether n names a stage (x, stage("x"), ctx("x")).
func (c *compiler) stageRef(n ast.Node) (int, bool, error) {
	switch n := n.(type) {
	case *ast.IdentifierNode:
		if _, isField := c.slot(n.Value); isField {
			return 0, false, nil
		}
		stage, ok := c.stages[n.Value]
		return stage, ok, nil
	case *ast.CallNode:
		if id, ok := n.Callee.(*ast.IdentifierNode); ok && (id.Value == "stage" || id.Value == "ctx") {
			stage, err := c.stageArg(n)
			return stage, err == nil, err
		}
	}
	return 0, false, nil
}

// refusedBuiltins are the builtins that would make a condition depend on the
// wall clock or on time values: a replay must give the same answers.
var refusedBuiltins = map[string]string{
	"now":      "now() is not allowed: it reads the wall clock and breaks replay",
	"date":     "date() is not allowed: time values break replay; event times are numbers (milliseconds)",
	"duration": "duration() is not allowed: time values break replay; durations are numbers (milliseconds)",
}

// refused returns the error for a refused builtin, nil for the others.
func (c *compiler) refused(n ast.Node, name string) error {
	if msg, ok := refusedBuiltins[name]; ok {
		return c.errorf(n, "%s", msg)
	}
	return nil
}

// functions are the function names an expression may call natively,
// for suggestions.
var functions = func() []string {
	out := []string{"stage", "ctx", "avg", "distance_km"}
	for name := range nativeBuiltins {
		out = append(out, name)
	}
	for name := range scalarFuncs {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}()

func (c *compiler) unknownFunc(id *ast.IdentifierNode) error {
	if err := c.refused(id, id.Value); err != nil {
		return err
	}
	if _, isField := c.slot(id.Value); isField {
		return c.errorf(id, "%s is a field, not a function", id.Value)
	}
	return c.errorf(id, "unknown function %s%s", id.Value, suggest(id.Value, functions))
}

// scan checks the names of the whole tree (also in constructs the compiler
// leaves to the VM) and reports the first construct that is not compiled
// natively ("" when none). bound holds the names of enclosing let
// declarations.
func (c *compiler) scan(n ast.Node, bound map[string]bool) (string, error) {
	if n == nil {
		return "", nil
	}
	var fallback string
	note := func(what string) {
		if fallback == "" {
			fallback = what
		}
	}
	children := childrenOf(n)
	switch n := n.(type) {
	case *ast.IdentifierNode:
		if bound[n.Value] {
			return "", nil
		}
		_, err := c.resolve(n)
		return "", err
	case *ast.CallNode:
		id, ok := n.Callee.(*ast.IdentifierNode)
		switch {
		case !ok:
			if err := c.javaCall(n); err != nil {
				return "", err
			}
			note("a call of " + n.Callee.String())
		case id.Value == "stage" || id.Value == "ctx":
			_, err := c.stageArg(n)
			return "", err
		case id.Value == "avg" || id.Value == "distance_km":
			children = n.Arguments
		default:
			return "", c.unknownFunc(id)
		}
	case *ast.BuiltinNode:
		if err := c.refused(n, n.Name); err != nil {
			return "", err
		}
		if _, ok := scalarFuncs[n.Name]; !ok && !nativeBuiltins[n.Name] {
			note("builtin " + n.Name)
		}
	case *ast.MemberNode:
		if n.Method {
			note("method call")
		}
		if id, ok := n.Node.(*ast.IdentifierNode); ok && id.Value == "$env" && !bound[id.Value] {
			// expr's environment, as a reader of fields named otherwise
			// than identifiers would try (the messy-data trial's
			// $env["merchant-country"]).
			const msg = "$env (expr's environment) is not read here: a condition reads a field by its name, an identifier"
			s, ok := n.Property.(*ast.StringNode)
			switch {
			case !ok:
				return "", c.errorf(id, "%s", msg)
			case isIdentName(s.Value):
				return "", c.errorf(id, "%s: write %s", msg, s.Value)
			}
			return "", c.errorf(id, "%s, so a field named %s is renamed upstream (to %s)", msg, s.Value, identifierOf(s.Value))
		}
		if id, ok := n.Node.(*ast.IdentifierNode); ok && !bound[id.Value] {
			// x.f reads field f of stage x's event: an x that is neither
			// a stage nor a field is most likely a misspelt stage.
			slot, isField := c.slot(id.Value)
			_, isStage := c.stages[id.Value]
			switch {
			case !isStage && !isField:
				return "", c.errorf(id, "no stage or field is named %s%s", id.Value, c.nearestStage(id.Value))
			case !isStage && c.fieldType(slot) == tyAny:
				// A field of an inferred (or untyped) schema: its values
				// are scalars (an object in an event is a dead letter), so
				// x.f reads nothing, ever (a typed field's is a type error).
				hint := c.nearestStage(id.Value)
				if s, ok := n.Property.(*ast.StringNode); ok && !strings.HasPrefix(hint, " (did you mean") {
					// Not a misspelt stage: a nested object's field, as
					// a Java getter or a JSON path reads it.
					hint += fmt.Sprintf("; events are flat JSON objects (a nested object is a dead letter): a nested field is a field of its own, flattened upstream (%s_%s), and a lookup's fields are read so once the ruleset declares lookup %s { ... }", id.Value, s.Value, id.Value)
				}
				return "", c.errorf(id, "%s is a field, whose values have no fields: %s reads nothing%s", id.Value, c.text(n), hint)
			}
		}
		if s, ok := n.Property.(*ast.StringNode); ok {
			_, isStage, err := c.stageRef(n.Node)
			if err != nil {
				return "", err
			}
			if isStage {
				if _, err := c.field(n.Property, s.Value); err != nil {
					return "", err
				}
			}
		}
	case *ast.VariableDeclaratorNode:
		note("let")
		fb, err := c.scan(n.Value, bound)
		if err != nil {
			return "", err
		}
		note(fb)
		inner := map[string]bool{n.Name: true}
		for k := range bound {
			inner[k] = true
		}
		fb, err = c.scan(n.Expr, inner)
		note(fb)
		return fallback, err
	case *ast.PointerNode:
		if n.Name != "" {
			note("#" + n.Name)
		}
	case *ast.BinaryNode:
		if n.Operator == ".." {
			note("range ..")
		}
		if n.Operator == "==" || n.Operator == "!=" {
			if err := c.unknownText(n.Left, n.Right, bound); err != nil {
				return "", err
			}
			if err := c.unknownText(n.Right, n.Left, bound); err != nil {
				return "", err
			}
		}
	case *ast.SequenceNode:
		note("a sequence (;)")
	case *ast.MapNode, *ast.PairNode:
		note("a map literal")
	case *ast.SliceNode:
		note("slicing")
	case *ast.ConstantNode, *ast.BytesNode:
		note(fmt.Sprintf("%T", n))
	}
	for _, k := range children {
		fb, err := c.scan(k, bound)
		if err != nil {
			return "", err
		}
		note(fb)
	}
	return fallback, nil
}

// childrenOf returns the children of n, in source order.
func childrenOf(n ast.Node) []ast.Node {
	switch n := n.(type) {
	case *ast.UnaryNode:
		return []ast.Node{n.Node}
	case *ast.BinaryNode:
		return []ast.Node{n.Left, n.Right}
	case *ast.ChainNode:
		return []ast.Node{n.Node}
	case *ast.MemberNode:
		return []ast.Node{n.Node, n.Property}
	case *ast.SliceNode:
		return []ast.Node{n.Node, n.From, n.To}
	case *ast.CallNode:
		return append([]ast.Node{n.Callee}, n.Arguments...)
	case *ast.BuiltinNode:
		return n.Arguments
	case *ast.PredicateNode:
		return []ast.Node{n.Node}
	case *ast.VariableDeclaratorNode:
		return []ast.Node{n.Value, n.Expr}
	case *ast.SequenceNode:
		return n.Nodes
	case *ast.ConditionalNode:
		return []ast.Node{n.Cond, n.Exp1, n.Exp2}
	case *ast.ArrayNode:
		return n.Nodes
	case *ast.MapNode:
		return n.Pairs
	case *ast.PairNode:
		return []ast.Node{n.Key, n.Value}
	}
	return nil
}

// isExprIdent reports whether s can be written as an identifier in expr.
func isExprIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if r == '_' || r == '$' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || r >= utf8.RuneSelf {
			continue
		}
		if i > 0 && '0' <= r && r <= '9' {
			continue
		}
		return false
	}
	switch s {
	case "true", "false", "nil", "not", "and", "or", "in", "matches", "contains", "startsWith", "endsWith", "let", "if", "else":
		return false
	}
	return true
}

// suggest returns " (did you mean x?)" for the candidate closest to
// name by edit distance, or "" when none is close.
func suggest(name string, candidates []string) string {
	best := closest(name, candidates)
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %s?)", best)
}

// closest returns the candidate closest to name by edit distance, when
// it is near enough to be a slip, or else the one candidate that name is
// a short form of; "" when there is none.
func closest(name string, candidates []string) string {
	best, bestD := "", -1
	for _, cand := range candidates {
		if cand == name {
			continue
		}
		// At a tie, one as long as name: a swap or a wrong letter is a
		// likelier slip than a letter too many (rulse: rules, not rule).
		d := editDistance(strings.ToLower(name), strings.ToLower(cand))
		if bestD < 0 || d < bestD || d == bestD && len(cand) == len(name) && len(best) != len(name) {
			best, bestD = cand, d
		}
	}
	limit := min(3, (utf8.RuneCountInString(name)+1)/3)
	if bestD < 0 || bestD > limit {
		// Too far for a slip, but maybe a short form: rnd for round,
		// amt for amount. Only when one candidate fits, or when the name
		// is the first word of several and one of them is the shortest:
		// card for card_id, beside card_country.
		var fits []string
		for _, cand := range candidates {
			if abbreviates(name, cand) {
				fits = append(fits, cand)
			}
		}
		switch len(fits) {
		case 0:
			return ""
		case 1:
			return fits[0]
		default:
			return shortestWordOf(name, fits)
		}
	}
	return best
}

// shortestWordOf returns the shortest of cands that starts with name as
// a word of its own (name_...), when one is shorter than all the others
// that do; "" otherwise.
func shortestWordOf(name string, cands []string) string {
	best, tie := "", false
	prefix := strings.ToLower(name) + "_"
	for _, cand := range cands {
		if !strings.HasPrefix(strings.ToLower(cand), prefix) {
			continue
		}
		switch n, b := utf8.RuneCountInString(cand), utf8.RuneCountInString(best); {
		case best == "" || n < b:
			best, tie = cand, false
		case n == b:
			tie = true
		}
	}
	if tie {
		return ""
	}
	return best
}

// abbreviates reports whether name, of three letters or more, is a short
// form of cand: its letters in cand's order, the first the same (case
// folded), cand at most three times as long.
func abbreviates(name, cand string) bool {
	a, b := []rune(strings.ToLower(name)), []rune(strings.ToLower(cand))
	if len(a) < 3 || len(a) >= len(b) || len(b) > 3*len(a) || a[0] != b[0] {
		return false
	}
	i := 0
	for _, r := range b {
		if i < len(a) && r == a[i] {
			i++
		}
	}
	return i == len(a)
}

// editDistance is the Levenshtein distance between a and b, with a
// transposition of two neighbours counting as one edit.
func editDistance(a, b string) int {
	x, y := []rune(a), []rune(b)
	prev2 := make([]int, len(y)+1)
	prev := make([]int, len(y)+1)
	cur := make([]int, len(y)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(x); i++ {
		cur[0] = i
		for j := 1; j <= len(y); j++ {
			cost := 1
			if x[i-1] == y[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && x[i-1] == y[j-2] && x[i-2] == y[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(y)]
}

// folder applies expr's literal folding (expr's optimizer/fold.go) so
// that compiled expressions give the answers of expr's optimised
// programs: besides arithmetic on literals, x && false is false and
// x && true is x without the check that x is a bool. The only error it
// reports is an integer % by a literal zero, which expr refuses to compile.
type folder struct {
	c   *compiler
	err error
}

// Visit implements ast.Visitor (children are visited first).
func (f *folder) Visit(node *ast.Node) {
	if f.err != nil {
		return
	}
	replace := func(n ast.Node) {
		n.SetLocation((*node).Location())
		*node = n
	}
	switch n := (*node).(type) {
	case *ast.UnaryNode:
		switch x := n.Node.(type) {
		case *ast.IntegerNode:
			switch n.Operator {
			case "-":
				replace(&ast.IntegerNode{Value: -x.Value})
			case "+":
				replace(&ast.IntegerNode{Value: x.Value})
			}
		case *ast.FloatNode:
			switch n.Operator {
			case "-":
				replace(&ast.FloatNode{Value: -x.Value})
			case "+":
				replace(&ast.FloatNode{Value: x.Value})
			}
		case *ast.BoolNode:
			if n.Operator == "!" || n.Operator == "not" {
				replace(&ast.BoolNode{Value: !x.Value})
			}
		}
	case *ast.BinaryNode:
		f.binary(n, replace, node)
	}
}

func (f *folder) binary(n *ast.BinaryNode, replace func(ast.Node), node *ast.Node) {
	li, lInt := n.Left.(*ast.IntegerNode)
	ri, rInt := n.Right.(*ast.IntegerNode)
	lf, lFloat := n.Left.(*ast.FloatNode)
	rf, rFloat := n.Right.(*ast.FloatNode)
	num := func(isInt bool, i *ast.IntegerNode, f *ast.FloatNode) float64 {
		if isInt {
			return float64(i.Value)
		}
		return f.Value
	}
	bothNum := (lInt || lFloat) && (rInt || rFloat)
	switch n.Operator {
	case "+", "-", "*":
		op := binaryOps[n.Operator]
		if lInt && rInt {
			v, _ := arithmetic(op, event.Int(int64(li.Value)), event.Int(int64(ri.Value)))
			i, _ := v.AsInt()
			replace(&ast.IntegerNode{Value: int(i)})
			return
		}
		if bothNum {
			v, _ := arithmetic(op, event.Float(num(lInt, li, lf)), event.Float(num(rInt, ri, rf)))
			x, _ := v.AsFloat()
			replace(&ast.FloatNode{Value: x})
			return
		}
		if n.Operator == "+" {
			if ls, ok := n.Left.(*ast.StringNode); ok {
				if rs, ok := n.Right.(*ast.StringNode); ok {
					replace(&ast.StringNode{Value: ls.Value + rs.Value})
				}
			}
		}
	case "/":
		if bothNum {
			replace(&ast.FloatNode{Value: num(lInt, li, lf) / num(rInt, ri, rf)})
		}
	case "%":
		if lInt && rInt {
			if ri.Value == 0 {
				f.err = f.c.errorf(n, "integer divide by zero")
				return
			}
			replace(&ast.IntegerNode{Value: li.Value % ri.Value})
		}
	case "**", "^":
		if bothNum {
			x, y := num(lInt, li, lf), num(rInt, ri, rf)
			replace(&ast.FloatNode{Value: math.Pow(x, y)})
		}
	case "and", "&&", "or", "||":
		and := n.Operator == "and" || n.Operator == "&&"
		lb, lBool := n.Left.(*ast.BoolNode)
		rb, rBool := n.Right.(*ast.BoolNode)
		switch {
		case lBool && lb.Value == and: // true && x, false || x
			*node = n.Right
		case rBool && rb.Value == and: // x && true, x || false
			*node = n.Left
		case lBool || rBool: // false && x, x && false, true || x, x || true
			replace(&ast.BoolNode{Value: !and})
		}
	case "==":
		switch l := n.Left.(type) {
		case *ast.IntegerNode:
			if rInt {
				replace(&ast.BoolNode{Value: l.Value == ri.Value})
			}
		case *ast.StringNode:
			if r, ok := n.Right.(*ast.StringNode); ok {
				replace(&ast.BoolNode{Value: l.Value == r.Value})
			}
		case *ast.BoolNode:
			if r, ok := n.Right.(*ast.BoolNode); ok {
				replace(&ast.BoolNode{Value: l.Value == r.Value})
			}
		}
	}
}

// combinePredicates applies expr's optimizer/predicate_combination.go:
// all(x, p) && all(x, q) is all(x, p && q), any(x, p) || any(x, q) is
// any(x, p || q), none(x, p) && none(x, q) is none(x, p || q). The
// combined form evaluates p and q element by element, which decides which
// errors surface.
type combinePredicates struct{}

// Visit implements ast.Visitor.
func (v combinePredicates) Visit(node *ast.Node) {
	op, ok := (*node).(*ast.BinaryNode)
	if !ok {
		return
	}
	left, ok := op.Left.(*ast.BuiltinNode)
	if !ok || len(left.Arguments) != 2 {
		return
	}
	var combined string
	switch and := op.Operator == "&&" || op.Operator == "and"; {
	case left.Name == "all" && and, left.Name == "any" && !and && (op.Operator == "||" || op.Operator == "or"):
		combined = op.Operator
	case left.Name == "none" && and:
		combined = map[string]string{"and": "or", "&&": "||"}[op.Operator]
	default:
		return
	}
	right, ok := op.Right.(*ast.BuiltinNode)
	if !ok || right.Name != left.Name || len(right.Arguments) != 2 || left.Arguments[0].String() != right.Arguments[0].String() {
		return
	}
	lp, ok1 := left.Arguments[1].(*ast.PredicateNode)
	rp, ok2 := right.Arguments[1].(*ast.PredicateNode)
	if !ok1 || !ok2 {
		return
	}
	body := &ast.BinaryNode{Operator: combined, Left: lp.Node, Right: rp.Node}
	body.SetLocation(op.Location())
	pred := &ast.PredicateNode{Node: body}
	pred.SetLocation(lp.Location())
	v.Visit(&pred.Node)
	merged := &ast.BuiltinNode{Name: left.Name, Arguments: []ast.Node{left.Arguments[0], pred}}
	merged.SetLocation(left.Location())
	*node = merged
}

// countRewrites applies expr's optimizer/count_any.go and
// count_threshold.go: count(x, p) > 0 (or >= 1) is any(x, p), and
// count(x, p) compared with a larger literal stops counting at the
// threshold that decides the comparison.
type countRewrites struct{}

// Visit implements ast.Visitor.
func (countRewrites) Visit(node *ast.Node) {
	bin, ok := (*node).(*ast.BinaryNode)
	if !ok {
		return
	}
	count, ok := bin.Left.(*ast.BuiltinNode)
	if !ok || count.Name != "count" || len(count.Arguments) != 2 {
		return
	}
	k, ok := bin.Right.(*ast.IntegerNode)
	if !ok {
		return
	}
	if bin.Operator == ">" && k.Value == 0 || bin.Operator == ">=" && k.Value == 1 {
		anyNode := &ast.BuiltinNode{Name: "any", Arguments: count.Arguments}
		anyNode.SetLocation(count.Location())
		*node = anyNode
		return
	}
	if k.Value < 0 {
		return
	}
	threshold := k.Value
	switch bin.Operator {
	case ">", "<=":
		threshold++
	case ">=", "<":
	default:
		return
	}
	if threshold > 1 {
		count.Threshold = &threshold
	}
}

// javaOps are the Java methods a condition ported from Flink calls on a
// field, with the expression's form of x.m(y).
var javaOps = map[string]string{
	"startsWith": "%s startsWith %s",
	"endsWith":   "%s endsWith %s",
	"contains":   "%s contains %s",
	"matches":    "%s matches %s",
	"equals":     "%s == %s",
}

// javaCall reports a method call written as in a Flink condition's Java
// code: ctx.getEventsForPattern("a"), name.startsWith("foo"),
// value.getName(), with the expression's form of it. It returns nil for
// any other call.
func (c *compiler) javaCall(n *ast.CallNode) error {
	m, ok := n.Callee.(*ast.MemberNode)
	if !ok || !m.Method {
		return nil
	}
	prop, ok := m.Property.(*ast.StringNode)
	if !ok {
		return nil
	}
	recv := c.text(m.Node)
	id, isIdent := m.Node.(*ast.IdentifierNode)
	_, isStage := c.stages[recv]
	switch {
	case prop.Value == "getEventsForPattern" && isIdent && id.Value == "ctx" && !isStage && len(n.Arguments) == 1:
		arg, ok := n.Arguments[0].(*ast.StringNode)
		if !ok {
			return nil
		}
		name := arg.Value
		if _, ok := c.stages[name]; !ok {
			return nil
		}
		if !isIdentName(name) {
			return c.errorf(n, "%s is Flink's; a condition reads the events of stage %q as stage(%q): stage(%q)[-1].f, count(stage(%q))", c.text(n), name, name, name, name)
		}
		return c.errorf(n, "%s is Flink's; a condition reads the events of stage %s by its name: %s.f (its last event's field), sum(%s.f), count(%s), or ctx(%q)", c.text(n), name, name, name, name, name)
	case javaOps[prop.Value] != "" && len(n.Arguments) == 1 && !isStage:
		form := fmt.Sprintf(javaOps[prop.Value], recv, c.text(n.Arguments[0]))
		return c.errorf(n, "%s is a Java method call; write %s", c.text(n), form)
	case strings.HasPrefix(prop.Value, "get") && len(prop.Value) > 3 && len(n.Arguments) == 0 && isIdent && isStage:
		field := strings.ToLower(prop.Value[3:4]) + prop.Value[4:]
		if _, isField := c.slot(field); !isField {
			return nil
		}
		return c.errorf(n, "%s.%s() is a Java getter; a condition reads a field of stage %s's last event as %s.%s", recv, prop.Value, recv, recv, field)
	case strings.HasPrefix(prop.Value, "get") && len(prop.Value) > 3 && len(n.Arguments) == 0 && isIdent && !isStage:
		if _, isField := c.slot(id.Value); isField {
			return nil
		}
		field := strings.ToLower(prop.Value[3:4]) + prop.Value[4:]
		if _, isField := c.slot(field); !isField {
			return nil
		}
		return c.errorf(n, "%s.%s() is a Java getter; a condition reads the event's field by its name: %s", recv, prop.Value, field)
	}
	return nil
}

// isIdentName reports whether s can be written as a bare name in an
// expression.
func isIdentName(s string) bool {
	for i, r := range s {
		if r != '_' && !unicode.IsLetter(r) && (i == 0 || !unicode.IsDigit(r)) {
			return false
		}
	}
	return s != ""
}

// identifierOf is name with each character an identifier may not hold
// made '_' (and a leading digit preceded by one).
func identifierOf(name string) string {
	var b strings.Builder
	for i, r := range name {
		switch {
		case unicode.IsLetter(r) || r == '_' || unicode.IsDigit(r) && i > 0:
			b.WriteRune(r)
		case unicode.IsDigit(r):
			b.WriteString("_")
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}
