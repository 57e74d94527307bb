package lint

import (
	"bufio"
	"bytes"
	"fmt"
	"go/format"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// importRule says which packages of ours one package may import.
type importRule struct {
	// imports lists the packages of ours (directories relative to the module
	// root) that every file of the package may import.
	imports []string
	// tests lists packages of ours that only its _test.go files may import,
	// in addition to imports.
	tests []string
}

// importRules is the import table of ARCHITECTURE.md section 2, keyed by a
// package's directory relative to the module root. Extend it when a package
// is added; a package that is not listed gets defaultRule. Whatever the
// table says, a file may import the package of its own directory (an
// external test package imports the package under test).
var importRules = map[string]importRule{
	"event": {},
	// The one JSON codec of events, alerts, late events and dead letters:
	// a leaf over event.
	"event/jsonev": {imports: []string{"event"}},
	"nfa":          {imports: []string{"event"}},
	"rules":        {imports: []string{"event", "event/jsonev", "nfa", "rules/internal/cond"}},
	// The expression compiler of the rule language, behind rules.
	"rules/internal/cond": {imports: []string{"event", "nfa"}},
	"runtime":             {imports: []string{"event", "event/jsonev", "runtime/state", "internal/failpoint"}},
	"runtime/state":       {imports: []string{"event", "internal/failpoint"}},
	"runtime/kafka":       {imports: []string{"event", "runtime", "runtime/state", "internal/failpoint"}},
	"enrich":              {imports: []string{"event"}},
	"cep": {imports: []string{
		"event", "event/jsonev", "nfa", "rules", "runtime", "runtime/state", "runtime/kafka", "enrich",
		"internal/failpoint", "internal/humanize",
	}},
	// Its crash tests read the records of a topic with their offsets
	// (where the copies of a duplicated alert sit), and kill fmt -w and
	// gen -o before their rename (internal/failpoint).
	"cmd/cepheus": {imports: []string{
		"cep", "event", "rules", "rulesets", "internal/gen", "internal/rulestest", "internal/metrics",
		"internal/control", "internal/humanize", "internal/failpoint",
	}, tests: []string{"runtime/kafka"}},
	// The gRPC control API of cepheus serve and its generated code: the
	// only importers of grpc.
	"internal/control":           {imports: []string{"cep", "event", "rules", "internal/control/cepheusv1"}},
	"internal/control/cepheusv1": {},
	// The Prometheus exporter of cepheus serve: the one importer of
	// client_golang.
	"internal/metrics":     {imports: []string{"cep", "event"}, tests: []string{"rules"}},
	"internal/gen":         {imports: []string{"event"}},
	"internal/conformance": {imports: []string{"event", "nfa", "rules", "cep", "runtime/state"}},
	// The runner of the tests written in ruleset files (cepheus test).
	"internal/rulestest": {imports: []string{"event", "nfa", "rules", "cep"}},
	// The runner's command (make conformance) is a thin main over the
	// runner package.
	"internal/conformance/cmd/conformance": {imports: []string{
		"event", "nfa", "rules", "cep", "internal/conformance",
	}},
	// The differential tester against Flink and its command (make
	// diff-flink) run cases through the conformance drivers.
	"internal/difftest": {imports: []string{"event", "nfa", "rules", "cep", "internal/conformance"}},
	"internal/difftest/cmd/diffflink": {imports: []string{
		"event", "nfa", "rules", "cep", "internal/conformance", "internal/difftest",
	}},
	"internal/lint": {tests: []string{"internal/failpoint"}},
	// The crash tests' kill points (CEPHEUS_FAILPOINT): a leaf the
	// engine's packages may call.
	"internal/failpoint": {},
	// Numbers formatted for people: a leaf of the engine and the command.
	"internal/humanize": {},
	"benchmarks":        {imports: []string{"cep", "event", "internal/gen", "rulesets"}},
	// The Cepheus side of make bench-compare: a thin main over benchmarks.
	"benchmarks/cmd/cepbench": {imports: []string{"benchmarks"}},
	// The alert latency of Kafka mode (benchmarks/stream.sh latency).
	"benchmarks/cmd/kafkalatency": {imports: []string{"cep"}},
	"rulesets":                    {tests: []string{"cep", "event", "rules", "internal/rulestest"}},
}

// defaultRule applies to packages of ours that importRules does not list.
var defaultRule = importRule{imports: []string{"event"}}

// heavyDeps maps a third-party module path to the only packages of ours
// (directories relative to the module root) that may import it or any
// package below it, tests included.
var heavyDeps = map[string][]string{
	"github.com/expr-lang/expr":           {"rules/internal/cond"},
	"github.com/cockroachdb/pebble":       {"runtime/state"},
	"github.com/redis/go-redis":           {"enrich"},
	"github.com/twmb/franz-go":            {"runtime/kafka"},
	"github.com/prometheus/client_golang": {"internal/metrics"},
	"google.golang.org/grpc":              {"internal/control", "internal/control/cepheusv1"},
}

// goFile is what the import checker needs to know about one Go file.
type goFile struct {
	name    string // slash-separated path relative to the module root, for messages
	dir     string // package directory relative to the module root; "" is the root
	test    bool   // a _test.go file
	imports []goImport
}

// goImport is one import spec.
type goImport struct {
	name string // the explicit local name, or "" when there is none
	path string
}

// checkFile returns the violations of the import rules by f, a file of the
// module modPath, each formatted as "file: package P may not import Q".
func checkFile(modPath string, f goFile) []string {
	pkg := f.dir
	if pkg == "" {
		pkg = modPath
	}
	rule, ok := importRules[f.dir]
	if !ok {
		rule = defaultRule
	}
	var out []string
	for _, imp := range f.imports {
		if imp.path == "runtime" && imp.name != "goruntime" {
			out = append(out, fmt.Sprintf(
				"%s: package %s must import the standard library runtime as goruntime", f.name, pkg))
			continue
		}
		if rel, ours := relToModule(modPath, imp.path); ours {
			if rel == f.dir ||
				slices.Contains(rule.imports, rel) ||
				f.test && slices.Contains(rule.tests, rel) {
				continue
			}
			out = append(out, fmt.Sprintf("%s: package %s may not import %s", f.name, pkg, displayPath(modPath, rel)))
			continue
		}
		for dep, allowed := range heavyDeps {
			if (imp.path == dep || strings.HasPrefix(imp.path, dep+"/")) && !slices.Contains(allowed, f.dir) {
				out = append(out, fmt.Sprintf("%s: package %s may not import %s", f.name, pkg, imp.path))
			}
		}
	}
	return out
}

// relToModule reports whether importPath belongs to the module modPath and,
// if so, returns its directory relative to the module root ("" for the
// root package).
func relToModule(modPath, importPath string) (rel string, ours bool) {
	if importPath == modPath {
		return "", true
	}
	rel, ours = strings.CutPrefix(importPath, modPath+"/")
	return rel, ours
}

// displayPath names a package of ours in messages: its directory relative
// to the module root, or the module path for the root package.
func displayPath(modPath, rel string) string {
	if rel == "" {
		return modPath
	}
	return rel
}

// moduleRoot returns the directory of the go.mod that governs the current
// working directory, and the module path it declares.
func moduleRoot(t *testing.T) (root, modPath string) {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil {
			modPath = modulePath(data)
			if modPath == "" {
				t.Fatalf("%s: no module directive", filepath.Join(dir, "go.mod"))
			}
			return dir, modPath
		}
		if !os.IsNotExist(err) {
			t.Fatal(err)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod found above the working directory")
		}
		dir = parent
	}
}

