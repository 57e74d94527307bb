// Command cepheus is the command-line tool of Cepheus. It works on ruleset
// files (*.cep, the rule language of docs/rules.md) and replays events
// through them:
//
//	cepheus check [files or directories]   report every error, with file:line:col and a caret
//	cepheus fmt [-w] [-d] [-l] [files]     print (or rewrite, diff or list) the canonical source
//	cepheus test [-run regexp] [-v] [files or directories]
//	                                       run the tests written inside ruleset files
//	cepheus backtest -rules R -events E    replay a file of events through a ruleset
//	cepheus explain -rules R [alerts]      say why alerts fired, condition by condition
//	cepheus run -rules R -events E -state S -alerts A
//	                                       run a ruleset live, checkpointed, exactly once
//	cepheus serve [the flags of run]       run, with metrics, a control API and hot-loading
//	cepheus status                         ask a running serve what it does
//	cepheus rules validate|deploy|list|rollback|promote [FILE]
//	                                       manage the ruleset versions of a running serve
//	cepheus gen [-o file]                  write synthetic card events with labelled fraud
//	cepheus enrich load ...                fill Redis with a lookup file
//	cepheus produce -topic T -events E     write a file of JSON lines to a Kafka topic
//	cepheus consume -topic T               print a Kafka topic's records (read committed)
//	cepheus version                        print the version (also -version, --version)
//	cepheus help [command]                 explain a command
//
// A directory stands for the *.cep files directly in it. Exit status: 0
// when all is well, 1 when errors were found (or a test failed), 2 for a
// usage error, 130 after Ctrl-C, 143 after SIGTERM and 129 after SIGHUP, as a shell reports
// a process the signal killed (but run and serve, which stop at a final
// checkpoint and exit 0, and status and rules, whose call it cancels: 1),
// 141 when standard output was closed (cepheus backtest ... | head -1: the
// summary is printed all the same; gen and consume, whose output is all
// they make, end without a word).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/cepheus-cep/cepheus/internal/failpoint"
	"github.com/cepheus-cep/cepheus/rules"
)

func main() {
	// A crash test's CEPHEUS_FAILPOINT is read now: a spec that names no
	// point is refused before anything runs, whatever the command.
	failpoint.Armed()
	ctx, cancel := context.WithCancelCause(context.Background())
	stops := make(chan os.Signal, 1)
	stopOn := []os.Signal{os.Interrupt, syscall.SIGTERM}
	if !signal.Ignored(syscall.SIGHUP) {
		// SIGHUP (the terminal of a run in the foreground closed) stops
		// as SIGTERM does; it ended the process at once, with no final
		// checkpoint and no summary. Under nohup it stays ignored (Notify
		// would make it heard again).
		stopOn = append(stopOn, syscall.SIGHUP)
	}
	signal.Notify(stops, stopOn...)
	go func() {
		// The first Ctrl-C, SIGTERM or SIGHUP cancels ctx, the signal its cause
		// (a run then stops with a final checkpoint, a backtest ends with
		// its summary and the signal's exit status); one more after
		// stopGrace kills, as without the handler. Those within it are
		// the same stop: GNU timeout, as a shell ending a job, signals
		// the process and then its process group, and the second signal
		// killed one run in six midway through its final checkpoint
		// (exit 143, a stray chk-N.tmp).
		sig := <-stops
		cancel(stopSignal{sig.(syscall.Signal)})
		time.Sleep(stopGrace)
		signal.Stop(stops)
	}()
	// A write to a closed pipe (cepheus backtest ... | head -1) fails with
	// EPIPE instead of killing the process, so the run ends as on any
	// output error: with its summary (exit status 141, below).
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	signal.Stop(stops)
	os.Exit(exitCode(err, os.Stderr))
}

// stopSignal is the cause of the context a stop signal (SIGINT, SIGTERM,
// SIGHUP)
// cancelled.
type stopSignal struct{ sig syscall.Signal }

func (s stopSignal) Error() string { return s.sig.String() + " signal received" }

