//go:build linux

package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/cepheus-cep/cepheus/cep"
)

// genSmall writes a day of 20,000 card events with two fraud scenarios
// (card_testing, auth_not_captured) to path, gzip-compressed when its name
// ends in .gz.
func genSmall(t *testing.T, path string) {
	t.Helper()
	code, _, stderr := cepheus(t, "gen", "-history-days", "0", "-days", "1", "-events-per-day", "20000",
		"-customers", "2000", "-scenarios", "card_testing,auth_not_captured", "-fraud-rate", "200", "-o", path)
	if code != 0 {
		t.Fatalf("gen: exit %d\n%s", code, stderr)
	}
}

// TestGenThenBacktest generates a small labelled data set and backtests the
// bundled cards ruleset over it, as make demo does: alerts are JSON lines,
// the summary gives precision and recall, and the late and dead-letter
// files are not created when there is nothing to put in them.
func TestGenThenBacktest(t *testing.T) {
	dir := t.TempDir()
	events := filepath.Join(dir, "events.jsonl.gz")
	genSmall(t, events)
	alerts := filepath.Join(dir, "alerts.jsonl")
	late := filepath.Join(dir, "late.jsonl")
	dead := filepath.Join(dir, "dead.jsonl")
	code, _, stderr := cepheus(t, "backtest", "-rules", "../../rulesets/cards.cep", "-events", events,
		"-label", "is_fraud", "-alerts", alerts, "-late", late, "-dead-letter", dead, "-examples", "1")
	if code != 0 {
		t.Fatalf("backtest: exit %d\n%s", code, stderr)
	}
	for _, want := range []string{"Ruleset cards", "precision", "card_testing", "auth_not_captured", "recall", "Example alerts"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("summary lacks %q:\n%s", want, stderr)
		}
	}
	f, err := os.Open(alerts)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rules := map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var a struct {
			ID   string `json:"alert_id"`
			Rule string `json:"rule"`
		}
		if err := json.Unmarshal(sc.Bytes(), &a); err != nil {
			t.Fatalf("alert is not JSON: %v\n%s", err, sc.Text())
		}
		if len(a.ID) != 32 {
			t.Errorf("alert id %q", a.ID)
		}
		rules[a.Rule]++
	}
	if rules["card_testing"] == 0 || rules["auth_not_captured"] == 0 {
		t.Errorf("alerts per rule %v: want card_testing and auth_not_captured", rules)
	}
	// The generator's disorder stays inside the 5 s default bound, and
	// every line is valid: no late events, no dead letters, no files.
	for _, p := range []string{late, dead} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s exists (err %v), want it not created", p, err)
		}
	}
}

// TestBacktestDeadLetters feeds bad lines: they go to the dead-letter file
// with their line numbers, and the run goes on.
func TestBacktestDeadLetters(t *testing.T) {
	dir := t.TempDir()
	rules := writeFile(t, dir, "r.cep", goodSrc)
	events := writeFile(t, dir, "e.jsonl", `{"ts": 1, "k": "x", "name": "a"}
not json
{"k": "x", "name": "b"}
{"ts": 3, "k": "x", "name": "b"}
`)
	dead := filepath.Join(dir, "dead.jsonl")
	code, stdout, stderr := cepheus(t, "backtest", "-rules", rules, "-events", events, "-dead-letter", dead, "-time-unit", "ms")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if n := strings.Count(stdout, "\n"); n != 1 {
		t.Errorf("%d alerts on stdout, want 1:\n%s", n, stdout)
	}
	b, err := os.ReadFile(dead)
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	if !strings.Contains(got, `"line":2`) || !strings.Contains(got, `"line":3`) || strings.Count(got, "\n") != 2 {
		t.Errorf("dead letters:\n%s\nwant lines 2 and 3", got)
	}
	if !strings.Contains(stderr, "2 lines could not be decoded") {
		t.Errorf("summary does not report the dead letters:\n%s", stderr)
	}
}

