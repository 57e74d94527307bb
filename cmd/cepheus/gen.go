package main

import (
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/cepheus-cep/cepheus/internal/gen"
	"github.com/cepheus-cep/cepheus/internal/humanize"
)

var genCommand = &command{
	name:  "gen",
	short: "generate synthetic card transactions with labelled fraud, and lookup profiles",
	usage: "cepheus gen [flags] [-o file] [-profiles dir]",
	help: `Gen writes seeded synthetic card transactions and account events as JSON
lines (docs/data.md describes every field): customers with cards, devices
and IPs, merchants with their countries, Zipf-skewed activity, bounded
out-of-order timestamps, and injected fraud scenarios whose events are
labelled (is_fraud, scenario): card_testing, account_takeover,
impossible_travel, large_then_foreign, refund_abuse, velocity_burst,
dormant_card, auth_not_captured.

The defaults give 60 days of sparse history and one dense day (about
325,000 events). The same flags give the same bytes. The output goes to
stdout, or to -o FILE (gzip-compressed when FILE ends in .gz), which
appears whole once gen ends well (an interrupted gen leaves none; a
symbolic link FILE is followed: the file it points to is written). A
summary goes to stderr (none with -q, which keeps the warnings).

-profiles DIR also writes the lookup data of the generated population,
creating DIR: one JSON-lines file per lookup of rulesets/cards.cep, today
DIR/customer.jsonl with one line per customer (customer_id, home_country,
risk_tier, tenure_days). The profiles depend only on -seed and
-customers, and asking for them does not change the events. Bind them
with -lookup customer=file:DIR/customer.jsonl on backtest, run and serve.
`,
}

func init() { genCommand.run = runGen }

