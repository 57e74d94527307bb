package rules

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestDataDriven runs testdata/*.txt:
//
//	lex      the tokens of the input, one per line
//	parse    the canonical source of the input, or its syntax errors
//	compile  a summary of the compiled ruleset, or every error
//
// The files are in the format of github.com/cockroachdb/datadriven;
// go test ./rules -run TestDataDriven -rewrite regenerates their expected
// outputs. testdata holds other files too (errors/, fuzz/), so the files
// are globbed rather than walked.
func TestDataDriven(t *testing.T) {
	paths, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no test files testdata/*.txt (%v)", err)
	}
	for _, path := range paths {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) {
			datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
				// datadriven ends the output with one newline; the
				// old harness trimmed any more, and so do we.
				return strings.TrimRight(runCommand(t, d), "\n")
			})
		})
	}
}

// runCommand runs one case of TestDataDriven and returns its output.
func runCommand(t *testing.T, d *datadriven.TestData) string {
	// datadriven trims the input; the sources end with a newline.
	src := d.Input + "\n"
	switch d.Cmd {
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
	d.Fatalf(t, "unknown command %q", d.Cmd)
	return ""
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
