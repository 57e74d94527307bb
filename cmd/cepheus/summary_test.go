package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cepheus-cep/cepheus/cep"
	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/rules"
)

// TestBacktestFlagValues: out-of-range flag values are usage errors (exit
// 2) named by their flags, all of them, before anything is read.
func TestBacktestFlagValues(t *testing.T) {
	dir := t.TempDir()
	rules := writeFile(t, dir, "r.cep", goodSrc)
	events := writeFile(t, dir, "e.jsonl", abEvents(4, 0, ""))
	code, out, errOut := cepheus(t, "backtest", "-rules", rules, "-events", events,
		"-out-of-orderness", "-5s", "-max-partial-matches", "-1", "-max-dead-fraction", "2")
	want := "cepheus: backtest: -out-of-orderness -5s is negative\n" +
		"cepheus: backtest: -max-partial-matches -1 is negative\n" +
		"cepheus: backtest: -max-dead-fraction 2 is outside 0..1\n" +
		"Run 'cepheus help backtest' for usage.\n"
	if code != 2 || out != "" || errOut != want {
		t.Errorf("exit %d, stderr\n%s\nwant 2 and\n%s", code, errOut, want)
	}
}

// TestBacktestErrorsWithoutPackagePrefixes: the errors that end a run
// speak of files and lines, not of the packages they passed through.
func TestBacktestErrorsWithoutPackagePrefixes(t *testing.T) {
	dir := t.TempDir()
	rules := writeFile(t, dir, "r.cep", goodSrc)
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.Write([]byte(abEvents(5000, 0, "")))
	zw.Close()
	truncated := filepath.Join(dir, "e.jsonl.gz")
	if err := os.WriteFile(truncated, z.Bytes()[:z.Len()/2], 0o644); err != nil {
		t.Fatal(err)
	}
	undecodable := writeFile(t, dir, "bad.jsonl", "not json\n")
	missing := filepath.Join(dir, "missing.jsonl")
	for _, c := range []struct {
		events, want string
	}{
		{missing, "cepheus: backtest: -events " + missing + ": no such file or directory\n"},
		{truncated, "cepheus: backtest: " + truncated + ": line "},
		{undecodable, "cepheus: backtest: ruleset good: 1 of 1 line could not be decoded (line 1: column 1: want a JSON object, found 'n')\n"},
	} {
		code, _, errOut := cepheus(t, "backtest", "-rules", rules, "-events", c.events, "-alerts", filepath.Join(dir, "a.jsonl"))
		last := errOut[strings.LastIndex(errOut, "cepheus: "):]
		if code != 1 || !strings.HasPrefix(last, c.want) {
			t.Errorf("%s: exit %d, stderr\n%s\nwant 1 and an error starting %q", filepath.Base(c.events), code, errOut, c.want)
		}
		for _, prefix := range []string{"cep:", "runtime:", "source:", "backtest: backtest:"} {
			if strings.Contains(errOut, prefix) {
				t.Errorf("%s: the error names %q:\n%s", filepath.Base(c.events), prefix, errOut)
			}
		}
	}
}

// TestBacktestSummaryWording: counts agree with their nouns, blank lines
// are said to be left out of the line count, no rate is given for no
// events, an input without labelled events has no recall, and a label
// field that no event has is said to be missing.
func TestBacktestSummaryWording(t *testing.T) {
	dir := t.TempDir()
	rules := writeFile(t, dir, "r.cep", goodSrc)
	events := writeFile(t, dir, "e.jsonl", "\n\nnot json\n")
	_, _, errOut := cepheus(t, "backtest", "-rules", rules, "-events", events, "-label", "is_fraud", "-max-dead-fraction", "1")
	for _, want := range []string{
		"Ruleset good (version ", "): 1 line (not counting 2 blank lines), 0 events, 0 alerts in ",
		"\n  1 line could not be decoded (first: line 3:",
		"recall -\n",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("summary lacks %q:\n%s", want, errOut)
		}
	}
	if strings.Contains(errOut, "events/s") || strings.Contains(errOut, "0.0%") {
		t.Errorf("summary gives a rate or a recall for no events:\n%s", errOut)
	}
	events = writeFile(t, dir, "e2.jsonl", abEvents(2, 0, ""))
	_, _, errOut = cepheus(t, "backtest", "-rules", rules, "-events", events)
	if !strings.Contains(errOut, "): 2 lines, 2 events, 1 alert in ") || !strings.Contains(errOut, "events/s)") {
		t.Errorf("summary of 2 events:\n%s", errOut)
	}

	// A label field no event has is named (a misspelled -label reads as
	// a run without fraud); one that events have, even false, is not.
	const note = "(no event has a field nosuchfield: is it the label field's name?)"
	_, _, errOut = cepheus(t, "backtest", "-rules", rules, "-events", events, "-label", "nosuchfield")
	if !strings.Contains(errOut, note) {
		t.Errorf("-label nosuchfield: summary lacks %q:\n%s", note, errOut)
	}
	// One close to a declared field: named.
	declared := writeFile(t, dir, "declared.cep", strings.Replace(goodSrc, "event time ts\n", "event time ts\nschema {\n  ts: time\n  k: string\n  name: string\n  is_fraud: bool\n}\n", 1))
	_, _, errOut = cepheus(t, "backtest", "-rules", declared, "-events", events, "-label", "isfraud")
	if want := "(no event has a field isfraud: is it the label field's name? the schema declares is_fraud)"; !strings.Contains(errOut, want) {
		t.Errorf("-label isfraud: summary lacks %q:\n%s", want, errOut)
	}
	falseLabels := strings.ReplaceAll(abEvents(2, 0, ""), `"k":`, `"nosuchfield":false,"k":`)
	events = writeFile(t, dir, "e3.jsonl", falseLabels)
	_, _, errOut = cepheus(t, "backtest", "-rules", rules, "-events", events, "-label", "nosuchfield")
	if strings.Contains(errOut, "no event has a field") || !strings.Contains(errOut, "Labelled events (nosuchfield): 0,") ||
		!strings.Contains(errOut, `(2 events have a field nosuchfield, none of them true: a label is true, a non-zero number, or "true", "1" or "yes")`) {
		t.Errorf("-label nosuchfield over events that have it, false:\n%s", errOut)
	}
	// A label of another form (a scenario's name) is said not to count.
	named := strings.ReplaceAll(abEvents(2, 0, ""), `"k":`, `"scenario":"card_testing","k":`)
	events = writeFile(t, dir, "e4.jsonl", named)
	_, _, errOut = cepheus(t, "backtest", "-rules", rules, "-events", events, "-label", "scenario")
	if !strings.Contains(errOut, "Labelled events (scenario): 0,") || !strings.Contains(errOut, "2 events have a field scenario, none of them true") {
		t.Errorf("-label scenario over names:\n%s", errOut)
	}
	// Once one is true, nothing is said.
	some := strings.Replace(falseLabels, `"nosuchfield":false`, `"nosuchfield":"yes"`, 1)
	events = writeFile(t, dir, "e5.jsonl", some)
	_, _, errOut = cepheus(t, "backtest", "-rules", rules, "-events", events, "-label", "nosuchfield")
	if strings.Contains(errOut, "none of them true") || !strings.Contains(errOut, "Labelled events (nosuchfield): 1,") {
		t.Errorf("-label nosuchfield, one yes:\n%s", errOut)
	}
	// A scenario field no labelled event has is named too (every
	// labelled event then falls in one row, "(no scenario)"); once one
	// has it, nothing is said.
	const scNote = "(no labelled event has a field scenarios: is it the scenario field's name?)"
	_, _, errOut = cepheus(t, "backtest", "-rules", rules, "-events", events, "-label", "nosuchfield", "-scenario", "scenarios")
	if !strings.Contains(errOut, scNote) || !strings.Contains(errOut, "(no scenario)") {
		t.Errorf("-scenario scenarios: summary lacks %q:\n%s", scNote, errOut)
	}
	events = writeFile(t, dir, "e6.jsonl", strings.Replace(some, `"nosuchfield":"yes"`, `"nosuchfield":"yes","scenarios":"x"`, 1))
	_, _, errOut = cepheus(t, "backtest", "-rules", rules, "-events", events, "-label", "nosuchfield", "-scenario", "scenarios")
	if strings.Contains(errOut, "no labelled event has a field") || !strings.Contains(errOut, "\n  x ") {
		t.Errorf("-scenario scenarios over a labelled event that has it:\n%s", errOut)
	}
}

// TestBacktestAbsentFields: a field that rules read and no event had (a
// misnamed field: status == "declined" is false on null, no error) is
// named with its rules; a field present as null, an aggregate's and a
// lookup's values, and a field no rule reads are not.
func TestBacktestAbsentFields(t *testing.T) {
	dir := t.TempDir()
	rules := writeFile(t, dir, "r.cep", `ruleset absent
event time ts
schema {
  ts: time
  k: string
  status: string
  note: string
  unread: string
}
lookup customer {
  key k
  fields {
    tier: string default "basic"
  }
}
aggregate n {
  key k
  count
  window 1h
}
rule declines {
  key k
  pattern {
    begin a times 2 where status == "declined"
    within 1h
  }
}
rule noted {
  key k
  pattern {
    begin a where note == nil && n > 0 && customer.tier == "basic" && status != "x"
  }
}
`)
	events := writeFile(t, dir, "e.jsonl", `{"ts": "2026-01-01T00:00:00Z", "k": "x", "note": null}`+"\n"+`{"ts": "2026-01-01T00:00:01Z", "k": "x"}`+"\n")
	code, _, errOut := cepheus(t, "backtest", "-q", "-rules", rules, "-events", events)
	const want = "backtest: warning: no event had the field status, which rules declines and noted read: each read of it is null (is it the field's name?)\n"
	if code != 0 || !strings.Contains(errOut, want) {
		t.Errorf("backtest: exit %d, want 0 and %q:\n%s", code, want, errOut)
	}
	for _, f := range []string{"field note", "field unread", "tier", "field n,"} {
		if strings.Contains(errOut, f) {
			t.Errorf("backtest names %q among the absent fields:\n%s", f, errOut)
		}
	}
	events = writeFile(t, dir, "e2.jsonl", `{"ts": "2026-01-01T00:00:00Z", "k": "x", "status": "declined", "note": "y"}`+"\n")
	if _, _, errOut := cepheus(t, "backtest", "-q", "-rules", rules, "-events", events); strings.Contains(errOut, "no event had the field") {
		t.Errorf("backtest over events that have every field read:\n%s", errOut)
	}
}

