package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/term"

	"github.com/cepheus-cep/cepheus/cep"
	"github.com/cepheus-cep/cepheus/internal/humanize"
	"github.com/cepheus-cep/cepheus/rules"
)

var backtestCommand = &command{
	name:  "backtest",
	short: "run rulesets over recorded events (files or a Kafka topic) and summarize their alerts",
	usage: "cepheus backtest -rules file|dir -events file.jsonl|file.jsonl.gz|dir|- | -topic T [-brokers B] [-from TIME] [-to TIME] [flags]",
	help: `Backtest replays a file of events through a ruleset exactly as a live run
would: every rule's keyed CEP operator in event time, a watermark that
trails the largest timestamp seen by -out-of-orderness, and, at the end of
the input, a final watermark that releases everything still pending
(absence rules such as "not captured within 30m" fire then). A test of
the file that a change of its rules broke (a threshold raised, the test's
match now too short) is a warning here: the rules run (cepheus check and
cepheus test refuse the file until the test is fixed).

-events DIR replays the files of a directory (its *.jsonl and *.jsonl.gz
files, not hidden: what run -events DIR reads) merged into one stream in
event-time order, so files split from one by time or by shard give that
file's report; the records are numbered in the merged order (a dead letter
gives the file of its line and its line there).

-topic T replays a Kafka topic instead of a file (read_committed; -brokers,
default $CEPHEUS_KAFKA_BROKERS): the records of [-from, -to) by record
timestamp (default the whole topic), found as Kafka finds them: each
partition from its first record stamped at or after -from up to its first
at or after -to (docs/kafka.md says what out-of-order stamps do), its
partitions merged into one stream in event-time order, so a topic produced
from a file gives that file's report (when the file's disorder stays inside
-out-of-orderness: else the merge's order, and with it the late events,
may differ); the records are numbered in the merged order (the "line" of
matched events; a dead letter gives its partition, TOPIC-P, and offset).

Alerts are written as JSON lines (a deterministic alert id, rule, ruleset
and its version hash, the rule's hash, severity, key, event time of
detection, timed_out on a timed-out partial match's, matched events by
stage, emitted fields: docs/operations.md, "Output") to -alerts, stdout by
default; when stdout is a terminal and -alerts is not given, they are not
printed there (the summary shows an example alert of each rule and says
how to keep them: -alerts FILE, a pipe, or -alerts - to print them after
all). Events that arrive
behind the watermark go to -late; lines that are not valid JSON, or lack
the time field or a key field, go to -dead-letter with the ruleset, their
line number and the reason. Without -late and -dead-letter they are only
counted: nothing is written into the working directory unless asked. The
files are created only when there is something to write (a file an
earlier run left there is removed by a run that reads its whole input:
the file, if any, is this run's; one stopped before, by an error or a
signal, leaves it). -alerts FILE is made at the first alert, or empty at
the end of a run that read its whole input; a run stopped before its
first alert (a mistyped -events or lookup file) leaves an earlier run's
alerts file as it is. An output that is a FIFO the run wrote nothing to
is opened and closed at the end all the same, so that a reader waiting
on it gets its end of file. All
their paths are checked before the input is read, and each output needs a
file of its own (not the events file), named without .gz (they are plain
JSON lines: compress the alerts on their way, -alerts - | gzip > FILE.gz).
Output files only ever hold whole lines: each write ends at a line end,
so even a killed run leaves whole JSON lines (a line without its newline
can only be the tail of a write the kernel cut short; drop it).

Bad input must not spoil a run (docs/decisions.md, "Bad times"):
  - Times written as numbers are epoch milliseconds. Unless -time-unit is
    given, a number that as milliseconds is no time between 2000 and 2100
    is refused (epoch seconds would land in January 1970): the line goes
    to the dead letters and the reason names the likely unit. -time-unit s
    reads numbers as epoch seconds (refusing, the same way, those that are
    no time between 2000 and 2100), -time-unit ms takes any number as
    milliseconds.
  - An event more than -max-ahead ahead of the stream (the newest time let
    through so far) goes to the dead letters instead of moving the
    watermark, unless the 5 events from it on are all that far ahead and
    within -max-ahead of it (a gap in the input). 0 turns this off.
  - A run in which more than -max-dead-fraction of the lines are dead
    letters fails (exit 1) after its summary; one in which none of the
    first 10,000 lines decodes stops there.
Every exit prints the summary of what was read: at the end, on an error
(a truncated gzip file), on Ctrl-C (exit 130; SIGTERM: 143; another
signal, a second or more later, kills), and when the alerts' reader goes
away (| head -1: exit 141, as for a process a closed pipe killed).

With -label (for example -label is_fraud on the output of cepheus gen; an
event is labelled when the field is true, a non-zero number, or "true",
"1" or "yes"), the summary gives per-rule true and false positives and precision (an alert is
true when any of its events is labelled, whatever its scenario) and the
labelled events in the rule's alerts (caught: other scenarios' too), and
per scenario the labelled events caught by any rule, the recall, the
events missed and the rules that caught them (the five that caught most,
the others counted). The figures count events, not instances: a
scenario's events no stage takes (its captures, a login between two
stages) count as missed even when the instance was caught. -missed FILE
writes the labelled events no alert holds, one JSON line each, to read
why (jq 'select(.type == "auth")' leaves the captures out). -case FIELD
counts cases too (the fraud instances a field of the labelled events
names): a case is caught when an alert holds any of its labelled
events, overall and per scenario (recall by instance).

-baseline FILE compares -rules (one ruleset) with another version of it,
say the one deployed: the same events go through FILE's ruleset after
-rules's (read twice; not stdin), whose alerts are only counted, and the
summary ends with a row per rule: changed, new or removed (by the rules'
content hashes), its alerts and the baseline's, how many hold the same
events in both runs (by stage), only in this one (new) and only in the
baseline's (gone), and with -label each side's precision and labelled
events caught; then, for a rule with both new and gone alerts, how many
of them share events with the other side's (the same incidents, other
events: a count threshold moved), and each side's recall.

A progress line goes to stderr every two seconds on long inputs: on a
terminal one line rewritten in place, else (a log file, a CI job) a line
of its own each time, starting with "backtest: ". The summary goes to
stderr at the end; a stderr that cannot be written (its reader gone, a
full disk) loses it and the warnings, and stops nothing. Flag values out
of range are usage errors (exit 2).
-rules may name a directory: each of its *.cep files is backtested in
turn over the same events (not with stdin); a file with the same rules
as one before it (a copy: the same version) is skipped with a warning.

Memory: keys whose state has not changed for a while are kept encoded,
and the collector works harder as the process nears -memory-limit (368MiB
by default; GOGC and GOMEMLIMIT in the environment win). The default is
raised to twice the live heap when that nears it, with a line saying so,
and lowered again when it falls; a limit given with -memory-limit is
kept, and a state larger than it still runs, more slowly.
`,
}

func init() { backtestCommand.run = runBacktest }

// backtestGCPercent is the garbage collector's target for backtests (the
// Go default is 100).
const backtestGCPercent = 400

type backtestFlags struct {
	lookups                           lookupFlags
	rules, events, alerts, late, dead string
	label, scenario, caseField        string
	labelNear                         string // a declared field close to -label, when none is it (set once the rulesets load)
	missed                            string // -missed FILE
	baseline                          string // -baseline FILE
	outOfOrder                        time.Duration
	maxPartial, maxBuffered           int
	watermarkEvery, aggWorkers        int
	examples                          int
	quiet                             bool
	timeUnit                          string
	maxAhead                          time.Duration
	maxDeadFraction                   float64
	cpuProfile, memProfile            string
	memoryLimit                       byteSize
	brokers, topic, from, to          string
	only                              nameList
}

// nameList is a flag of names, repeated or comma-separated.
type nameList []string

func (l *nameList) String() string { return strings.Join(*l, ",") }

func (l *nameList) Set(v string) error {
	for n := range strings.SplitSeq(v, ",") {
		if n = strings.TrimSpace(n); n == "" {
			return errors.New("an empty name")
		}
		*l = append(*l, n)
	}
	return nil
}

// selectRules returns sets with only the rules named by only (all of
// them when only is empty), leaving out the rulesets that keep none. The
// kept rulesets keep their schema, hash and everything else, so that the
// kept rules' alerts are those of a run of the whole file, ids included.
// A name that no ruleset has is an error naming the rules there are.
func selectRules(sets []*rules.Ruleset, only []string) ([]*rules.Ruleset, error) {
	if len(only) == 0 {
		return sets, nil
	}
	var all []string
	found := map[string]bool{}
	var out []*rules.Ruleset
	for _, rs := range sets {
		var kept []*rules.Rule
		for _, r := range rs.Rules {
			all = append(all, r.Name)
			if slices.Contains(only, r.Name) {
				kept = append(kept, r)
				found[r.Name] = true
			}
		}
		if len(kept) > 0 {
			c := *rs
			c.Rules = kept
			out = append(out, &c)
		}
	}
	for _, n := range only {
		if !found[n] {
			return nil, fmt.Errorf("-rule %s: no such rule%s (the rules: %s)", n, rules.Suggest(n, all), strings.Join(all, ", "))
		}
	}
	return out, nil
}

