package lint

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cepheus-cep/cepheus/internal/failpoint"
)

// pointFamilies are the prefixes of the points whose names the code
// builds: the file sink's steps, named by its fp calls (read here), and a
// checkpoint's commit steps, whose names runtime/state's tests check.
var pointFamilies = map[string]string{"sink.": "fp", "checkpoint.": ""}

// failpointHits returns the points file's code hits by name: the string
// literal of each failpoint.Hit call, and "sink." and the literal of each
// fp call (the file sink's steps); and what it cannot read: a Hit whose
// name is neither a literal nor a family's prefix plus something.
func failpointHits(fset *token.FileSet, file *ast.File) (hits, problems []string) {
	ast.Inspect(file, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || len(call.Args) != 1 {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		pkg, _ := sel.X.(*ast.Ident)
		switch {
		case pkg != nil && pkg.Name == "failpoint" && sel.Sel.Name == "Hit":
			if s, ok := stringLit(call.Args[0]); ok {
				hits = append(hits, s)
				return true
			}
			if b, ok := call.Args[0].(*ast.BinaryExpr); ok && b.Op == token.ADD {
				if s, ok := stringLit(b.X); ok {
					if _, ok := pointFamilies[s]; ok {
						return true
					}
				}
			}
			problems = append(problems, fset.Position(call.Pos()).String()+": a failpoint.Hit whose point's name is neither a string literal nor a known family's prefix plus a name")
		case sel.Sel.Name == pointFamilies["sink."]:
			if s, ok := stringLit(call.Args[0]); ok {
				hits = append(hits, "sink."+s)
			}
		}
		return true
	})
	return hits, problems
}

func stringLit(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}

// TestFailpointNames: every point the code hits by name is listed in
// package failpoint (a spec names only listed points, so one missing
// could never be armed), and every listed point is hit (a crash test
// armed with one no code hits would pass without its crash); the
// checkpoint's steps are checked by runtime/state's tests.
func TestFailpointNames(t *testing.T) {
	root, _ := moduleRoot(t)
	fset := token.NewFileSet()
	hit := map[string]bool{}
	for _, name := range goFiles(t, root) {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(root, filepath.FromSlash(name)), nil, 0)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		hits, problems := failpointHits(fset, f)
		for _, p := range problems {
			t.Error(p)
		}
		for _, h := range hits {
			hit[h] = true
			if !failpoint.Known(h) {
				t.Errorf("%s: the point %q is hit but not listed in package failpoint", name, h)
			}
		}
	}
	for _, p := range failpoint.Points() {
		if !hit[p] && !strings.HasPrefix(p, "checkpoint.") {
			t.Errorf("the point %q is listed in package failpoint but no code hits it", p)
		}
	}
}

// TestFailpointHits: what failpointHits reads from a file, and what it
// refuses.
func TestFailpointHits(t *testing.T) {
	const src = `package x

func f(name string, s *sink) {
	failpoint.Hit("a.b")
	failpoint.Hit("checkpoint." + name)
	failpoint.Hit("sink." + name)
	s.fp("commit.renamed")
	s.fp(name)
	failpoint.Armed()
	failpoint.Hit(name)
	failpoint.Hit("other." + name)
	other.Hit("c.d")
}
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "x.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	hits, problems := failpointHits(fset, f)
	if want := []string{"a.b", "sink.commit.renamed"}; !slices.Equal(hits, want) {
		t.Errorf("hits %q, want %q", hits, want)
	}
	if len(problems) != 2 || !strings.HasPrefix(problems[0], "x.go:10:") || !strings.HasPrefix(problems[1], "x.go:11:") {
		t.Errorf("problems %q, want the Hit of a variable (line 10) and of an unknown family (line 11)", problems)
	}
}