// TestProgressLines: on a terminal the progress line is rewritten in
// place; elsewhere every report is a plain line starting with
// "backtest: ", also without an input size (stdin). A topic's progress
// counts records.
func TestProgressLines(t *testing.T) {
	for _, c := range []struct {
		tty   bool
		total int64
		unit  string
		want  string
	}{
		{false, -1, "", "backtest: line 100, 25 events/s, 1 alert\nbacktest: line 300, 50 events/s, 3 alerts\n"},
		{false, 1000, "", "backtest: line 100, 25 events/s, 1 alert, 50%\nbacktest: line 300, 50 events/s, 3 alerts, 50%\n"},
		{true, -1, "", fmt.Sprintf("\r%-72s\r%-72s\n", "backtest: line 100, 25 events/s, 1 alert", "backtest: line 300, 50 events/s, 3 alerts")},
		{false, 1000, "record", "backtest: record 100, 25 events/s, 1 alert, 50%\nbacktest: record 300, 50 events/s, 3 alerts, 50%\n"},
	} {
		var w bytes.Buffer
		t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		clock := t0
		p := &progressPrinter{w: &w, tty: c.tty, began: t0, now: func() time.Time { return clock }, src: fakeProgress{c.total}, unit: c.unit}
		report := func(after time.Duration, line, alerts int64) {
			clock = t0.Add(after)
			var bp cep.Progress
			bp.Line, bp.Decoded, bp.Alerts = line, line, alerts
			p.report(bp)
		}
		report(time.Second, 10, 0) // too early
		report(4*time.Second, 100, 1)
		report(5*time.Second, 200, 2) // too soon after the last
		report(6*time.Second, 300, 3)
		p.done()
		if got := w.String(); got != c.want {
			t.Errorf("tty %v, total %d: progress\n%q\nwant\n%q", c.tty, c.total, got, c.want)
		}
	}
}

// TestBacktestProgressCadence: a backtest whose records are slow (here a
// clock that moves a second each time it is read) prints its progress
// every two seconds or so, not only every 100,000 records: a rule whose
// key holds many partial matches ran for minutes without a line.
func TestBacktestProgressCadence(t *testing.T) {
	dir := t.TempDir()
	rules := writeFile(t, dir, "r.cep", goodSrc)
	events := writeFile(t, dir, "e.jsonl", abEvents(2000, 0, ""))
	slowBacktestClock(t)
	var stdout, stderr bytes.Buffer
	if code := exitCode(run(context.Background(), []string{"backtest", "-rules", rules, "-events", events, "-alerts", filepath.Join(dir, "alerts.jsonl")}, &stdout, &stderr), &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	lines := progressLines(stderr.String())
	if len(lines) < 3 || !strings.HasPrefix(lines[0], "backtest: line 512,") {
		t.Errorf("progress lines %q: want one every two seconds, the first at line 512 (two seconds in)", lines)
	}
}

// TestBacktestProgressOfRedirectedStdin: -events - with standard input
// a regular file (< FILE) gives how far the run has read in its progress
// line, as -events FILE does: read through ctxReader (3ada2be), the
// source no longer knew the input's size and the share was gone.
func TestBacktestProgressOfRedirectedStdin(t *testing.T) {
	dir := t.TempDir()
	rules := writeFile(t, dir, "r.cep", goodSrc)
	slowBacktestClock(t)
	var stdout, stderr bytes.Buffer
	withStdin(t, abEvents(2000, 0, ""), func() {
		if code := exitCode(run(context.Background(), []string{"backtest", "-rules", rules, "-events", "-", "-alerts", filepath.Join(dir, "alerts.jsonl")}, &stdout, &stderr), &stderr); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
	})
	lines := progressLines(stderr.String())
	if len(lines) == 0 || !regexp.MustCompile(`, [0-9]+%$`).MatchString(lines[0]) {
		t.Errorf("progress lines %q: want each to end in the share of the input read", lines)
	}
}

// slowBacktestClock makes the backtest clock move a second each time it
// is read, for the test's duration.
func slowBacktestClock(t *testing.T) {
	saved := backtestClock
	t.Cleanup(func() { backtestClock = saved })
	var ticks atomic.Int64
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	backtestClock = func() time.Time { return t0.Add(time.Duration(ticks.Add(1)) * time.Second) }
}

// progressLines returns the progress lines of a backtest's stderr.
func progressLines(stderr string) []string {
	var lines []string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, "backtest: line ") {
			lines = append(lines, l)
		}
	}
	return lines
}

type fakeProgress struct{ total int64 }

func (f fakeProgress) Progress() (read, total int64) { return 500, f.total }

// TestBacktestAlertsOnTerminal: with stdout a terminal and no -alerts, the
// alerts are not poured onto it: the summary shows an example of each
// rule and says how to keep them. -alerts - still prints them there.
func TestBacktestAlertsOnTerminal(t *testing.T) {
	dir := t.TempDir()
	rules := writeFile(t, dir, "r.cep", goodSrc)
	events := writeFile(t, dir, "e.jsonl", abEvents(6, 0, ""))
	var stdout, stderr bytes.Buffer
	saved := isTerminal
	defer func() { isTerminal = saved }()
	isTerminal = func(w io.Writer) bool { return w == &stdout }
	backtest := func(args ...string) int {
		stdout.Reset()
		stderr.Reset()
		return exitCode(run(context.Background(), append([]string{"backtest", "-rules", rules, "-events", events}, args...), &stdout, &stderr), &stderr)
	}
	if code := backtest(); code != 0 || stdout.Len() != 0 ||
		!strings.Contains(stderr.String(), "Example alerts:\n    [medium] r ") ||
		!strings.Contains(stderr.String(), "\n        a: line 1; b: line 2\n") ||
		!strings.Contains(stderr.String(), "The 3 alerts are not shown: stdout is a terminal. Write them to a file with -alerts FILE") {
		t.Errorf("terminal: exit %d, stdout %q, stderr\n%s", code, stdout.String(), stderr.String())
	}
	if code := backtest("-alerts", "-"); code != 0 || strings.Count(stdout.String(), "\n") != 3 || strings.Contains(stderr.String(), "not shown") {
		t.Errorf("terminal, -alerts -: exit %d, stdout %q, stderr\n%s", code, stdout.String(), stderr.String())
	}
	if code := backtest("-q"); code != 0 || strings.Count(stdout.String(), "\n") != 3 {
		t.Errorf("terminal, -q: exit %d, stdout %q; want the alerts", code, stdout.String())
	}
}

// TestSummaryAggregates: a summary says how many keys hold events in an
// aggregate's window only where that means something: not at the end of
// a backtest nor of a finished run, whose final watermark passed every
// window; the events dropped at the bound are said in each.
func TestSummaryAggregates(t *testing.T) {
	aggs := []cep.AggregateStats{{Name: "cards_10m", Keys: 3, Dropped: 0}, {Name: "merchants_1h", Keys: 1, Dropped: 1}}
	for _, c := range []struct {
		finished bool
		want     string
	}{
		{false, "run: aggregate cards_10m: 3 keys with events in their window, 0 events dropped at the bound\n" +
			"run: aggregate merchants_1h: 1 key with events in their window, 1 event dropped at the bound\n"},
		{true, "run: aggregate cards_10m: 0 events dropped at the bound\n" +
			"run: aggregate merchants_1h: 1 event dropped at the bound\n"},
	} {
		var b strings.Builder
		printRunSummary(&b, &cep.StreamResult{Summary: cep.Summary{Ruleset: "r", Aggregates: aggs}, Finished: c.finished}, "", "")
		if out := b.String(); !strings.HasSuffix(out, c.want) {
			t.Errorf("run summary (finished %v):\n%s\nwant it to end with\n%s", c.finished, out, c.want)
		}
	}
	var b strings.Builder
	printSummary(&b, &cep.Summary{Ruleset: "r", Aggregates: aggs}, nil, time.Second, backtestFlags{}, nil, nil, false)
	out := b.String()
	if strings.Contains(out, "cards_10m") || strings.Contains(out, "keys") {
		t.Errorf("backtest summary:\n%s\nspeaks of keys, or of an aggregate that dropped nothing", out)
	}
	if want := "  aggregate merchants_1h: 1 event dropped at the bound of a key's window (its values undercount)\n"; !strings.Contains(out, want) {
		t.Errorf("backtest summary:\n%s\nwant the line\n%s", out, want)
	}
}

// TestRunLookupSummaryLastError: the lookup lines of run's summary say
// why the requests of a lookup failed, after how many, and what their
// events got; a lookup none of whose requests failed says so, and one
// whose keys all came back without a record asks whether its source holds
// the records (every event got the defaults, and no figure of a failure
// says so); an unbound one says what its events got.
func TestRunLookupSummaryLastError(t *testing.T) {
	var failing, fine, empty, unbound cep.LookupStats
	failing.Name, failing.Bound = "customer", true
	failing.Misses, failing.Requests, failing.Failures, failing.Timeouts, failing.Defaulted = 4, 3, 2, 1, 4
	failing.LastError = "no answer within 250ms"
	fine.Name, fine.Bound, fine.Misses, fine.Requests = "merchant", true, 1, 1
	empty.Name, empty.Bound, empty.Hits, empty.Misses, empty.NotFound, empty.Requests = "user", true, 2, 3, 3, 1
	unbound.Name = "device"
	var b bytes.Buffer
	printLookupSummary(&b, "run", []cep.LookupStats{failing, fine, empty, unbound}, false)
	want := "run: lookup customer: 0 keys from the cache (0.0%), 4 looked up at the source (0 without a record) in 3 requests; 2 failed (1 timeout): their events: 4 got the defaults, 0 went to the dead letters; last error: no answer within 250ms\n" +
		"run: lookup merchant: 0 keys from the cache (0.0%), 1 looked up at the source (0 without a record) in 1 request; none failed\n" +
		"run: lookup user: 2 keys from the cache (40.0%), 3 looked up at the source (3 without a record, whose events got the defaults) in 1 request; none failed; no key had a record: does the source hold this lookup's records (the file, the Redis database, ?format=json)?\n" +
		"run: lookup device: unbound, every event got its defaults\n"
	if got := b.String(); got != want {
		t.Errorf("lookup lines\n got  %q\n want %q", got, want)
	}
	// A resumed run's figures count from the process's start, unlike the
	// records and alerts: said so.
	b.Reset()
	printLookupSummary(&b, "run", []cep.LookupStats{fine, unbound}, true)
	want = "run: lookup merchant: since this process started, 0 keys from the cache (0.0%), 1 looked up at the source (0 without a record) in 1 request; none failed\n" +
		"run: lookup device: unbound, every event got its defaults\n"
	if got := b.String(); got != want {
		t.Errorf("lookup lines of a resumed run\n got  %q\n want %q", got, want)
	}
}