// backtestMemoryLimit is the default soft memory limit of a backtest: the
// collector's target of 400 keeps a small heap cheap, the limit keeps a
// large one from growing to five times its live size. It is 368 MiB, not
// 384, so that the resident memory, which also holds what the runtime
// keeps outside the limit (the program's pages, spans not yet returned),
// stays under 400 MiB: the 4M-event input peaked at 387 MiB with it and
// 400-402 MiB with 384 MiB, in as many collections (16).
const backtestMemoryLimit = 368 << 20

// giveUpAfter is how many lines a backtest reads without decoding any
// before it stops.
var giveUpAfter = cep.DefaultInputPolicy().GiveUpAfter

func runBacktest(ctx context.Context, args []string, stdout, stderr io.Writer) (result error) {
	var f backtestFlags
	fs := newFlagSet(backtestCommand, stdout)
	fs.StringVar(&f.rules, "rules", "", "ruleset file, or a directory of *.cep files (required)")
	fs.StringVar(&f.events, "events", "", "events: a JSON-lines file, .jsonl.gz, a directory of them (merged in event-time order), or - for stdin (this or -topic)")
	fs.StringVar(&f.topic, "topic", "", "replay a Kafka topic instead of -events: its partitions merged in event-time order (read_committed)")
	fs.StringVar(&f.brokers, "brokers", "", "with -topic, the Kafka brokers, host:port[,host:port] (default: $"+brokersEnv+")")
	fs.StringVar(&f.from, "from", "", "with -topic, replay each partition from its first record stamped at or after this time, RFC 3339 (by record timestamp; default: the topic's start)")
	fs.StringVar(&f.to, "to", "", "with -topic, replay each partition up to its first record stamped at or after this time, RFC 3339 (default: up to the topic's end)")
	secFlags := addKafkaSecurityFlags(fs)
	fs.StringVar(&f.alerts, "alerts", "", "where alerts go: a file, or - for stdout; left out, stdout when it is not a terminal (on a terminal, the summary shows an example of each rule's alerts instead)")
	fs.StringVar(&f.late, "late", "", "file for late events (created only if there are any; default: only counted)")
	fs.StringVar(&f.dead, "dead-letter", "", "file for undecodable lines (created only if there are any; default: only counted)")
	fs.StringVar(&f.timeUnit, "time-unit", "", "unit of times written as numbers: ms or s (default: ms, refusing numbers that are no time in 2000..2100; s refuses them too; ms takes any number)")
	fs.DurationVar(&f.maxAhead, "max-ahead", cep.DefaultInputPolicy().MaxAhead, "an event further ahead of the stream's newest time goes to the dead letters, unless the next events confirm the jump (0: off)")
	fs.Float64Var(&f.maxDeadFraction, "max-dead-fraction", cep.DefaultInputPolicy().MaxDeadFraction, "fail the run when more than this fraction of the lines are dead letters (1: never; a run none of whose first 10,000 lines decodes stops there whatever this says)")
	fs.StringVar(&f.label, "label", "", "field that labels fraudulent events (for example is_fraud): an event is labelled when it is true, a non-zero number, or \"true\", \"1\" or \"yes\"")
	fs.StringVar(&f.scenario, "scenario", "scenario", "field that names a labelled event's scenario")
	fs.StringVar(&f.caseField, "case", "", "with -label, field that names the case (the fraud instance) of a labelled event: the summary also counts cases, each caught when an alert holds any of its labelled events (recall by instance; the events' recall counts the captures and logins no stage takes)")
	fs.StringVar(&f.missed, "missed", "", "with -label, file for the labelled events no alert holds, one JSON line each (\"line\", then the fields, as in alerts), in input order: what the rules missed, to read with jq (one ruleset; with -baseline, those -rules missed)")
	fs.StringVar(&f.baseline, "baseline", "", "a ruleset file to compare -rules with: backtested after it over the same events (its alerts only counted, none written), then each rule against its version there: alerts of the same events in both runs, only in this one, only in the baseline's, and with -label precision and labelled events caught (what a change of a rule gains and loses; one ruleset in -rules; not with -events -)")
	fs.DurationVar(&f.outOfOrder, "out-of-orderness", cep.DefaultOutOfOrderness, "watermark bound: how far an event may come behind the newest one without being late")
	fs.IntVar(&f.watermarkEvery, "watermark-every", 256, "events between two watermarks (1: after every event, as Flink's per-record watermarks; 0: the default); lateness depends on it only for input more disordered than -out-of-orderness")
	fs.IntVar(&f.maxPartial, "max-partial-matches", 0, "per-key cap on partial matches per rule (0: unlimited)")
	fs.IntVar(&f.maxBuffered, "max-buffered-events", 0, "per-key cap on events waiting for the watermark (0: unlimited)")
	fs.IntVar(&f.aggWorkers, "aggregate-workers", 1, "workers of the velocity aggregates: above 1, each aggregate's windows are spread over this many goroutines and a hot key (more than 20% of the events a watermark releases, at least 64) is salted over them, its partial windows merged exactly: the same values, faster for an aggregate one key dominates (docs/rules.md, Skew); 1: one aggregator; at most 64")
	fs.IntVar(&f.examples, "examples", 0, "print this many example alerts per rule in the summary")
	fs.BoolVar(&f.quiet, "q", false, "no progress line and no summary")
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of the run to this file (for go tool pprof)")
	fs.StringVar(&f.memProfile, "memprofile", "", "write a profile of the run's allocations to this file at the end (for go tool pprof)")
	f.memoryLimit = backtestMemoryLimit
	fs.Var(&f.memoryLimit, "memory-limit", "soft limit of the process's memory, as 384MiB, 2GiB or bytes; the collector works harder near it (0: none; GOMEMLIMIT in the environment wins); the default is raised to twice the live heap when that nears it, and lowered again when it falls")
	fs.Var(&f.only, "rule", "backtest only this rule of the ruleset (repeat it, or list several comma-separated); its alerts and their ids are those of a run of the whole ruleset (default: every rule)")
	f.lookups.register(fs)
	if err := fs.parse(args); err != nil {
		return err
	}
	warnCommandLinePasswords(stderr, "backtest", "-lookup", f.lookups.binds...)
	if fs.NArg() > 0 {
		return fs.usagef("unexpected arguments %q", fs.Args())
	}
	if !fs.isSet("alerts") {
		f.alerts = "-" // (hidden on a terminal: hideAlerts)
	}
	if f.rules == "" || (f.events == "") == (f.topic == "") {
		return fs.usagef("-rules and -events or -topic (one of them) are required")
	}
	var replay *cep.TopicReplay
	if f.topic != "" {
		seeds, err := brokerList(fs, f.brokers)
		if err != nil {
			return err
		}
		sec, err := secFlags.security(fs, stderr)
		if err != nil {
			return err
		}
		replay = &cep.TopicReplay{Brokers: seeds, Security: sec, Topic: f.topic}
		defer func() { result = loginHint(result, sec) }()
		for _, t := range []struct {
			flag, v string
			to      *time.Time
		}{{"-from", f.from, &replay.From}, {"-to", f.to, &replay.To}} {
			if t.v == "" {
				continue
			}
			v, err := time.Parse(time.RFC3339Nano, t.v)
			if err != nil {
				return fs.usagef("%s %q: want an RFC 3339 time", t.flag, t.v)
			}
			if v.UnixMilli() < 0 {
				return fs.usagef("%s %s is before 1970-01-01T00:00:00Z, where record timestamps begin", t.flag, t.v)
			}
			*t.to = v
		}
		if !replay.From.IsZero() && !replay.To.IsZero() && !replay.From.Before(replay.To) {
			return fs.usagef("-from %s is not before -to %s", f.from, f.to)
		}
	} else if f.from != "" || f.to != "" || f.brokers != "" {
		return fs.usagef("-brokers, -from and -to go with -topic")
	}
	input := cep.InputPolicy{MaxAhead: f.maxAhead, MaxDeadFraction: f.maxDeadFraction, GiveUpAfter: giveUpAfter}
	switch f.timeUnit {
	case "":
		input.CheckNumericTimes = true
	case "ms":
	case "s":
		// Checked as the default: milliseconds read as seconds land tens
		// of thousands of years ahead.
		input.TimeUnit, input.CheckNumericTimes = cep.Seconds, true
	default:
		return fs.usagef("-time-unit %q: want ms or s", f.timeUnit)
	}
	if err := f.check(fs); err != nil {
		return err
	}
	if f.maxDeadFraction == 1 {
		input.MaxDeadFraction = 0
	}
	files, err := rulesetFiles([]string{f.rules})
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("backtest: no *.cep files in %s", f.rules)
	}
	if len(files) > 1 && f.events == "-" {
		return fs.usagef("several rulesets need an events file, not stdin")
	}
	// A directory is read as run -events DIR reads it: its partition
	// files, merged in event-time order.
	eventsDir := false
	if st, err := os.Stat(f.events); err == nil && st.IsDir() {
		eventsDir = true
	}
	var sets []*rules.Ruleset
	bad := false
	fileOf := map[string]string{} // by ruleset version: the first file of it
	for _, name := range files {
		src, err := os.ReadFile(name)
		if err != nil {
			return err
		}
		rs, err := rules.LoadRules(name, src) // a change of a rule that broke its tests still runs
		if err != nil {
			if err := printErrors(stderr, err, true); err != nil {
				return err
			}
			bad = true
			continue
		}
		// A standard error that cannot be written (its reader gone, a full
		// disk) loses the warnings, as it loses the summary, and stops
		// nothing.
		_ = rs.Warnings.Print(stderr, true)
		if first, ok := fileOf[rs.Hash]; ok {
			// A copy left beside its original (cards.cep and
			// cards-old.cep, the same rules): each is backtested, so
			// every alert would come twice, with the same id.
			fmt.Fprintf(stderr, "warning: %s is the same ruleset as %s (%s version %.12s): backtested once\n", name, first, rs.Name, rs.Hash)
			continue
		}
		fileOf[rs.Hash] = name
		sets = append(sets, rs)
	}
	if bad {
		return errFound
	}
	if sets, err = selectRules(sets, f.only); err != nil {
		return fs.usagef("%v", err)
	}
	for _, rs := range sets {
		// A misspelt -label reads as a run without fraud: the summary
		// names the declared field it is close to.
		if names := rs.Schema.Names(); f.label != "" && f.labelNear == "" && !slices.Contains(names, f.label) {
			f.labelNear = rules.Closest(f.label, names)
		}
	}
	switch {
	case f.caseField != "" && f.label == "":
		return fs.usagef("-case %s needs -label: the cases are those of the labelled events", f.caseField)
	case f.missed != "" && f.label == "":
		return fs.usagef("-missed %s needs -label: the missed events are the labelled ones no alert holds", f.missed)
	case f.missed != "" && len(sets) > 1:
		return fs.usagef("-missed %s takes one ruleset; -rules %s holds %d (name the file)", f.missed, f.rules, len(sets))
	}
	var base *rules.Ruleset
	if f.baseline != "" {
		switch {
		case len(sets) != 1:
			return fs.usagef("-baseline %s compares one ruleset; -rules %s holds %d (name the file)", f.baseline, f.rules, len(sets))
		case f.events == "-":
			return fs.usagef("-baseline reads the events twice: give a file, not -events -")
		case f.baseline == "-":
			return fs.usagef("-baseline takes a ruleset file, not standard input")
		}
		if st, err := os.Stat(f.baseline); err == nil && st.IsDir() {
			return fs.usagef("-baseline %s is a directory: name the ruleset file", f.baseline)
		}
		if base, err = loadBaseline(f.baseline, f.only, stderr); err != nil {
			return err
		}
		if base.Hash == sets[0].Hash {
			fmt.Fprintf(stderr, "warning: -baseline %s is the same ruleset as %s (%s version %.12s): every alert will be the same\n", f.baseline, fileOf[base.Hash], base.Name, base.Hash)
		}
	}
	checked := sets // a -lookup binds a lookup of the baseline, or of -rules
	if base != nil {
		checked = append(slices.Clone(sets), base)
	}
	if err := f.lookups.check(checked); err != nil {
		return fs.usagef("%v", err)
	}

	// An input that cannot be opened fails before any output is opened
	// (truncated: -alerts FILE lost the alerts of an earlier run).
	if err := checkEvents("backtest", f.events); err != nil {
		return err
	}
	// Every output path is checked before the input is read: a run must
	// not fail on its output after the whole input, nor overwrite it.
	inputFiles := files
	if base != nil {
		inputFiles = append(slices.Clone(files), f.baseline)
	}
	if err := checkOutputs(f, inputPaths(f.events, inputFiles, &f.lookups)); err != nil {
		return err
	}
	// Alerts are JSON lines for a file or a pipe; on a terminal they
	// would bury the summary. There, unless -alerts says otherwise, the
	// summary shows examples instead and says where to send the alerts.
	hideAlerts := !fs.isSet("alerts") && !f.quiet && isTerminal(stdout)
	alertsOut := stdout
	if hideAlerts {
		alertsOut = io.Discard
		if !fs.isSet("examples") {
			f.examples = 1
		}
	}
	if replay != nil {
		// After the rules' and the outputs' checks: those are named
		// first.
		if err := brokersRefuse(ctx, replay.Brokers, replay.Security); err != nil {
			return err
		}
	}
	alerts, closeAlerts := openAlerts(f.alerts, alertsOut)
	var tee *exampleTee
	if f.examples > 0 && !f.quiet {
		tee = &exampleTee{w: alerts, per: f.examples, seen: map[string]int{}, label: f.label}
		alerts = tee
	}
	late := &lazyFile{path: f.late}
	dead := &lazyFile{path: f.dead}
	deadWriter := cep.NewDeadLetterWriter(dead)
	// Without a file, late events and dead letters are only counted.
	var lateOut io.Writer
	if f.late != "" {
		lateOut = late
	}
	if f.cpuProfile != "" {
		stop, err := startCPUProfile("backtest", f.cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	if f.memProfile != "" {
		defer writeAllocProfile(f.memProfile, stderr)
	}
	var sums []*cep.Summary
	var labelSums []*cep.LabelSummary
	var missedBuf []byte // -missed's lines (one ruleset)
	missedN := 0
	var elapsed []time.Duration // by ruleset run
	var runErr error
	herePassed := false // the -rules runs read their input to the end
	warned := map[string]bool{}
	// With -baseline, the baseline's run comes last (sums[len-1] once it
	// ran), each run with its alertSet.
	runs := sets
	var compared []*alertSet
	if base != nil {
		runs = append(slices.Clone(sets), base)
	}
	for _, rs := range runs {
		isBase := base != nil && rs == base
		var src *cep.EventSource
		var err error
		switch {
		case replay != nil:
			r := *replay
			r.TimeField, r.TimeUnit = rs.TimeField, input.TimeUnit
			src, err = cep.OpenTopicEventSource(ctx, r)
		case eventsDir:
			src, err = cep.OpenDirEventSource(ctx, f.events, rs.TimeField, input.TimeUnit)
		case f.events == "-":
			// Read so that Ctrl-C stops a run waiting for a line.
			src, err = cep.NewEventSource(stdinReader(ctx), "stdin")
		default:
			src, err = cep.OpenEventSource(f.events)
		}
		if err != nil {
			runErr = err
			break
		}
		began := backtestClock()
		prog := &progressPrinter{w: stderr, tty: isTerminal(stderr), began: began, now: backtestClock, quiet: f.quiet, src: src}
		if f.topic != "" {
			prog.unit = "record"
		}
		if isBase {
			prog.of = "the baseline, "
		}
		runAlerts, runLate := alerts, lateOut
		if isBase {
			runAlerts, runLate = io.Discard, nil // counted only
		}
		opts := []cep.Option{
			cep.WithRuleset(rs),
			cep.WithAlerts(runAlerts),
			cep.WithLate(runLate),
			cep.WithOutOfOrderness(f.outOfOrder),
			cep.WithWatermarkEvery(f.watermarkEvery),
			cep.WithLimits(f.maxPartial, f.maxBuffered),
			cep.WithInputPolicy(input),
			cep.WithProgress(progressEvery, prog.report),
			cep.WithAggregateWorkers(f.aggWorkers),
		}
		if f.dead != "" && !isBase {
			opts = append(opts, cep.WithDeadLetters(deadWriter))
		}
		if base != nil {
			compared = append(compared, newAlertSet())
			opts = append(opts, cep.WithObservers(compared[len(compared)-1]))
		}
		// A backtest is a batch job whose heap is mostly short-lived
		// events: collecting less often costs memory (about 1.7x the
		// peak) and saves about a third of the CPU. GOGC in the
		// environment still wins.
		if os.Getenv("GOGC") == "" {
			opts = append(opts, cep.WithGCPercent(backtestGCPercent))
		}
		if os.Getenv("GOMEMLIMIT") == "" && f.memoryLimit > 0 {
			opts = append(opts, cep.WithMemoryLimit(int64(f.memoryLimit)))
		}
		var labels *cep.Labels
		if f.label != "" {
			labels = cep.NewLabels(f.label, f.scenario)
			if f.caseField != "" {
				labels.CountCases(f.caseField)
			}
			if f.missed != "" && !isBase {
				labels.KeepEvents()
			}
			opts = append(opts, cep.WithObservers(labels))
		}
		var sum *cep.Summary
		warnf := func(format string, args ...any) {
			// Once: the baseline's run would repeat -rules's (an unbound
			// lookup both declare).
			if msg := fmt.Sprintf(format, args...); !warned[msg] {
				warned[msg] = true
				fmt.Fprintf(stderr, "backtest: warning: %s\n", msg)
			}
		}
		lookups, closeLookups, err := f.lookups.open(ctx, rs, warnf)
		if err != nil {
			src.Close()
			runErr = err
			break
		}
		opts = append(opts, lookups)
		engine, err := cep.New(opts...)
		if err == nil {
			stopGuard := func() {}
			if os.Getenv("GOMEMLIMIT") == "" && f.memoryLimit > 0 && !fs.isSet("memory-limit") {
				stopGuard = goGuardMemoryLimit(ctx, int64(f.memoryLimit), func(format string, args ...any) {
					if !f.quiet {
						fmt.Fprintf(stderr, "backtest: "+format+"\n", args...)
					}
				})
			}
			sum, err = engine.Run(ctx, src)
			stopGuard()
		}
		closeLookups()
		src.Close()
		prog.done()
		if sum != nil {
			sums = append(sums, sum)
			elapsed = append(elapsed, backtestClock().Sub(began))
			var ls *cep.LabelSummary
			if labels != nil {
				ls = labels.Summary()
			}
			labelSums = append(labelSums, ls)
			if f.missed != "" && labels != nil && err == nil && !isBase {
				missedBuf, missedN = labels.AppendMissed(nil, engine)
			}
		}
		if err != nil {
			runErr = err
			break
		}
		if !isBase {
			herePassed = true
		}
	}
	// The outputs are the -rules runs' alone: whole once they ran to the
	// end, even when the baseline's was cut short.
	outputsDone := ranToEnd(runErr) || base != nil && herePassed
	// Whatever ended the run, the outputs get their whole lines and the
	// summary of what was read is printed.
	err = closeAlerts(outputsDone)
	// The dead-letter writer flushes into the lazy file, which then
	// flushes and closes: both, in that order.
	if cerr := deadWriter.Close(); err == nil {
		err = cerr
	}
	// A run that stopped before the end of its input (a path mistyped,
	// Ctrl-C) leaves the files of an earlier run as they are.
	if cerr := dead.Close(outputsDone); err == nil {
		err = cerr
	}
	if cerr := late.Close(outputsDone); err == nil {
		err = cerr
	}
	// -missed: made by a run that read its whole input, empty when
	// nothing was missed (an earlier run's left by one that did not).
	missed := &lazyFile{path: f.missed, made: f.missed != ""}
	if len(missedBuf) > 0 && outputsDone {
		if _, werr := missed.Write(missedBuf); err == nil {
			err = werr
		}
	}
	if cerr := missed.Close(outputsDone); err == nil {
		err = cerr
	}
	if runErr == nil && len(sums) > 0 && sums[0].Records == 0 {
		// A run over nothing succeeds (an empty file is a valid input),
		// but a wrong path to a file being written, or a topic's name
		// mistaken, looks the same: say so.
		input, why := emptyInput(f.events, eventsDir)
		switch {
		case f.topic != "" && (f.from != "" || f.to != ""):
			// The topic may hold many: none in the range.
			input, why = "the range of topic "+f.topic, fmt.Sprintf("no record is stamped in [%s, %s): the range is by record timestamp, the append time or the field cepheus produce -time-field named",
				cmp.Or(f.from, "its start"), cmp.Or(f.to, "its end"))
		case f.topic != "":
			input = "topic " + f.topic
		}
		fmt.Fprintf(stderr, "backtest: warning: %s holds no events (%s)\n", input, why)
	}
	// The -rules runs' summaries, and the baseline's when it ran.
	var baseSum *cep.Summary
	var baseLabels *cep.LabelSummary
	if base != nil && len(sums) == len(runs) {
		baseSum, baseLabels = sums[len(sums)-1], labelSums[len(sums)-1]
		sums, labelSums = sums[:len(sums)-1], labelSums[:len(sums)-1]
	}
	for _, s := range sums {
		// A field misnamed in the schema (or the input): each read is
		// null, and status == "declined" is false without an error.
		of := ""
		if len(sums) > 1 {
			of = "ruleset " + s.Ruleset + ": "
		}
		for _, a := range s.Absent {
			fmt.Fprintf(stderr, "backtest: warning: %s%s\n", of, absentText(a))
		}
		for _, m := range s.Mixed {
			fmt.Fprintf(stderr, "backtest: warning: %s%s\n", of, mixedText(m))
		}
	}
	if !f.quiet {
		for i, s := range sums {
			partial := i == len(sums)-1 && !ranToEnd(runErr) && baseSum == nil
			printSummary(stderr, s, labelSums[i], elapsed[i], f, late, dead, partial)
			if tee != nil {
				tee.print(stderr, s.Ruleset)
			}
		}
		switch {
		case baseSum != nil && ranToEnd(runErr):
			printComparison(stderr, baselineRun{sets[0], sums[0], labelSums[0], compared[0]},
				baselineRun{base, baseSum, baseLabels, compared[1]}, f.baseline)
		case baseSum != nil:
			// Half a baseline against a whole run would read as changes.
			fmt.Fprintf(stderr, "\nThe baseline's run (%s) was cut short at line %d: no comparison.\n", f.baseline, baseSum.Line)
		}
		if f.missed != "" && outputsDone {
			fmt.Fprintf(stderr, "\nThe %s no alert holds: %s (one JSON line each, in input order).\n",
				plural(int64(missedN), "labelled event", "labelled events"), f.missed)
		}
		if hideAlerts && len(sums) > 0 {
			var n int64
			for _, s := range sums {
				n += s.Alerts
			}
			fmt.Fprintf(stderr, "\nThe %s not shown: stdout is a terminal. Write them to a file with -alerts FILE,\n"+
				"or pipe them (cepheus backtest ... | jq); -alerts - prints them here.\n", plural(n, "alert is", "alerts are"))
		}
	}
	if runErr != nil {
		if baseSum != nil && ctx.Err() != nil && errors.Is(runErr, ctx.Err()) {
			return interrupted(ctx, "backtest interrupted at line %d of the baseline's run; the summary of %s above is whole, the comparison left out", baseSum.Line, f.rules)
		}
		return backtestError(ctx, runErr, sums, f)
	}
	return err
}

// emptyInput names the input of -events (a file, a directory when dir,
// or - for stdin) that held no record, and says why it may have, for the
// warning of a backtest or a run over it.
func emptyInput(events string, dir bool) (input, why string) {
	switch {
	case events == "-":
		return "stdin", "it is empty, or only blank lines"
	case dir:
		return "directory " + events, "no *.jsonl or *.jsonl.gz files, or only empty ones"
	}
	return events, "it is empty, or only blank lines"
}

// check reports the flags whose values are out of range, in terms of the
// flags, as one usage error (the engine would refuse them too, in its own
// terms).
func (f *backtestFlags) check(fs *flagSet) error {
	var msgs []string
	negative := func(flag string, bad bool, v any) {
		if bad {
			msgs = append(msgs, fmt.Sprintf("%s %v is negative", flag, v))
		}
	}
	negative("-out-of-orderness", f.outOfOrder < 0, formatDuration(f.outOfOrder))
	negative("-max-ahead", f.maxAhead < 0, formatDuration(f.maxAhead))
	negative("-watermark-every", f.watermarkEvery < 0, f.watermarkEvery)
	negative("-max-partial-matches", f.maxPartial < 0, f.maxPartial)
	negative("-max-buffered-events", f.maxBuffered < 0, f.maxBuffered)
	negative("-examples", f.examples < 0, f.examples)
	if f.aggWorkers < 1 || f.aggWorkers > cep.MaxAggregateWorkers {
		msgs = append(msgs, fmt.Sprintf("-aggregate-workers %d: from 1 to %d", f.aggWorkers, cep.MaxAggregateWorkers))
	}
	if !(f.maxDeadFraction >= 0 && f.maxDeadFraction <= 1) {
		msgs = append(msgs, fmt.Sprintf("-max-dead-fraction %v is outside 0..1", f.maxDeadFraction))
	}
	msgs = append(msgs, f.lookups.outOfRange()...)
	if len(msgs) == 0 {
		return nil
	}
	return fs.usagef("%s", strings.Join(msgs, "\ncepheus: backtest: "))
}

// formatDuration writes d as a flag would take it: 2h, 1m30s, -5s
// (time.Duration's String without its zero units).
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// ranToEnd reports whether a run that ended with err read all its input.
func ranToEnd(err error) bool {
	var ie *cep.InputError
	return err == nil || errors.As(err, &ie) && !ie.GaveUp
}

// errInterrupted is a command stopped by a signal (Ctrl-C, SIGTERM): exit
// status 128 plus the signal's number, as a shell gives a process the
// signal killed (130 after SIGINT, 143 after SIGTERM).
type errInterrupted struct {
	msg string
	sig syscall.Signal
}

func (e *errInterrupted) Error() string { return e.msg }

// interrupted returns the error of a command that ctx stopped, with the
// message format makes: of the signal that cancelled ctx, or of SIGINT
// when no signal did (a test's cancelled context).
func interrupted(ctx context.Context, format string, args ...any) *errInterrupted {
	e := &errInterrupted{msg: fmt.Sprintf(format, args...), sig: syscall.SIGINT}
	var s stopSignal
	if errors.As(context.Cause(ctx), &s) {
		e.sig = s.sig
	}
	return e
}

// backtestError explains the error that ended a run.
func backtestError(ctx context.Context, err error, sums []*cep.Summary, f backtestFlags) error {
	var line int64
	if len(sums) > 0 {
		line = sums[len(sums)-1].Line
	}
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		where := fmt.Sprintf("at line %d", line)
		if line == 0 {
			where = "before its first line" // stdin with nothing written yet
		}
		if len(sums) == 0 || f.quiet {
			return interrupted(ctx, "backtest interrupted %s", where)
		}
		return interrupted(ctx, "backtest interrupted %s; the summary above is partial", where)
	}
	var ie *cep.InputError
	if errors.As(err, &ie) {
		var what, hint string
		switch {
		case ie.GaveUp && ie.Rejected > 0:
			what = fmt.Sprintf("none of the first %s reached the rules, so the run stopped there", plural(ie.Records, "line", "lines"))
		case ie.GaveUp:
			what = fmt.Sprintf("none of the first %s could be decoded, so the run stopped there", plural(ie.Records, "line", "lines"))
		case ie.Rejected > 0:
			what = fmt.Sprintf("%s of %s went to the dead letters", humanize.Int(ie.Dead), plural(ie.Records, "line", "lines"))
		default:
			what = fmt.Sprintf("%s of %s could not be decoded", humanize.Int(ie.Dead), plural(ie.Records, "line", "lines"))
		}
		if ie.Rejected > 0 {
			hint = fmt.Sprintf("%s because a lookup failing closed (on failure closed) could not read its source: "+
				"check the source of -lookup (the reason above), or make the lookup fail open", plural(ie.Rejected, "event went there", "events went there"))
		} else {
			hint = "check the ruleset's schema, key fields and event time field against the input; " +
				"for times written as numbers, -time-unit s or ms says the unit"
		}
		return &userError{err: err, msg: fmt.Sprintf("backtest: ruleset %s: %s (%s: %s)\n  %s",
			ie.Ruleset, what, ie.FirstWhere(), ie.FirstReason, hint)}
	}
	// A truncated gzip input says so itself (runtime.FileSource), as a
	// lookup file does (enrich).
	return &userError{err: err, msg: "backtest: " + stripPrefixes(err.Error())}
}