// modulePath returns the path of the module directive of a go.mod file, or
// "" when there is none.
func modulePath(gomod []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(gomod))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module")
		if !ok || rest == "" || (rest[0] != ' ' && rest[0] != '\t') {
			continue
		}
		p := strings.TrimSpace(rest)
		if i := strings.Index(p, "//"); i >= 0 {
			p = strings.TrimSpace(p[:i])
		}
		if unq, err := strconv.Unquote(p); err == nil {
			p = unq
		}
		return p
	}
	return ""
}

// goFiles returns the slash-separated paths, relative to root, of every .go
// file of the module rooted at root. It skips testdata, vendor and hidden
// directories, and nested modules.
func goFiles(t *testing.T, root string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p == root {
				return nil
			}
			name := d.Name()
			if name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
				return filepath.SkipDir // a nested module is not part of this one
			}
			return nil
		}
		if d.Type().IsRegular() && strings.HasSuffix(d.Name(), ".go") {
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no .go files found under %s", root)
	}
	return files
}

// TestImportRules enforces the import table of ARCHITECTURE.md section 2
// (importRules, heavyDeps) and the goruntime alias over every .go file of the
// module, reporting every violation.
func TestImportRules(t *testing.T) {
	root, modPath := moduleRoot(t)
	fset := token.NewFileSet()
	for _, name := range goFiles(t, root) {
		af, err := parser.ParseFile(fset, filepath.Join(root, filepath.FromSlash(name)), nil, parser.ImportsOnly)
		if err != nil {
			t.Errorf("%s: cannot read imports: %v", name, err)
			continue
		}
		f := goFile{
			name: name,
			dir:  path.Dir(name),
			test: strings.HasSuffix(name, "_test.go"),
		}
		if f.dir == "." {
			f.dir = ""
		}
		for _, spec := range af.Imports {
			p, err := strconv.Unquote(spec.Path.Value)
			if err != nil {
				t.Errorf("%s: bad import path %s", name, spec.Path.Value)
				continue
			}
			imp := goImport{path: p}
			if spec.Name != nil {
				imp.name = spec.Name.Name
			}
			f.imports = append(f.imports, imp)
		}
		for _, v := range checkFile(modPath, f) {
			t.Error(v)
		}
	}
}

