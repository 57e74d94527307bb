package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	"github.com/cepheus-cep/cepheus/cep"
	"github.com/cepheus-cep/cepheus/rules"
)

var backtestCommand = &command{
	name:  "backtest",
	usage: "cepheus backtest --rules file|dir --events file.jsonl|file.jsonl.gz|- [flags]",
	help: `Backtest replays a file of events through a ruleset exactly as a live run
would: every rule's keyed CEP operator in event time, a watermark that
trails the largest timestamp seen by -out-of-orderness, and, at the end of
the input, a final watermark that releases everything still pending
(absence rules such as "not captured within 30m" fire then).

Alerts are written as JSON lines (rule, ruleset and its version hash, key,
matched events by stage, emitted fields, event time of detection, and a
deterministic alert id) to -alerts, stdout by default. Events that arrive
behind the watermark go to -late; lines that are not valid JSON, or lack
the time field or a key field, go to -dead-letter with their line number
and the reason. Both files are created only when there is something to
write. Nothing stops the run but an I/O error.

With -label (for example -label is_fraud on the output of cepheus gen), the
summary gives per-rule true and false positives and precision (an alert is
true when any of its events is labelled), and per scenario the labelled
events caught, the recall and the events missed.

A progress line goes to stderr every few seconds on long inputs; the
summary goes to stderr at the end. -rules may name a directory: each of its
*.cep files is backtested in turn over the same events (not with stdin).
`,
}

func init() { backtestCommand.run = runBacktest }

// backtestGCPercent is the garbage collector's target for backtests (the
// Go default is 100).
const backtestGCPercent = 400

type backtestFlags struct {
	rules, events, alerts, late, dead string
	label, scenario                   string
	outOfOrder                        time.Duration
	maxPartial, maxBuffered           int
	watermarkEvery                    int
	examples                          int
	quiet                             bool
}

func runBacktest(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var f backtestFlags
	fs := newFlagSet(backtestCommand, stderr)
	fs.StringVar(&f.rules, "rules", "", "ruleset file, or a directory of *.cep files (required)")
	fs.StringVar(&f.events, "events", "", "events: a JSON-lines file, .jsonl.gz, or - for stdin (required)")
	fs.StringVar(&f.alerts, "alerts", "-", "where alerts go: a file, or - for stdout")
	fs.StringVar(&f.late, "late", "late.jsonl", "file for late events (created only if there are any)")
	fs.StringVar(&f.dead, "dead-letter", "dead-letter.jsonl", "file for undecodable lines (created only if there are any)")
	fs.StringVar(&f.label, "label", "", "field that labels fraudulent events (for example is_fraud)")
	fs.StringVar(&f.scenario, "scenario", "scenario", "field that names a labelled event's scenario")
	fs.DurationVar(&f.outOfOrder, "out-of-orderness", 5*time.Second, "watermark bound: how far an event may come behind the newest one without being late")
	fs.IntVar(&f.watermarkEvery, "watermark-every", 256, "events between two watermarks (1: after every event, as Flink's per-record watermarks); lateness depends on it only for input more disordered than -out-of-orderness")
	fs.IntVar(&f.maxPartial, "max-partial-matches", 0, "per-key cap on partial matches per rule (0: unlimited)")
	fs.IntVar(&f.maxBuffered, "max-buffered-events", 0, "per-key cap on events waiting for the watermark (0: unlimited)")
	fs.IntVar(&f.examples, "examples", 0, "print this many example alerts per rule in the summary")
	fs.BoolVar(&f.quiet, "q", false, "no progress line and no summary")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("backtest: unexpected arguments %q", fs.Args())
	}
	if f.rules == "" || f.events == "" {
		return usagef("backtest: -rules and -events are required")
	}
	// A backtest is a batch job whose heap is mostly short-lived events:
	// collecting less often costs memory (about 1.7x the peak) and saves
	// about a third of the CPU. GOGC in the environment still wins. The
	// setting is process-wide: restore it when the backtest ends.
	if os.Getenv("GOGC") == "" {
		defer debug.SetGCPercent(debug.SetGCPercent(backtestGCPercent))
	}
	files, err := rulesetFiles([]string{f.rules})
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("backtest: no *.cep files in %s", f.rules)
	}
	if len(files) > 1 && f.events == "-" {
		return usagef("backtest: several rulesets need an events file, not stdin")
	}
	var sets []*rules.Ruleset
	bad := false
	for _, name := range files {
		src, err := os.ReadFile(name)
		if err != nil {
			return err
		}
		rs, err := rules.Load(name, src)
		if err != nil {
			fmt.Fprintln(stderr, err)
			bad = true
			continue
		}
		sets = append(sets, rs)
	}
	if bad {
		return errFound
	}

	alerts, closeAlerts, err := createOutput(f.alerts, stdout)
	if err != nil {
		return err
	}
	var tee *exampleTee
	if f.examples > 0 && !f.quiet {
		tee = &exampleTee{w: alerts, per: f.examples, seen: map[string]int{}}
		alerts = tee
	}
	late := &lazyFile{path: f.late}
	dead := &lazyFile{path: f.dead}
	deadWriter := cep.NewDeadLetterWriter(dead)
	var sums []*cep.BacktestSummary
	var elapsed time.Duration
	for _, rs := range sets {
		src, err := cep.OpenEventSource(f.events)
		if err != nil {
			closeAlerts()
			return err
		}
		began := time.Now()
		prog := &progressPrinter{w: stderr, began: began, quiet: f.quiet, src: src}
		sum, err := cep.Backtest(ctx, cep.BacktestConfig{
			Ruleset:           rs,
			Source:            src,
			OutOfOrderness:    f.outOfOrder,
			LabelField:        f.label,
			ScenarioField:     f.scenario,
			Alerts:            alerts,
			Late:              late,
			DeadLetter:        deadWriter,
			Progress:          prog.report,
			WatermarkEvery:    f.watermarkEvery,
			MaxPartialMatches: f.maxPartial,
			MaxBufferedEvents: f.maxBuffered,
		})
		src.Close()
		prog.done()
		elapsed += time.Since(began)
		if err != nil {
			closeAlerts()
			deadWriter.Close()
			dead.Close()
			late.Close()
			return err
		}
		sums = append(sums, sum)
	}
	err = closeAlerts()
	// The dead-letter writer flushes into the lazy file, which then
	// flushes and closes: both, in that order.
	if cerr := deadWriter.Close(); err == nil {
		err = cerr
	}
	if cerr := dead.Close(); err == nil {
		err = cerr
	}
	if cerr := late.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if !f.quiet {
		for _, s := range sums {
			printSummary(stderr, s, elapsed, f, late, dead)
			if tee != nil {
				tee.print(stderr, s.Ruleset)
			}
		}
	}
	return nil
}