// lookupRejected is the number of events of s sent to the dead letters
// by lookups that failed closed.
func lookupRejected(s *cep.Summary) int64 {
	var n int64
	for _, l := range s.Lookups {
		n += int64(l.Rejected)
	}
	return n
}

// userError is an error with a message for the user in place of its
// own: the engine's errors name the packages they pass through (cep:,
// runtime: source:), which mean nothing on the command line.
type userError struct {
	err error
	msg string
}

func (e *userError) Error() string { return e.msg }
func (e *userError) Unwrap() error { return e.err }

// internalPrefixes are the names of packages and components that the
// engine's errors start their parts with.
var internalPrefixes = map[string]bool{
	"cep": true, "runtime": true, "backtest": true, "source": true, "subtask": true,
	"dead letters": true, "state": true, "jsonev": true, "enrich": true, "nfa": true,
	"stream": true,
}

// stripPrefixes removes the engine's package prefixes from an error
// message: "cep: runtime: source f.gz: line 2: unexpected EOF" becomes
// "f.gz: line 2: unexpected EOF".
func stripPrefixes(msg string) string {
	parts := strings.Split(msg, ": ")
	out := parts[:0]
	for _, p := range parts {
		switch {
		case internalPrefixes[p]:
			continue
		case strings.HasPrefix(p, "source "):
			p = strings.TrimPrefix(p, "source ")
		}
		out = append(out, p)
	}
	return strings.Join(out, ": ")
}