// TestBacktestLateFile: an event further behind than -out-of-orderness goes
// to the late file (with per-event watermarks), and is counted.
func TestBacktestLateFile(t *testing.T) {
	dir := t.TempDir()
	rules := writeFile(t, dir, "r.cep", goodSrc)
	events := writeFile(t, dir, "e.jsonl", `{"ts": 10000, "k": "x", "name": "a"}
{"ts": 20000, "k": "x", "name": "c"}
{"ts": 1000, "k": "x", "name": "b"}
`)
	late := filepath.Join(dir, "late.jsonl")
	code, _, stderr := cepheus(t, "backtest", "-rules", rules, "-events", events, "-late", late,
		"-out-of-orderness", "1s", "-watermark-every", "1", "-time-unit", "ms")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	b, err := os.ReadFile(late)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(b); !strings.HasPrefix(got, `{"ruleset":"good","line":3,`) || strings.Count(got, "\n") != 1 {
		t.Errorf("late file:\n%s\nwant line 3 only, of ruleset good", got)
	}
	if !strings.Contains(stderr, "  1 event was late (behind the watermark, set every 1 event to 1s before the newest time: -out-of-orderness 1s, -watermark-every 1; the furthest 17.999s behind it, so -out-of-orderness 19s takes them all)") {
		t.Errorf("summary does not report the late event:\n%s", stderr)
	}
}

// TestBacktestOutputsOfAnEarlierRun: a backtest without late events or
// dead letters leaves no -late or -dead-letter file, also where an earlier
// run over other input left one: a cron job's [ -s dead.jsonl ] took
// yesterday's dead letters for today's, which left the file as it was. A
// device given as the file (/dev/null) stays.
func TestBacktestOutputsOfAnEarlierRun(t *testing.T) {
	dir := t.TempDir()
	rules := writeFile(t, dir, "r.cep", goodSrc)
	clean := `{"ts": 10000, "k": "x", "name": "a"}
{"ts": 20000, "k": "x", "name": "b"}
`
	bad := writeFile(t, dir, "bad.jsonl", clean+`{"ts": 1000, "k": "x", "name": "b"}
not json
`)
	late, dead := filepath.Join(dir, "late.jsonl"), filepath.Join(dir, "dead.jsonl")
	args := []string{"backtest", "-rules", rules, "-late", late, "-dead-letter", dead, "-out-of-orderness", "1s", "-watermark-every", "1", "-time-unit", "ms", "-events"}
	if code, _, stderr := cepheus(t, append(args, bad)...); code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	for _, p := range []string{late, dead} {
		if st, err := os.Stat(p); err != nil || st.Size() == 0 {
			t.Fatalf("the run over %s left %s empty or missing: %v", bad, p, err)
		}
	}
	// A run that fails before it has read its input (a mistyped path)
	// is no run whose outputs these are: it leaves them, and an alerts
	// file (it was truncated).
	const earlier = `{"alert_id":"earlier"}` + "\n"
	alerts := writeFile(t, dir, "alerts.jsonl", earlier)
	missing := append([]string{"backtest", "-alerts", alerts}, append(args[1:], filepath.Join(dir, "missing.jsonl"))...)
	if code, _, stderr := cepheus(t, missing...); code != 1 {
		t.Fatalf("missing events: exit %d\n%s", code, stderr)
	}
	for _, p := range []string{late, dead} {
		if st, err := os.Stat(p); err != nil || st.Size() == 0 {
			t.Fatalf("the run over a missing file removed or emptied %s: %v", p, err)
		}
	}
	if b, err := os.ReadFile(alerts); string(b) != earlier {
		t.Errorf("the run over a missing file left %s holding %q (%v), want %q", alerts, b, err, earlier)
	}
	// Nor a run whose lookup file is missing (it fails before it reads an
	// event); a run without alerts that read its input leaves it empty.
	code, _, stderr := cepheus(t, "backtest", "-rules", "../../rulesets/cards.cep", "-events", bad, "-lookup", "customer=file:"+filepath.Join(dir, "missing.jsonl"), "-alerts", alerts)
	if b, err := os.ReadFile(alerts); code != 1 || string(b) != earlier {
		t.Errorf("the run with a missing lookup file: exit %d, %s holding %q (%v), want 1 and %q\n%s", code, alerts, b, err, earlier, stderr)
	}
	if code, _, stderr := cepheus(t, "backtest", "-rules", rules, "-events", writeFile(t, dir, "none.jsonl", clean[:strings.IndexByte(clean, '\n')+1]), "-time-unit", "ms", "-alerts", alerts); code != 0 {
		t.Fatalf("a run without alerts: exit %d\n%s", code, stderr)
	}
	if b, err := os.ReadFile(alerts); err != nil || len(b) != 0 {
		t.Errorf("a run without alerts left %s holding %q (%v), want it empty", alerts, b, err)
	}
	code, out, stderr := cepheus(t, append(args, writeFile(t, dir, "clean.jsonl", clean))...)
	if code != 0 || strings.Count(out, "\n") != 1 {
		t.Fatalf("exit %d, alerts %q\n%s", code, out, stderr)
	}
	for _, p := range []string{late, dead} {
		if b, err := os.ReadFile(p); !os.IsNotExist(err) {
			t.Errorf("the run over clean input left %s (%v):\n%s", p, err, b)
		}
	}
	args = []string{"backtest", "-rules", rules, "-late", os.DevNull, "-dead-letter", os.DevNull, "-time-unit", "ms", "-events", bad}
	if code, _, stderr := cepheus(t, args...); code != 0 {
		t.Fatalf("-late and -dead-letter %s: exit %d\n%s", os.DevNull, code, stderr)
	}
	if st, err := os.Stat(os.DevNull); err != nil || st.Mode().IsRegular() {
		t.Errorf("%s: %v, %v", os.DevNull, st.Mode(), err)
	}
}