// stopCause returns " on SIGTERM" (SIGINT, SIGHUP) when a stop signal
// cancelled ctx, "" otherwise: which signal stopped a run, in its last
// line (a closed terminal's SIGHUP ended it without a word).
func stopCause(ctx context.Context) string {
	var s stopSignal
	if !errors.As(context.Cause(ctx), &s) {
		return ""
	}
	switch s.sig {
	case syscall.SIGINT:
		return " on SIGINT"
	case syscall.SIGTERM:
		return " on SIGTERM"
	case syscall.SIGHUP:
		return " on SIGHUP"
	}
	return " on " + s.sig.String()
}

// stopGrace is how long after the first stop signal the next ones are
// taken for the same stop, not for a kill.
const stopGrace = time.Second

// errFound is returned when a command found errors (or failing tests) and
// has already reported them: exit status 1.
var errFound = errors.New("errors found")

// usageError is a command line the tool does not understand: exit status
// 2, with the message and a pointer to the help (of cmd, when set).
type usageError struct{ cmd, msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// exitCode maps the error of run to an exit status, printing what was not
// printed yet.
func exitCode(err error, stderr io.Writer) int {
	var ue *usageError
	var ie *errInterrupted
	var le *loggedError
	switch {
	case err == nil, errors.Is(err, errHelp):
		return 0
	case errors.As(err, &le):
		return le.code
	case errors.Is(err, errFound):
		return 1
	case errors.As(err, &ie):
		fmt.Fprintf(stderr, "cepheus: %v\n", err)
		return 128 + int(ie.sig)
	case errors.Is(err, errStreamClosed):
		return 141
	case closedStdout(err):
		fmt.Fprintf(stderr, "cepheus: %v (the output was closed)\n", err)
		return 141
	case errors.As(err, &ue):
		help := "cepheus help"
		if ue.cmd != "" {
			help += " " + ue.cmd
		}
		fmt.Fprintf(stderr, "cepheus: %s\nRun '%s' for usage.\n", ue.msg, help)
		return 2
	}
	fmt.Fprintf(stderr, "cepheus: %v\n", err)
	return 1
}

// closedStdout tells whether err is a write to standard output after its
// reader went away: exit status 141, what a shell reports for a process
// SIGPIPE killed, so a pipeline sees what it would of any other tool.
func closedStdout(err error) bool {
	var pe *fs.PathError
	return errors.As(err, &pe) && pe.Path == os.Stdout.Name() && errors.Is(pe.Err, syscall.EPIPE)
}

// errStreamClosed is the end of a command whose standard output is all it
// makes (consume, gen) when that output's reader went away (| head): exit
// status 141 without a word, as other tools end there.
var errStreamClosed = errors.New("the output was closed")

// streams are the commands whose standard output is what they make, a
// stream of records a reader may stop reading (| head).
var streams = map[string]bool{"consume": true, "gen": true}

// command is a subcommand.
type command struct {
	name  string
	usage string // the synopsis line
	short string // what it does, in a line of the usage
	// subs are its subcommands (cepheus rules deploy), which cepheus
	// help COMMAND SUB takes; none for most.
	subs []string
	help string // what it does, for -h and help
	run  func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

func commands() []*command {
	return []*command{checkCommand, fmtCommand, testCommand, backtestCommand, explainCommand, runCommand, serveCommand, statusCommand, rulesCommand, genCommand,
		enrichCommand, produceCommand, consumeCommand, versionCommand}
}

func lookup(name string) *command {
	for _, c := range commands() {
		if c.name == name {
			return c
		}
	}
	return nil
}

// unknownCommand is the usage error of a command that does not exist,
// naming the closest one when the name looks like a slip.
func unknownCommand(name string) error {
	var names []string
	for _, c := range commands() {
		names = append(names, c.name)
	}
	return usagef("unknown command %q%s", name, rules.Suggest(name, names))
}

// run runs the command line args (without the program name).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		_ = printUsage(stderr) // (its error is the usage error's to tell)
		return &usageError{msg: "no command given"}
	}
	name, rest := args[0], args[1:]
	switch name {
	case "help", "-h", "-help", "--help":
		return runHelp(ctx, rest, stdout, stderr)
	case "-version", "--version":
		return versionCommand.run(ctx, rest, stdout, stderr)
	}
	c := lookup(name)
	if c == nil {
		return unknownCommand(name)
	}
	err := c.run(ctx, rest, stdout, stderr)
	if streams[name] && closedStdout(err) {
		return errStreamClosed
	}
	return err
}

