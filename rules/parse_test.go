package rules

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// astDiff compares two syntax trees, ignoring positions (fields of type
// Pos), unexported fields (the source they came from) and the difference
// between nil and empty slices. It returns "" when they are equal, else
// the path of the first difference.
func astDiff(a, b any) string {
	return valueDiff(reflect.ValueOf(a), reflect.ValueOf(b), "")
}

var posType = reflect.TypeFor[Pos]()

func valueDiff(a, b reflect.Value, path string) string {
	if a.IsValid() != b.IsValid() {
		return path + ": one side missing"
	}
	if !a.IsValid() {
		return ""
	}
	if a.Type() != b.Type() {
		return fmt.Sprintf("%s: type %v vs %v", path, a.Type(), b.Type())
	}
	switch a.Kind() {
	case reflect.Pointer, reflect.Interface:
		if a.IsNil() || b.IsNil() {
			if a.IsNil() != b.IsNil() {
				return path + ": nil vs non-nil"
			}
			return ""
		}
		return valueDiff(a.Elem(), b.Elem(), path)
	case reflect.Struct:
		for i := range a.NumField() {
			f := a.Type().Field(i)
			if !f.IsExported() || f.Type == posType {
				continue
			}
			if d := valueDiff(a.Field(i), b.Field(i), path+"."+f.Name); d != "" {
				return d
			}
		}
		return ""
	case reflect.Slice:
		if a.Len() != b.Len() {
			return fmt.Sprintf("%s: length %d vs %d", path, a.Len(), b.Len())
		}
		for i := range a.Len() {
			if d := valueDiff(a.Index(i), b.Index(i), fmt.Sprintf("%s[%d]", path, i)); d != "" {
				return d
			}
		}
		return ""
	}
	if !reflect.DeepEqual(a.Interface(), b.Interface()) {
		return fmt.Sprintf("%s: %#v vs %#v", path, a.Interface(), b.Interface())
	}
	return ""
}

// checkRoundTrip checks the printing invariants on src: if it parses,
// its canonical source parses to the same tree, and formatting is
// idempotent. Compiling never panics.
func checkRoundTrip(t *testing.T, src []byte) {
	f, err := ParseFile("in.cep", src)
	if err != nil {
		// The tree of a file with syntax errors is partial; compiling it
		// must not panic either.
		_, _ = Compile(f)
		return
	}
	out := Format(f)
	f2, err := ParseFile("in.cep", out)
	if err != nil {
		t.Fatalf("canonical source does not parse: %v\ninput:\n%s\ncanonical:\n%s", err, src, out)
	}
	if d := astDiff(f, f2); d != "" {
		t.Fatalf("re-parsed tree differs at %s\ninput:\n%s\ncanonical:\n%s", d, src, out)
	}
	if out2 := Format(f2); string(out2) != string(out) {
		t.Fatalf("Format is not idempotent\nfirst:\n%s\nsecond:\n%s", out, out2)
	}
	_, _ = Compile(f)
}

// FuzzParse: parsing never panics, printing then parsing gives the same
// tree, and compiling never panics. The seed corpus is in
// testdata/fuzz/FuzzParse (with the rule text of some conformance cases);
// every datadriven input, error file and example ruleset is added too.
func FuzzParse(f *testing.F) {
	for _, src := range seedSources(f) {
		f.Add([]byte(src))
	}
	f.Fuzz(func(t *testing.T, src []byte) { checkRoundTrip(t, src) })
}

// seedSources returns the inputs of the datadriven files and the error
// files. tb is a *testing.F or a *testing.T.
func seedSources(tb testing.TB) []string {
	var out []string
	paths, _ := filepath.Glob("testdata/*.txt")
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			tb.Fatal(err)
		}
		// Read through datadriven itself, from a string so that -rewrite
		// never writes the file: each case returns its expected output
		// unchanged.
		datadriven.RunTestFromStringAny(tb, string(b), func(_ testing.TB, d *datadriven.TestData) string {
			out = append(out, d.Input+"\n")
			return d.Expected
		})
	}
	files, _ := filepath.Glob("testdata/errors/*.cep")
	examples, _ := filepath.Glob("../rulesets/*.cep")
	files = append(files, examples...)
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err == nil {
			out = append(out, string(b))
		}
	}
	return out
}

// TestRoundTrip runs the printing invariants on every seed.
func TestRoundTrip(t *testing.T) {
	for _, src := range seedSources(t) {
		checkRoundTrip(t, []byte(src))
	}
}

// TestNodeStrings checks that nodes print their own canonical source.
func TestNodeStrings(t *testing.T) {
	src := `ruleset x
rule r {
  pattern {
    begin a oneOrMore within 5s greedy where x > 1 # c
      until y
    followedBy (
      begin b
    ) times 1..3
  }
  skip toFirst a orFail
}
test "t" {
  expect {
    r key "k" { a: [1, 2] }
  }
}
`
	f, err := ParseFile("x.cep", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	r := f.Decls[0].(*RuleDecl)
	stage := r.Pattern.Elems[0].(*StageNode)
	group := r.Pattern.Elems[1].(*GroupNode)
	for _, tt := range []struct {
		got  fmt.Stringer
		want string
	}{
		{stage, "begin a oneOrMore within 5s greedy where x > 1 # c\n  until y\n"},
		{group, "followedBy (\n  begin b\n) times 1..3\n"},
		{stage.Quant, "oneOrMore within 5s greedy"},
		{stage.Clauses[1], "until y"},
		{r.Skip, "skip toFirst a orFail"},
		{f.Decls[1].(*TestDecl).Expect.Matches[0], `r key "k" { a: [1, 2] }`},
		{Duration{Value: 36*60*60*1e9 + 1e6}, "1d12h1ms"},
		{Name{Value: "not c"}, `"not c"`},
		{f, src},
	} {
		if s := tt.got.String(); s != tt.want {
			t.Errorf("%T.String() =\n%s\nwant\n%s", tt.got, s, tt.want)
		}
	}
}
