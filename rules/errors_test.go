package rules

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// errorMarker is `# ERROR "regexp"` at the end of a line of a file in
// testdata/errors: an error is expected on that line, with a message that
// matches the regexp (in which \" stands for ").
var errorMarker = regexp.MustCompile(`# ERROR "((?:[^"\\]|\\.)*)"`)

// TestErrorFiles loads every testdata/errors/*.cep file and checks that the
// errors reported are exactly those its markers expect: one per marked
// line, matching the marker.
func TestErrorFiles(t *testing.T) {
	paths, err := filepath.Glob("testdata/errors/*.cep")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no error files (%v)", err)
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			src, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			want := map[int]*regexp.Regexp{}
			for i, line := range strings.Split(string(src), "\n") {
				if m := errorMarker.FindStringSubmatch(line); m != nil {
					want[i+1] = regexp.MustCompile(strings.ReplaceAll(m[1], `\"`, `"`))
				}
			}
			_, err = Load(path, src)
			var list ErrorList
			if err != nil && !errors.As(err, &list) {
				t.Fatalf("Load: %v is not an ErrorList", err)
			}
			got := map[int]bool{}
			for _, e := range list {
				if e.Pos.Filename != path {
					t.Errorf("error %v: file name %q, want %q", e, e.Pos.Filename, path)
				}
				got[e.Pos.Line] = true
				rx, ok := want[e.Pos.Line]
				switch {
				case !ok:
					t.Errorf("unexpected error %v", e)
				case !rx.MatchString(e.Msg):
					t.Errorf("error %v does not match %q", e, rx)
				}
			}
			for line, rx := range want {
				if !got[line] {
					t.Errorf("%s:%d: no error, want one matching %q", path, line, rx)
				}
			}
		})
	}
}

// TestErrorCap checks that a file reports at most MaxErrors errors, plus a
// "too many errors" entry, and that a second error on a line is dropped.
func TestErrorCap(t *testing.T) {
	var b strings.Builder
	b.WriteString("ruleset many\nevent time ts\n")
	for i := range 30 {
		fmt.Fprintf(&b, "bogus%d line with two faults }\n", i)
	}
	_, err := Load("many.cep", []byte(b.String()))
	var list ErrorList
	if !errors.As(err, &list) {
		t.Fatalf("Load: %v, want an ErrorList", err)
	}
	if len(list) != MaxErrors+1 {
		t.Fatalf("%d errors, want %d:\n%v", len(list), MaxErrors+1, list)
	}
	for i, e := range list[:MaxErrors] {
		if e.Pos.Line != i+3 {
			t.Errorf("error %d on line %d, want %d (one per line)", i, e.Pos.Line, i+3)
		}
	}
	if last := list[MaxErrors]; last.Msg != "too many errors" {
		t.Errorf("last error %v, want too many errors", last)
	}
	if got := list.Error(); !strings.HasPrefix(got, "many.cep:3:1: ") || !strings.HasSuffix(got, "(and 20 more errors)") {
		t.Errorf("Error() = %q", got)
	}
}

// TestErrorSnippet checks the caret line, with tabs and wide characters
// before the fault.
func TestErrorSnippet(t *testing.T) {
	src := "ruleset x\nevent time ts\nrule r {\n\tdescription \"ünï\" bad\n}\n"
	_, err := Load("s.cep", []byte(src))
	var list ErrorList
	if !errors.As(err, &list) || len(list) != 1 {
		t.Fatalf("Load: %v, want one error", err)
	}
	e := list[0]
	if got, want := e.Error(), `s.cep:4:20: unexpected "bad" at the end of the line`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if got, want := e.Snippet(), "\tdescription \"ünï\" bad\n\t                  ^"; got != want {
		t.Errorf("Snippet() =\n%s\nwant\n%s", got, want)
	}
	var b strings.Builder
	if err := list.Print(&b, true); err != nil {
		t.Fatal(err)
	}
	if want := "s.cep:4:20: unexpected \"bad\" at the end of the line\n    \tdescription \"ünï\" bad\n    \t                  ^\n"; b.String() != want {
		t.Errorf("Print =\n%q\nwant\n%q", b.String(), want)
	}
}
