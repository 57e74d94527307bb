package rules

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// rewrite regenerates the expected outputs of the datadriven files:
// go test ./rules -run TestDataDriven -rewrite
var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of datadriven test files")

// ddCase is one case of a datadriven file, in the format of
// cockroachdb/datadriven: a command line, input lines, "----", the expected
// output, then a blank line. An output that holds blank lines is written
// between "----\n----" and "----\n----".
type ddCase struct {
	line     int // of the command
	cmd      string
	input    string
	expected string
}

// ddParse reads the cases of a datadriven file. Lines starting with '#'
// between cases are comments.
func ddParse(t *testing.T, path string) []ddCase {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	var cases []ddCase
	for i := 0; i < len(lines); {
		l := lines[i]
		if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") {
			i++
			continue
		}
		c := ddCase{line: i + 1, cmd: l}
		i++
		var in []string
		for i < len(lines) && lines[i] != "----" {
			in = append(in, lines[i])
			i++
		}
		if i == len(lines) {
			t.Fatalf("%s:%d: no ---- after the input", path, c.line)
		}
		i++
		c.input = strings.Join(in, "\n")
		var out []string
		if i < len(lines) && lines[i] == "----" {
			i++
			for i+1 < len(lines) && !(lines[i] == "----" && lines[i+1] == "----") {
				out = append(out, lines[i])
				i++
			}
			i += 2
		} else {
			for i < len(lines) && lines[i] != "" {
				out = append(out, lines[i])
				i++
			}
		}
		c.expected = strings.Join(out, "\n")
		cases = append(cases, c)
	}
	return cases
}

// ddFormat writes cases back, with their (new) outputs.
func ddFormat(cases []ddCase) string {
	var b strings.Builder
	for i, c := range cases {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(c.cmd + "\n")
		if c.input != "" {
			b.WriteString(c.input + "\n")
		}
		b.WriteString("----\n")
		out := strings.TrimRight(c.expected, "\n")
		if strings.Contains(out, "\n\n") {
			b.WriteString("----\n" + out + "\n----\n----\n")
		} else if out != "" {
			b.WriteString(out + "\n")
		}
	}
	return b.String()
}

// ddRun runs every case of every file matching glob through run, which
// returns the actual output.
func ddRun(t *testing.T, glob string, run func(t *testing.T, c *ddCase) string) {
	paths, err := filepath.Glob(glob)
	if err != nil || len(paths) == 0 {
		t.Fatalf("no test files %s (%v)", glob, err)
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			cases := ddParse(t, path)
			for i := range cases {
				c := &cases[i]
				got := strings.TrimRight(run(t, c), "\n")
				if *rewrite {
					c.expected = got
					continue
				}
				if got != c.expected {
					t.Errorf("%s:%d: %s\ninput:\n%s\ngot:\n%s\nwant:\n%s", path, c.line, c.cmd, c.input, got, c.expected)
				}
			}
			if *rewrite {
				if err := os.WriteFile(path, []byte(ddFormat(cases)), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestDataDriven runs testdata/*.txt:
//
//	lex      the tokens of the input, one per line
//	parse    the canonical source of the input, or its syntax errors
//	compile  a summary of the compiled ruleset, or every error
func TestDataDriven(t *testing.T) {
	ddRun(t, "testdata/*.txt", func(t *testing.T, c *ddCase) string {
		cmd := strings.Fields(c.cmd)[0]
		src := c.input + "\n"
		switch cmd {
		case "lex":
			return lexDump(src)
		case "parse":
			f, err := ParseFile("in.cep", []byte(src))
			if err != nil {
				return errorDump(err)
			}
			return string(Format(f))
		case "compile":
			rs, err := Load("in.cep", []byte(src))
			if err != nil {
				return errorDump(err)
			}
			return rulesetDump(rs)
		}
		t.Fatalf("line %d: unknown command %q", c.line, c.cmd)
		return ""
	})
}

func lexDump(src string) string {
	l := newRuleLexer(src)
	f := newSrcFile("in", src)
	var b strings.Builder
	for {
		tok := l.nextToken()
		pos := f.position(posAt(tok.pos))
		fmt.Fprintf(&b, "%d:%d %s %q\n", pos.Line, pos.Column, tok.kind, tok.val)
		if tok.kind == tokEOF {
			return b.String()
		}
	}
}

func errorDump(err error) string {
	var b strings.Builder
	if l, ok := err.(ErrorList); ok {
		_ = l.Print(&b, true)
		return b.String()
	}
	return "error: " + err.Error()
}

func rulesetDump(rs *Ruleset) string {
	var b strings.Builder
	fmt.Fprintf(&b, "ruleset %s, event time %s (slot %d)\n", rs.Name, rs.TimeField, rs.TimeSlot)
	decl := "inferred"
	if rs.Declared {
		decl = "declared"
	}
	fmt.Fprintf(&b, "schema (%s): %s\n", decl, rs.Schema)
	for _, r := range rs.Rules {
		fmt.Fprintf(&b, "rule %s: severity %s, key %q %v\n", r.Name, r.Severity, r.KeyFields, r.KeySlots)
		if r.Description != "" {
			fmt.Fprintf(&b, "  description %q\n", r.Description)
		}
		n := r.NFA
		fmt.Fprintf(&b, "  stages %q", n.Stages())
		for i := range n.Stages() {
			if n.IsNegative(i) {
				fmt.Fprintf(&b, " (%d negative)", i)
			}
		}
		fmt.Fprintf(&b, "\n  window %dms, skip %s\n", n.Window(), n.Skip())
		for _, e := range r.Emits {
			fmt.Fprintf(&b, "  emit %s\n", e.Name)
		}
	}
	for _, t := range rs.Tests {
		fmt.Fprintf(&b, "test %q: %d rules, %d events, %d expected matches\n", t.Name, len(t.Rules), len(t.Events), len(t.Expect))
		for _, e := range t.Events {
			fmt.Fprintf(&b, "  event %d @%s: %v\n", e.Seq, e.Time, e.Fields)
		}
		for _, x := range t.Expect {
			fmt.Fprintf(&b, "  expect %s key %v stages %v\n", x.Rule.Name, x.Key, x.Stages)
		}
	}
	return b.String()
}
