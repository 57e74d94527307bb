package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/rules"
)

var explainCommand = &command{
	name:  "explain",
	short: "say why alerts fired: each condition of their rule over their events, with the values read",
	usage: "cepheus explain -rules FILE [-id ID] [alerts.jsonl | -]",
	help: `Explain reads alerts (JSON lines, as backtest, run and consume write
them; a file, or standard input without one) and, for each alert of a
rule of the ruleset -rules names, says why it fired: for each event the
alert holds, its stage and each where, or and until clause of the stage,
true or false, the terms of a && chain each with its value and the
values of the fields it read (the event's, and the earlier stages' last
events', as the rule read them), for a negated stage that no event
matched it where it stood (between the stages around it, or within the
window), then the time from its first event to
its last against the pattern's window; of a timed-out alert, the stages
that took no event before the window ended. Events are named by their line
in the input (the alert's "line"), and, of a run over several
partitions, by the index of their partition too ("partition 1 line 40",
the alert's "partition": a directory's file, numbered as run numbers
them; a topic's partition). -id keeps the alerts whose id starts with
it.

An alert of a rule the ruleset does not have, or of another version of
the rule (its rule_hash differs: explained with this version, which may
not have fired), is said so. An alert's events carry the values of the
velocity aggregates its rule reads, as each event had them: a condition
reading one is explained with them. Lines that are not alerts are skipped with a warning.`,
}

func init() { explainCommand.run = runExplain }

func runExplain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet(explainCommand, stdout)
	rulesPath := fs.String("rules", "", "the ruleset file whose rules raised the alerts (required)")
	id := fs.String("id", "", "explain only the alerts whose alert_id starts with this")
	if err := fs.parse(args); err != nil {
		return err
	}
	if *rulesPath == "" {
		return fs.usagef("-rules is required")
	}
	if fs.NArg() > 1 {
		return fs.usagef("one alerts file at most, got %q", fs.Args())
	}
	rs, err := loadOneRuleset(fs, *rulesPath, rules.LoadRules, stderr)
	if err != nil {
		return err
	}
	in, name := io.Reader(os.Stdin), "stdin"
	if fs.NArg() == 0 && isTerminal(os.Stdin) {
		return fs.usagef("give an alerts file, or pipe alerts in (cepheus backtest ... | cepheus explain -rules %s)", *rulesPath)
	}
	if fs.NArg() == 1 && fs.Arg(0) != "-" {
		f, err := os.Open(fs.Arg(0))
		if err != nil {
			return err
		}
		defer f.Close()
		in, name = f, fs.Arg(0)
	}
	dec, err := rs.LenientDecoder()
	if err != nil {
		return err
	}
	w := bufio.NewWriter(stdout)
	defer w.Flush()
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	n, explained := 0, 0
	for sc.Scan() {
		n++
		if ctx.Err() != nil {
			w.Flush()
			return interrupted(ctx, "explain interrupted at line %d of %s", n, name)
		}
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var a alertJSON
		if err := json.Unmarshal([]byte(line), &a); err != nil || a.ID == "" || a.Rule == "" {
			fmt.Fprintf(stderr, "explain: warning: %s:%d is not an alert (no alert_id and rule), skipped\n", name, n)
			continue
		}
		if !strings.HasPrefix(a.ID, *id) {
			continue
		}
		explained++
		if err := explainAlert(w, rs, dec, &a); err != nil {
			return fmt.Errorf("%s:%d: %w", name, n, err)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if explained == 0 {
		what := "no alert"
		if *id != "" {
			what = "no alert whose id starts with " + *id
		}
		fmt.Fprintf(stderr, "explain: warning: %s in %s\n", what, name)
	}
	return nil
}

// alertJSON is what explain reads of an alert line.
type alertJSON struct {
	ID         string                       `json:"alert_id"`
	Rule       string                       `json:"rule"`
	Ruleset    string                       `json:"ruleset"`
	RuleHash   string                       `json:"rule_hash"`
	Key        map[string]any               `json:"key"`
	DetectedAt string                       `json:"detected_at"`
	TimedOut   bool                         `json:"timed_out"`
	Matched    map[string][]json.RawMessage `json:"matched"`
}

// explainAlert writes why alert a fired, by rule r of rs.
func explainAlert(w io.Writer, rs *rules.Ruleset, dec func([]byte) (*event.Event, error), a *alertJSON) error {
	what := "alert"
	if a.TimedOut {
		what = "timed-out alert"
	}
	key, _ := json.Marshal(a.Key)
	fmt.Fprintf(w, "%s %s: rule %s, key %s, detected at %s\n", what, a.ID, a.Rule, key, a.DetectedAt)
	r := rs.Rule(a.Rule)
	switch {
	case r == nil:
		fmt.Fprintf(w, "  ruleset %s has no rule %s\n\n", rs.Name, a.Rule)
		return nil
	case r.NFA == nil:
		fmt.Fprintf(w, "  rule %s did not compile\n\n", a.Rule)
		return nil
	case a.RuleHash != "" && a.RuleHash != r.Hash:
		fmt.Fprintf(w, "  (raised by another version of the rule, rule_hash %.12s; explained with this one, %.12s)\n", a.RuleHash, r.Hash)
	}
	stages := make([][]*event.Event, len(r.NFA.Stages()))
	where := map[*event.Event]string{} // "line N", "partition P line N"
	parted := false
	for name, evs := range a.Matched {
		i := slices.Index(r.NFA.Stages(), name)
		if i < 0 {
			fmt.Fprintf(w, "  the rule has no stage %s (another version of it?)\n\n", name)
			return nil
		}
		for _, raw := range evs {
			var at struct {
				Line      uint64 `json:"line"`
				Partition *int   `json:"partition"` // a directory's file after the first (run)
			}
			_ = json.Unmarshal(raw, &at)
			ev, err := dec(raw)
			if err != nil {
				return fmt.Errorf("an event of stage %s does not decode with the ruleset's schema: %v", name, err)
			}
			ev.Seq = at.Line
			where[ev] = fmt.Sprintf("line %d", at.Line)
			if at.Partition != nil {
				where[ev] = fmt.Sprintf("partition %d line %d", *at.Partition, at.Line)
				parted = true
			}
			stages[i] = append(stages[i], ev)
		}
	}
	if parted {
		// The first file's events carry no partition.
		for ev, w := range where {
			if !strings.HasPrefix(w, "partition ") {
				where[ev] = "partition 0 " + w
			}
		}
	}
	trace := r.Trace(stages, a.TimedOut, func(ev *event.Event) string { return where[ev] })
	for l := range strings.Lines(trace) {
		fmt.Fprintf(w, "  %s", l)
	}
	fmt.Fprintln(w)
	return nil
}

// loadOneRuleset loads the one ruleset file path names (a directory of
// one) with load, printing its errors to stderr (then errFound).
func loadOneRuleset(fs *flagSet, path string, load func(string, []byte) (*rules.Ruleset, error), stderr io.Writer) (*rules.Ruleset, error) {
	files, err := rulesetFiles([]string{path})
	if err != nil {
		return nil, err
	}
	if len(files) != 1 {
		return nil, fs.usagef("-rules %s holds %d rulesets; name the file", path, len(files))
	}
	src, err := os.ReadFile(files[0])
	if err != nil {
		return nil, err
	}
	rs, err := load(files[0], src)
	if err != nil {
		if err := printErrors(stderr, err, true); err != nil {
			return nil, err
		}
		return nil, errFound
	}
	return rs, nil
}