// TestBacktestOutputModes: the alerts, late and dead-letter files a
// backtest creates are 0600, whatever the umask allows (0 here; not
// parallel: the umask is the process's): they hold customer data. They
// were 0666 less the umask, readable by every user under the usual 022.
func TestBacktestOutputModes(t *testing.T) {
	dir := t.TempDir()
	rules := writeFile(t, dir, "r.cep", goodSrc)
	events := writeFile(t, dir, "e.jsonl", `{"ts": 10000, "k": "x", "name": "a"}
{"ts": 20000, "k": "x", "name": "b"}
{"ts": 1000, "k": "x", "name": "b"}
not json
`)
	out := map[string]string{"-alerts": "alerts.jsonl", "-late": "late.jsonl", "-dead-letter": "dead.jsonl"}
	args := []string{"backtest", "-rules", rules, "-events", events, "-out-of-orderness", "1s", "-watermark-every", "1", "-time-unit", "ms"}
	for flag, name := range out {
		args = append(args, flag, filepath.Join(dir, name))
	}
	old := syscall.Umask(0)
	code, _, stderr := cepheus(t, args...)
	syscall.Umask(old)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	for _, name := range out {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() == 0 {
			t.Errorf("%s is empty", name)
		}
		if got := st.Mode().Perm(); got != 0o600 {
			t.Errorf("%s: mode %04o, want 0600", name, got)
		}
	}
}

// TestBacktestRestoresGCPercent: a backtest raises the process-wide GC
// percent for its run and puts the caller's back when it returns.
func TestBacktestRestoresGCPercent(t *testing.T) {
	t.Setenv("GOGC", "")
	const before = 137
	defer debug.SetGCPercent(debug.SetGCPercent(before))
	dir := t.TempDir()
	rules := writeFile(t, dir, "r.cep", goodSrc)
	events := writeFile(t, dir, "e.jsonl", `{"ts": 1, "k": "x", "name": "a"}
{"ts": 3, "k": "x", "name": "b"}
`)
	if code, _, stderr := cepheus(t, "backtest", "-q", "-rules", rules, "-events", events, "-time-unit", "ms"); code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if got := debug.SetGCPercent(before); got != before {
		t.Errorf("GC percent after the backtest %d, want %d (the caller's)", got, before)
	}
}

