package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/cepheus-cep/cepheus/rules"
)

var checkCommand = &command{
	name:  "check",
	short: "report the errors and warnings of ruleset files, at file:line:col",
	usage: "cepheus check [-q] [-strict] files, directories or -...",
	help: `Check parses and compiles ruleset files, as the engine would before running
them, and reports every error found: syntax errors, names that are not
defined or defined twice, fields missing from a declared schema, errors
inside conditions and emit expressions, what Flink's Pattern API rejects,
and malformed tests (beside a syntax error, the other rules are still
checked: their errors come in the same run; the tests are then not).
Each error is printed as file:line:col: message, then
the source line with a caret under the fault. At most 20 errors are
reported per file; a second error on the same line is dropped. A directory
stands for the *.cep files directly in it, and - for standard input (named
<stdin> in the errors: for an editor that checks its unsaved buffer).

It also reports, as file:line:col: warning: message, what is legal (Flink
accepts it) but surely not meant: a stage reference that always reads
nothing, such as a.amount in the condition of a stage a that takes one
event (a condition tests the event before its stage takes it: the event
under test's field is amount alone), or a field of a later stage or of a
negated one; an emit's use of an optional stage's field, which fails
when the stage took no event; a within ... of previous or a loop gap
that bounds nothing; a timeout block that can never raise an alert; a
pattern without a window whose partial matches can wait for ever (its
state grows without bound); a loop taking every combination with no
largest count; a condition that can never hold (amount > 1000 &&
amount < 100); a rule without key whose conditions compare the events of
a match (its matches may join different cards' events); greedy on the
pattern's last stage, which changes nothing; a test event's
numeric time that reads as epoch seconds; and a lookup timeout over 10s.
docs/rules.md ("Warnings") lists them.
Warnings are printed only for files without errors, at most 20 per file
as errors are (then "warning: too many warnings (N more)").

The errors and warnings go to stderr. Check prints nothing when every file
is clean, and exits with status 0 (warnings too, unless -strict); with
status 1 when it found an error (or, with -strict, a warning: for the CI
of a repository of rules).
`,
}

func init() { checkCommand.run = runCheck }

func runCheck(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet(checkCommand, stdout)
	quiet := fs.Bool("q", false, "print only file:line:col: message, without the source line and caret")
	strict := fs.Bool("strict", false, "exit 1 on a warning too")
	if err := fs.parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return fs.usagef("no files given")
	}
	files, err := rulesetSources(fs.Args())
	if err != nil {
		return err
	}
	found := false
	for _, arg := range files {
		name, src, err := readSource(ctx, "check", arg)
		if err != nil {
			return err
		}
		rs, err := rules.Load(name, src)
		if err != nil {
			found = true
			if err := printErrors(stderr, err, !*quiet); err != nil {
				return err
			}
			continue
		}
		if err := rs.Warnings.Print(stderr, !*quiet); err != nil {
			return err
		}
		found = found || *strict && len(rs.Warnings) > 0
	}
	if found {
		return errFound
	}
	return nil
}

// printErrors prints the errors of the rules package, with their snippets.
func printErrors(w io.Writer, err error, snippets bool) error {
	var list rules.ErrorList
	if errors.As(err, &list) {
		return list.Print(w, snippets)
	}
	_, werr := fmt.Fprintln(w, err)
	return werr
}