// namedPath is a file a command reads or writes, and the flag that names
// it ("-events", "-lookup customer").
type namedPath struct{ flag, path string }

// inputPaths returns the files a run reads: the events (unless stdin),
// the ruleset files and the lookup files.
func inputPaths(events string, ruleFiles []string, lf *lookupFlags) []namedPath {
	var in []namedPath
	if events != "" && events != "-" {
		in = append(in, namedPath{"-events", events})
	}
	for _, r := range ruleFiles {
		in = append(in, namedPath{"-rules", r})
	}
	for _, b := range lf.binds {
		name, target, err := cep.ParseLookupBinding(b)
		if path, ok := strings.CutPrefix(target, "file:"); err == nil && ok {
			in = append(in, namedPath{"-lookup " + name, path})
		}
	}
	return in
}

// clobbered returns an error when the file of output is one of inputs
// (the same file, whatever the path says): writing it would destroy what
// the run reads.
func clobbered(cmd string, output namedPath, inputs []namedPath) error {
	for _, in := range inputs {
		// An events directory reads every partition file in it: one
		// written there, new or not, would be read as events (by the next
		// ruleset's run, or the next run).
		if dst, err := os.Stat(in.path); err == nil && dst.IsDir() && cep.IsEventsFile(filepath.Base(output.path)) {
			if pst, err := os.Stat(filepath.Dir(output.path)); err == nil && os.SameFile(pst, dst) {
				return fmt.Errorf("%s: %s %s is in the events directory %s, whose *.jsonl and *.jsonl.gz files are read as events: write it elsewhere", cmd, output.flag, output.path, in.path)
			}
		}
	}
	st, err := os.Stat(output.path)
	if err != nil {
		return nil // a new file
	}
	for _, in := range inputs {
		if ist, err := os.Stat(in.path); err == nil && os.SameFile(st, ist) {
			what := "the events file"
			switch {
			case in.flag == "-rules":
				what = "a ruleset file"
			case strings.HasPrefix(in.flag, "-lookup"):
				what = "the file of " + in.flag
			}
			return fmt.Errorf("%s: %s %s is %s", cmd, output.flag, output.path, what)
		}
	}
	return nil
}