// TestCheckFile proves that checkFile reports broken rules, and only those,
// on fake import lists.
func TestCheckFile(t *testing.T) {
	const mod = "example.com/m"
	ours := func(rel string) goImport { return goImport{path: mod + "/" + rel} }
	tests := []struct {
		name string
		file goFile
		want []string
	}{
		{
			name: "leaf imports only the standard library",
			file: goFile{name: "event/e.go", dir: "event", imports: []goImport{{path: "fmt"}}},
		},
		{
			name: "event imports nothing of ours",
			file: goFile{name: "event/e.go", dir: "event", imports: []goImport{ours("nfa")}},
			want: []string{"event/e.go: package event may not import nfa"},
		},
		{
			name: "allowed and forbidden imports in one file",
			file: goFile{name: "nfa/n.go", dir: "nfa", imports: []goImport{ours("event"), ours("rules"), ours("cep")}},
			want: []string{
				"nfa/n.go: package nfa may not import rules",
				"nfa/n.go: package nfa may not import cep",
			},
		},
		{
			name: "rules may import event and nfa",
			file: goFile{name: "rules/r.go", dir: "rules", imports: []goImport{ours("event"), ours("nfa")}},
		},
		{
			name: "runtime may not import nfa",
			file: goFile{name: "runtime/r.go", dir: "runtime", imports: []goImport{ours("nfa"), ours("runtime/state")}},
			want: []string{"runtime/r.go: package runtime may not import nfa"},
		},
		{
			name: "cep may not import cmd, benchmarks or conformance",
			file: goFile{name: "cep/c.go", dir: "cep", imports: []goImport{
				ours("runtime/kafka"), ours("cmd/cepheus"), ours("benchmarks"), ours("internal/conformance"),
			}},
			want: []string{
				"cep/c.go: package cep may not import cmd/cepheus",
				"cep/c.go: package cep may not import benchmarks",
				"cep/c.go: package cep may not import internal/conformance",
			},
		},
		{
			name: "an external test package imports the package under test",
			file: goFile{name: "cep/c_test.go", dir: "cep", test: true, imports: []goImport{ours("cep")}},
		},
		{
			name: "rulesets itself imports nothing of ours",
			file: goFile{name: "rulesets/r.go", dir: "rulesets", imports: []goImport{ours("cep")}},
			want: []string{"rulesets/r.go: package rulesets may not import cep"},
		},
		{
			name: "rulesets tests may import cep, event and rules",
			file: goFile{name: "rulesets/r_test.go", dir: "rulesets", test: true, imports: []goImport{
				ours("cep"), ours("event"), ours("rules"), ours("nfa"),
			}},
			want: []string{"rulesets/r_test.go: package rulesets may not import nfa"},
		},
		{
			name: "an unlisted package may import event only",
			file: goFile{name: "internal/x/x.go", dir: "internal/x", imports: []goImport{ours("event"), ours("nfa")}},
			want: []string{"internal/x/x.go: package internal/x may not import nfa"},
		},
		{
			name: "the root package is named by the module path",
			file: goFile{name: "m.go", dir: "", imports: []goImport{ours("cep")}},
			want: []string{"m.go: package example.com/m may not import cep"},
		},
		{
			name: "importing the root package",
			file: goFile{name: "nfa/n.go", dir: "nfa", imports: []goImport{{path: mod}}},
			want: []string{"nfa/n.go: package nfa may not import example.com/m"},
		},
		{
			name: "heavy dependencies in their own packages",
			file: goFile{name: "rules/internal/cond/c_test.go", dir: "rules/internal/cond", test: true, imports: []goImport{
				{path: "github.com/expr-lang/expr"}, {path: "github.com/expr-lang/expr/vm"},
			}},
		},
		{
			name: "heavy dependencies elsewhere, subpackages and major versions included",
			file: goFile{name: "cep/c.go", dir: "cep", imports: []goImport{
				{path: "github.com/expr-lang/expr/vm"},
				{path: "github.com/cockroachdb/pebble/v2/vfs"},
				{path: "github.com/redis/go-redis/v9"},
				{path: "github.com/twmb/franz-go/pkg/kgo"},
				{path: "github.com/expr-lang/exprx"}, // another module
			}},
			want: []string{
				"cep/c.go: package cep may not import github.com/expr-lang/expr/vm",
				"cep/c.go: package cep may not import github.com/cockroachdb/pebble/v2/vfs",
				"cep/c.go: package cep may not import github.com/redis/go-redis/v9",
				"cep/c.go: package cep may not import github.com/twmb/franz-go/pkg/kgo",
			},
		},
		{
			name: "pebble in runtime/state, franz-go in runtime/kafka",
			file: goFile{name: "runtime/kafka/k.go", dir: "runtime/kafka", imports: []goImport{
				{path: "github.com/twmb/franz-go/pkg/kfake"}, {path: "github.com/cockroachdb/pebble"},
			}},
			want: []string{"runtime/kafka/k.go: package runtime/kafka may not import github.com/cockroachdb/pebble"},
		},
		{
			name: "standard library runtime without the goruntime name",
			file: goFile{name: "nfa/n.go", dir: "nfa", imports: []goImport{{path: "runtime"}, {name: "rt", path: "runtime"}}},
			want: []string{
				"nfa/n.go: package nfa must import the standard library runtime as goruntime",
				"nfa/n.go: package nfa must import the standard library runtime as goruntime",
			},
		},
		{
			name: "standard library runtime as goruntime",
			file: goFile{name: "cep/c.go", dir: "cep", imports: []goImport{
				{name: "goruntime", path: "runtime"}, {path: "runtime/debug"}, ours("runtime"),
			}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := checkFile(mod, tt.file)
			if !slices.Equal(got, tt.want) {
				t.Errorf("checkFile:\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

// TestModulePath checks the reading of the module directive.
func TestModulePath(t *testing.T) {
	for in, want := range map[string]string{
		"module example.com/m\n\ngo 1.26\n":     "example.com/m",
		"// c\nmodule \"example.com/q\" // x\n": "example.com/q",
		"modules x\n":                           "",
		"go 1.26\n":                             "",
	} {
		if got := modulePath([]byte(in)); got != want {
			t.Errorf("modulePath(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestGofmt fails, listing the files, when a .go file of the module is not
// formatted as gofmt would format it.
func TestGofmt(t *testing.T) {
	root, _ := moduleRoot(t)
	var bad []string
	for _, name := range goFiles(t, root) {
		src, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(name)))
		if err != nil {
			t.Error(err)
			continue
		}
		formatted, err := format.Source(src)
		if err != nil {
			t.Errorf("%s: cannot format: %v", name, err)
			continue
		}
		if !bytes.Equal(src, formatted) {
			bad = append(bad, name)
		}
	}
	if len(bad) > 0 {
		t.Errorf("files not formatted with gofmt:\n\t%s", strings.Join(bad, "\n\t"))
	}
}
