package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	"github.com/cepheus-cep/cepheus/internal/rulestest"
	"github.com/cepheus-cep/cepheus/rules"
)

var testCommand = &command{
	name:  "test",
	short: "run the tests written in ruleset files",
	usage: "cepheus test [-run regexp] [-v] files or directories...",
	help: `Test runs the tests written inside ruleset files (test "name" { ... }
blocks; see docs/rules.md). Each test's events go through the keyed CEP
operator, one per rule, in event time, followed by a final watermark that
releases everything (a backtest over a bounded input). The matches that
come out are compared with the test's expect block as a multiset of
(rule, key, events of each stage, and the emit values an expected match
gives); on a mismatch, the missing and unexpected matches are printed in
the notation of an expect line, each missing one with a why: line (the
first reason found that the rule cannot produce it: an event that fails
its stage's condition, with the values it read; events of other keys or
out of order; the window; an event that next, followedBy, a loop or a
negation cannot skip; see docs/rules.md, "Why a match is missing"), then
what was produced and the number of conditions that failed at run time
(each counted as false), per rule.

A file that does not compile is reported as check would report it. Test
prints a line per file (ok or FAIL, with the number of tests; ? when the
file has no test, or none that -run matches) and exits with status 1 when
a file does not compile or a test fails.
`,
}

func init() { testCommand.run = runTest }

func runTest(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet(testCommand, stdout)
	runRx := fs.String("run", "", "run only the tests whose name matches this regular expression")
	verbose := fs.Bool("v", false, "print every test, also those that pass")
	if err := fs.parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return fs.usagef("no files given")
	}
	var filter *regexp.Regexp
	if *runRx != "" {
		rx, err := regexp.Compile(*runRx)
		if err != nil {
			return fs.usagef("-run: %v", err)
		}
		filter = rx
	}
	files, err := rulesetFiles(fs.Args())
	if err != nil {
		return err
	}
	found := false
	for _, name := range files {
		if ctx.Err() != nil {
			return interrupted(ctx, "test interrupted before %s", name)
		}
		ok, err := testFile(ctx, name, filter, *verbose, stdout)
		if err != nil {
			return err
		}
		found = found || !ok
	}
	if found {
		return errFound
	}
	return nil
}

// testFile runs the tests of one file and reports whether all passed. A
// cancelled ctx stops it before its next test, with what it found so far.
func testFile(ctx context.Context, name string, filter *regexp.Regexp, verbose bool, stdout io.Writer) (bool, error) {
	src, err := os.ReadFile(name)
	if err != nil {
		return false, err
	}
	rs, err := rules.Load(name, src)
	if err != nil {
		if err := printErrors(stdout, err, true); err != nil {
			return false, err
		}
		fmt.Fprintf(stdout, "FAIL\t%s\t(does not compile)\n", name)
		return false, nil
	}
	if err := rs.Warnings.Print(stdout, true); err != nil {
		return false, err
	}
	var b strings.Builder
	ran, failed := 0, 0
	for _, t := range rs.Tests {
		if filter != nil && !filter.MatchString(t.Name) {
			continue
		}
		if ctx.Err() != nil {
			io.WriteString(stdout, b.String())
			return false, interrupted(ctx, "test interrupted in %s after %s", name, plural(int64(ran), "test", "tests"))
		}
		ran++
		r := rulestest.Run(t)
		if r.Pass() {
			switch {
			case len(r.CondErrors) > 0:
				// Passed, perhaps only because a condition failed on
				// its events (the messy-data trial's expect none over an
				// amount sent as a string): said even without -v.
				fmt.Fprintf(&b, "--- PASS: %s: %q, with condition errors (each counted as false):\n", t.Pos, t.Name)
				for _, e := range r.CondErrors {
					b.WriteString("    " + e + "\n")
				}
			case verbose:
				fmt.Fprintf(&b, "--- PASS: %s: %q\n", t.Pos, t.Name)
			}
			continue
		}
		failed++
		fmt.Fprintf(&b, "--- FAIL: %s: %q\n", t.Pos, t.Name)
		for line := range strings.Lines(r.Diff()) {
			if rest, ok := strings.CutPrefix(line, "run failed: "); ok {
				line = "run failed: " + stripPrefixes(rest)
			}
			b.WriteString("    " + line)
		}
	}
	switch {
	case ran == 0:
		fmt.Fprintf(&b, "?\t%s\t[no tests to run]\n", name)
	case failed > 0:
		fmt.Fprintf(&b, "FAIL\t%s\t%d of %s failed\n", name, failed, plural(int64(ran), "test", "tests"))
	default:
		fmt.Fprintf(&b, "ok\t%s\t%s\n", name, plural(int64(ran), "test", "tests"))
	}
	_, err = io.WriteString(stdout, b.String())
	return failed == 0, err
}