// checkOutputs checks, before any input is read, that every output path
// (profiles included) can be written, that none of them is a file the
// run reads (inputs), that no two of them name the same file (each
// output truncates its file and writes from the start, so two would
// overwrite each other's lines), and that no JSON-lines output is named
// as a gzip file. A device such as /dev/null may take several outputs.
func checkOutputs(f backtestFlags, inputs []namedPath) error {
	type output struct {
		namedPath
		abs string      // the path made absolute and clean
		st  os.FileInfo // nil when the file does not exist
	}
	var seen []output
	for _, o := range []output{{namedPath: namedPath{"-alerts", f.alerts}}, {namedPath: namedPath{"-late", f.late}}, {namedPath: namedPath{"-dead-letter", f.dead}}, {namedPath: namedPath{"-missed", f.missed}},
		{namedPath: namedPath{"-cpuprofile", f.cpuProfile}}, {namedPath: namedPath{"-memprofile", f.memProfile}}} {
		if o.path == "" || o.path == "-" {
			continue
		}
		if err := clobbered("backtest", o.namedPath, inputs); err != nil {
			return err
		}
		// A name in .gz would pass for gzip (cepheus reads such a name
		// as one, so would zcat) and hold plain lines.
		switch gz := strings.HasSuffix(o.path, ".gz"); {
		case gz && o.flag == "-alerts":
			return fmt.Errorf("backtest: -alerts %s: the alerts are plain JSON lines, not gzip: name the file without .gz, or compress them on their way (-alerts - | gzip > %s)", o.path, o.path)
		case gz && (o.flag == "-late" || o.flag == "-dead-letter" || o.flag == "-missed"):
			return fmt.Errorf("backtest: %s %s: the file holds plain JSON lines, not gzip: name it without .gz", o.flag, o.path)
		}
		st, err := os.Stat(o.path)
		if err == nil {
			o.st = st
		}
		if o.abs, err = filepath.Abs(o.path); err != nil {
			o.abs = filepath.Clean(o.path)
		}
		for _, p := range seen {
			same := p.abs == o.abs
			if p.st != nil && o.st != nil {
				same = os.SameFile(p.st, o.st)
			}
			if same && (o.st == nil || o.st.Mode().IsRegular()) {
				return fmt.Errorf("backtest: %s and %s name the same file, %s: give each its own", p.flag, o.flag, o.path)
			}
		}
		seen = append(seen, o)
		if err := probeWritable(o.path); err != nil {
			return fmt.Errorf("backtest: %s: %w", o.flag, err)
		}
	}
	return nil
}

// probeWritable checks that path can be created or written, leaving it as
// it was: an existing regular file is opened for writing and closed, a
// missing one created and removed. A FIFO or a device is not opened: to
// open a FIFO without a reader blocks, and to close it gives its reader an
// end of file before the run has written anything.
func probeWritable(path string) error {
	if st, err := os.Stat(path); err == nil {
		if st.IsDir() {
			return fmt.Errorf("%s is a directory", path)
		}
		if !st.Mode().IsRegular() {
			return nil // found at its opening
		}
		fh, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		return fh.Close()
	}
	fh, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	fh.Close()
	return os.Remove(path)
}

// createWriteOnly creates or truncates the file of an output, for writing
// only, with mode 0600: alerts, late events and dead letters hold customer
// data. (os.Create opens it for reading too: a FIFO or a pipe, as
// /dev/stdout, opened so has this process as a reader, so that a reader
// gone away is never seen, and the writes block once the pipe is full.)
func createWriteOnly(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
}

// openAlerts opens the alerts output: stdout for "-", else a file created
// at the first alert, or at the end of a run that read its whole input (a
// [lazyFile]: a run that stopped first leaves an earlier run's file as it
// is; it was truncated at the start). Either way through a [lineWriter].
// The returned function flushes and closes it; ranToEnd says whether the
// run read its whole input.
func openAlerts(path string, stdout io.Writer) (io.Writer, func(ranToEnd bool) error) {
	if path == "" || path == "-" {
		lw := newLineWriter(stdout)
		return lw, func(bool) error { return lw.Flush() }
	}
	lf := &lazyFile{path: path, made: true}
	return lf, lf.Close
}

// lineWriter buffers output and writes it only up to a line end, each time
// with one Write call: whatever chunks it is given, the file it writes
// holds whole lines after every write, so a process killed between two
// writes leaves no torn JSON line. (A single write can still be cut short
// by the kernel when the process is killed during it; then the file ends
// in a line without its newline.) Flush writes everything, a last line
// without newline included.
type lineWriter struct {
	w   io.Writer
	buf []byte
	err error
}