// TestBacktestRule: -rule backtests only the rules it names, whose alerts
// (ids included) are exactly those the whole ruleset gives for them, in
// the same order; an unknown name is a usage error listing the rules.
func TestBacktestRule(t *testing.T) {
	dir := t.TempDir()
	events := filepath.Join(dir, "events.jsonl.gz")
	code, _, stderr := cepheus(t, "gen", "-history-days", "0", "-days", "1", "-events-per-day", "20000",
		"-customers", "2000", "-scenarios", "card_testing,impossible_travel,velocity_burst", "-fraud-rate", "200", "-o", events)
	if code != 0 {
		t.Fatalf("gen: exit %d\n%s", code, stderr)
	}
	backtest := func(more ...string) []string {
		t.Helper()
		out := filepath.Join(dir, "alerts.jsonl")
		args := append([]string{"backtest", "-q", "-rules", "../../rulesets/cards.cep", "-events", events, "-alerts", out}, more...)
		if code, _, stderr := cepheus(t, args...); code != 0 {
			t.Fatalf("%v: exit %d\n%s", more, code, stderr)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Split(strings.TrimSpace(string(b)), "\n")
	}
	ruleOf := func(line string) string {
		var a struct {
			Rule string `json:"rule"`
		}
		if err := json.Unmarshal([]byte(line), &a); err != nil {
			t.Fatalf("alert is not JSON: %v\n%s", err, line)
		}
		return a.Rule
	}
	var want []string
	for _, line := range backtest() {
		if r := ruleOf(line); r == "card_testing" || r == "impossible_travel" {
			want = append(want, line)
		}
	}
	got := backtest("-rule", "card_testing", "-rule", "impossible_travel")
	if len(want) == 0 || strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("-rule card_testing -rule impossible_travel: %d alerts, want the whole ruleset's %d of these rules, the same lines", len(got), len(want))
	}
	if both := backtest("-rule", "card_testing,impossible_travel"); strings.Join(both, "\n") != strings.Join(got, "\n") {
		t.Error("-rule a,b differs from -rule a -rule b")
	}

	code, _, stderr = cepheus(t, "backtest", "-rules", "../../rulesets/cards.cep", "-events", events, "-rule", "card_testin")
	if code != 2 || !strings.Contains(stderr, "-rule card_testin: no such rule (did you mean card_testing?) (the rules: card_testing, ") {
		t.Errorf("an unknown rule: exit %d, want 2 and the rules named\n%s", code, stderr)
	}
}

