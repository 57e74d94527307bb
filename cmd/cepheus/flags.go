package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/cepheus-cep/cepheus/rules"
)

// badValue matches the flag package's error of a value a flag refused
// (its quoted value, the flag's name), which says only "parse error".
var badValue = regexp.MustCompile(`^invalid value ("(?:[^"\\]|\\.)*") for flag -([^:]+): parse error$`)

// errHelp is returned after -h printed a command's help: exit status 0.
var errHelp = flag.ErrHelp

// flagSet is the flag set of a command. Unlike a bare flag.FlagSet it takes
// flags anywhere on the command line, also after the files (check f.cep
// -q); "--" ends the flags. -h prints the command's help to stdout.
type flagSet struct {
	*flag.FlagSet
	cmd    *command
	stdout io.Writer
	args   []string // the arguments that are not flags, in order
}

// newFlagSet returns the flag set of c; its help goes to stdout.
func newFlagSet(c *command, stdout io.Writer) *flagSet {
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	// The flag package prints its errors and the usage on every error;
	// parse reports them itself, once.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return &flagSet{FlagSet: fs, cmd: c, stdout: stdout}
}

// parse parses args. -h prints the help and returns errHelp (exit status
// 0), or the error of writing it; a bad flag is a usage error of the
// command.
func (fs *flagSet) parse(args []string) error {
	for {
		err := fs.FlagSet.Parse(args)
		switch {
		case errors.Is(err, flag.ErrHelp):
			if err := fs.printHelp(); err != nil {
				return err
			}
			return errHelp
		case err != nil:
			msg := err.Error()
			if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
				msg += closestFlag(fs.FlagSet, name, "-")
			}
			if m := badValue.FindStringSubmatch(msg); m != nil {
				if f := fs.Lookup(m[2]); f != nil {
					v, _ := strconv.Unquote(m[1])
					msg += wantOf(f, v)
				}
			}
			return fs.usagef("%s", msg)
		}
		rest := fs.FlagSet.Args()
		if used := args[:len(args)-len(rest)]; len(used) > 0 && used[len(used)-1] == "--" {
			fs.args = append(fs.args, rest...)
			return nil
		}
		if len(rest) == 0 {
			return nil
		}
		fs.args = append(fs.args, rest[0])
		args = rest[1:]
	}
}

// closestFlag returns " (did you mean PREFIXf?)" for the flag f of fs
// (but those of skip) closest to name, a misspelt flag or setting, or ""
// when none is close enough to be a slip (-event for -events, -rule for
// -rules) or name is no short form of one (-evts for -events). The rule
// language's errors choose their suggestions alike (rules.Closest).
func closestFlag(fs *flag.FlagSet, name, prefix string, skip ...string) string {
	var names []string
	fs.VisitAll(func(f *flag.Flag) {
		if !slices.Contains(skip, f.Name) {
			names = append(names, f.Name)
		}
	})
	best := rules.Closest(name, names)
	if best == "" {
		return ""
	}
	return " (did you mean " + prefix + best + "?)"
}

// Args returns the arguments that are not flags.
func (fs *flagSet) Args() []string { return fs.args }

// NArg returns the number of arguments that are not flags.
func (fs *flagSet) NArg() int { return len(fs.args) }

// Arg returns the i'th argument that is not a flag, or "" when there is
// none.
func (fs *flagSet) Arg(i int) string {
	if i < 0 || i >= len(fs.args) {
		return ""
	}
	return fs.args[i]
}

// usagef returns a usage error of the command.
func (fs *flagSet) usagef(format string, args ...any) error {
	return &usageError{cmd: fs.cmd.name, msg: fs.cmd.name + ": " + fmt.Sprintf(format, args...)}
}

// printHelp prints the command's synopsis, help and flags to stdout, and
// returns the error of writing them (a full disk: cepheus help > FILE
// must not succeed with a torn file). The help ends with a line end
// whether or not its text does, so that a blank line comes before the
// flags.
func (fs *flagSet) printHelp() error {
	var b strings.Builder
	fmt.Fprintf(&b, "usage: %s\n\n%s\n", fs.cmd.usage, strings.TrimRight(fs.cmd.help, "\n"))
	hasFlags := false
	fs.VisitAll(func(*flag.Flag) { hasFlags = true })
	if hasFlags {
		b.WriteString("\nFlags:\n")
		fs.SetOutput(&b)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
	_, err := io.WriteString(fs.stdout, b.String())
	return err
}

// isSet reports whether the flag name was given on the command line.
func (fs *flagSet) isSet(name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// optionalFloat is a float flag that may stay unset; its help then shows
// no default (the flag's usage says what unset means).
type optionalFloat struct {
	v   float64
	set bool
}

func (f *optionalFloat) String() string {
	if f == nil || !f.set {
		return ""
	}
	return strconv.FormatFloat(f.v, 'g', -1, 64)
}

func (f *optionalFloat) Set(s string) error {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return errors.New("not a number")
	}
	f.v, f.set = v, true
	return nil
}

// rulesetFiles expands the arguments: a file stands for itself, a
// directory for the *.cep files directly in it (in name order).
func rulesetFiles(args []string) ([]string, error) {
	return expandRulesets(args, false)
}

// stdinName is the name a ruleset read from standard input goes by in
// errors and listings.
const stdinName = "<stdin>"

// rulesetSources is rulesetFiles for the commands that also read a
// ruleset from standard input: an argument "-" stands for it (once).
func rulesetSources(args []string) ([]string, error) {
	return expandRulesets(args, true)
}

// readSource reads the ruleset file name, or standard input when name is
// "-" (until ctx is done: Ctrl-C stops a command waiting for it); it
// returns the name to print with it. cmd names the command in the error
// of an interrupted read.
func readSource(ctx context.Context, cmd, name string) (string, []byte, error) {
	if name != "-" {
		src, err := os.ReadFile(name)
		return name, src, err
	}
	src, err := io.ReadAll(stdinReader(ctx))
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return stdinName, nil, interrupted(ctx, "%s interrupted while reading standard input", cmd)
	}
	return stdinName, src, err
}

func expandRulesets(args []string, stdin bool) ([]string, error) {
	var out []string
	read := false
	for _, a := range args {
		if a == "-" && stdin {
			if read {
				return nil, errors.New("-: standard input given twice")
			}
			read = true
			out = append(out, a)
			continue
		}
		st, err := os.Stat(a)
		var pe *os.PathError
		if errors.As(err, &pe) {
			return nil, fmt.Errorf("%s: %w", a, pe.Err) // not "stat a: ..."
		}
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

// checkEvents fails a command whose -events path (a file or a directory;
// "" and "-" pass) cannot be opened, naming the flag and the path, before
// it makes or truncates anything. A FIFO is not opened: the open would
// wake a writer waiting for the command, and the close, no reader left
// until the command opens it again, would lose what it wrote meanwhile or
// break its pipe.
func checkEvents(cmd, path string) error {
	if path == "" || path == "-" {
		return nil
	}
	st, err := os.Stat(path)
	if err == nil && st.Mode()&os.ModeNamedPipe == 0 {
		var in *os.File
		if in, err = os.Open(path); err == nil {
			in.Close()
		}
	}
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err // not "stat PATH: ...", "open PATH: ..."
		}
		return fmt.Errorf("%s: -events %s: %w", cmd, path, err)
	}
	return nil
}
