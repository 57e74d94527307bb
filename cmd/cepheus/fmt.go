package main

import (
	"bytes"
	"context"
	"io"
	"os"

	"github.com/cepheus-cep/cepheus/rules"
)

var fmtCommand = &command{
	name:  "fmt",
	usage: "cepheus fmt [-w] [-d] [files or directories...]",
	help: `Fmt prints the canonical source of ruleset files: two-space indentation,
one item per line, rule items and quantifiers in their fixed order,
durations and names in canonical form, runs of blank lines collapsed, and
every comment kept. With no file, it formats standard input. A file with a
syntax error is not formatted; its errors are printed and the exit status
is 1.

With -w, fmt rewrites each file that is not canonical instead of printing
it. With -d, it prints a unified diff of the changes instead. With both,
it prints the diff and rewrites the file.
`,
}

func init() { fmtCommand.run = runFmt }

func runFmt(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet(fmtCommand, stderr)
	write := fs.Bool("w", false, "rewrite the files instead of printing them")
	diff := fs.Bool("d", false, "print a diff of the changes instead of the files")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		if *write {
			return usagef("fmt: -w needs files")
		}
		src, err := io.ReadAll(os.Stdin)
		if err != nil {
			return err
		}
		return formatOne("<stdin>", src, stdout, false, *diff)
	}
	files, err := rulesetFiles(fs.Args())
	if err != nil {
		return err
	}
	found := false
	for _, name := range files {
		src, err := os.ReadFile(name)
		if err != nil {
			return err
		}
		if err := formatOne(name, src, stdout, *write, *diff); err == errFound {
			found = true
		} else if err != nil {
			return err
		}
	}
	if found {
		return errFound
	}
	return nil
}

// formatOne formats one file's source and prints, diffs or writes it.
func formatOne(name string, src []byte, stdout io.Writer, write, diff bool) error {
	f, err := rules.ParseFile(name, src)
	if err != nil {
		if err := printErrors(stdout, err, true); err != nil {
			return err
		}
		return errFound
	}
	out := rules.Format(f)
	if diff && !bytes.Equal(src, out) {
		if _, err := io.WriteString(stdout, unifiedDiff(name, string(src), string(out))); err != nil {
			return err
		}
	}
	if write {
		if bytes.Equal(src, out) {
			return nil
		}
		st, err := os.Stat(name)
		if err != nil {
			return err
		}
		return os.WriteFile(name, out, st.Mode().Perm())
	}
	if !diff {
		_, err := stdout.Write(out)
		return err
	}
	return nil
}