// TestRunSummaryFormerRules: the rules of a run's summary that the
// active version has not (removed, a former severity) say so and of which
// severity, in run's lines and serve's records: the same rule may have a
// line of the active version. A rule's one alert is "1 alert" (it was
// "1 alerts").
func TestRunSummaryFormerRules(t *testing.T) {
	res := &cep.StreamResult{Summary: cep.Summary{Ruleset: "cards", Rules: []cep.RuleSummary{
		{Rule: "r", Severity: "high", Alerts: 3786},
		{Rule: "r", Severity: "medium", Former: true, Alerts: 36, ConditionErrors: 2},
		{Rule: "gone", Severity: "low", TimeoutSeverity: "medium", Former: true, Alerts: 10},
		{Rule: "once", Severity: "low", Alerts: 1},
	}}}
	var b bytes.Buffer
	printRunSummary(&b, res, "", "")
	for _, want := range []string{
		"\n  once                                1 alert\n",
		"\n  r                               3,786 alerts\n",
		"\n  r                                  36 alerts  (an earlier version's, severity medium; 2 condition errors)\n",
		"\n  gone                               10 alerts  (an earlier version's, severity low, timeout medium)\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("run's summary lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	logSummary(slog.New(slog.NewTextHandler(&b, nil)), res)
	for _, want := range []string{
		`msg="rule summary" rule=r severity=high alerts=3786` + "\n",
		`msg="rule summary" rule=r severity=medium alerts=36 former=true condition_errors=2` + "\n",
		`msg="rule summary" rule=gone severity=low alerts=10 former=true timeout_severity=medium` + "\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("serve's rule summaries lack %q:\n%s", want, b.String())
		}
	}
}

// TestEngineLogfQuiet: -q silences a run's informational lines, never its
// warnings.
func TestEngineLogfQuiet(t *testing.T) {
	for _, quiet := range []bool{false, true} {
		var info, warn []string
		logf := engineLogf(quiet, func(l string) { info = append(info, l) }, func(w string) { warn = append(warn, w) })
		logf("checkpoint %d took %s", 3, "5ms")
		logf("warning: lookup %s: its source fails: %s", "customer", "100% down")
		wantInfo := []string{"checkpoint 3 took 5ms"}
		if quiet {
			wantInfo = nil
		}
		if !slices.Equal(info, wantInfo) || !slices.Equal(warn, []string{"lookup customer: its source fails: 100% down"}) {
			t.Errorf("quiet %v: info %q, warnings %q; want info %q and the warning", quiet, info, warn, wantInfo)
		}
	}
}

// TestSummaryColumns: the columns of the backtest summary's tables stay
// aligned with rule and scenario names longer than 22 characters, and a
// scenario that no rule caught ends its line without trailing blanks.
func TestSummaryColumns(t *testing.T) {
	s := &cep.Summary{Ruleset: "r", Rules: []cep.RuleSummary{
		{Rule: "short", Severity: "high", Alerts: 1},
		{Rule: "login_transfer_from_abroad", Severity: "medium", Alerts: 22},
	}}
	ls := &cep.LabelSummary{Field: "is_fraud", Labelled: 2, Scenarios: []cep.ScenarioSummary{
		{Scenario: "card_testing", Labelled: 1, Caught: 1, ByRule: map[string]int64{"short": 1}},
		{Scenario: "a_scenario_named_at_length", Labelled: 1},
	}}
	var b strings.Builder
	printSummary(&b, s, ls, time.Second, backtestFlags{label: "is_fraud"}, nil, nil, false)
	out := b.String()
	col := func(prefix, word string) int {
		for line := range strings.SplitSeq(out, "\n") {
			if strings.HasPrefix(line, prefix) {
				return strings.Index(line, word)
			}
		}
		t.Fatalf("no line starting with %q:\n%s", prefix, out)
		return 0
	}
	if h, a, b := col("  rule ", "severity"), col("  short ", "high"), col("  login_transfer_from_abroad ", "medium"); h != a || h != b {
		t.Errorf("severity column at %d, %d and %d:\n%s", h, a, b, out)
	}
	if h, a, b := col("  scenario ", "labelled")+len("labelled"), col("  card_testing ", "1")+1, col("  a_scenario_named_at_length ", " 1 ")+2; h != a || h != b {
		t.Errorf("labelled column ends at %d, %d and %d:\n%s", h, a, b, out)
	}
	for line := range strings.SplitSeq(out, "\n") {
		if strings.HasSuffix(line, " ") {
			t.Errorf("line %q ends with a blank", line)
		}
	}
}

// TestSummaryCaughtByBounded: a scenario's "caught by" names the five
// rules that caught most of its events, then counts the others (the
// rulesets trial: 66 rules on one line).
func TestSummaryCaughtByBounded(t *testing.T) {
	by := map[string]int64{}
	for i := range 8 {
		by[fmt.Sprintf("r%d", i)] = int64(10 + i)
	}
	s := &cep.Summary{Ruleset: "r"}
	ls := &cep.LabelSummary{Field: "is_fraud", Labelled: 20, Caught: 20, Scenarios: []cep.ScenarioSummary{
		{Scenario: "card_testing", Labelled: 20, Caught: 20, ByRule: by},
		{Scenario: "dormant_card", Labelled: 20, Caught: 20, ByRule: map[string]int64{"r0": 5, "r1": 4, "r2": 3, "r3": 2, "r4": 1, "r5": 1}},
	}}
	var b strings.Builder
	printSummary(&b, s, ls, time.Second, backtestFlags{label: "is_fraud"}, nil, nil, false)
	for _, want := range []string{
		"  r7 17, r6 16, r5 15, r4 14, r3 13, and 3 more rules\n",
		"  r0 5, r1 4, r2 3, r3 2, r4 1, and 1 more rule\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("summary:\n%s\nwant a line ending %q", b.String(), want)
		}
	}
}

// orFailSrc is a rule that fails at run time: after a then c, the skip
// wants the first event of b, which the match does not have.
const orFailSrc = `ruleset orfail
event time ts
rule r {
  key k
  pattern {
    begin a where t == "a"
    followedBy b optional where t == "b"
    followedBy c where t == "c"
  }
  skip toFirst b orFail
}
`

// TestBacktestRunErrorAtEnd: a rule that fails at the final watermark (a
// skip with orFail whose stage took no event) says "at the end of the
// input", not "line 0".
func TestBacktestRunErrorAtEnd(t *testing.T) {
	dir := t.TempDir()
	rules := writeFile(t, dir, "r.cep", orFailSrc)
	events := writeFile(t, dir, "e.jsonl", `{"ts":"2026-01-01T00:00:00Z","k":"x","t":"a"}
{"ts":"2026-01-01T00:00:01Z","k":"x","t":"c"}
`)
	code, _, errOut := cepheus(t, "backtest", "-rules", rules, "-events", events, "-alerts", filepath.Join(dir, "alerts.jsonl"))
	if code != 1 || !strings.Contains(errOut, "rule r, at the end of the input: ") || strings.Contains(errOut, "line 0") {
		t.Errorf("exit %d, stderr:\n%s\nwant exit 1 and the error of rule r at the end of the input", code, errOut)
	}
}

// TestBacktestConditionErrorText: a condition that fails at run time (here
// a misspelled field of an inferred schema, null in every event) is
// counted on its rule, and the summary says what the last error was.
func TestBacktestConditionErrorText(t *testing.T) {
	dir := t.TempDir()
	rules := writeFile(t, dir, "r.cep", "ruleset t\n\nevent time ts\n\nrule big {\n  key k\n  pattern {\n    begin a where amout > 10\n  }\n}\n")
	events := writeFile(t, dir, "e.jsonl", `{"ts":"2026-01-01T00:00:01Z","k":"x","amount":50}`+"\n"+`{"ts":"2026-01-01T00:00:02Z","k":"x","amount":60}`+"\n")
	code, _, errOut := cepheus(t, "backtest", "-rules", rules, "-events", events, "-alerts", filepath.Join(dir, "a.jsonl"))
	want := "(2 condition errors)\n\n  Condition errors count as false; the last of each rule:\n    big: amout is null (in amout > 10)\n"
	if code != 0 || !strings.Contains(errOut, want) {
		t.Errorf("exit %d, summary lacks %q:\n%s", code, want, errOut)
	}
}

// TestRunSummaryFirstDeadLetter: run's summary says why its first dead
// letter was refused and where the dead letters are, as backtest's does; it
// said only how many, so a run over epoch seconds read as milliseconds
// gave no event and no reason.
func TestRunSummaryFirstDeadLetter(t *testing.T) {
	dir := t.TempDir()
	rules := writeFile(t, dir, "r.cep", goodSrc)
	events := writeFile(t, dir, "e.jsonl", `{"ts":1767225601,"k":"x","name":"a"}`+"\n"+`{"ts":1767225602,"k":"x","name":"b"}`+"\n")
	const reason = `e.jsonl line 1: column 7: time field "ts": 1767225601 as epoch milliseconds is 1970-01-21T10:53:45.601Z, outside 2000..2100; as epoch seconds it is 2026-01-01T00:00:01.000Z (say the time unit)`
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "\nrun: 2 dead letters (first: " + reason + "): only counted (-dead-letter DIR keeps them)\n"},
		{[]string{"-dead-letter", filepath.Join(dir, "dead")}, "\nrun: 2 dead letters (first: " + reason + "): see " + filepath.Join(dir, "dead") + "\n"},
	} {
		state := t.TempDir()
		args := append([]string{"run", "-rules", rules, "-events", events, "-state", state, "-alerts", filepath.Join(state, "alerts")}, c.args...)
		if code, _, errOut := cepheus(t, args...); code != 0 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d; want 0 and the summary saying\n%s\ngot\n%s", c.args, code, c.want, errOut)
		}
	}
	// In Kafka mode the hint names -dead-letter-topic (-dead-letter is
	// refused there; the hint named it).
	for _, c := range []struct {
		f    runFlags
		want string
	}{
		{runFlags{alertsTopic: "alerts"}, "only counted (-dead-letter-topic T keeps them)"},
		{runFlags{alertsTopic: "alerts", deadTopic: "dead"}, "see topic dead"},
		{runFlags{}, "only counted (-dead-letter DIR keeps them)"},
	} {
		if got := c.f.deadLetterTo(); got != c.want {
			t.Errorf("deadLetterTo of alerts topic %q, dead letter topic %q = %q, want %q", c.f.alertsTopic, c.f.deadTopic, got, c.want)
		}
	}
	// A directory's: the line is of a file, which the summary names.
	in := filepath.Join(dir, "in")
	if err := os.Mkdir(in, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, in, "a.jsonl", abEvents(4, 0, ""))
	writeFile(t, in, "b.jsonl", abEvents(4, 3, `{"ts":"2026-01-01T00:00:03Z","k":`))
	state := t.TempDir()
	want := "\nrun: 1 dead letter (first: b.jsonl line 3: "
	if code, _, errOut := cepheus(t, "run", "-rules", rules, "-events", in, "-state", state, "-alerts", filepath.Join(state, "alerts")); code != 0 || !strings.Contains(errOut, want) {
		t.Errorf("a directory: exit %d; want 0 and the summary saying\n%s\ngot\n%s", code, want, errOut)
	}
	state = t.TempDir()
	good := writeFile(t, dir, "good.jsonl", abEvents(4, 0, ""))
	if code, _, errOut := cepheus(t, "run", "-rules", rules, "-events", good, "-state", state, "-alerts", filepath.Join(state, "alerts")); code != 0 || strings.Contains(errOut, "(first: ") {
		t.Errorf("without dead letters: exit %d, summary\n%s", code, errOut)
	}
}