func runGen(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	d := gen.DefaultConfig()
	fs := newFlagSet(genCommand, stdout)
	seed := fs.Uint64("seed", d.Seed, "random seed: selects the data")
	start := fs.String("start", d.Start.Format(time.RFC3339), "first possible event time (RFC 3339)")
	history := fs.Int("history-days", d.HistoryDays, "days of sparse history before the dense days")
	historyRate := fs.Int("history-events-per-day", d.HistoryEventsPerDay, "normal events per history day")
	days := fs.Int("days", d.Days, "dense days after the history")
	rate := fs.Int("events-per-day", d.EventsPerDay, "normal events per dense day")
	customers := fs.Int("customers", d.Customers, "number of customers")
	merchants := fs.Int("merchants", d.Merchants, "number of merchants")
	var fraud optionalFloat
	fs.Var(&fraud, "fraud-rate", "inject every scenario at this `rate`: instances per 100,000 normal events (default: each scenario's own rate, 10)")
	scenarios := fs.String("scenarios", "", "comma-separated scenarios to inject (default: all)")
	maxDelay := fs.Duration("max-delay", d.MaxDelay, "disorder bound: how far behind the newest event an event may come")
	out := fs.String("o", "", "write to this file instead of stdout (.gz: gzip)")
	profiles := fs.String("profiles", "", "also write the population's lookup data (customer.jsonl) to this `dir`, creating it")
	quiet := fs.Bool("q", false, "no summary; warnings are still written")
	if err := fs.parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fs.usagef("unexpected arguments %q", fs.Args())
	}
	cfg := d
	cfg.Seed = *seed
	t, err := time.Parse(time.RFC3339, *start)
	if err != nil {
		return fs.usagef("-start: %v", err)
	}
	cfg.Start = t
	cfg.HistoryDays, cfg.HistoryEventsPerDay = *history, *historyRate
	cfg.Days, cfg.EventsPerDay = *days, *rate
	cfg.Customers, cfg.Merchants = *customers, *merchants
	cfg.MaxDelay = *maxDelay
	if *scenarios != "" {
		keep := map[string]bool{}
		for _, s := range strings.Split(*scenarios, ",") {
			keep[strings.TrimSpace(s)] = true
		}
		for name := range keep {
			if _, ok := cfg.Scenarios[name]; !ok {
				return fs.usagef("-scenarios: unknown scenario %q (known: %s)", name, strings.Join(gen.ScenarioNames(), ", "))
			}
		}
		for name := range cfg.Scenarios {
			if !keep[name] {
				cfg.Scenarios[name] = 0
			}
		}
	}
	if fraud.set {
		for name, r := range cfg.Scenarios {
			if r > 0 {
				cfg.Scenarios[name] = fraud.v
			}
		}
	}
	if fraud.set && !(fraud.v >= 0 && fraud.v <= gen.MaxRate) {
		return fs.usagef("-fraud-rate %v is outside 0..%d (instances per 100,000 normal events)", fraud.v, gen.MaxRate)
	}
	g, err := gen.New(cfg)
	if err != nil {
		return genConfigError(fs, err)
	}
	if err := outputBesideProfiles(*out, *profiles); err != nil {
		return fs.usagef("%v", err)
	}
	// The profiles come first: they are quick, and a directory that cannot
	// be written fails the command before the long part.
	var profileFiles []string
	if *profiles != "" {
		if profileFiles, err = g.WriteProfiles(ctx, *profiles); err != nil {
			return fmt.Errorf("gen: -profiles: %w", err)
		}
	}
	w, commit, abort, err := createOutput(*out, stdout)
	if err != nil {
		return fmt.Errorf("gen: %w", err)
	}
	began := time.Now()
	st, err := g.WriteTo(ctx, w)
	if err == nil {
		err = commit()
	} else {
		abort()
	}
	switch {
	case err != nil && ctx.Err() != nil && *out != "" && *out != "-":
		return interrupted(ctx, "gen interrupted: %s not written", *out)
	case err != nil && ctx.Err() != nil:
		return interrupted(ctx, "gen interrupted: the output is partial")
	case err != nil:
		return fmt.Errorf("gen: %w", err)
	}
	if !*quiet {
		printGenSummary(stderr, st, time.Since(began), *out, cfg.Customers, profileFiles)
	}
	// A scenario asked for that got no instance is a surprise: its rate
	// is per 100,000 normal events, so small runs may get none.
	var none []string
	for _, n := range gen.ScenarioNames() {
		if cfg.Scenarios[n] > 0 && st.Instances[n] == 0 {
			none = append(none, n)
		}
	}
	if len(none) > 0 {
		normal := st.Events - st.Fraud
		perDay := "-events-per-day"
		if cfg.Days == 0 {
			perDay = "-history-events-per-day" // only history days
		}
		fmt.Fprintf(stderr, "gen: warning: no instance of %s was injected: a rate of %v per 100,000 normal events expects %.2g in %s; raise -fraud-rate or %s\n",
			strings.Join(none, ", "), cfg.Scenarios[none[0]], cfg.Scenarios[none[0]]*float64(normal)/100_000, plural(int64(normal), "normal event", "normal events"), perDay)
	}
	return nil
}

// printGenSummary writes gen's summary: the events written (to out, when
// not stdout) in elapsed, by scenario, and the profiles files.
func printGenSummary(stderr io.Writer, st gen.Stats, elapsed time.Duration, out string, customers int, profileFiles []string) {
	fmt.Fprintf(stderr, "gen: %s (%s fraud) in %.1fs", plural(int64(st.Events), "event", "events"), humanize.Int(int64(st.Fraud)), elapsed.Seconds())
	if out != "" {
		fmt.Fprintf(stderr, " to %s", out)
	}
	fmt.Fprintln(stderr)
	names := make([]string, 0, len(st.Instances))
	for n := range st.Instances {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		instances, events := "instances", "events"
		if st.Instances[n] == 1 {
			instances = "instance"
		}
		if st.ByScenario[n] == 1 {
			events = "event"
		}
		fmt.Fprintf(stderr, "  %-20s %4s %-9s %6s %s\n", n, humanize.Int(int64(st.Instances[n])), instances, humanize.Int(int64(st.ByScenario[n])), events)
	}
	if len(profileFiles) > 0 {
		fmt.Fprintf(stderr, "gen: profiles of %s to %s\n", plural(int64(customers), "customer", "customers"), strings.Join(profileFiles, ", "))
	}
}