// lineWriterSize is how much a lineWriter gathers before it writes.
const lineWriterSize = 64 << 10

func newLineWriter(w io.Writer) *lineWriter {
	return &lineWriter{w: w, buf: make([]byte, 0, lineWriterSize+4<<10)}
}

func (l *lineWriter) Write(p []byte) (int, error) {
	if l.err != nil {
		return 0, l.err
	}
	l.buf = append(l.buf, p...)
	if len(l.buf) < lineWriterSize {
		return len(p), nil
	}
	i := bytes.LastIndexByte(l.buf, '\n')
	if i < 0 {
		return len(p), nil // one long line so far: wait for its end
	}
	if _, err := l.w.Write(l.buf[:i+1]); err != nil {
		l.err = err
		return 0, err
	}
	l.buf = l.buf[:copy(l.buf, l.buf[i+1:])]
	return len(p), nil
}

// Flush writes what is buffered.
func (l *lineWriter) Flush() error {
	if l.err != nil || len(l.buf) == 0 {
		return l.err
	}
	_, l.err = l.w.Write(l.buf)
	l.buf = l.buf[:0]
	return l.err
}

// progressEvery is the records between two calls of a backtest's progress
// printer, which prints at most every two seconds: few enough that a rule
// whose events are slow (a key holding many partial matches, an explosive
// pattern) still shows its progress every two seconds or so (at the
// engine's default, every 100,000 records, such a run printed nothing for
// minutes), the call cheap beside a record's work.
const progressEvery = 256

// backtestClock is the backtest's clock, of its progress lines and its
// elapsed time. A variable for tests.
var backtestClock = time.Now

// progressPrinter prints a progress line at most every two seconds, only
// once the run has lasted two seconds (short runs stay quiet). On a
// terminal the line is rewritten in place (\r); elsewhere (a log file, a
// CI job) each report is a line of its own.
type progressPrinter struct {
	w       io.Writer
	tty     bool // w is a terminal
	began   time.Time
	last    time.Time
	now     func() time.Time
	quiet   bool
	printed bool
	src     interface{ Progress() (read, total int64) }
	unit    string // what the input's numbered items are: "line" (empty) or "record"
	of      string // "" or "the baseline, ": which run it reports
}

func (p *progressPrinter) report(bp cep.Progress) {
	if p.quiet {
		return
	}
	now := p.now()
	if now.Sub(p.began) < 2*time.Second || now.Sub(p.last) < 2*time.Second {
		return
	}
	p.last = now
	rate := float64(bp.Decoded) / now.Sub(p.began).Seconds()
	unit := p.unit
	if unit == "" {
		unit = "line"
	}
	line := fmt.Sprintf("backtest: %s%s %d, %s events/s, %s", p.of, unit, bp.Line, humanize.Int(int64(rate)), plural(bp.Alerts, "alert", "alerts"))
	if read, total := p.src.Progress(); total > 0 {
		line += fmt.Sprintf(", %.0f%%", 100*float64(read)/float64(total))
	}
	if p.tty {
		fmt.Fprintf(p.w, "\r%-72s", line)
	} else {
		fmt.Fprintln(p.w, line)
	}
	p.printed = true
}

// done ends the progress line on a terminal.
func (p *progressPrinter) done() {
	if p.printed && p.tty {
		fmt.Fprintln(p.w)
	}
}

// isTerminal reports whether w is a terminal (not merely a character
// device: /dev/null and /dev/full are not). A variable for tests.
var isTerminal = func(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// ruleNotes returns what a summary says of rule r beside its alerts:
// its expressions' run-time errors and what its limits dropped.
func ruleNotes(r cep.RuleSummary) []string {
	var notes []string
	if r.TimedOut > 0 {
		notes = append(notes, humanize.Int(r.TimedOut)+" timed out")
	}
	if r.ConditionErrors > 0 {
		notes = append(notes, plural(int64(r.ConditionErrors), "condition error", "condition errors"))
	}
	if r.EmitErrors > 0 {
		notes = append(notes, plural(int64(r.EmitErrors), "emit error", "emit errors"))
	}
	if r.Dropped > 0 {
		note := plural(r.Dropped, "partial match", "partial matches") + " dropped (limit)"
		if len(r.DroppedKeys) > 0 {
			note += ", most at key " + droppedAt(r.DroppedKeys)
		}
		notes = append(notes, note)
	}
	if r.Overflow > 0 {
		notes = append(notes, plural(r.Overflow, "event", "events")+" over the buffer limit")
	}
	if r.NoKey > 0 {
		notes = append(notes, plural(r.NoKey, "event", "events")+" without its key skipped")
	}
	if r.EmptyKey > 0 {
		notes = append(notes, plural(r.EmptyKey, "event", "events")+" with an empty key, matched together as one key")
	}
	return notes
}

// droppedAt lists the keys of a rule's drops with their counts, as
// card="c1" (3,000), card="c2" (at least 150) (a lower bound when more
// keys dropped than were followed: cep.KeyCount).
func droppedAt(keys []cep.KeyCount) string {
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		least := ""
		if !k.Exact {
			least = "at least "
		}
		fmt.Fprintf(&b, "%s (%s%s)", k.Key, least, humanize.Int(k.Count))
	}
	return b.String()
}

// printRuleErrors prints the last run-time error of each rule whose
// conditions or emit fields failed: a condition that fails (a field
// missing or null, a misspelled field of an inferred schema) counts as
// false, an emit field that fails is null in its alert; say why.
func printRuleErrors(w io.Writer, rules []cep.RuleSummary) {
	for _, kind := range []struct {
		title string
		last  func(cep.RuleSummary) string
	}{
		{"Condition errors count as false", func(r cep.RuleSummary) string { return r.LastConditionError }},
		{"Emit errors leave the field null in the alert", func(r cep.RuleSummary) string { return r.LastEmitError }},
	} {
		first := true
		for _, r := range rules {
			msg := kind.last(r)
			if msg == "" {
				continue
			}
			if first {
				fmt.Fprintf(w, "\n  %s; the last of each rule:\n", kind.title)
				first = false
			}
			fmt.Fprintf(w, "    %s: %s\n", r.Rule, msg)
		}
	}
}

// absentText is the warning of a field that rules read and that no event
// had.
func absentText(a cep.AbsentField) string {
	verb := " reads"
	if len(a.Rules) > 1 {
		verb = " read"
	}
	return fmt.Sprintf("no event had the field %s, which %s%s: each read of it is null (is it the field's name?)", a.Field, rulesText(a.Rules), verb)
}

// rulesText names rules (at least one): "rule a", "rules a and b",
// "rules a, b, c and 4 more".
func rulesText(rules []string) string {
	switch n := len(rules); {
	case n > 4:
		return fmt.Sprintf("rules %s and %d more", strings.Join(rules[:3], ", "), n-3)
	case n > 1:
		return "rules " + strings.Join(rules[:n-1], ", ") + " and " + rules[n-1]
	}
	return "rule " + rules[0]
}

// mixedText is the warning of a field of no declared type that events
// gave as a number and as a string (the messy-data trial: a producer's
// "amount": "0.00" never equalled 0, with no word).
func mixedText(m cep.MixedField) string {
	by := rulesText(m.Rules)
	what := "a string never equals a number (==, in), nor compares with one (<, >: a condition error)"
	fix := fmt.Sprintf("or convert it where it is read (float(%s))", m.Field)
	if m.Key {
		what = "as a key, \"7\" and 7 are two keys, whose events never match together; and " + what
		fix = "or have the producers agree"
	}
	return fmt.Sprintf("field %s (of no declared type; read by %s) came as a number in %s and as a string in %s: %s; declare its type (the events of the other kind then go to the dead letters), %s",
		m.Field, by, plural(m.Numbers, "event", "events"), humanize.Int(m.Strings), what, fix)
}