// TestRunErrorWithoutPackagePrefixes: a rule that fails at run time (a
// skip ... orFail whose target is missing) is reported by test and
// backtest without the engine's package names.
func TestRunErrorWithoutPackagePrefixes(t *testing.T) {
	dir := t.TempDir()
	src := orFailSrc + `
test "b missing" {
  events {
    {"ts": 1, "k": "x", "t": "a"}
    {"ts": 2, "k": "x", "t": "c"}
  }
  expect {
    r key "x" { a: [1], c: [2] }
  }
}
`
	rules := writeFile(t, dir, "r.cep", src)
	events := writeFile(t, dir, "e.jsonl", `{"ts":"2026-01-01T00:00:01Z","k":"x","t":"a"}`+"\n"+`{"ts":"2026-01-01T00:00:02Z","k":"x","t":"c"}`+"\n")
	const want = `key "x": after-match skip target missing: could not skip to "b": no such element in the found match`
	code, out, errOut := cepheus(t, "test", rules)
	if code != 1 || !strings.Contains(out+errOut, "run failed: rule r: "+want) {
		t.Errorf("test: exit %d, want 1 and %q:\n%s%s", code, want, out, errOut)
	}
	code, _, errOut2 := cepheus(t, "backtest", "-rules", rules, "-events", events, "-alerts", filepath.Join(dir, "a.jsonl"))
	if code != 1 || !strings.Contains(errOut2, "rule r, at the end of the input: "+want) {
		t.Errorf("backtest: exit %d, want 1 and %q:\n%s", code, want, errOut2)
	}
	for _, prefix := range []string{"cep: ", "nfa: "} {
		if strings.Contains(out+errOut+errOut2, prefix) {
			t.Errorf("an error names %q:\n%s%s%s", prefix, out, errOut, errOut2)
		}
	}
}

// TestBacktestLookupNoRecord: a bound lookup whose source has no record
// for any key read (an empty file here; another Redis database, or JSON
// strings read as hashes, alike) is said in the summary, as a question
// about the source; a source with records is not.
func TestBacktestLookupNoRecord(t *testing.T) {
	dir := t.TempDir()
	events := filepath.Join(dir, "events.jsonl.gz")
	profiles := filepath.Join(dir, "profiles")
	if code, _, stderr := cepheus(t, "gen", "-history-days", "0", "-days", "1", "-events-per-day", "5000",
		"-customers", "500", "-scenarios", "card_testing", "-profiles", profiles, "-o", events); code != 0 {
		t.Fatalf("gen: exit %d\n%s", code, stderr)
	}
	empty := writeFile(t, dir, "empty.jsonl", "")
	const note = "no key had a record: does the source hold this lookup's records"
	for _, c := range []struct {
		source string
		said   bool
	}{{empty, true}, {filepath.Join(profiles, "customer.jsonl"), false}} {
		code, _, errOut := cepheus(t, "backtest", "-rules", "../../rulesets/cards.cep", "-events", events,
			"-alerts", filepath.Join(dir, "a.jsonl"), "-lookup", "customer=file:"+c.source)
		if code != 0 || strings.Contains(errOut, note) != c.said {
			t.Errorf("%s: exit %d, the note said %v, want %v:\n%s", filepath.Base(c.source), code, !c.said, c.said, errOut)
		}
	}
}

// TestSummaryEmitErrors: an emit field that fails at run time is null in
// its alert, and the summaries of backtest and run count it per rule and
// show the last error, as they do a condition's; run's counts, at
// parallelism 2, are those of the backtest (an expression's counter is
// shared by the subtasks: counted once).
func TestSummaryEmitErrors(t *testing.T) {
	dir := t.TempDir()
	rules := writeFile(t, dir, "r.cep", `ruleset ee
event time ts
rule r {
  key k
  pattern {
    begin a where amount > 1 && tag > "a"
  }
  emit {
    ratio: a.amount / a.count
    tagged: a.tag + "!"
  }
}
`)
	var events strings.Builder
	for i := range 40 {
		tag := `,"tag":"b"`
		if i%4 == 0 {
			tag = "" // a condition error: tag is missing
		}
		fmt.Fprintf(&events, `{"ts":%d,"k":"k%d","amount":5%s}`+"\n", 1767225600000+int64(i)*1000, i%7, tag)
	}
	in := writeFile(t, dir, "e.jsonl", events.String())
	alerts := filepath.Join(dir, "alerts.jsonl")
	code, _, stderr := cepheus(t, "backtest", "-rules", rules, "-events", in, "-alerts", alerts)
	if code != 0 {
		t.Fatalf("backtest: exit %d\n%s", code, stderr)
	}
	// A condition error is counted per failed evaluation (an event may
	// be evaluated more than once), an emit error per alert and field.
	counts := regexp.MustCompile(`\(([0-9]+) condition errors; 30 emit errors\)`).FindStringSubmatch(stderr)
	if counts != nil {
		if n, _ := strconv.Atoi(counts[1]); n < 10 {
			counts = nil // fewer than the events without a tag
		}
	}
	if counts == nil {
		t.Errorf("backtest summary lacks (N >= 10 condition errors; 30 emit errors):\n%s", stderr)
		counts = []string{"", "?"}
	}
	for _, want := range []string{
		"30 alerts",
		"Condition errors count as false; the last of each rule:\n    r: tag is null",
		"Emit errors leave the field null in the alert; the last of each rule:\n    r: ratio: a.count is null (in a.amount / a.count)",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("backtest summary lacks %q:\n%s", want, stderr)
		}
	}
	b, err := os.ReadFile(alerts)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), `"emit":{"ratio":null,"tagged":"b!"}`); n != 30 {
		t.Errorf("%d alerts with ratio null and tagged b!, want 30:\n%s", n, b)
	}
	code, _, stderr = cepheus(t, "run", "-rules", rules, "-events", in, "-state", filepath.Join(dir, "state"),
		"-alerts", filepath.Join(dir, "run-alerts"), "-parallelism", "2")
	if code != 0 {
		t.Fatalf("run: exit %d\n%s", code, stderr)
	}
	for _, want := range []string{
		"30 alerts  (" + counts[1] + " condition errors; 30 emit errors)",
		"Emit errors leave the field null in the alert; the last of each rule:\n    r: ratio: a.count is null",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("run summary lacks %q:\n%s", want, stderr)
		}
	}
}

// TestProgressLineProcessingTime: in processing time the progress line
// has no watermark, which is of the events' times and moves no window
// there; it said "watermark 2030-12-31T23:59:54Z (lag 5s)" of a stream
// whose clocks were years ahead (the processing-time trial).
func TestProgressLineProcessingTime(t *testing.T) {
	st := cep.StreamStats{Records: 60, RunRecords: 60, Watermark: 1_924_991_994_000, MaxEventTime: 1_924_991_999_000}
	var m rateMeter
	if got := progressLine(cep.StreamProgress{StreamStats: st, Elapsed: time.Second}, &m, false); !strings.Contains(got, "watermark 2030-12-31T23:59:54Z (lag 5s)") {
		t.Errorf("event time: %q, want its watermark", got)
	}
	if got := progressLine(cep.StreamProgress{StreamStats: st, Elapsed: 2 * time.Second}, &m, true); strings.Contains(got, "watermark") {
		t.Errorf("processing time: %q, want no watermark", got)
	}
	// A job that took a partition over with its watermark and read no
	// event yet: lag 0, as status and the metric say (it said "lag
	// -491016h31m55.793s").
	st.MaxEventTime = 0
	if got := progressLine(cep.StreamProgress{StreamStats: st, Elapsed: 3 * time.Second}, &m, false); !strings.Contains(got, "watermark 2030-12-31T23:59:54Z (lag 0s)") {
		t.Errorf("no event read: %q, want lag 0s", got)
	}
}