// progressPrinter prints a progress line at most every two seconds, only
// once the run has lasted two seconds (short runs stay quiet).
type progressPrinter struct {
	w       io.Writer
	began   time.Time
	last    time.Time
	quiet   bool
	printed bool
	src     *cep.EventSource
}

func (p *progressPrinter) report(bp cep.BacktestProgress) {
	if p.quiet {
		return
	}
	now := time.Now()
	if now.Sub(p.began) < 2*time.Second || now.Sub(p.last) < 2*time.Second {
		return
	}
	p.last = now
	rate := float64(bp.Records) / now.Sub(p.began).Seconds()
	line := fmt.Sprintf("backtest: line %d, %s events/s, %d alerts", bp.Line, humanInt(int64(rate)), bp.Alerts)
	if read, total := p.src.Progress(); total > 0 {
		line += fmt.Sprintf(", %.0f%%", 100*float64(read)/float64(total))
	}
	fmt.Fprintf(p.w, "\r%-72s", line)
	p.printed = true
}

func (p *progressPrinter) done() {
	if p.printed {
		fmt.Fprintln(p.w)
	}
}

func printSummary(w io.Writer, s *cep.BacktestSummary, elapsed time.Duration, f backtestFlags, late, dead *lazyFile) {
	bw := bufio.NewWriter(w)
	defer bw.Flush()
	version := s.RulesetVersion
	if len(version) > 12 {
		version = version[:12]
	}
	rate := float64(s.Records) / elapsed.Seconds()
	fmt.Fprintf(bw, "\nRuleset %s (version %s): %s lines, %s events, %s alerts in %.2fs (%s events/s)\n",
		s.Ruleset, version, humanInt(s.Records), humanInt(s.Decoded), humanInt(s.Alerts), elapsed.Seconds(), humanInt(int64(rate)))
	if s.Dead > 0 {
		fmt.Fprintf(bw, "  %s lines could not be decoded: see %s\n", humanInt(s.Dead), dead.path)
	}
	if s.Late > 0 {
		fmt.Fprintf(bw, "  %s events were late (behind the watermark, -out-of-orderness %v): see %s\n", humanInt(s.Late), f.outOfOrder, late.path)
	}
	labels := f.label != ""
	fmt.Fprintf(bw, "\n  %-22s %-9s %8s", "rule", "severity", "alerts")
	if labels {
		fmt.Fprintf(bw, " %7s %7s %9s %8s", "true", "false", "precision", "caught")
	}
	fmt.Fprintln(bw)
	for _, r := range s.Rules {
		fmt.Fprintf(bw, "  %-22s %-9s %8s", r.Rule, r.Severity, humanInt(r.Alerts))
		if labels {
			prec := "-"
			if r.Alerts > 0 {
				prec = fmt.Sprintf("%.1f%%", 100*r.Precision())
			}
			fmt.Fprintf(bw, " %7s %7s %9s %8s", humanInt(r.TruePositives), humanInt(r.FalsePositives), prec, humanInt(r.LabelledCaught))
		}
		var notes []string
		if r.ConditionErrors > 0 {
			notes = append(notes, fmt.Sprintf("%d condition errors", r.ConditionErrors))
		}
		if r.Dropped > 0 {
			notes = append(notes, fmt.Sprintf("%d partial matches dropped (limit)", r.Dropped))
		}
		if r.Overflow > 0 {
			notes = append(notes, fmt.Sprintf("%d events over the buffer limit", r.Overflow))
		}
		if len(notes) > 0 {
			fmt.Fprintf(bw, "  (%s)", strings.Join(notes, "; "))
		}
		fmt.Fprintln(bw)
	}
	if !labels {
		return
	}
	fmt.Fprintf(bw, "\n  Labelled events (%s): %s, caught by some alert: %s, recall %.1f%%\n",
		f.label, humanInt(s.Labelled), humanInt(s.Caught), 100*s.Recall())
	if len(s.Scenarios) == 0 {
		return
	}
	fmt.Fprintf(bw, "\n  %-22s %9s %8s %7s %7s  %s\n", "scenario", "labelled", "caught", "recall", "missed", "caught by")
	for _, sc := range s.Scenarios {
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
		for _, b := range by {
			parts = append(parts, fmt.Sprintf("%s %s", b.rule, humanInt(b.n)))
		}
		fmt.Fprintf(bw, "  %-22s %9s %8s %6.1f%% %7s  %s\n", name, humanInt(sc.Labelled), humanInt(sc.Caught),
			100*sc.Recall(), humanInt(sc.Missed()), strings.Join(parts, ", "))
	}
}