// printSummary prints the summary of one ruleset's run, with its label
// statistics ls when -label is set.
func printSummary(w io.Writer, s *cep.Summary, ls *cep.LabelSummary, elapsed time.Duration, f backtestFlags, late, dead *lazyFile, partial bool) {
	bw := bufio.NewWriter(w)
	defer bw.Flush()
	version := s.RulesetVersion
	if len(version) > 12 {
		version = version[:12]
	}
	what := "Ruleset"
	if partial {
		what = "Partial run of ruleset"
	}
	lines := plural(s.Records, "line", "lines")
	if f.topic != "" {
		lines = plural(s.Records, "record", "records")
	}
	// Records counts the lines that are not blank; Line is the number of
	// the last one read.
	if blank := s.Line - s.Records; blank > 0 && f.topic == "" {
		lines += fmt.Sprintf(" (not counting %s)", plural(blank, "blank line", "blank lines"))
	}
	rate := ""
	if s.Decoded > 0 && elapsed > 0 {
		rate = fmt.Sprintf(" (%s events/s)", humanize.Int(int64(float64(s.Decoded)/elapsed.Seconds())))
	}
	fmt.Fprintf(bw, "\n%s %s (version %s): %s, %s, %s in %.2fs%s\n",
		what, s.Ruleset, version, lines, plural(s.Decoded, "event", "events"), plural(s.Alerts, "alert", "alerts"), elapsed.Seconds(), rate)
	if s.Dead > 0 {
		noun, nouns := "line", "lines"
		if f.topic != "" {
			noun, nouns = "record", "records"
		}
		what := plural(s.Dead, noun+" could", nouns+" could") + " not be decoded"
		if lookupRejected(s) > 0 {
			what = plural(s.Dead, noun+" went", nouns+" went") + " to the dead letters"
		}
		first := fmt.Sprintf("line %d", s.FirstDeadLine)
		if s.FirstDeadFile != "" { // a directory's or a topic's
			first = s.FirstDeadFile + " " + first
		}
		fmt.Fprintf(bw, "  %s (first: %s: %s): %s\n", what, first, s.FirstDeadReason, seeFile(dead.path, "-dead-letter"))
		if s.Ahead > 0 {
			fmt.Fprintf(bw, "  of them, %s more than -max-ahead %s ahead of the stream\n", plural(s.Ahead, "event was", "events were"), formatDuration(f.maxAhead))
		}
	}
	if s.Late > 0 {
		// How far: the -out-of-orderness that takes them on time (a
		// trial's 2-minute delays gave 1,946 late events and no hint).
		by := ""
		if s.LateBy > 0 {
			by = fmt.Sprintf("; the furthest %s behind it, so -out-of-orderness %s takes them all", formatDuration(s.LateBy), formatDuration(f.outOfOrder+s.LateBy+time.Millisecond))
		}
		// The watermark's cadence too: an event further behind than the
		// bound is late only if a watermark went by since the newer one
		// (a trial took -out-of-orderness for the bound of lateness).
		every := f.watermarkEvery
		if every == 0 {
			every = 256
		}
		fmt.Fprintf(bw, "  %s late (behind the watermark, set every %s to %s before the newest time: -out-of-orderness %s, -watermark-every %d%s): %s\n",
			plural(s.Late, "event was", "events were"), plural(int64(every), "event", "events"), formatDuration(f.outOfOrder), formatDuration(f.outOfOrder), every, by,
			seeFile(late.path, "-late"))
	}
	for _, l := range s.Lookups {
		if !l.Bound {
			fmt.Fprintf(bw, "  lookup %s: unbound, every event got its defaults\n", l.Name)
			continue
		}
		// Hits+Misses counts each batch's distinct keys: "N keys" read as
		// the distinct keys of the whole input.
		fmt.Fprintf(bw, "  lookup %s: %s (one per key of a batch of events), %.1f%% from the cache; %s looked up at the source in %s (%s without a record)",
			l.Name, plural(int64(l.Hits+l.Misses), "key lookup", "key lookups"), 100*l.HitRate(), humanize.Int(int64(l.Misses)), plural(int64(l.Requests), "request", "requests"), humanize.Int(int64(l.NotFound)))
		if l.Failures > 0 {
			fmt.Fprintf(bw, "; %s failed (%s)", plural(int64(l.Failures), "request", "requests"), plural(int64(l.Timeouts), "timeout", "timeouts"))
		}
		if l.Unreadable > 0 {
			fmt.Fprintf(bw, "; %s did not read", plural(int64(l.Unreadable), "record", "records"))
		}
		if l.Failures > 0 || l.Unreadable > 0 {
			fmt.Fprintf(bw, ": %s the defaults, %s to the dead letters%s",
				plural(int64(l.Defaulted), "event got", "events got"), humanize.Int(int64(l.Rejected))+" went",
				lastError(l))
		}
		fmt.Fprintln(bw, noRecordHint(l))
	}
	for _, a := range s.Aggregates {
		// (At the end of the input no window holds an event: the final
		// watermark passed them all. What is left to say is the bound.)
		if a.Dropped > 0 {
			fmt.Fprintf(bw, "  aggregate %s: %s dropped at the bound of a key's window (its values undercount)\n", a.Name, plural(int64(a.Dropped), "event", "events"))
		}
	}
	labels := ls != nil
	// The name column is as wide as the longest rule name, at least 22.
	width := 22
	for _, r := range s.Rules {
		width = max(width, len(r.Rule))
	}
	fmt.Fprintf(bw, "\n  %-*s %-9s %8s", width, "rule", "severity", "alerts")
	if labels {
		fmt.Fprintf(bw, " %7s %7s %9s %8s", "true", "false", "precision", "caught")
	}
	fmt.Fprintln(bw)
	for _, r := range s.Rules {
		fmt.Fprintf(bw, "  %-*s %-9s %8s", width, r.Rule, r.Severity, humanize.Int(r.Alerts))
		if labels {
			l := ls.Rule(r.Rule)
			prec := "-"
			if l.Alerts > 0 {
				prec = fmt.Sprintf("%.1f%%", 100*l.Precision())
			}
			fmt.Fprintf(bw, " %7s %7s %9s %8s", humanize.Int(l.TruePositives), humanize.Int(l.FalsePositives), prec, humanize.Int(l.Caught))
		}
		if notes := ruleNotes(r); len(notes) > 0 {
			fmt.Fprintf(bw, "  (%s)", strings.Join(notes, "; "))
		}
		fmt.Fprintln(bw)
	}
	printRuleErrors(bw, s.Rules)
	if !labels {
		return
	}
	recall := "-" // no labelled event: no recall
	if ls.Labelled > 0 {
		recall = fmt.Sprintf("%.1f%%", 100*ls.Recall())
	}
	fmt.Fprintf(bw, "\n  Labelled events (%s): %s, caught by some alert: %s, recall %s\n",
		f.label, humanize.Int(ls.Labelled), humanize.Int(ls.Caught), recall)
	if ls.Late > 0 {
		fmt.Fprintf(bw, "  (%s late, behind the watermark: no rule saw them, so they count as missed; see the late events above)\n",
			plural(ls.Late, "labelled event came", "labelled events came"))
	}
	if ls.CaseField != "" {
		caseRecall := "-"
		if ls.Cases > 0 {
			caseRecall = fmt.Sprintf("%.1f%%", 100*ls.CaseRecall())
		}
		fmt.Fprintf(bw, "  Cases (%s): %s, caught (an alert holds one of their labelled events): %s, recall %s\n",
			ls.CaseField, humanize.Int(ls.Cases), humanize.Int(ls.CasesCaught), caseRecall)
		if ls.Cases == 0 && ls.Labelled > 0 {
			fmt.Fprintf(bw, "  (no labelled event has a field %s: is it the case field's name?)\n", ls.CaseField)
		}
	}
	if ls.Present == 0 && s.Decoded > 0 {
		// A misspelled -label reads as a run without fraud.
		near := ""
		if f.labelNear != "" {
			near = " the schema declares " + f.labelNear
		}
		fmt.Fprintf(bw, "  (no event has a field %s: is it the label field's name?%s)\n", f.label, near)
	} else if ls.Present > 0 && ls.Labelled == 0 {
		// A label of another form (a scenario name) reads the same way.
		fmt.Fprintf(bw, "  (%s a field %s, none of them true: a label is true, a non-zero number, or \"true\", \"1\" or \"yes\")\n",
			plural(ls.Present, "event has", "events have"), f.label)
	}
	if len(ls.Scenarios) == 0 {
		return
	}
	if ls.ScenarioPresent == 0 {
		// A misspelled -scenario put every labelled event in one row.
		fmt.Fprintf(bw, "  (no labelled event has a field %s: is it the scenario field's name?)\n", ls.ScenarioField)
	}
	width = 22
	for _, sc := range ls.Scenarios {
		width = max(width, len(sc.Scenario))
	}
	cases := ls.CaseField != ""
	fmt.Fprintf(bw, "\n  %-*s %9s %8s %7s %7s", width, "scenario", "labelled", "caught", "recall", "missed")
	if cases {
		fmt.Fprintf(bw, " %6s %7s", "cases", "caught")
	}
	fmt.Fprintf(bw, "  %s\n", "caught by")
	for _, sc := range ls.Scenarios {
		name := sc.Scenario
		if name == "" {
			name = "(no scenario)"
		}
		type rc struct {
			rule string
			n    int64
		}
		var by []rc
		for r, n := range sc.ByRule {
			by = append(by, rc{r, n})
		}
		sort.Slice(by, func(i, j int) bool { return by[i].n > by[j].n || by[i].n == by[j].n && by[i].rule < by[j].rule })
		var parts []string
		for i, b := range by {
			if i == maxCaughtBy {
				// The rules that caught most; the alerts file has the rest.
				more := "and 1 more rule"
				if n := len(by) - i; n > 1 {
					more = fmt.Sprintf("and %d more rules", n)
				}
				parts = append(parts, more)
				break
			}
			parts = append(parts, fmt.Sprintf("%s %s", b.rule, humanize.Int(b.n)))
		}
		recall := "-"
		if sc.Labelled > 0 {
			recall = fmt.Sprintf("%.1f%%", 100*sc.Recall())
		}
		line := fmt.Sprintf("  %-*s %9s %8s %7s %7s", width, name, humanize.Int(sc.Labelled), humanize.Int(sc.Caught),
			recall, humanize.Int(sc.Missed()))
		if cases {
			line += fmt.Sprintf(" %6s %7s", humanize.Int(sc.Cases), humanize.Int(sc.CasesCaught))
		}
		line += "  " + strings.Join(parts, ", ")
		fmt.Fprintln(bw, strings.TrimRight(line, " "))
	}
	if !cases {
		// Recall counts events: a scenario whose alerts hold a few
		// events of each instance (a burst of 50 logins, an alert of 2)
		// reads low though every instance was caught (a trial's 4.2%).
		for _, sc := range ls.Scenarios {
			if sc.Caught > 0 && sc.Recall() < 0.25 {
				fmt.Fprintf(bw, "  (recall counts labelled events, and an alert holds a few of a long instance's: -case FIELD counts the instances caught)\n")
				break
			}
		}
	}
}