// TestProgressPartialMatches: run's progress line and summary give the
// partial matches held at the latest checkpoint beside the keys: a key
// whose every event started a partial match under a 24h window held
// 30,000 of them, its records ever slower, and the line said only "1 keys"
// (one key is said in the singular too).
func TestProgressPartialMatches(t *testing.T) {
	var m rateMeter
	st := cep.StreamStats{Records: 30_000, RunRecords: 30_000, Watermark: event.MinTime, Checkpoints: 2, LastCheckpoint: 2, Keys: 1, PartialMatches: 29_950, Buffered: 50}
	if got, want := progressLine(cep.StreamProgress{StreamStats: st, Elapsed: time.Second}, &m, false), ", 1 key, 29,950 partial matches, checkpoint 2"; !strings.Contains(got, want) {
		t.Errorf("progress line %q, want %q in it", got, want)
	}
	var b strings.Builder
	printRunSummary(&b, &cep.StreamResult{Summary: cep.Summary{Ruleset: "r"}, Stats: st}, "", "")
	if want := "; 1 key holds state (29,950 partial matches, 50 events buffered)\n"; !strings.Contains(b.String(), want) {
		t.Errorf("run summary:\n%s\nwant %q in it", b.String(), want)
	}
	b.Reset()
	one := st
	one.Dead, one.Ahead = 3, 1
	one.Buffered = 1
	printRunSummary(&b, &cep.StreamResult{Summary: cep.Summary{Ruleset: "r"}, Stats: one}, "", "")
	if want := "(29,950 partial matches, 1 event buffered)\n"; !strings.Contains(b.String(), want) {
		t.Errorf("run summary:\n%s\nwant %q in it", b.String(), want)
	}
	if want := "3 dead letters; 2 checkpoints taken, last 2\nrun: of them, 1 event was more than -max-ahead ahead of the stream\n"; !strings.Contains(b.String(), want) {
		t.Errorf("run summary:\n%s\nwant %q in it", b.String(), want)
	}
	var log bytes.Buffer
	logProgress(slog.New(slog.NewJSONHandler(&log, nil)), cep.StreamProgress{StreamStats: st, Elapsed: time.Second}, &rateMeter{}, false)
	if want := `"keys":1,"partial_matches":29950,`; !strings.Contains(log.String(), want) {
		t.Errorf("serve's progress record %s, want %s in it", log.String(), want)
	}
	// serve's record has the watermark, its lag and the stall, as run's
	// line has (they were left out); in processing time no watermark.
	st.Watermark = event.Time(time.Date(2026, 3, 2, 18, 10, 25, 0, time.UTC).UnixMilli())
	st.MaxEventTime = st.Watermark + 49_755
	st.LastDuration, st.LastStall = 422*time.Millisecond, 89*time.Millisecond
	for _, processing := range []bool{false, true} {
		log.Reset()
		logProgress(slog.New(slog.NewJSONHandler(&log, nil)), cep.StreamProgress{StreamStats: st, Elapsed: time.Second}, &rateMeter{}, processing)
		if want := `"checkpoint_stall":89000000`; !strings.Contains(log.String(), want) {
			t.Errorf("serve's progress record (processing time %v) %s, want %s in it", processing, log.String(), want)
		}
		watermark := `"watermark":"2026-03-02T18:10:25Z","lag":49755000000`
		if got := strings.Contains(log.String(), watermark); got == processing {
			t.Errorf("serve's progress record (processing time %v) %s: has %s %v, want %v", processing, log.String(), watermark, got, !processing)
		}
	}
}

// TestProgressLineSingular: one record and one alert are said in the
// singular ("1 alerts", a trial saw).
func TestProgressLineSingular(t *testing.T) {
	var m rateMeter
	st := cep.StreamStats{Records: 1, RunRecords: 1, Alerts: 1, Watermark: event.MinTime}
	got := progressLine(cep.StreamProgress{StreamStats: st, Elapsed: time.Second}, &m, false)
	if want := "1 record (1/s), 1 alert, 0 late, 0 dead"; got != want {
		t.Errorf("progress line %q, want %q", got, want)
	}
}

// TestProgressLineRateNewJob: after a rebalance of a Kafka group the
// instance's new job counts its run's records from its restored
// checkpoint again: the rate is of what it read since, never negative
// (a trial's scale-out logged records_per_second=-421).
func TestProgressLineRateNewJob(t *testing.T) {
	var m rateMeter
	at := func(total, run int64, elapsed time.Duration) string {
		return progressLine(cep.StreamProgress{StreamStats: cep.StreamStats{Records: total, RunRecords: run}, Elapsed: elapsed}, &m, false)
	}
	at(14_000, 14_000, 20*time.Second)
	if got, want := at(14_700, 700, 30*time.Second), "14,700 records (70/s)"; !strings.HasPrefix(got, want) {
		t.Errorf("after a new job: %q, want it to start %q", got, want)
	}
	if got, want := at(15_700, 1_700, 40*time.Second), "15,700 records (100/s)"; !strings.HasPrefix(got, want) {
		t.Errorf("then: %q, want it to start %q", got, want)
	}
	// A job that restored another instance's checkpoint counts from its
	// counters: the lines and the log's records never go down (the
	// Kafka trial's serve log fell from records=100374 to records=0).
	if got, want := at(300, 300, 50*time.Second), "15,700 records (30/s)"; !strings.HasPrefix(got, want) {
		t.Errorf("after a lower restore: %q, want it to start %q", got, want)
	}
	var log bytes.Buffer
	lm := rateMeter{}
	for _, n := range []int64{100_374, 0} {
		logProgress(slog.New(slog.NewJSONHandler(&log, nil)), cep.StreamProgress{StreamStats: cep.StreamStats{Records: n, Alerts: n / 1000}, Elapsed: time.Second}, &lm, false)
	}
	if got := strings.Count(log.String(), `"records":100374,`); got != 2 {
		t.Errorf("serve's progress log, records 100,374 then 0: %d lines of 100374, want 2:\n%s", got, log.String())
	}
}

// TestProgressLineRate: run's progress line gives the rate since the
// previous line, not over the whole run: a quiet spell, or a resumed
// run's records, do not drag it.
func TestProgressLineRate(t *testing.T) {
	var m rateMeter
	at := func(records int64, elapsed time.Duration) string {
		return progressLine(cep.StreamProgress{StreamStats: cep.StreamStats{Records: 500_000 + records, RunRecords: records}, Elapsed: elapsed}, &m, false)
	}
	for _, c := range []struct {
		records int64
		elapsed time.Duration
		want    string
	}{
		{100_000, 10 * time.Second, "600,000 records (10,000/s)"},
		{100_000, 20 * time.Second, "600,000 records (0/s)"}, // quiet
		{300_000, 30 * time.Second, "800,000 records (20,000/s)"},
		{300_000, 30 * time.Second, "800,000 records, "}, // no time passed: no rate
	} {
		if got := at(c.records, c.elapsed); !strings.HasPrefix(got, c.want) {
			t.Errorf("%d records at %v: %q, want it to start %q", c.records, c.elapsed, got, c.want)
		}
	}
}

// TestRunProcessingTimeOpenWindows: a run in processing time that ends
// with its input (no -follow) warns of the partial matches it leaves
// open, whose windows never end (the summary said only "N keys hold
// state"); in event time the end of the input releases them, and there is
// no warning.
func TestRunProcessingTimeOpenWindows(t *testing.T) {
	dir := t.TempDir()
	rules := writeFile(t, dir, "good.cep", goodSrc)
	events := writeFile(t, dir, "events.jsonl", `{"ts":"2026-01-01T00:00:00Z","k":"x","name":"a"}
{"ts":"2026-01-01T00:00:01Z","k":"y","name":"a"}
{"ts":"2026-01-01T00:00:02Z","k":"x","name":"b"}
{"ts":"2026-01-01T00:00:03Z","k":"z","name":"a"}
`)
	const warning = "run: warning: 2 partial matches left open will never time out: in processing time a window ends on the wall clock, and the run ended with its input (run with -follow to have them time out)\n"
	for _, mode := range []string{"processing", "event"} {
		code, _, stderr := cepheus(t, "run", "-rules", rules, "-events", events, "-time", mode,
			"-state", filepath.Join(dir, "state-"+mode), "-alerts", filepath.Join(dir, "alerts-"+mode))
		if code != 0 || !strings.Contains(stderr, "1 alert") {
			t.Fatalf("run -time %s: exit %d, want 0 and 1 alert\n%s", mode, code, stderr)
		}
		if warned := strings.Contains(stderr, warning); warned != (mode == "processing") {
			t.Errorf("run -time %s: warned %v of the open partial matches, want %v\n%s", mode, warned, mode == "processing", stderr)
		}
	}
}

// TestSummaryDroppedKeys: the summary line of a rule that dropped partial
// matches at -max-partial-matches names the keys with the most drops, in
// run's lines and serve's record: it named none.
func TestSummaryDroppedKeys(t *testing.T) {
	res := &cep.StreamResult{Summary: cep.Summary{Ruleset: "cards", Rules: []cep.RuleSummary{
		{Rule: "r", Severity: "high", Alerts: 2, Dropped: 3192, DroppedKeys: []cep.KeyCount{
			{Key: `card="c1"`, Count: 3000, Exact: true}, {Key: `card="c2"`, Count: 150}}},
		{Rule: "q", Severity: "low", Alerts: 1},
	}}}
	var b bytes.Buffer
	printRunSummary(&b, res, "", "")
	want := "\n  r                                   2 alerts  (3,192 partial matches dropped (limit), most at key card=\"c1\" (3,000), card=\"c2\" (at least 150))\n"
	if !strings.Contains(b.String(), want) {
		t.Errorf("run's summary lacks %q:\n%s", want, b.String())
	}
	b.Reset()
	logSummary(slog.New(slog.NewTextHandler(&b, nil)), res)
	want = `msg="rule summary" rule=r severity=high alerts=2 partial_matches_dropped=3192 partial_matches_dropped_at="card=\"c1\" (3,000), card=\"c2\" (at least 150)"` + "\n"
	if !strings.Contains(b.String(), want) {
		t.Errorf("serve's rule summaries lack %q:\n%s", want, b.String())
	}
}

// TestRecordKeyHint: a record without a key is told to be keyed (it was
// told to trust its keys, which would split each key's state over the
// instances, after a stray "( -"); one keyed by another field to name it.
func TestRecordKeyHint(t *testing.T) {
	for _, c := range []struct {
		ke   cep.RecordKeyError
		want string
	}{
		{cep.RecordKeyError{Field: "card_id"}, ` (the producer wrote it without a key: key the records by card_id, as cepheus produce -key card_id does; docs/kafka.md, "Record keys")`},
		{cep.RecordKeyError{Field: "card_id", Key: []byte("m1"), KeyedBy: "merchant_id"}, ` (-record-key merchant_id if the topic is keyed by it: the rules keyed otherwise are then repartitioned; -trust-record-keys if its keys are another encoding of card_id; docs/kafka.md, "Record keys")`},
		{cep.RecordKeyError{Field: "card_id", Key: []byte{0x1f, 0x8b}}, ` (-trust-record-keys if its keys are another encoding of card_id; docs/kafka.md, "Record keys")`},
	} {
		if got := recordKeyHint(&c.ke); got != c.want {
			t.Errorf("recordKeyHint(key %q, keyed by %q):\n%s\nwant\n%s", c.ke.Key, c.ke.KeyedBy, got, c.want)
		}
	}
}

