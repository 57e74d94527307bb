// Command conformance runs the Flink CEP conformance cases (make
// conformance): it reads every *.json case file of -dir, runs the cases,
// writes what the engine produced to -out, judges that file and prints each
// failing case with a diff, then "conformance: N passed, M failed". It exits
// with status 1 when a case failed or the run could not be done.
//
// Flags:
//
//	-dir            directory of *.json case files (internal/conformance/testdata)
//	-out            results file, its directory created if needed
//	                ($CONFORMANCE_OUT, else build/conformance-results.json)
//	-known-failing  list of cases known to fail, only used to mark them in
//	                the report (<dir>/known-failing.txt when it exists)
//	-mode           text (default): each case's pattern is written as rule
//	                text and compiled by package rules; builder: built with
//	                the nfa Go builder
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"

	"github.com/cepheus-cep/cepheus/internal/conformance"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if !errors.Is(err, errFailed) {
			fmt.Fprintln(os.Stderr, "conformance:", err)
		}
		os.Exit(1)
	}
}

// errFailed is returned by run when the suite ran and some case failed; the
// report already says which.
var errFailed = errors.New("some cases failed")

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("conformance", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "internal/conformance/testdata", "directory of *.json case files")
	defaultOut := "build/conformance-results.json"
	if v := os.Getenv("CONFORMANCE_OUT"); v != "" {
		defaultOut = v
	}
	out := fs.String("out", defaultOut, "results file to write (default $CONFORMANCE_OUT when set)")
	knownPath := fs.String("known-failing", "", "list of cases known to fail, only to mark them in the report (default <dir>/known-failing.txt when it exists)")
	modeName := fs.String("mode", "text", "how patterns are compiled: text (rule language) or builder (nfa Go builder)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	mode, err := conformance.ParseMode(*modeName)
	if err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}

	known := conformance.KnownFailing{}
	path := *knownPath
	if path == "" {
		path = filepath.Join(*dir, "known-failing.txt")
		if _, err := os.Stat(path); err != nil {
			path = ""
		}
	}
	if path != "" {
		k, err := conformance.ReadKnownFailing(path)
		if err != nil {
			return err
		}
		known = k
	}

	cases, err := conformance.LoadDir(*dir)
	if err != nil {
		return err
	}
	results := conformance.ProduceMode(ctx, conformance.Inputs(cases), mode)
	if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
		return fmt.Errorf("create the directory of %s: %w", *out, err)
	}
	if err := results.WriteFile(*out); err != nil {
		return err
	}
	// Judge what the file says, not what is in memory: the file is the
	// contract with other checkers.
	written, err := conformance.ReadResults(*out)
	if err != nil {
		return err
	}
	report := conformance.JudgeAll(cases, written)
	if err := report.Write(stdout, known); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if _, failed := report.Counts(); failed > 0 {
		return errFailed
	}
	return nil
}