// maxCaughtBy is the most rules a scenario's "caught by" names, those
// that caught most of its events; the others are counted.
const maxCaughtBy = 5

// exampleTee passes alerts through and keeps the first few of each rule.
type exampleTee struct {
	w    io.Writer
	per  int
	seen map[string]int
	kept []string
	part []byte
	// label is -label's field: an example holding a labelled event is
	// marked true, else false, as the summary counts them.
	label string
}

func (t *exampleTee) Write(p []byte) (int, error) {
	n, err := t.w.Write(p)
	t.part = append(t.part, p...)
	for {
		i := strings.IndexByte(string(t.part), '\n')
		if i < 0 {
			break
		}
		line := string(t.part[:i])
		t.part = t.part[i+1:]
		var a struct {
			Rule string `json:"rule"`
		}
		if json.Unmarshal([]byte(line), &a) == nil && t.seen[a.Rule] < t.per {
			t.seen[a.Rule]++
			t.kept = append(t.kept, line)
		}
	}
	return n, err
}

// print shows the kept alerts of a ruleset in a readable form.
func (t *exampleTee) print(w io.Writer, ruleset string) {
	if len(t.kept) == 0 {
		return
	}
	fmt.Fprintf(w, "\n  Example alerts:\n")
	for _, line := range t.kept {
		var a struct {
			Rule       string          `json:"rule"`
			Ruleset    string          `json:"ruleset"`
			Severity   string          `json:"severity"`
			Key        map[string]any  `json:"key"`
			DetectedAt string          `json:"detected_at"`
			Matched    json.RawMessage `json:"matched"`
			Emit       json.RawMessage `json:"emit"`
			ID         string          `json:"alert_id"`
		}
		if json.Unmarshal([]byte(line), &a) != nil || a.Ruleset != ruleset {
			continue
		}
		// The stages in the alert's order, the pattern's.
		names, raws := objectMembers(a.Matched)
		mark := ""
		if t.label != "" {
			mark = " (false)"
			for _, raw := range raws {
				var evs []map[string]any
				_ = json.Unmarshal(raw, &evs)
				for _, e := range evs {
					if labelled(e[t.label]) {
						mark = " (true)"
					}
				}
			}
		}
		fmt.Fprintf(w, "    [%s] %s %s key %s at %s%s\n", a.Severity, a.Rule, a.ID[:12], compactJSON(a.Key), a.DetectedAt, mark)
		stages := make([]string, 0, len(names))
		for i, s := range names {
			var evs []struct {
				Line json.Number `json:"line"`
			}
			_ = json.Unmarshal(raws[i], &evs)
			lines := make([]string, len(evs))
			for j, e := range evs {
				lines[j] = e.Line.String()
			}
			word := "lines"
			if len(lines) == 1 {
				word = "line"
			}
			stages = append(stages, fmt.Sprintf("%s: %s %s", s, word, strings.Join(lines, ",")))
		}
		fmt.Fprintf(w, "        %s", strings.Join(stages, "; "))
		var emit bytes.Buffer
		if json.Compact(&emit, a.Emit) == nil && emit.Len() > 2 { // its fields in the rule's order
			fmt.Fprintf(w, "; emit %s", emit.String())
		}
		fmt.Fprintln(w)
	}
}

// labelled reports whether a label's JSON value marks an event, as
// cep.Labels reads it: true, a non-zero number, or "true", "1" or "yes".
func labelled(v any) bool {
	switch v := v.(type) {
	case bool:
		return v
	case float64:
		return v != 0
	case string:
		return v == "true" || v == "1" || v == "yes"
	}
	return false
}

// objectMembers returns the names and values of a JSON object's members,
// in their order (none when raw is no object).
func objectMembers(raw json.RawMessage) ([]string, []json.RawMessage) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, nil
	}
	var names []string
	var values []json.RawMessage
	for dec.More() {
		t, err := dec.Token()
		name, ok := t.(string)
		if err != nil || !ok {
			break
		}
		var v json.RawMessage
		if dec.Decode(&v) != nil {
			break
		}
		names, values = append(names, name), append(values, v)
	}
	return names, values
}

func compactJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// seeFile points at the file that holds some records, or at the flag that
// would keep them.
func seeFile(path, flag string) string {
	if path == "" {
		return "only counted (" + flag + " FILE keeps them)"
	}
	return "see " + path
}

// lazyFile creates its file on the first write, so a run without late
// events or dead letters leaves no empty files behind; closed without a
// write after a run that read its whole input, it removes the regular file
// of its path that an earlier run left (the file there, if any, is this
// run's), or, made set (the alerts file), makes it empty. A run that did
// not read its input to the end (a mistyped -events or lookup file,
// Ctrl-C) before its first write leaves the file of an earlier run as it
// is. Without a path it discards what it is given. It writes whole lines
// ([lineWriter]).
type lazyFile struct {
	path string
	made bool // a run that read its whole input leaves the file, empty if nothing was written
	f    *os.File
	bw   *lineWriter
}

func (l *lazyFile) Write(p []byte) (int, error) {
	if l.path == "" {
		return len(p), nil
	}
	if l.bw == nil {
		f, err := createWriteOnly(l.path)
		if err != nil {
			return 0, err
		}
		l.f, l.bw = f, newLineWriter(f)
	}
	return l.bw.Write(p)
}

// Close flushes and closes the file; ranToEnd says that the run read its
// whole input, so that a file it did not write is an earlier run's.
func (l *lazyFile) Close(ranToEnd bool) error {
	if l.bw == nil {
		if ranToEnd && l.made && l.path != "" {
			_, err := l.Write(nil) // the run's file: no alerts
			if err != nil {
				return err
			}
			return l.Close(true)
		}
		endFIFO(l.path)
		// Yesterday's dead letters must not pass for today's (a cron
		// job's [ -s dead.jsonl ]). A device, a FIFO (its reader given
		// its end above) or a symbolic link is left as it is, and so
		// is every file after a run that did not read its input to the
		// end: it may be all there is of the last complete run.
		if st, err := os.Lstat(l.path); ranToEnd && l.path != "" && err == nil && st.Mode().IsRegular() {
			return os.Remove(l.path)
		}
		return nil
	}
	err := l.bw.Flush()
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	l.bw = nil
	return err
}

// endFIFO gives the reader of the FIFO at path, if there is one, its end
// of file: an output the run did not write (no late events, or a run
// that stopped before its first alert) is a FIFO its reader would wait
// on for ever (cat FIFO). It opens the FIFO without blocking and closes
// it; without a reader the open fails and nothing happens. Any other
// path is left alone.
func endFIFO(path string) {
	if st, err := os.Stat(path); path == "" || err != nil || st.Mode()&os.ModeNamedPipe == 0 {
		return
	}
	if fh, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
		fh.Close()
	}
}

// writeAllocProfile writes the allocations profile (every allocation
// since the process started, sampled) to path; a failure is reported on
// stderr, the run's outcome stands.
func writeAllocProfile(path string, stderr io.Writer) {
	out, err := os.Create(path)
	if err == nil {
		err = pprof.Lookup("allocs").WriteTo(out, 0)
		if cerr := out.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "cepheus: backtest: -memprofile: %v\n", err)
	}
}

// startCPUProfile writes a CPU profile to path until the returned function
// is called.
func startCPUProfile(cmd, path string) (stop func(), err error) {
	out, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("%s: -cpuprofile: %w", cmd, err)
	}
	if err := pprof.StartCPUProfile(out); err != nil {
		out.Close()
		return nil, fmt.Errorf("%s: -cpuprofile: %w", cmd, err)
	}
	return func() {
		pprof.StopCPUProfile()
		out.Close()
	}, nil
}

// plural returns n (with thousands separators) and the noun that goes with
// it: "1 line", "2 lines".
func plural(n int64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return humanize.Int(n) + " " + many
}

// byteSize is a flag value of bytes: a number with an optional unit (KiB,
// MiB, GiB, KB, MB, GB, B).
type byteSize int64

func (b *byteSize) String() string {
	n := int64(*b)
	for _, u := range []struct {
		name string
		size int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n != 0 && n%u.size == 0 {
			return strconv.FormatInt(n/u.size, 10) + u.name
		}
	}
	return strconv.FormatInt(n, 10)
}

func (b *byteSize) Set(s string) error {
	units := []struct {
		name string
		size int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"B", 1}}
	num, mult := s, int64(1)
	for _, u := range units {
		if strings.HasSuffix(s, u.name) {
			num, mult = strings.TrimSpace(strings.TrimSuffix(s, u.name)), u.size
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || n > math.MaxInt64/mult {
		return fmt.Errorf("want a size such as 384MiB, 2GiB or a number of bytes")
	}
	*b = byteSize(n * mult)
	return nil
}