// TestBacktestMissed: -missed writes the labelled events no alert holds,
// one JSON line each in input order (as alerts write events), and the
// summary names the file; it needs -label and one ruleset. The analyst
// trial found the misses only by scripting over the input.
func TestBacktestMissed(t *testing.T) {
	dir := t.TempDir()
	rules := writeFile(t, dir, "r.cep", goodSrc)
	// x's a and b match (labelled, caught); y's a has no b (labelled,
	// missed); z's c is labelled and no rule takes it (missed); w's a is
	// not labelled.
	events := writeFile(t, dir, "e.jsonl", `{"ts":"2026-01-01T00:00:01Z","k":"x","name":"a","fraud":true,"scenario":"s1"}
{"ts":"2026-01-01T00:00:02Z","k":"y","name":"a","fraud":true,"scenario":"s2"}
{"ts":"2026-01-01T00:00:03Z","k":"x","name":"b","fraud":true,"scenario":"s1"}
{"ts":"2026-01-01T00:00:04Z","k":"z","name":"c","fraud":true,"scenario":"s2"}
{"ts":"2026-01-01T00:00:05Z","k":"w","name":"a","fraud":false}
`)
	missed := filepath.Join(dir, "missed.jsonl")
	code, _, errOut := cepheus(t, "backtest", "-rules", rules, "-events", events, "-alerts", os.DevNull, "-label", "fraud", "-missed", missed)
	if code != 0 || !strings.Contains(errOut, "The 2 labelled events no alert holds: "+missed+" (one JSON line each, in input order).") {
		t.Fatalf("backtest -missed: exit %d\n%s", code, errOut)
	}
	got, err := os.ReadFile(missed)
	if err != nil {
		t.Fatal(err)
	}
	// (The fields in the ruleset's slot order, times as alerts write them.)
	want := `{"line":2,"k":"y","name":"a","ts":"2026-01-01T00:00:02.000Z","fraud":true,"scenario":"s2"}
{"line":4,"k":"z","name":"c","ts":"2026-01-01T00:00:04.000Z","fraud":true,"scenario":"s2"}
`
	if string(got) != want {
		t.Errorf("-missed wrote\n%s\nwant\n%s", got, want)
	}
	// Nothing missed: the file is there, empty (not an earlier run's).
	writeFile(t, dir, "caught.jsonl", "")
	caught := writeFile(t, dir, "e2.jsonl", `{"ts":"2026-01-01T00:00:01Z","k":"x","name":"a","fraud":true}
{"ts":"2026-01-01T00:00:03Z","k":"x","name":"b","fraud":true}
`)
	if code, _, errOut = cepheus(t, "backtest", "-rules", rules, "-events", caught, "-alerts", os.DevNull, "-label", "fraud", "-missed", missed); code != 0 {
		t.Fatalf("backtest -missed, nothing missed: exit %d\n%s", code, errOut)
	}
	if got, err := os.ReadFile(missed); err != nil || len(got) != 0 {
		t.Errorf("-missed with nothing missed: %q, %v; want an empty file", got, err)
	}
	two := filepath.Join(dir, "two")
	if err := os.Mkdir(two, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, two, "a.cep", goodSrc)
	writeFile(t, two, "b.cep", strings.Replace(goodSrc, "ruleset good", "ruleset other", 1))
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-missed", missed}, "-missed " + missed + " needs -label"},
		{[]string{"-missed", missed, "-label", "fraud", "-rules", two}, "-missed " + missed + " takes one ruleset; -rules " + two + " holds 2 (name the file)"},
	} {
		args := append([]string{"backtest", "-rules", rules, "-events", events, "-alerts", os.DevNull}, c.args...)
		if code, _, errOut := cepheus(t, args...); code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d\n%s\nwant exit 2 and %q", c.args, code, errOut, c.want)
		}
	}
}

// TestBacktestLateBy: the summary says how far the furthest late event
// came behind the watermark, and the -out-of-orderness that takes every
// one on time, which does (a trial's 2-minute delays gave 1,946 late
// events, a jump in false positives, and no hint).
func TestBacktestLateBy(t *testing.T) {
	dir := t.TempDir()
	rules := writeFile(t, dir, "r.cep", goodSrc)
	// The watermark (after every event) stands 5 s and 1 ms behind the
	// newest time, 00:02:05, at 00:01:59.999: the event at 00:00:30 is
	// 1m29.999s behind it, the one at 00:01:45 14.999 s.
	events := writeFile(t, dir, "e.jsonl", `{"ts":"2026-01-01T00:00:00Z","k":"x","name":"a"}
{"ts":"2026-01-01T00:02:05Z","k":"x","name":"a"}
{"ts":"2026-01-01T00:00:30Z","k":"y","name":"a"}
{"ts":"2026-01-01T00:01:45Z","k":"y","name":"b"}
{"ts":"2026-01-01T00:02:06Z","k":"x","name":"b"}
`)
	code, _, errOut := cepheus(t, "backtest", "-rules", rules, "-events", events, "-alerts", os.DevNull, "-watermark-every", "1")
	want := "2 events were late (behind the watermark, set every 1 event to 5s before the newest time: -out-of-orderness 5s, -watermark-every 1; the furthest 1m29.999s behind it, so -out-of-orderness 1m35s takes them all)"
	if code != 0 || !strings.Contains(errOut, want) {
		t.Fatalf("backtest: exit %d\n%s\nwant %q", code, errOut, want)
	}
	code, _, errOut = cepheus(t, "backtest", "-rules", rules, "-events", events, "-alerts", os.DevNull, "-watermark-every", "1", "-out-of-orderness", "1m35s")
	if code != 0 || strings.Contains(errOut, "late") {
		t.Errorf("backtest with the -out-of-orderness it gave: exit %d, want no late event\n%s", code, errOut)
	}
	// A millisecond less leaves the furthest late.
	code, _, errOut = cepheus(t, "backtest", "-rules", rules, "-events", events, "-alerts", os.DevNull, "-watermark-every", "1", "-out-of-orderness", "1m34.999s")
	if code != 0 || !strings.Contains(errOut, "1 event was late") {
		t.Errorf("backtest with a millisecond less: exit %d, want 1 late event\n%s", code, errOut)
	}
}

// TestBacktestBaseline: -baseline backtests a second ruleset over the
// same events and compares each rule: the alerts of the same events in
// both runs, in one only, a rule changed, added or removed, and with
// -label precision, caught events and recall; only the -rules run's
// alerts are written. An analyst comparing a threshold's change ran two
// backtests and diffed their summaries by hand.
func TestBacktestBaseline(t *testing.T) {
	dir := t.TempDir()
	// big: amounts over 100 (over 50 in the candidate); pair: a then b
	// (the same in both); gone only in the baseline, small only in the
	// candidate.
	baseline := writeFile(t, dir, "base.cep", `ruleset cards
event time ts
rule big {
  key k
  pattern {
    begin x where amount > 100
  }
}
rule pair {
  key k
  pattern {
    begin a where name == "a"
    followedBy b where name == "b"
    within 1m
  }
}
rule gone {
  key k
  pattern {
    begin x where name == "c"
  }
}
rule first {
  key k
  pattern {
    begin x where name == "p"
  }
}
`)
	candidate := writeFile(t, dir, "cand.cep", `ruleset cards
event time ts
rule big {
  key k
  pattern {
    begin x where amount > 50
  }
}
rule pair {
  key k
  pattern {
    begin a where name == "a"
    followedBy b where name == "b"
    within 1m
  }
}
rule small {
  key k
  pattern {
    begin x where amount < 5
  }
}
rule first {
  key k
  pattern {
    begin x where name == "p"
    followedBy y where name == "p"
    within 1m
  }
}
`)
	// Amounts 200 (fraud), 80 (fraud), 60 (not), 3 (fraud); a then b of
	// key y (fraud); a c (not).
	events := writeFile(t, dir, "e.jsonl", `{"ts":"2026-01-01T00:00:01Z","k":"x","name":"p","amount":200,"fraud":true}
{"ts":"2026-01-01T00:00:02Z","k":"x","name":"p","amount":80,"fraud":true}
{"ts":"2026-01-01T00:00:03Z","k":"z","name":"p","amount":60,"fraud":false}
{"ts":"2026-01-01T00:00:04Z","k":"y","name":"a","amount":3,"fraud":true}
{"ts":"2026-01-01T00:00:05Z","k":"y","name":"b","amount":10,"fraud":true}
{"ts":"2026-01-01T00:00:06Z","k":"w","name":"c","amount":10,"fraud":false}
`)
	alerts := filepath.Join(dir, "alerts.jsonl")
	code, _, errOut := cepheus(t, "backtest", "-rules", candidate, "-baseline", baseline, "-events", events, "-alerts", alerts, "-label", "fraud")
	if code != 0 {
		t.Fatalf("backtest -baseline: exit %d\n%s", code, errOut)
	}
	for _, want := range []string{
		"Against the baseline " + baseline + " (ruleset cards, version ",
		"  rule                   change     alerts baseline     same     new    gone precision  baseline   caught baseline\n" +
			"  big                    changed         3        1        1       2       0     66.7%    100.0%        2        1\n" +
			"  pair                                   1        1        1       0       0    100.0%    100.0%        2        2\n" +
			"  small                  new             1        -        0       1       0    100.0%         -        1        -\n" +
			"  first                  changed         1        3        0       1       3    100.0%     66.7%        2        2\n" +
			"  gone                   removed         -        1        0       0       1         -      0.0%        -        0\n",
		// first's alert of x's two p events is the incident of two of the
		// baseline's one-event alerts; z's p is one the candidate lost.
		"  first: 1 of the 1 new share events with a gone one, 2 of the 3 gone with a new one (the same incidents, other events)\n",
		"  Labelled events caught by some alert: 4, recall 100.0% (baseline 4, 100.0%)\n",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("the comparison lacks\n%s\nin\n%s", want, errOut)
		}
	}
	// Only the candidate's alerts are written: those of a run of it alone
	// (with -label, whose fields the alerts show).
	got, err := os.ReadFile(alerts)
	if err != nil {
		t.Fatal(err)
	}
	alone := filepath.Join(dir, "alone.jsonl")
	if code, _, errOut := cepheus(t, "backtest", "-q", "-rules", candidate, "-events", events, "-alerts", alone, "-label", "fraud"); code != 0 {
		t.Fatalf("backtest: exit %d\n%s", code, errOut)
	}
	if want, err := os.ReadFile(alone); err != nil || string(got) != string(want) || len(want) == 0 {
		t.Errorf("-baseline wrote alerts\n%s\nwant those of the candidate alone\n%s (%v)", got, want, err)
	}
	// The same ruleset: a warning, every alert the same.
	code, _, errOut = cepheus(t, "backtest", "-rules", baseline, "-baseline", baseline, "-events", events, "-alerts", os.DevNull)
	if code != 0 || !strings.Contains(errOut, "warning: -baseline "+baseline+" is the same ruleset as "+baseline) ||
		!strings.Contains(errOut, "  big                                    1        1        1       0       0\n") {
		t.Errorf("-baseline of the same ruleset: exit %d\n%s", code, errOut)
	}
	two := filepath.Join(dir, "two")
	if err := os.Mkdir(two, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, two, "a.cep", goodSrc)
	writeFile(t, two, "b.cep", strings.Replace(goodSrc, "ruleset good", "ruleset other", 1))
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-rules", two, "-events", events}, "-baseline " + baseline + " compares one ruleset; -rules " + two + " holds 2 (name the file)"},
		{[]string{"-rules", candidate, "-events", "-"}, "-baseline reads the events twice: give a file, not -events -"},
		{[]string{"-rules", candidate, "-events", events, "-baseline", two}, "-baseline " + two + " is a directory: name the ruleset file"},
		{[]string{"-rules", candidate, "-events", events, "-baseline", "-"}, "-baseline takes a ruleset file, not standard input"},
	} {
		args := append([]string{"backtest", "-baseline", baseline, "-alerts", os.DevNull}, c.args...)
		if code, _, errOut := cepheus(t, args...); code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d\n%s\nwant exit 2 and %q", c.args, code, errOut, c.want)
		}
	}
	// The baseline is an input: -alerts does not overwrite it.
	code, _, errOut = cepheus(t, "backtest", "-rules", candidate, "-baseline", baseline, "-events", events, "-alerts", baseline)
	if code != 1 || !strings.Contains(errOut, "-alerts "+baseline+" is a ruleset file") {
		t.Errorf("-alerts of the baseline's file: exit %d\n%s", code, errOut)
	}
}

