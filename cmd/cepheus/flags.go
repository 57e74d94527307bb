package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
)

// errHelp is returned after -h printed a command's help: exit status 0.
var errHelp = flag.ErrHelp

// newFlagSet returns the flag set of c; -h prints c's help and flags.
func newFlagSet(c *command, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: %s\n\n%s", c.usage, c.help)
		hasFlags := false
		fs.VisitAll(func(*flag.Flag) { hasFlags = true })
		if hasFlags {
			fmt.Fprintf(fs.Output(), "\nFlags:\n")
			fs.PrintDefaults()
		}
	}
	return fs
}

// parseFlags parses args; -h is not an error (the help was printed), a bad
// flag is a usage error.
func parseFlags(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		return errHelp
	}
	return usagef("%s: %v", fs.Name(), err)
}

// rulesetFiles expands the arguments: a file stands for itself, a
// directory for the *.cep files directly in it (in name order).
func rulesetFiles(args []string) ([]string, error) {
	var out []string
	for _, a := range args {
		st, err := os.Stat(a)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			out = append(out, a)
			continue
		}
		m, err := filepath.Glob(filepath.Join(a, "*.cep"))
		if err != nil {
			return nil, err
		}
		sort.Strings(m)
		if len(m) == 0 {
			return nil, fmt.Errorf("%s: no *.cep files", a)
		}
		out = append(out, m...)
	}
	return out, nil
}