// printUsage writes the usage to w and returns the error of the write.
func printUsage(w io.Writer) error {
	var b strings.Builder
	b.WriteString("Cepheus is a complex event processing engine with Flink CEP semantics.\n\nUsage:\n\n")
	for _, c := range commands() {
		fmt.Fprintf(&b, "\t%s\n\t    %s\n", c.usage, c.short)
	}
	b.WriteString("\tcepheus help [command]\n\t    the help of a command: what it does and its flags\n\n")
	b.WriteString("Ruleset files (*.cep) are described in docs/rules.md. A directory stands for\n")
	b.WriteString("the *.cep files directly in it. Exit status: 0 when all is well, 1 when errors\n")
	b.WriteString("were found or a test failed, 2 for a usage error, 130 after Ctrl-C, 143 after\n")
	b.WriteString("SIGTERM and 129 after SIGHUP (but run and serve, which stop at a final\n")
	b.WriteString("checkpoint and exit 0, and status and rules, whose call it cancels: 1), 141\n")
	b.WriteString("when standard output was closed (| head).\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// runHelp prints the usage, or the help of one command: what the
// command's -h prints (its flags included), to stdout. Words after the
// command (a subcommand: help rules deploy) name a part of that help.
func runHelp(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	switch len(args) {
	case 0:
		return printUsage(stdout)
	case 1:
		switch args[0] {
		case "help", "-h", "-help", "--help":
			// help is a command of the usage too (cepheus help
			// [command]): its help is the usage.
			return printUsage(stdout)
		}
	}
	// cepheus help rules deploy: the help of rules, which describes its
	// subcommands and their flags.
	c := lookup(args[0])
	if c == nil {
		return unknownCommand(args[0])
	}
	if len(args) > 1 {
		switch {
		case len(c.subs) == 0:
			return usagef("%s has no subcommands: cepheus help %s", c.name, c.name)
		case len(args) > 2 || !slices.Contains(c.subs, args[1]):
			return usagef("%s has no subcommand %q: %s", c.name, strings.Join(args[1:], " "), strings.Join(c.subs, ", "))
		}
	}
	return c.run(ctx, []string{"-h"}, stdout, stderr)
}

var versionCommand = &command{
	name:  "version",
	short: "print the version of this build",
	usage: "cepheus version",
	help: `Version prints the version of cepheus: the module version and, when built
from a repository, the commit. A binary built without module or VCS
information (go build -buildvcs=false) prints the version make build
stamped into it, else (devel). cepheus -version and --version do the same.
`,
}

func init() { versionCommand.run = runVersion }

func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet(versionCommand, stdout)
	if err := fs.parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fs.usagef("takes no arguments")
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		info = nil
	}
	_, err := fmt.Fprintln(stdout, "cepheus", versionString(version, info))
	return err
}

// version is the version the Makefile stamps into the binary (go build
// -ldflags "-X main.version=..."); empty in a plain go build.
var version string

// versionString returns the version to print: the module version of info
// (else the stamped version, else (devel)), then its VCS revision if known.
// info is nil when the binary has no build information.
func versionString(stamped string, info *debug.BuildInfo) string {
	v, rev, modified := "", "", ""
	if info != nil {
		v = info.Main.Version
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					modified = "+dirty"
				}
			}
		}
	}
	if v == "" || v == "(devel)" {
		// No module version: a build from a work tree without VCS
		// information (go build -buildvcs=false, or outside a repository).
		v = "(devel)"
		if stamped != "" {
			v = stamped
		}
	}
	if rev != "" {
		v += " " + rev + modified
	}
	return v
}