// TestRunSummaryResumedOf: a Kafka run's summary says whose checkpoint it
// resumed from, the group's (an instance that took over another's
// partitions read it as its own); a file run's says the number alone.
func TestRunSummaryResumedOf(t *testing.T) {
	res := &cep.StreamResult{Summary: cep.Summary{Ruleset: "cards"}, Restored: 7}
	for _, c := range []struct{ group, want string }{
		{"fraud", "run: resumed from checkpoint 7 of group fraud\n"},
		{"", "run: resumed from checkpoint 7\n"},
	} {
		var b bytes.Buffer
		printRunSummary(&b, res, "", c.group)
		if !strings.HasPrefix(b.String(), c.want) {
			t.Errorf("group %q: the summary begins\n%s\nwant %q", c.group, b.String(), c.want)
		}
	}
}

// TestExplain: explain says why each alert fired: each clause of each
// event's stage with its value, a && chain's terms with theirs and the
// values they read (the event's and an earlier stage's), the window; an
// alert of another version of the rule, or of a rule the ruleset lacks,
// is said so; -id keeps the alerts it starts; a line that is no alert is
// skipped with a warning.
func TestExplain(t *testing.T) {
	dir := t.TempDir()
	src := `ruleset cards
event time ts
schema {
  ts: time
  card: string
  kind: string
  amount: float
}
rule large_then_more {
  key card
  pattern {
    begin large where kind == "auth" && amount > 100
    followedBy more where amount > large.amount
    within 10m
  }
}
`
	rulesFile := writeFile(t, dir, "r.cep", src)
	events := writeFile(t, dir, "e.jsonl", `{"ts":"2026-01-01T10:00:00Z","card":"c1","kind":"auth","amount":500}
{"ts":"2026-01-01T10:01:00Z","card":"c1","kind":"auth","amount":300}
{"ts":"2026-01-01T10:03:00Z","card":"c1","kind":"auth","amount":700}
`)
	alerts := filepath.Join(dir, "alerts.jsonl")
	if code, _, errOut := cepheus(t, "backtest", "-q", "-rules", rulesFile, "-events", events, "-alerts", alerts); code != 0 {
		t.Fatalf("backtest: exit %d\n%s", code, errOut)
	}
	b, err := os.ReadFile(alerts)
	if err != nil {
		t.Fatal(err)
	}
	var a struct {
		ID string `json:"alert_id"`
	}
	if err := json.Unmarshal(bytes.SplitN(b, []byte("\n"), 2)[0], &a); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := cepheus(t, "explain", "-rules", rulesFile, alerts)
	want := "alert " + a.ID + `: rule large_then_more, key {"card":"c1"}, detected at 2026-01-01T10:03:00.000Z
  stage large, line 1:
    where kind == "auth" && amount > 100: true
      kind == "auth": true (kind = "auth")
      amount > 100: true (amount = 500)
  stage more, line 3:
    where amount > large.amount: true (amount = 700, large.amount = 500)
  within 10m: line 1 to line 3, 3m apart

`
	if code != 0 || !strings.Contains(out, want) || strings.Count(out, "\nalert ")+1 != 2 {
		t.Errorf("explain: exit %d\n%s\nwant 2 alerts, the first\n%s\n%s", code, out, want, errOut)
	}
	// Another version of the rule, a rule the ruleset lacks, -id, and a
	// line that is no alert.
	other := writeFile(t, dir, "other.cep", strings.Replace(src, "amount > 100", "amount > 600", 1))
	mixed := writeFile(t, dir, "mixed.jsonl", string(b)+"not an alert\n"+strings.Replace(string(b), `"rule":"large_then_more"`, `"rule":"gone"`, 1))
	code, out, errOut = cepheus(t, "explain", "-rules", other, "-id", a.ID[:8], mixed)
	for _, w := range []string{
		"  (raised by another version of the rule, rule_hash ",
		"      amount > 600: false (amount = 500)\n",
		"  ruleset cards has no rule gone\n",
	} {
		if code != 0 || !strings.Contains(out, w) {
			t.Errorf("explain with another version: exit %d, want %q in\n%s", code, w, out)
		}
	}
	if !strings.Contains(errOut, "explain: warning: "+mixed+":3 is not an alert (no alert_id and rule), skipped") {
		t.Errorf("a line that is no alert: no warning\n%s", errOut)
	}
	if code, out, errOut = cepheus(t, "explain", "-rules", rulesFile, "-id", "zz", alerts); code != 0 || out != "" || !strings.Contains(errOut, "no alert whose id starts with zz") {
		t.Errorf("-id matching none: exit %d\n%s\n%s", code, out, errOut)
	}
	// An alert of a run over a directory: its events of a file after the
	// first carry the file's index, and every event is named with its.
	first := string(bytes.SplitN(b, []byte("\n"), 2)[0]) + "\n"
	parted := writeFile(t, dir, "parted.jsonl", strings.Replace(first, `{"line":3,`, `{"line":3,"partition":2,`, 1))
	code, out, errOut = cepheus(t, "explain", "-rules", rulesFile, parted)
	for _, w := range []string{"  stage large, partition 0 line 1:\n", "  stage more, partition 2 line 3:\n", "  within 10m: partition 0 line 1 to partition 2 line 3, 3m apart\n"} {
		if code != 0 || !strings.Contains(out, w) {
			t.Errorf("explain of events of several files: exit %d, want %q in\n%s\n%s", code, w, out, errOut)
		}
	}
	// explainOf backtests the ruleset src over evs (a file's path) and
	// explains the alerts: explain's exit, stdout and stderr.
	explainOf := func(name, src, evs string) (int, string, string) {
		t.Helper()
		rules := writeFile(t, dir, name+".cep", src)
		alerts := filepath.Join(dir, name+"-alerts.jsonl")
		if code, _, errOut := cepheus(t, "backtest", "-q", "-rules", rules, "-events", evs, "-alerts", alerts); code != 0 {
			t.Fatalf("backtest of %s: exit %d\n%s", name, code, errOut)
		}
		return cepheus(t, "explain", "-rules", rules, alerts)
	}
	// A velocity aggregate the rule reads: its value is in the alert's
	// events, and explained with it.
	aggSrc := strings.Replace(src, "rule large_then_more", "aggregate spend {\n  key card\n  sum amount\n  window 1h\n}\n\nrule large_then_more", 1)
	aggSrc = strings.Replace(aggSrc, "followedBy more where amount > large.amount", "followedBy more where amount > large.amount && spend > 1000", 1)
	code, out, errOut = explainOf("agg", aggSrc, events)
	if w := "      spend > 1000: true (spend = 1500)\n"; code != 0 || !strings.Contains(out, w) {
		t.Errorf("explain of a rule reading an aggregate: exit %d, want %q in\n%s\n%s", code, w, out, errOut)
	}
	// A negated stage: what it held the match to (the trial read no word
	// of the notFollowedBy that made its alert hold).
	negSrc := strings.Replace(src, `    begin large where kind == "auth" && amount > 100
    followedBy more where amount > large.amount
`, `    begin large where kind == "auth" && amount > 100
    notFollowedBy refund where kind == "refund"
    followedBy more where amount > large.amount
`, 1)
	code, out, errOut = explainOf("neg", negSrc, events)
	if w := "  stage refund, notFollowedBy where kind == \"refund\": no event matched between line 1 and line 3\n  stage more, line 3:\n"; code != 0 || !strings.Contains(out, w) {
		t.Errorf("explain of a rule with a negated stage: exit %d, want %q in\n%s\n%s", code, w, out, errOut)
	}
	// A trailing notFollowedBy: none within the window.
	trailSrc := strings.Replace(src, "    followedBy more where amount > large.amount\n", "    notFollowedBy more where amount > large.amount\n", 1)
	trailEvents := writeFile(t, dir, "trail.jsonl", `{"ts":"2026-01-01T10:00:00Z","card":"c2","kind":"auth","amount":500}
{"ts":"2026-01-01T10:01:00Z","card":"c2","kind":"auth","amount":300}
{"ts":"2026-01-01T11:00:00Z","card":"c3","kind":"auth","amount":5}
`)
	code, out, errOut = explainOf("trail", trailSrc, trailEvents)
	if w := "  stage more, notFollowedBy where amount > large.amount: no event matched within 10m of line 1\n"; code != 0 || !strings.Contains(out, w) {
		t.Errorf("explain of a rule ending with a negated stage: exit %d, want %q in\n%s\n%s", code, w, out, errOut)
	}
	// A timed-out partial match: what did not come within the window.
	toSrc := strings.Replace(src, "    within 10m\n  }\n", "    within 10m\n  }\n  timeout {\n    only\n  }\n", 1)
	toEvents := writeFile(t, dir, "to.jsonl", `{"ts":"2026-01-01T10:00:00Z","card":"c9","kind":"auth","amount":500}
{"ts":"2026-01-01T11:00:00Z","card":"c8","kind":"auth","amount":5}
`)
	code, out, errOut = explainOf("to", toSrc, toEvents)
	if w := `timed-out alert `; code != 0 || !strings.HasPrefix(out, w) || !strings.HasSuffix(out, `: rule large_then_more, key {"card":"c9"}, detected at 2026-01-01T10:10:00.000Z
  stage large, line 1:
    where kind == "auth" && amount > 100: true
      kind == "auth": true (kind = "auth")
      amount > 100: true (amount = 500)
  timed out: stage more took no event within 10m of line 1

`) {
		t.Errorf("explain of a timed-out alert: exit %d\n%s\n%s", code, out, errOut)
	}
}