// TestBacktestDirectory: a backtest of a directory reads its *.jsonl and
// *.jsonl.gz files (a hidden one and another name are not events) merged
// in event-time order, so a file split in three by time (the middle part
// compressed) gives the alerts of the whole file (their ids; the matched
// events' line numbers are the merged order's); an
// output written into the directory would be read as events and is
// refused before anything is read.
func TestBacktestDirectory(t *testing.T) {
	dir := t.TempDir()
	whole := filepath.Join(dir, "events.jsonl")
	genSmall(t, whole)
	b, err := os.ReadFile(whole)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(strings.TrimSuffix(string(b), "\n"), "\n")
	in := filepath.Join(dir, "in")
	if err := os.Mkdir(in, 0o755); err != nil {
		t.Fatal(err)
	}
	third := len(lines) / 3
	writeFile(t, in, "1.jsonl", strings.Join(lines[:third], ""))
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	if _, err := zw.Write([]byte(strings.Join(lines[third:2*third], ""))); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	writeFile(t, in, "2.jsonl.gz", gz.String())
	writeFile(t, in, "3.jsonl", strings.Join(lines[2*third:], ""))
	writeFile(t, in, ".hidden.jsonl", "not an event\n")
	writeFile(t, in, "notes.txt", "not an event\n")

	backtest := func(events, alerts string) []string {
		t.Helper()
		code, _, stderr := cepheus(t, "backtest", "-rules", "../../rulesets/cards.cep", "-events", events, "-alerts", alerts, "-q")
		if code != 0 {
			t.Fatalf("backtest -events %s: exit %d\n%s", events, code, stderr)
		}
		return readLines(t, alerts)
	}
	want := backtest(whole, filepath.Join(dir, "whole.jsonl"))
	got := backtest(in, filepath.Join(dir, "dir.jsonl"))
	if len(want) < 20 {
		t.Fatalf("%d alerts of the whole file: too few to compare", len(want))
	}
	if !slices.Equal(alertIDs(t, filepath.Join(dir, "dir.jsonl")), alertIDs(t, filepath.Join(dir, "whole.jsonl"))) || len(got) != len(want) {
		t.Fatalf("the directory's %d alerts differ from the whole file's %d", len(got), len(want))
	}

	code, _, stderr := cepheus(t, "backtest", "-rules", "../../rulesets/cards.cep", "-events", in, "-alerts", filepath.Join(in, "alerts.jsonl"))
	if code != 1 || !strings.Contains(stderr, "is in the events directory") {
		t.Errorf("-alerts in the events directory: exit %d, want 1 saying so\n%s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(in, "alerts.jsonl")); !os.IsNotExist(err) {
		t.Errorf("alerts.jsonl in the events directory: %v, want it not created", err)
	}
}

// TestBacktestRulesetCopies: a directory of rulesets holding a copy of
// one (the same rules, another comment) backtests it once, with a
// warning naming both files; it backtested both, every alert twice with
// the same id.
func TestBacktestRulesetCopies(t *testing.T) {
	dir := t.TempDir()
	events := filepath.Join(dir, "events.jsonl")
	genSmall(t, events)
	src, err := os.ReadFile("../../rulesets/cards.cep")
	if err != nil {
		t.Fatal(err)
	}
	sets := filepath.Join(dir, "rules")
	if err := os.Mkdir(sets, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, sets, "cards.cep", string(src))
	writeFile(t, sets, "cards-old.cep", "# the copy kept before an edit\n"+string(src))
	code, _, stderr := cepheus(t, "backtest", "-rules", "../../rulesets/cards.cep", "-events", events, "-alerts", filepath.Join(dir, "one.jsonl"), "-q")
	if code != 0 {
		t.Fatalf("backtest of the file: exit %d\n%s", code, stderr)
	}
	code, _, stderr = cepheus(t, "backtest", "-rules", sets, "-events", events, "-alerts", filepath.Join(dir, "dir.jsonl"), "-q")
	if code != 0 {
		t.Fatalf("backtest of the directory: exit %d\n%s", code, stderr)
	}
	if want := "warning: " + filepath.Join(sets, "cards.cep") + " is the same ruleset as " + filepath.Join(sets, "cards-old.cep"); !strings.Contains(stderr, want) {
		t.Errorf("backtest of the directory said\n%s\nwant %q", stderr, want)
	}
	one, both := alertIDs(t, filepath.Join(dir, "one.jsonl")), alertIDs(t, filepath.Join(dir, "dir.jsonl"))
	if len(one) < 20 || !slices.Equal(one, both) {
		t.Errorf("the directory's %d alerts differ from the file's %d (want the same, at least 20)", len(both), len(one))
	}
}

// TestCommandDefaults: an engine built with cep.CommandDefaults gives the
// alerts of cepheus backtest over the same input, byte for byte; without
// them (the engine's own defaults: the input taken as ordered) the same
// input gives late events.
func TestCommandDefaults(t *testing.T) {
	dir := t.TempDir()
	events := filepath.Join(dir, "events.jsonl")
	genSmall(t, events)
	alerts := filepath.Join(dir, "alerts.jsonl")
	if code, _, stderr := cepheus(t, "backtest", "-q", "-rules", "../../rulesets/cards.cep", "-events", events, "-alerts", alerts); code != 0 {
		t.Fatalf("backtest: exit %d\n%s", code, stderr)
	}
	want, err := os.ReadFile(alerts)
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("../../rulesets/cards.cep")
	if err != nil {
		t.Fatal(err)
	}
	rs, err := cep.CompileRuleset("cards.cep", src)
	if err != nil {
		t.Fatal(err)
	}
	run := func(opts ...cep.Option) ([]byte, *cep.Summary) {
		t.Helper()
		var out bytes.Buffer
		e, err := cep.New(append(opts, cep.WithRuleset(rs), cep.WithAlerts(&out))...)
		if err != nil {
			t.Fatal(err)
		}
		in, err := cep.OpenEventSource(events)
		if err != nil {
			t.Fatal(err)
		}
		defer in.Close()
		sum, err := e.Run(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		return out.Bytes(), sum
	}
	got, sum := run(cep.CommandDefaults()...)
	if len(want) == 0 || !bytes.Equal(got, want) {
		t.Errorf("the engine with CommandDefaults: %d bytes of alerts (%d alerts), backtest's %d bytes", len(got), sum.Alerts, len(want))
	}
	if _, sum := run(); sum.Late == 0 {
		t.Errorf("the engine's own defaults gave no late event: the input shows nothing of CommandDefaults")
	}
}