// exampleTee passes alerts through and keeps the first few of each rule.
type exampleTee struct {
	w    io.Writer
	per  int
	seen map[string]int
	kept []string
	part []byte
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
			Rule       string                      `json:"rule"`
			Ruleset    string                      `json:"ruleset"`
			Severity   string                      `json:"severity"`
			Key        map[string]any              `json:"key"`
			DetectedAt string                      `json:"detected_at"`
			Matched    map[string][]map[string]any `json:"matched"`
			Emit       map[string]any              `json:"emit"`
			ID         string                      `json:"alert_id"`
		}
		if json.Unmarshal([]byte(line), &a) != nil || a.Ruleset != ruleset {
			continue
		}
		fmt.Fprintf(w, "    [%s] %s %s key %s at %s\n", a.Severity, a.Rule, a.ID[:12], compactJSON(a.Key), a.DetectedAt)
		stages := make([]string, 0, len(a.Matched))
		for s, evs := range a.Matched {
			lines := make([]string, len(evs))
			for i, e := range evs {
				lines[i] = fmt.Sprint(e["line"])
			}
			stages = append(stages, fmt.Sprintf("%s: lines %s", s, strings.Join(lines, ",")))
		}
		sort.Strings(stages)
		fmt.Fprintf(w, "        %s", strings.Join(stages, "; "))
		if len(a.Emit) > 0 {
			fmt.Fprintf(w, "; emit %s", compactJSON(a.Emit))
		}
		fmt.Fprintln(w)
	}
}

func compactJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// humanInt formats n with thousands separators.
func humanInt(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// lazyFile creates its file on the first write, so a run without late
// events or dead letters leaves no empty files behind.
type lazyFile struct {
	path string
	f    *os.File
	bw   *bufio.Writer
}

func (l *lazyFile) Write(p []byte) (int, error) {
	if l.bw == nil {
		f, err := os.Create(l.path)
		if err != nil {
			return 0, err
		}
		l.f, l.bw = f, bufio.NewWriterSize(f, 1<<16)
	}
	return l.bw.Write(p)
}

func (l *lazyFile) Close() error {
	if l.bw == nil {
		return nil
	}
	err := l.bw.Flush()
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	l.bw = nil
	return err
}