// TestBacktestExamplesOrder: an example alert's stages and emitted fields
// come in the rule's order (they came sorted by name), and with -label
// each example says whether it is true (holds a labelled event).
func TestBacktestExamplesOrder(t *testing.T) {
	dir := t.TempDir()
	rulesFile := writeFile(t, dir, "r.cep", `ruleset order
event time ts
rule r {
  key k
  pattern {
    begin zed where name == "a"
    followedBy alpha where name == "b"
    within 1m
  }
  emit {
    z: zed.n
    a: alpha.n
  }
}
`)
	events := writeFile(t, dir, "e.jsonl", `{"ts":"2026-01-01T00:00:01Z","k":"x","name":"a","n":1,"fraud":true}
{"ts":"2026-01-01T00:00:02Z","k":"x","name":"b","n":2,"fraud":false}
{"ts":"2026-01-01T00:00:03Z","k":"y","name":"a","n":3,"fraud":false}
{"ts":"2026-01-01T00:00:04Z","k":"y","name":"b","n":4}
`)
	code, _, errOut := cepheus(t, "backtest", "-rules", rulesFile, "-events", events, "-alerts", os.DevNull, "-examples", "2", "-label", "fraud")
	for _, want := range []string{
		` key {"k":"x"} at 2026-01-01T00:00:02.000Z (true)` + "\n        zed: line 1; alpha: line 2; emit {\"z\":1,\"a\":2}\n",
		` key {"k":"y"} at 2026-01-01T00:00:04.000Z (false)` + "\n        zed: line 3; alpha: line 4; emit {\"z\":3,\"a\":4}\n",
	} {
		if code != 0 || !strings.Contains(errOut, want) {
			t.Errorf("backtest -examples: exit %d, want %q in\n%s", code, want, errOut)
		}
	}
}

// TestBacktestCases: -case counts the cases (fraud instances) of the
// labelled events, each caught when an alert holds one of its labelled
// events, overall and per scenario (two trials asked for recall by
// instance: the events' recall counts what no stage takes).
func TestBacktestCases(t *testing.T) {
	dir := t.TempDir()
	rulesFile := writeFile(t, dir, "r.cep", goodSrc)
	// Case k1 (s1): x's a and b, caught, with a capture no stage takes
	// (name c); case k2 (s2): y's a, no b; case k3 (s2): z's c.
	events := writeFile(t, dir, "e.jsonl", `{"ts":"2026-01-01T00:00:01Z","k":"x","name":"a","fraud":true,"scenario":"s1","case_id":"k1"}
{"ts":"2026-01-01T00:00:02Z","k":"y","name":"a","fraud":true,"scenario":"s2","case_id":"k2"}
{"ts":"2026-01-01T00:00:03Z","k":"x","name":"b","fraud":true,"scenario":"s1","case_id":"k1"}
{"ts":"2026-01-01T00:00:04Z","k":"x","name":"c","fraud":true,"scenario":"s1","case_id":"k1"}
{"ts":"2026-01-01T00:00:05Z","k":"z","name":"c","fraud":true,"scenario":"s2","case_id":"k3"}
`)
	code, _, errOut := cepheus(t, "backtest", "-rules", rulesFile, "-events", events, "-alerts", os.DevNull, "-label", "fraud", "-case", "case_id")
	for _, want := range []string{
		"  Labelled events (fraud): 5, caught by some alert: 2, recall 40.0%\n",
		"  Cases (case_id): 3, caught (an alert holds one of their labelled events): 1, recall 33.3%\n",
		"  scenario                labelled   caught  recall  missed  cases  caught  caught by\n",
		"  s1                             3        2   66.7%       1      1       1  ",
		"  s2                             2        0    0.0%       2      2       0\n",
	} {
		if code != 0 || !strings.Contains(errOut, want) {
			t.Errorf("backtest -case: exit %d, want %q in\n%s", code, want, errOut)
		}
	}
	if code, _, errOut := cepheus(t, "backtest", "-rules", rulesFile, "-events", events, "-alerts", os.DevNull, "-case", "case_id"); code != 2 || !strings.Contains(errOut, "-case case_id needs -label") {
		t.Errorf("-case without -label: exit %d\n%s", code, errOut)
	}
}

// TestBacktestLateLabelled: labelled events that came late (no rule saw
// them) are said so beside the recall, since they count as missed
// whatever the rules (the marketplace trial found 3 such by hand).
func TestBacktestLateLabelled(t *testing.T) {
	dir := t.TempDir()
	rulesFile := writeFile(t, dir, "r.cep", goodSrc)
	events := writeFile(t, dir, "e.jsonl", `{"ts":"2026-01-01T00:00:00Z","k":"x","name":"a"}
{"ts":"2026-01-01T00:02:05Z","k":"x","name":"a"}
{"ts":"2026-01-01T00:00:30Z","k":"y","name":"a","fraud":true}
{"ts":"2026-01-01T00:01:45Z","k":"y","name":"b","fraud":true}
{"ts":"2026-01-01T00:02:06Z","k":"x","name":"b","fraud":true}
`)
	code, _, errOut := cepheus(t, "backtest", "-rules", rulesFile, "-events", events, "-alerts", os.DevNull, "-watermark-every", "1", "-label", "fraud")
	want := "  (2 labelled events came late, behind the watermark: no rule saw them, so they count as missed; see the late events above)\n"
	if code != 0 || !strings.Contains(errOut, want) {
		t.Errorf("backtest: exit %d, want %q in\n%s", code, want, errOut)
	}
}

// TestRunOpenTimeouts: a live run stopped with partial matches open says
// when the timed-out alerts of its rules with a timeout block come; a run
// that finished, read in processing time, has no such rule or none open
// says nothing.
func TestRunOpenTimeouts(t *testing.T) {
	src := `ruleset r
event time ts
rule reset {
  key k
  pattern {
    begin a where name == "reset"
    followedBy b where name == "login"
    within 30m
  }
  timeout {
    only
  }
}
`
	rs, err := rules.Load("r.cep", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := rules.Load("p.cep", []byte(strings.Replace(src, "  timeout {\n    only\n  }\n", "", 1)))
	if err != nil {
		t.Fatal(err)
	}
	stopped := &cep.StreamResult{}
	stopped.RulesetVersion = rs.Hash
	stopped.Stats.PartialMatches, stopped.Stats.Watermark = 3, event.Time(time.Date(2026, 3, 2, 11, 41, 51, 0, time.UTC).UnixMilli())
	want := "the watermark stands at 2026-03-02T11:41:51Z: the timed-out alerts of reset come as it passes their windows' ends, which newer events move it to (on a quiet input, -wall-clock-advance moves it on)"
	if got := openTimeouts(rs, stopped, &runFlags{follow: true}); got != want {
		t.Errorf("a followed run stopped:\n got  %q\n want %q", got, want)
	}
	deployed := *stopped
	deployed.RulesetVersion = "another"
	if got, want := openTimeouts(rs, &deployed, &runFlags{follow: true}), "the timed-out alerts of the rules with a timeout block come"; !strings.Contains(got, want) {
		t.Errorf("a run of another version:\n got  %q\n want it to say %q", got, want)
	}
	finished := *stopped
	finished.Finished = true
	none := *stopped
	none.Stats.PartialMatches = 0
	for what, c := range map[string]struct {
		rs  *rules.Ruleset
		res *cep.StreamResult
		f   runFlags
	}{
		"not live":        {rs, stopped, runFlags{}},
		"finished":        {rs, &finished, runFlags{follow: true}},
		"processing time": {rs, stopped, runFlags{follow: true, timeMode: "processing"}},
		"no timeout rule": {plain, stopped, runFlags{follow: true}},
		"none open":       {rs, &none, runFlags{follow: true}},
	} {
		if got := openTimeouts(c.rs, c.res, &c.f); got != "" {
			t.Errorf("%s: %q, want nothing", what, got)
		}
	}
}

// TestBacktestLowRecallHint: without -case, a scenario whose recall is
// low though its events were caught gets the hint that recall counts
// events and -case counts instances; with -case, or none low, no hint.
func TestBacktestLowRecallHint(t *testing.T) {
	hint := "(recall counts labelled events, and an alert holds a few of a long instance's: -case FIELD counts the instances caught)"
	print := func(ls *cep.LabelSummary) string {
		var b strings.Builder
		printSummary(&b, &cep.Summary{Ruleset: "r", InputStats: cep.InputStats{Decoded: 400}}, ls, time.Second, backtestFlags{label: "is_fraud"}, nil, nil, false)
		return b.String()
	}
	low := &cep.LabelSummary{Field: "is_fraud", Present: 400, ScenarioField: "scenario", ScenarioPresent: 333, Labelled: 333, Caught: 62,
		Scenarios: []cep.ScenarioSummary{{Scenario: "ato", Labelled: 50, Caught: 50}, {Scenario: "stuffing", Labelled: 283, Caught: 12}}}
	if out := print(low); !strings.Contains(out, hint) {
		t.Errorf("a scenario at 4.2%% recall: no hint\n%s", out)
	}
	cased := *low
	cased.CaseField, cased.Cases, cased.CasesCaught = "case_id", 7, 7
	if out := print(&cased); strings.Contains(out, hint) {
		t.Errorf("with -case: the hint\n%s", out)
	}
	high := *low
	high.Scenarios = low.Scenarios[:1]
	if out := print(&high); strings.Contains(out, hint) {
		t.Errorf("no scenario low: the hint\n%s", out)
	}
}