// genFlags names the flag of each gen.Config field.
var genFlags = map[string]string{
	"Start":               "-start",
	"HistoryDays":         "-history-days",
	"HistoryEventsPerDay": "-history-events-per-day",
	"Days":                "-days",
	"EventsPerDay":        "-events-per-day",
	"Customers":           "-customers",
	"Merchants":           "-merchants",
	"Scenarios":           "-scenarios",
	"MaxDelay":            "-max-delay",
}

// genConfigError rewrites the problems of a gen.Config in terms of the
// flags: a usage error.
func genConfigError(fs *flagSet, err error) error {
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	var msgs []string
	for _, e := range errs {
		var ce *gen.ConfigError
		if !errors.As(e, &ce) {
			return err
		}
		msgs = append(msgs, ce.Message(func(field string) string {
			if f, ok := genFlags[field]; ok {
				return f
			}
			return field
		}))
	}
	return fs.usagef("%s", strings.Join(msgs, "\ncepheus: gen: "))
}

// createOutput opens the output: stdout for "" or "-", else a hidden
// file beside path (a partialFile), gzip-compressed when path ends in
// .gz. commit flushes, syncs and closes it and renames it to path; abort
// removes it: a gen that fails or is interrupted leaves no partial file
// that would pass for a whole one (nor replaces an older file of that
// name). A path that is
// not a regular file (/dev/null, a FIFO) is written as it is: renamed
// over, a device or a FIFO would become a regular file (as root, /dev/null
// itself). A symbolic link is followed: the file it points to is written.
func createOutput(path string, stdout io.Writer) (w io.Writer, commit func() error, abort func(), err error) {
	if path == "" || path == "-" {
		bw := bufio.NewWriterSize(stdout, 1<<16)
		return bw, bw.Flush, func() { _ = bw.Flush() }, nil
	}
	path = linkTarget(path)
	var f *os.File
	var pf *partialFile
	if st, serr := os.Stat(path); serr == nil && st.IsDir() {
		// Refused before the work (the rename at its end failed, saying
		// "file exists").
		return nil, nil, nil, fmt.Errorf("-o %s is a directory: name the file to write (for example %s)", path, filepath.Join(path, "events.jsonl.gz"))
	} else if serr == nil && !st.Mode().IsRegular() {
		f, err = os.OpenFile(path, os.O_WRONLY, 0)
	} else if pf, err = createPartial(path); err == nil {
		f = pf.File
	}
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err // said once, after -o
		}
		return nil, nil, nil, fmt.Errorf("-o %s: %w", path, err)
	}
	bw := bufio.NewWriterSize(f, 1<<16)
	w = bw
	flush := bw.Flush
	if strings.HasSuffix(path, ".gz") {
		zw, _ := gzip.NewWriterLevel(bw, gzip.BestSpeed)
		w = zw
		flush = func() error {
			if err := zw.Close(); err != nil {
				return err
			}
			return bw.Flush()
		}
	}
	abort = func() {
		if pf != nil {
			pf.abort()
		} else {
			f.Close()
		}
	}
	commit = func() error {
		err := flush()
		if pf == nil {
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			return err
		}
		if err != nil {
			pf.abort()
			return err
		}
		return pf.commit()
	}
	return w, commit, abort, nil
}

// outputBesideProfiles refuses an -o that -profiles would take: its
// directory (made by -profiles, then refused as a directory) or one of
// the files it writes (the events written over the profiles, without a
// word).
func outputBesideProfiles(out, profiles string) error {
	if out == "" || out == "-" || profiles == "" {
		return nil
	}
	o, err1 := filepath.Abs(out)
	p, err2 := filepath.Abs(profiles)
	if err1 != nil || err2 != nil {
		return nil // the writes report it
	}
	if o == p {
		return fmt.Errorf("-o %s is the -profiles directory: name the events file (for example %s)", out, filepath.Join(out, "events.jsonl.gz"))
	}
	for _, name := range gen.ProfileFiles() {
		if o == filepath.Join(p, name) {
			return fmt.Errorf("-o %s is a file -profiles writes: name another events file", out)
		}
	}
	return nil
}
