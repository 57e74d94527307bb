package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cepheus-cep/cepheus/rules"
)

// abEvents writes n events for key k alternating names a and b one second
// apart from 2026-01-01, with line bad (1-based; 0 for none) replaced.
func abEvents(n, bad int, badLine string) string {
	var b strings.Builder
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := 1; i <= n; i++ {
		if i == bad {
			b.WriteString(badLine + "\n")
			continue
		}
		name := "a"
		if i%2 == 0 {
			name = "b"
		}
		fmt.Fprintf(&b, `{"ts":%q,"k":"x","name":%q}`+"\n", t0.Add(time.Duration(i)*time.Second).Format(time.RFC3339), name)
	}
	return b.String()
}

// TestBacktestFarFutureTime: one event in year 9999 goes to the dead
// letters with its line and the reason; it does not move the watermark, so
// no other event is late.
func TestBacktestFarFutureTime(t *testing.T) {
	dir := t.TempDir()
	rules := writeFile(t, dir, "r.cep", goodSrc)
	events := writeFile(t, dir, "e.jsonl", abEvents(200, 100, `{"ts":"9999-12-31T23:59:59Z","k":"x","name":"a"}`))
	dead := filepath.Join(dir, "dead.jsonl")
	code, _, stderr := cepheus(t, "backtest", "-rules", rules, "-events", events, "-dead-letter", dead, "-alerts", filepath.Join(dir, "a.jsonl"))
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if strings.Contains(stderr, "late (behind the watermark") {
		t.Errorf("events were late:\n%s", stderr)
	}
	b, _ := os.ReadFile(dead)
	if got := string(b); !strings.HasPrefix(got, `{"ruleset":"good","line":100,`) || !strings.Contains(got, "more than 24h0m0s ahead of the stream") || strings.Count(got, "\n") != 1 {
		t.Errorf("dead letters:\n%s\nwant line 100, too far ahead", got)
	}
	if !strings.Contains(stderr, "1 event was more than -max-ahead 24h ahead") {
		t.Errorf("summary:\n%s", stderr)
	}
	// -max-ahead 0 turns the check off: the old behaviour, the rest late.
	code, _, stderr = cepheus(t, "backtest", "-rules", rules, "-events", events, "-max-ahead", "0", "-watermark-every", "1", "-alerts", filepath.Join(dir, "a.jsonl"))
	if code != 0 || !strings.Contains(stderr, "100 events were late") {
		t.Errorf("-max-ahead 0: exit %d\n%s", code, stderr)
	}
}

// TestBacktestEpochSeconds: times in epoch seconds are refused with a
// message that says so and names -time-unit; -time-unit s reads them.
func TestBacktestEpochSeconds(t *testing.T) {
	dir := t.TempDir()
	rules := writeFile(t, dir, "r.cep", goodSrc)
	var in strings.Builder
	for i := range 40 {
		name := []string{"a", "b"}[i%2]
		fmt.Fprintf(&in, `{"ts":%d,"k":"x","name":%q}`+"\n", 1767225600+i, name)
	}
	events := writeFile(t, dir, "e.jsonl", in.String())
	code, stdout, stderr := cepheus(t, "backtest", "-rules", rules, "-events", events)
	if code != 1 || stdout != "" {
		t.Errorf("exit %d, alerts %q; want 1 and none", code, stdout)
	}
	for _, want := range []string{"40 of 40 lines could not be decoded", "as epoch seconds it is 2026-01-01T00:00:00.000Z", "-time-unit s"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	code, stdout, stderr = cepheus(t, "backtest", "-rules", rules, "-events", events, "-time-unit", "s")
	if code != 0 || strings.Count(stdout, "\n") != 20 || !strings.Contains(stdout, `"detected_at":"2026-01-01T00:00:01.000Z"`) {
		t.Errorf("-time-unit s: exit %d\n%s\n%s", code, stdout, stderr)
	}
	// Milliseconds read as seconds are refused the same way, naming the
	// unit that fits; -time-unit ms takes any number.
	var ms strings.Builder
	for i := range 40 {
		fmt.Fprintf(&ms, `{"ts":%d,"k":"x","name":%q}`+"\n", 1767225600000+int64(i)*1000, []string{"a", "b"}[i%2])
	}
	msEvents := writeFile(t, dir, "ms.jsonl", ms.String())
	code, stdout, stderr = cepheus(t, "backtest", "-rules", rules, "-events", msEvents, "-time-unit", "s")
	if code != 1 || stdout != "" || !strings.Contains(stderr, "40 of 40 lines could not be decoded") ||
		!strings.Contains(stderr, "as epoch seconds is beyond year 9999, outside 2000..2100; as epoch milliseconds it is 2026-01-01T00:00:00.000Z") {
		t.Errorf("milliseconds with -time-unit s: exit %d, alerts %q\n%s", code, stdout, stderr)
	}
	code, stdout, stderr = cepheus(t, "backtest", "-rules", rules, "-events", events, "-time-unit", "ms")
	if code != 0 || strings.Count(stdout, "\n") != 20 {
		t.Errorf("seconds with -time-unit ms: exit %d\n%s\n%s", code, stdout, stderr)
	}
}

// TestBacktestNothingDecodes: a schema that matches nothing (a wrong key
// field) fails loudly, and nothing is written into the working directory.
func TestBacktestNothingDecodes(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	src := goodSrc[:strings.Index(goodSrc, "test ")]
	rules := writeFile(t, dir, "r.cep", strings.Replace(src, "key k", "key card", 1))
	events := writeFile(t, dir, "e.jsonl", abEvents(50, 0, ""))
	code, _, stderr := cepheus(t, "backtest", "-rules", rules, "-events", events)
	if code != 1 || !strings.Contains(stderr, `50 of 50 lines could not be decoded (line 1: missing required field "card")`) {
		t.Errorf("exit %d\n%s", code, stderr)
	}
	if !strings.Contains(stderr, "only counted (-dead-letter FILE keeps them)") {
		t.Errorf("summary does not say where dead letters went:\n%s", stderr)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 2 {
		t.Errorf("working directory holds %v, want only r.cep and e.jsonl", ents)
	}
	// Past 10,000 lines with nothing decoded the run stops there.
	big := writeFile(t, dir, "big.jsonl", strings.Repeat(`{"ts":"2026-01-01T00:00:00Z","k":"x","name":"a"}`+"\n", 12000))
	code, _, stderr = cepheus(t, "backtest", "-rules", rules, "-events", big)
	if code != 1 || !strings.Contains(stderr, "none of the first 10,000 lines could be decoded") || !strings.Contains(stderr, "Partial run") {
		t.Errorf("give up: exit %d\n%s", code, stderr)
	}
}

// TestBacktestEmptyInput: an input without events is a successful run
// that says so, whether the file is empty or blank.
func TestBacktestEmptyInput(t *testing.T) {
	dir := t.TempDir()
	rules := writeFile(t, dir, "r.cep", goodSrc)
	for name, content := range map[string]string{"empty.jsonl": "", "blank.jsonl": "\n  \n\n"} {
		events := writeFile(t, dir, name, content)
		code, stdout, stderr := cepheus(t, "backtest", "-rules", rules, "-events", events)
		want := "backtest: warning: " + events + " holds no events (it is empty, or only blank lines)"
		if code != 0 || stdout != "" || !strings.Contains(stderr, want) {
			t.Errorf("%s: exit %d, alerts %q\n%s", name, code, stdout, stderr)
		}
	}
	// An input with events says nothing of the kind.
	events := writeFile(t, dir, "e.jsonl", abEvents(4, 0, ""))
	if code, _, stderr := cepheus(t, "backtest", "-rules", rules, "-events", events); code != 0 || strings.Contains(stderr, "holds no events") {
		t.Errorf("events: exit %d\n%s", code, stderr)
	}
}

// TestBacktestOutputsCheckedFirst: an output that cannot be written, or
// that is the events file, fails the run before anything is read.
func TestBacktestOutputsCheckedFirst(t *testing.T) {
	dir := t.TempDir()
	rules := writeFile(t, dir, "r.cep", goodSrc)
	events := writeFile(t, dir, "e.jsonl", abEvents(10, 0, ""))
	alerts := filepath.Join(dir, "alerts.jsonl")
	code, _, stderr := cepheus(t, "backtest", "-rules", rules, "-events", events, "-alerts", alerts,
		"-dead-letter", filepath.Join(dir, "no", "such", "dir", "dead.jsonl"))
	if code != 1 || !strings.Contains(stderr, "-dead-letter") || strings.Contains(stderr, "Ruleset") {
		t.Errorf("unwritable -dead-letter: exit %d\n%s", code, stderr)
	}
	if _, err := os.Stat(alerts); !os.IsNotExist(err) {
		t.Errorf("alerts file created before the check failed: %v", err)
	}
	code, _, stderr = cepheus(t, "backtest", "-rules", rules, "-events", events, "-late", events)
	if code != 1 || !strings.Contains(stderr, "is the events file") {
		t.Errorf("-late = -events: exit %d\n%s", code, stderr)
	}
	if b, _ := os.ReadFile(events); string(b) != abEvents(10, 0, "") {
		t.Error("the events file was changed")
	}
	// Nor may any output, profiles included, be a file the run reads:
	// the events, a ruleset or a lookup file (reached by any path).
	lookupRules := writeFile(t, dir, "l.cep", `ruleset l
event time ts
schema {
  ts: time
  k: string
}
lookup who {
  key k
  fields {
    tier: string default ""
  }
}
rule r {
  key k
  pattern {
    begin a where who.tier == "x"
  }
}
`)
	lookupFile := writeFile(t, dir, "who.jsonl", `{"k":"x","tier":"x"}`+"\n")
	if err := os.Symlink(lookupFile, filepath.Join(dir, "who-link.jsonl")); err != nil {
		t.Fatal(err)
	}
	inputs := map[string]string{events: abEvents(10, 0, ""), rules: goodSrc, lookupFile: `{"k":"x","tier":"x"}` + "\n"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-rules", rules, "-cpuprofile", events}, "-cpuprofile " + events + " is the events file"},
		{[]string{"-rules", rules, "-memprofile", dir + "/./e.jsonl"}, " is the events file"},
		{[]string{"-rules", rules, "-alerts", rules}, "-alerts " + rules + " is a ruleset file"},
		{[]string{"-rules", dir, "-dead-letter", rules}, "-dead-letter " + rules + " is a ruleset file"},
		{[]string{"-rules", lookupRules, "-lookup", "who=file:" + lookupFile, "-late", filepath.Join(dir, "who-link.jsonl")}, "is the file of -lookup who"},
		{[]string{"-rules", rules, "-alerts", alerts, "-cpuprofile", alerts}, "-alerts and -cpuprofile name the same file"},
	} {
		code, _, stderr := cepheus(t, append([]string{"backtest", "-events", events}, c.args...)...)
		if code != 1 || !strings.Contains(stderr, c.want) || strings.Contains(stderr, "Ruleset") {
			t.Errorf("%v: exit %d, want 1 and %q\n%s", c.args, code, c.want, stderr)
		}
		for path, want := range inputs {
			if b, _ := os.ReadFile(path); string(b) != want {
				t.Fatalf("%v: %s was changed", c.args, path)
			}
		}
	}
}

// TestBacktestOutputsDistinct: two outputs that name one file (which
// would overwrite each other's lines) fail the run before anything is
// read; a device such as /dev/null may take several.
func TestBacktestOutputsDistinct(t *testing.T) {
	dir := t.TempDir()
	rules := writeFile(t, dir, "r.cep", goodSrc)
	// Line 11 is late: a minute behind the newest event.
	events := writeFile(t, dir, "e.jsonl", abEvents(10, 0, "")+`{"ts":"2026-01-01T00:00:01Z","k":"x","name":"a"}`+"\n")
	out := filepath.Join(dir, "out.jsonl")
	for _, other := range []string{out, filepath.Join(dir, ".", "out.jsonl")} {
		code, _, stderr := cepheus(t, "backtest", "-rules", rules, "-events", events, "-alerts", out, "-late", other, "-watermark-every", "1", "-out-of-orderness", "0")
		if code != 1 || !strings.Contains(stderr, "-alerts and -late name the same file") || strings.Contains(stderr, "Ruleset") {
			t.Errorf("-late %s: exit %d\n%s", other, code, stderr)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("-late %s: output created before the check failed: %v", other, err)
			os.Remove(out)
		}
	}
	// An existing file reached by another path is the same file too.
	writeFile(t, dir, "dead.jsonl", "")
	if err := os.Symlink(filepath.Join(dir, "dead.jsonl"), filepath.Join(dir, "link.jsonl")); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := cepheus(t, "backtest", "-rules", rules, "-events", events, "-alerts", out,
		"-dead-letter", filepath.Join(dir, "dead.jsonl"), "-late", filepath.Join(dir, "link.jsonl"))
	if code != 1 || !strings.Contains(stderr, "-late and -dead-letter name the same file") {
		t.Errorf("symlink: exit %d\n%s", code, stderr)
	}
	code, _, stderr = cepheus(t, "backtest", "-rules", rules, "-events", events, "-alerts", os.DevNull, "-late", os.DevNull,
		"-watermark-every", "1", "-out-of-orderness", "0")
	if code != 0 || !strings.Contains(stderr, "1 event was late") {
		t.Errorf("%s twice: exit %d\n%s", os.DevNull, code, stderr)
	}
}

// TestBacktestOutputNamedGzip: an -alerts, -late or -dead-letter file
// named in .gz is refused before anything is read or written, saying
// that it would hold plain lines. Before, backtest wrote plain JSON lines
// into it, which backtest -events, run and zcat then refused as "not gzip
// data".
func TestBacktestOutputNamedGzip(t *testing.T) {
	dir := t.TempDir()
	rules := writeFile(t, dir, "r.cep", goodSrc)
	events := writeFile(t, dir, "e.jsonl", abEvents(10, 0, ""))
	for _, c := range []struct{ flag, want string }{
		{"-alerts", "the alerts are plain JSON lines, not gzip: name the file without .gz, or compress them on their way (-alerts - | gzip > "},
		{"-late", "the file holds plain JSON lines, not gzip: name it without .gz\n"},
		{"-dead-letter", "the file holds plain JSON lines, not gzip: name it without .gz\n"},
	} {
		out := filepath.Join(dir, "out.jsonl.gz")
		code, stdout, stderr := cepheus(t, "backtest", "-rules", rules, "-events", events, c.flag, out)
		if code != 1 || stdout != "" || !strings.Contains(stderr, "cepheus: backtest: "+c.flag+" "+out+": "+c.want) || strings.Contains(stderr, "Ruleset") {
			t.Errorf("%s %s: exit %d, stdout %q\n%s", c.flag, out, code, stdout, stderr)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("%s %s: the file was made: %v", c.flag, out, err)
			os.Remove(out)
		}
	}
}

// TestBacktestTruncatedGzip: a gzip file cut short, or followed by bytes
// that start no gzip member (trailing garbage, zero padding), ends a
// backtest with an error after the summary of what was read, and a run
// (which takes no checkpoint past it) with an error; both say what is wrong
// with the file, once. A run said only "unexpected EOF" of a truncated
// file, and both said "a truncated .gz file?" or "gzip: invalid header" of
// whole members followed by garbage.
func TestBacktestTruncatedGzip(t *testing.T) {
	dir := t.TempDir()
	rules := writeFile(t, dir, "r.cep", goodSrc)
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.Write([]byte(abEvents(5000, 0, "")))
	zw.Close()
	for _, c := range []struct {
		name, data, want string
	}{
		{"truncated", string(z.Bytes()[:z.Len()/2]), ": unexpected EOF (the input ends in the middle of a compressed block: a truncated .gz file?)"},
		{"garbage", z.String() + "garbage\n", ": line 5001: after gzip member 1 the input holds bytes that start no gzip member (trailing garbage)"},
		{"zero padding", z.String() + strings.Repeat("\x00", 512), ": line 5001: after gzip member 1 the input holds bytes that start no gzip member (trailing garbage)"},
	} {
		events := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-")+".jsonl.gz")
		if err := os.WriteFile(events, []byte(c.data), 0o644); err != nil {
			t.Fatal(err)
		}
		code, _, stderr := cepheus(t, "backtest", "-rules", rules, "-events", events, "-alerts", filepath.Join(dir, "a.jsonl"))
		if code != 1 || !strings.Contains(stderr, "Partial run of ruleset good") || !strings.Contains(stderr, c.want) ||
			strings.Count(stderr, "a truncated .gz file?") > 1 || c.name != "truncated" && strings.Contains(stderr, "truncated") {
			t.Errorf("backtest, %s: exit %d, want 1 and %q\n%s", c.name, code, c.want, stderr)
		}
		code, _, stderr = cepheus(t, "run", "-rules", rules, "-events", events, "-state", filepath.Join(dir, c.name+".state"),
			"-alerts", filepath.Join(dir, c.name+".alerts"))
		// The run took no checkpoint (the whole input is one batch here).
		if code != 1 || !strings.Contains(stderr, "\ncepheus: "+events) ||
			!strings.Contains(stderr, c.want+" (no checkpoint was taken: once the cause is fixed, the same command starts over)\n") ||
			c.name != "truncated" && strings.Contains(stderr, "truncated") {
			t.Errorf("run, %s: exit %d, want 1 and %q\n%s", c.name, code, c.want, stderr)
		}
	}
}

// TestBacktestDirectoryDeadLetterFile: a backtest of a directory names the
// file of a dead letter's line, with its line there, in the dead letter,
// the summary and the error of a run that decodes too little; it gave the
// line's number in the merged order of the files.
func TestBacktestDirectoryDeadLetterFile(t *testing.T) {
	dir := t.TempDir()
	rules := writeFile(t, dir, "r.cep", goodSrc)
	events := filepath.Join(dir, "in")
	if err := os.Mkdir(events, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, events, "a.jsonl", abEvents(10, 0, ""))
	writeFile(t, events, "b.jsonl", abEvents(3, 2, "{oops"))
	dead := filepath.Join(dir, "dead.jsonl")
	code, _, stderr := cepheus(t, "backtest", "-rules", rules, "-events", events, "-alerts", filepath.Join(dir, "a.jsonl"), "-dead-letter", dead)
	if code != 0 || !strings.Contains(stderr, "1 line could not be decoded (first: b.jsonl line 2: column 2: ") {
		t.Errorf("exit %d, want 0 and the first dead letter at b.jsonl line 2\n%s", code, stderr)
	}
	data, err := os.ReadFile(dead)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`{"ruleset":"good","file":"b.jsonl","line":2,"offset":%d,"reason":`, len(abEvents(1, 0, "")))
	if !strings.HasPrefix(string(data), want) || strings.Count(string(data), "\n") != 1 {
		t.Errorf("dead letters %q, want one starting %s", data, want)
	}
	writeFile(t, events, "b.jsonl", strings.Repeat("{oops\n", 30))
	code, _, stderr = cepheus(t, "backtest", "-rules", rules, "-events", events, "-alerts", filepath.Join(dir, "a.jsonl"))
	if code != 1 || !strings.Contains(stderr, "cepheus: backtest: ruleset good: 30 of 40 lines could not be decoded (b.jsonl line 1: column 2: ") {
		t.Errorf("mostly dead: exit %d, want 1 naming b.jsonl line 1\n%s", code, stderr)
	}
}

// buildCepheus builds the command into a temporary directory.
func buildCepheus(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := filepath.Join(t.TempDir(), "cepheus")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// bigEvents writes an input that takes the binary a few seconds, with an
// alert every two lines.
func bigEvents(t *testing.T, dir string) (rules, events string) {
	t.Helper()
	rules = writeFile(t, dir, "r.cep", goodSrc)
	f, err := os.Create(filepath.Join(dir, "big.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	for i := range 3_000_000 {
		fmt.Fprintf(w, `{"ts":%d,"k":"k%d","name":"%c","pad":"%s"}`+"\n", t0+int64(i), i%1000, "ab"[i/1000%2], "0123456789abcdef0123456789abcdef")
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	return rules, f.Name()
}

// TestBacktestClosedPipe runs the binary with its alerts going to a pipe
// whose reader goes away after the first line (backtest ... | head -1):
// the run ends with the partial summary and exit status 141, as a shell
// reports a process SIGPIPE killed, instead of dying without a word.
func TestBacktestClosedPipe(t *testing.T) {
	bin := buildCepheus(t)
	dir := t.TempDir()
	rules := writeFile(t, dir, "r.cep", goodSrc)
	// 25,000 alerts: far more than a pipe's buffer holds.
	events := writeFile(t, dir, "e.jsonl", abEvents(50_000, 0, ""))
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "backtest", "-rules", rules, "-events", events)
	cmd.Stdout = w
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, `{"alert_id":"`) {
		t.Fatalf("first line %q, %v", line, err)
	}
	r.Close()
	err = cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 141 {
		t.Fatalf("exit %d (%v), want 141\n%s", code, err, stderr.String())
	}
	out := stderr.String()
	for _, want := range []string{"Partial run of ruleset good", "broken pipe (the output was closed)"} {
		if !strings.Contains(out, want) {
			t.Errorf("stderr lacks %q:\n%s", want, out)
		}
	}

	// A command whose output is all it makes (gen, consume) ends there
	// without a word, as other tools do (gen | head -1).
	r, w, err = os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	gen := exec.Command(bin, "gen", "-o", "-")
	gen.Stdout = w
	stderr.Reset()
	gen.Stderr = &stderr
	if err := gen.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if line, err := bufio.NewReader(r).ReadString('\n'); err != nil || !strings.HasPrefix(line, "{") {
		t.Fatalf("gen's first line %q, %v", line, err)
	}
	r.Close()
	err = gen.Wait()
	if code := gen.ProcessState.ExitCode(); code != 141 || stderr.Len() > 0 {
		t.Errorf("gen | head -1: exit %d (%v), stderr %q; want 141 and nothing said", code, err, stderr.String())
	}
}

// TestRunClosedStderr runs the binary's run with its standard error a
// pipe whose reader is gone (its log's reader died): the run does not die
// of it, it reads its input to the end, commits the backtest's alerts and
// exits 0; its log lines are lost. SIGPIPE is caught (TestBacktestClosedPipe),
// so the log's writes fail and are dropped; before, the process died at
// its first log line.
func TestRunClosedStderr(t *testing.T) {
	bin := buildCepheus(t)
	dir := t.TempDir()
	rules := writeFile(t, dir, "r.cep", goodSrc)
	events := writeFile(t, dir, "e.jsonl", abEvents(2000, 0, ""))
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	alerts := filepath.Join(dir, "a")
	cmd := exec.Command(bin, "run", "-rules", rules, "-events", events, "-state", filepath.Join(dir, "s"), "-alerts", alerts)
	cmd.Stderr = w
	err = cmd.Run()
	w.Close()
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("exit %d (%v), want 0", code, err)
	}
	code, want, stderr := cepheus(t, "backtest", "-rules", rules, "-events", events)
	if code != 0 || strings.Count(want, "\n") == 0 {
		t.Fatalf("the backtest: exit %d, %d alerts\n%s", code, strings.Count(want, "\n"), stderr)
	}
	files, err := filepath.Glob(filepath.Join(alerts, "*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, strings.SplitAfter(string(b), "\n")...)
	}
	got = slices.DeleteFunc(got, func(l string) bool { return l == "" })
	wantLines := strings.SplitAfter(want, "\n")
	wantLines = slices.DeleteFunc(wantLines, func(l string) bool { return l == "" })
	slices.Sort(got)
	slices.Sort(wantLines)
	if !slices.Equal(got, wantLines) {
		t.Errorf("the run committed %d alerts, the backtest gives %d", len(got), len(wantLines))
	}
}

// waitForSize waits until the file at path holds at least n bytes.
func waitForSize(t *testing.T, path string, n int64) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if st, err := os.Stat(path); err == nil && st.Size() >= n {
			return
		}
	}
	t.Fatalf("%s never reached %d bytes", path, n)
}

// TestBacktestSignals runs the binary: Ctrl-C (SIGINT) ends the run with
// the partial summary and exit 130, SIGTERM with it and exit 143, and the
// alerts file holds whole JSON lines; after kill -9 it holds whole lines
// too.
func TestBacktestSignals(t *testing.T) {
	bin := buildCepheus(t)
	dir := t.TempDir()
	rules, events := bigEvents(t, dir)

	// SIGINT and SIGTERM stop it with the summary; the exit status is a
	// shell's for the signal (SIGTERM gave 130, as Ctrl-C, before).
	for _, s := range []struct {
		sig  syscall.Signal
		code int
	}{{syscall.SIGINT, 130}, {syscall.SIGTERM, 143}} {
		alerts := filepath.Join(dir, fmt.Sprintf("sig%d.jsonl", s.sig))
		cmd := exec.Command(bin, "backtest", "-rules", rules, "-events", events, "-alerts", alerts)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waitForSize(t, alerts, 1<<20)
		cmd.Process.Signal(s.sig)
		err := cmd.Wait()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != s.code {
			t.Errorf("after %v: %v, want exit %d\n%s", s.sig, err, s.code, stderr.String())
		}
		for _, want := range []string{"Partial run of ruleset good", "backtest interrupted at line"} {
			if !strings.Contains(stderr.String(), want) {
				t.Errorf("after %v: stderr lacks %q:\n%s", s.sig, want, stderr.String())
			}
		}
		checkWholeLines(t, alerts, true)
	}

	for i := range 3 {
		alerts := filepath.Join(dir, fmt.Sprintf("kill%d.jsonl", i))
		cmd := exec.Command(bin, "backtest", "-q", "-rules", rules, "-events", events, "-alerts", alerts)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waitForSize(t, alerts, int64(1+i)<<20)
		time.Sleep(time.Duration(i*37) * time.Millisecond)
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		checkWholeLines(t, alerts, false)
	}
}

// pageSize is the granularity at which the kernel may cut a write to a
// file short when the writing process is killed during the write.
const pageSize = 4096

// checkWholeLines checks that the file is JSON lines, the last one ended
// by its newline; after a kill (!final) the last line may lack its end
// only where the kernel cut a write short: at a page boundary of the file,
// the one torn line the help text tells readers to drop.
func checkWholeLines(t *testing.T, path string, final bool) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 0 && b[len(b)-1] != '\n' && !final && len(b)%pageSize == 0 {
		t.Logf("%s: the kernel cut the last write at byte %d (a page boundary): dropping the torn line", path, len(b))
		b = b[:bytes.LastIndexByte(b, '\n')+1]
	}
	if len(b) == 0 || b[len(b)-1] != '\n' {
		t.Fatalf("%s: %d bytes, the last line torn: %q", path, len(b), b[max(0, len(b)-80):])
	}
	n := 0
	for line := range bytes.Lines(b) {
		n++
		if !json.Valid(line) {
			t.Fatalf("%s: line %d is not JSON: %q", path, n, line)
		}
	}
	t.Logf("%s: %d whole lines (final %v)", path, n, final)
}

// TestRunMissingEvents: run over an -events path that does not exist fails
// (exit 1) naming the flag and the path (not "stat PATH"), and makes no
// state directory.
func TestRunMissingEvents(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	missing := filepath.Join(dir, "nope.jsonl")
	code, _, stderr := cepheus(t, "run", "-rules", "../../rulesets/cards.cep", "-events", missing, "-state", state, "-alerts", filepath.Join(dir, "alerts"))
	if code != 1 || !strings.Contains(stderr, "cepheus: run: -events "+missing+": no such file or directory\n") {
		t.Errorf("exit %d\n%s", code, stderr)
	}
	if _, err := os.Stat(state); !os.IsNotExist(err) {
		t.Errorf("the state directory was made: %v", err)
	}
	// A path that is there but cannot be read (a socket here: the tests
	// run as root, which reads any file) fails as early, with the cause
	// (it made the state and output directories and printed a summary of
	// 0 records first, the fs trial).
	sock := filepath.Join(dir, "events.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	code, _, stderr = cepheus(t, "run", "-rules", "../../rulesets/cards.cep", "-events", sock, "-state", state, "-alerts", filepath.Join(dir, "alerts"))
	if code != 1 || !strings.Contains(stderr, "cepheus: run: -events "+sock+": no such device or address\n") {
		t.Errorf("an unreadable input: exit %d\n%s", code, stderr)
	}
	if _, err := os.Stat(state); !os.IsNotExist(err) {
		t.Errorf("an unreadable input: the state directory was made: %v", err)
	}
}

// TestRunEmptyDirectory: run over a directory with no events file (and
// without -follow) fails (exit 1) saying why, without the engine's
// component names ("stream: " was left in), and makes no state directory.
func TestRunEmptyDirectory(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	empty := filepath.Join(dir, "in")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := cepheus(t, "run", "-rules", "../../rulesets/cards.cep", "-events", empty, "-state", state, "-alerts", filepath.Join(dir, "alerts"))
	if code != 1 || !strings.Contains(stderr, "\ncepheus: the directory "+empty+" has no file to read (names ending in .jsonl or .jsonl.gz)") {
		t.Errorf("exit %d\n%s", code, stderr)
	}
	if _, err := os.Stat(state); !os.IsNotExist(err) {
		t.Errorf("the state directory was made: %v", err)
	}
}

// TestRunEmptyInputWarned: a run over an input with no record (an empty
// file, blank lines, a directory of empty files; stdin closed or
// /dev/null) finishes its state directory, so that every later run on it
// has nothing to do whatever its input: it warns, with -q too. Before, a
// cron job's run -q over an empty stdin said nothing, and neither did
// the runs after it, which read nothing.
func TestRunEmptyInputWarned(t *testing.T) {
	dir := t.TempDir()
	rules := writeFile(t, dir, "r.cep", goodSrc)
	in := filepath.Join(dir, "in")
	if err := os.Mkdir(in, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, in, "a.jsonl", "")
	for i, c := range []struct{ events, input, why string }{
		{writeFile(t, dir, "empty.jsonl", ""), "", "it is empty, or only blank lines"},
		{writeFile(t, dir, "blank.jsonl", "\n\n"), "", "it is empty, or only blank lines"},
		{in, "directory ", "no *.jsonl or *.jsonl.gz files, or only empty ones"},
	} {
		state := filepath.Join(dir, fmt.Sprintf("state%d", i))
		args := []string{"run", "-q", "-rules", rules, "-state", state, "-alerts", filepath.Join(dir, fmt.Sprintf("alerts%d", i))}
		code, _, stderr := cepheus(t, append(args, "-events", c.events)...)
		want := fmt.Sprintf("run: warning: %s%s holds no events (%s): the run of %s has finished, and a run on that state directory has nothing to do\n", c.input, c.events, c.why, state)
		if code != 0 || stderr != want {
			t.Errorf("run -q -events %s: exit %d, stderr %q; want 0 and %q", c.events, code, stderr, want)
		}
	}
	events := writeFile(t, dir, "e.jsonl", abEvents(10, 0, ""))
	if code, _, stderr := cepheus(t, "run", "-q", "-rules", rules, "-events", events, "-state", filepath.Join(dir, "s"), "-alerts", filepath.Join(dir, "a")); code != 0 || stderr != "" {
		t.Errorf("run -q over events: exit %d, stderr %q; want 0 and nothing", code, stderr)
	}
}

// TestRunProfileNotAnInput: run's -cpuprofile may not be a file the run
// reads (the events, the ruleset): it fails (exit 1) and leaves them be.
func TestRunProfileNotAnInput(t *testing.T) {
	dir := t.TempDir()
	rules := writeFile(t, dir, "r.cep", goodSrc)
	events := writeFile(t, dir, "e.jsonl", abEvents(10, 0, ""))
	for path, want := range map[string]string{events: "is the events file", rules: "is a ruleset file"} {
		code, _, stderr := cepheus(t, "run", "-q", "-rules", rules, "-events", events, "-state", filepath.Join(dir, "state"),
			"-alerts", filepath.Join(dir, "alerts"), "-cpuprofile", path)
		if code != 1 || !strings.Contains(stderr, "run: -cpuprofile "+path+" "+want) {
			t.Errorf("-cpuprofile %s: exit %d, want 1 and %q\n%s", path, code, want, stderr)
		}
	}
	if b, _ := os.ReadFile(events); string(b) != abEvents(10, 0, "") {
		t.Error("the events file was changed")
	}
	if b, _ := os.ReadFile(rules); string(b) != goodSrc {
		t.Error("the ruleset file was changed")
	}
}

// TestRunParallelismRange: a -parallelism past the key groups is a usage
// error (exit 2, before anything is read or made), as a negative one is.
func TestRunParallelismRange(t *testing.T) {
	dir := t.TempDir()
	rules := writeFile(t, dir, "r.cep", goodSrc)
	events := writeFile(t, dir, "e.jsonl", abEvents(4, 0, ""))
	for p, want := range map[string]string{
		"-1":  "-parallelism -1 is negative",
		"200": "-parallelism 200: at most 128",
	} {
		state := filepath.Join(dir, "state"+p)
		code, _, stderr := cepheus(t, "run", "-rules", rules, "-events", events, "-state", state, "-alerts", filepath.Join(dir, "alerts"), "-parallelism", p)
		if code != 2 || !strings.Contains(stderr, want) || !strings.Contains(stderr, "cepheus help run") {
			t.Errorf("-parallelism %s: exit %d, want 2 and %q\n%s", p, code, want, stderr)
		}
		if _, err := os.Stat(state); !os.IsNotExist(err) {
			t.Errorf("-parallelism %s: the state directory was made: %v", p, err)
		}
	}
}

// TestRunNegativeDurations: a negative -poll or -session-timeout, and a
// -transaction-timeout shorter than a checkpoint may last, are usage
// errors naming the flag (exit 2, before anything is read or made), as
// the other durations are. -poll was found only by the stream's own check
// ("negative interval, count or parallelism", exit 1), -transaction-timeout
// by the stream's too (exit 1, naming no flag), and -session-timeout only
// once the brokers answered (45 s when they do not).
func TestRunNegativeDurations(t *testing.T) {
	dir := t.TempDir()
	rules := writeFile(t, dir, "r.cep", goodSrc)
	events := writeFile(t, dir, "e.jsonl", abEvents(4, 0, ""))
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"poll", []string{"-events", events, "-follow", "-poll", "-1s"}, "-poll -1s is negative"},
		{"session", []string{"-input-topic", "t", "-brokers", "127.0.0.1:1", "-alerts-topic", "a", "-group", "g", "-session-timeout", "-1s"}, "-session-timeout -1s is negative"},
		{"txn", []string{"-input-topic", "t", "-brokers", "127.0.0.1:1", "-alerts-topic", "a", "-group", "g", "-transaction-timeout", "1m", "-checkpoint-interval", "2s"},
			"-transaction-timeout 1m is below -checkpoint-interval plus -checkpoint-timeout (1m2s): the broker would abort transactions that may still commit"},
	} {
		state := filepath.Join(dir, "state-"+c.name)
		args := append([]string{"run", "-rules", rules, "-state", state}, c.args...)
		if !slices.Contains(c.args, "-alerts-topic") {
			args = append(args, "-alerts", filepath.Join(dir, "alerts"))
		}
		start := time.Now()
		code, _, stderr := cepheus(t, args...)
		if code != 2 || !strings.Contains(stderr, "cepheus: run: "+c.want+"\n") || !strings.Contains(stderr, "cepheus help run") {
			t.Errorf("%s: exit %d, want 2 and %q\n%s", c.name, code, c.want, stderr)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("%s: refused after %v: the flag was checked only once the brokers answered", c.name, d)
		}
		if _, err := os.Stat(state); !os.IsNotExist(err) {
			t.Errorf("%s: the state directory was made: %v", c.name, err)
		}
	}
}

// TestRunKafkaFlagsWithFiles: the flags of Kafka mode given to a run over
// files are a usage error naming them (exit 2), as -shadow-topic and
// -alerts-topic are. They were ignored: -late-topic L or
// -dead-letter-topic D left those lines only counted, without a word;
// -start TIME read the files from their start, and -delivery took any
// value (-delivery once ran, exactly once).
func TestRunKafkaFlagsWithFiles(t *testing.T) {
	dir := t.TempDir()
	rules := writeFile(t, dir, "r.cep", goodSrc)
	events := writeFile(t, dir, "e.jsonl", abEvents(4, 0, ""))
	for i, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-late-topic", "l"}, "-late-topic: for Kafka mode (-input-topic), not a run over files (with files, use -late DIR and -dead-letter DIR)"},
		{[]string{"-dead-letter-topic", "d", "-group", "g"}, "-dead-letter-topic, -group: for Kafka mode"},
		{[]string{"-rules-topic", "r", "-changelog-topic", "c", "-record-key", "k", "-trust-record-keys"}, "-rules-topic, -changelog-topic, -record-key, -trust-record-keys: for Kafka mode (-input-topic), not a run over files\n"},
		{[]string{"-start", "2026-01-02T00:00:00Z"}, "-start: for Kafka mode (-input-topic), not a run over files\n"},
		{[]string{"-delivery", "once", "-instance-id", "b"}, "-delivery, -instance-id: for Kafka mode (-input-topic), not a run over files\n"},
		{[]string{"-delivery", "at-least-once"}, "-delivery: for Kafka mode (-input-topic), not a run over files\n"},
		{[]string{"-session-timeout", "3s", "-local-checkpoint-interval", "1s", "-transaction-timeout", "5m"},
			"-session-timeout, -local-checkpoint-interval, -transaction-timeout: for Kafka mode (-input-topic), not a run over files\n"},
		{[]string{"-brokers", "localhost:9092"}, "-brokers: for Kafka mode (-input-topic), not a run over files\n"},
		{[]string{"-tls", "-tls-ca", "ca.pem", "-sasl", "PLAIN", "-sasl-user", "u", "-kafka-config", "k.properties"},
			"-kafka-config, -tls, -tls-ca, -sasl, -sasl-user: for Kafka mode (-input-topic), not a run over files\n"},
	} {
		state := filepath.Join(dir, fmt.Sprintf("state%d", i))
		args := append([]string{"run", "-rules", rules, "-events", events, "-state", state, "-alerts", filepath.Join(dir, "alerts")}, c.args...)
		code, _, stderr := cepheus(t, args...)
		if code != 2 || !strings.Contains(stderr, "cepheus: run: "+c.want) || !strings.Contains(stderr, "cepheus help run") {
			t.Errorf("%q: exit %d, want 2 and %q\n%s", c.args, code, c.want, stderr)
		}
		if _, err := os.Stat(state); !os.IsNotExist(err) {
			t.Errorf("%q: the state directory was made: %v", c.args, err)
		}
	}
	// serve takes the brokers and security settings from the environment
	// as if given (its config): they are not refused over files, the
	// command line's are. Every serve over files was refused while
	// $CEPHEUS_KAFKA_BROKERS was set (as make test sets it).
	t.Setenv("CEPHEUS_KAFKA_BROKERS", "localhost:9092")
	t.Setenv("CEPHEUS_KAFKA_CONFIG", filepath.Join(dir, "k.properties"))
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-late-topic", "l"}, "cepheus: serve: -late-topic: for Kafka mode (-input-topic), not a run over files (with files"},
		{[]string{"-late-topic", "l", "-brokers", "b:1"}, "cepheus: serve: -late-topic, -brokers: for Kafka mode"},
	} {
		args := append([]string{"serve", "-rules", rules, "-events", events, "-state", filepath.Join(dir, "serve-state"), "-alerts", filepath.Join(dir, "alerts"),
			"-grpc", "off", "-http", "127.0.0.1:0"}, c.args...)
		if code, _, stderr := cepheus(t, args...); code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("serve %q with $CEPHEUS_KAFKA_BROKERS and $CEPHEUS_KAFKA_CONFIG: exit %d, want 2 and %q\n%s", c.args, code, c.want, stderr)
		}
	}
}

// TestBacktestOutputPipe: an output that is a pipe (as /dev/stdout piped
// into head) is opened for writing only, so that a reader gone away is a
// broken pipe and the run fails, after its summary. Opened for reading
// too, the process was a reader of its own: the alerts went nowhere with
// exit 0, and once the pipe was full the run blocked for ever.
func TestBacktestOutputPipe(t *testing.T) {
	dir := t.TempDir()
	rules := writeFile(t, dir, "r.cep", goodSrc)
	events := writeFile(t, dir, "e.jsonl", abEvents(10, 0, ""))
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	r.Close() // the reader has gone
	code, _, stderr := cepheus(t, "backtest", "-rules", rules, "-events", events, "-alerts", fmt.Sprintf("/proc/self/fd/%d", w.Fd()))
	if code != 1 || !strings.Contains(stderr, "broken pipe") || !strings.Contains(stderr, "Ruleset good") {
		t.Errorf("exit %d, want 1, the summary and a broken pipe\n%s", code, stderr)
	}
}

// TestBacktestOutputFIFO: the check of the outputs before the input is
// read does not open a FIFO: that blocks until a reader comes (for ever
// for a -late without late events, which never opens it), and closing it
// would give the reader an end of file before the alerts.
func TestBacktestOutputFIFO(t *testing.T) {
	dir := t.TempDir()
	rules := writeFile(t, dir, "r.cep", goodSrc)
	events := writeFile(t, dir, "e.jsonl", abEvents(10, 0, ""))
	fifo := filepath.Join(dir, "late.fifo")
	mkfifo(t, fifo)
	done := make(chan string, 1)
	go func() {
		code, _, stderr := cepheus(t, "backtest", "-rules", rules, "-events", events, "-alerts", os.DevNull, "-late", fifo)
		done <- fmt.Sprintf("exit %d\n%s", code, stderr)
	}()
	select {
	case got := <-done:
		if !strings.HasPrefix(got, "exit 0\n") {
			t.Errorf("-late FIFO without late events: %s", got)
		}
	case <-time.After(20 * time.Second):
		// Release the blocked open before failing.
		if f, err := os.OpenFile(fifo, os.O_RDONLY, 0); err == nil {
			defer f.Close()
		}
		<-done
		t.Error("-late FIFO without late events: the run blocked opening the FIFO without a reader")
	}
}

// TestRunOutputBrokenMidRun: a live run whose alerts directory is
// replaced by a file fails (exit 1) naming the path and the cause, and
// says where its state stands and that the same command resumes (it
// said the cause alone, the observability trial); one that failed
// before its first checkpoint says that the same command starts over.
func TestRunOutputBrokenMidRun(t *testing.T) {
	for _, c := range []struct {
		name     string
		interval string // -checkpoint-interval
		first    int    // the events at the start: alerts from the 2nd
		want     string
	}{
		{"after a checkpoint", "20ms", 10, `\(the state stands at checkpoint [1-9][0-9]*: once the cause is fixed, the same command resumes from it\)\n`},
		{"before any checkpoint", "1h", 1, `\(no checkpoint was taken: once the cause is fixed, the same command starts over\)\n`},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			rules := writeFile(t, dir, "r.cep", goodSrc)
			events := writeFile(t, dir, "e.jsonl", abEvents(c.first, 0, ""))
			state, alerts := filepath.Join(dir, "state"), filepath.Join(dir, "alerts")
			type result struct {
				code   int
				stderr string
			}
			done := make(chan result, 1)
			go func() {
				code, _, stderr := cepheus(t, "run", "-rules", rules, "-events", events, "-follow", "-state", state, "-alerts", alerts,
					"-checkpoint-interval", c.interval, "-progress", "1h")
				done <- result{code, stderr}
			}()
			// Once the run has made the directory (and, with checkpoints,
			// committed alerts into it), the directory goes.
			for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				files, _ := filepath.Glob(filepath.Join(alerts, "*.jsonl"))
				if _, err := os.Stat(state); err == nil && (len(files) > 0 || c.first < 2) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("no alerts committed in 20 s")
				}
			}
			// The run reads what is there, and commits its alerts: the
			// lines in the directory hold still.
			committed := -1
			for still := 0; still < 10; time.Sleep(10 * time.Millisecond) {
				n := 0
				files, _ := filepath.Glob(filepath.Join(alerts, "*.jsonl"))
				for _, f := range files {
					n += len(readLines(t, f))
				}
				if n == committed {
					still++
				} else {
					committed, still = n, 0
				}
			}
			if err := os.RemoveAll(alerts); err != nil {
				t.Fatal(err)
			}
			writeFile(t, dir, "alerts", "not a directory\n")
			f, err := os.OpenFile(events, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteString(abEvents(40, 0, "")[len(abEvents(c.first, 0, "")):])
			f.Close()
			select {
			case r := <-done:
				if r.code != 1 || !strings.Contains(r.stderr, alerts) || !strings.Contains(r.stderr, "not a directory") ||
					!regexp.MustCompile(c.want).MatchString(r.stderr) {
					t.Errorf("exit %d\n%s", r.code, r.stderr)
				}
				// The summary says how many of its alerts are written:
				// those of the files committed before the directory went.
				m := regexp.MustCompile(`(?:written: (\d+)|none) of these (\d+) alerts?[ ,]`).FindStringSubmatch(r.stderr)
				if m == nil {
					t.Fatalf("no line on the alerts written:\n%s", r.stderr)
				}
				written, _ := strconv.Atoi(m[1]) // "" for none: 0
				if n, _ := strconv.Atoi(m[2]); written != committed || n <= written {
					t.Errorf("%d alerts committed before the directory went, %d detected in all; the summary says:\n%s", committed, n, r.stderr)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("the run did not fail in 30 s with its output directory gone")
			}
		})
	}
}

// TestRunEventsFIFO: a FIFO as -events is read whole, its writer
// undisturbed. The early check that -events can be read does not open
// it: that open woke a writer waiting for the run, and its close (no
// reader left until the run opened it again) lost what the writer had
// written meanwhile, or broke its pipe; the run read nothing, or a few
// records, and ended well.
func TestRunEventsFIFO(t *testing.T) {
	dir := t.TempDir()
	rules := writeFile(t, dir, "r.cep", goodSrc)
	fifo := filepath.Join(dir, "events.fifo")
	mkfifo(t, fifo)
	input := abEvents(20, 0, "")
	wrote := make(chan error, 1)
	go func() {
		// Waits for the run's open, then writes everything and goes.
		w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err == nil {
			_, err = w.WriteString(input)
			err = errors.Join(err, w.Close())
		}
		wrote <- err
	}()
	done := make(chan string, 1)
	go func() {
		code, _, stderr := cepheus(t, "run", "-rules", rules, "-events", fifo, "-state", filepath.Join(dir, "state"), "-alerts", filepath.Join(dir, "alerts"))
		done <- fmt.Sprintf("exit %d\n%s", code, stderr)
	}()
	select {
	case got := <-done:
		if want := fmt.Sprintf("run: %d records", strings.Count(input, "\n")); !strings.HasPrefix(got, "exit 0\n") || !strings.Contains(got, want) {
			t.Errorf("a FIFO as -events: %s\nwant exit 0 and %q", got, want)
		}
	case <-time.After(20 * time.Second):
		// Release the run's blocked open before failing.
		if w, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
			w.Close()
		}
		<-done
		t.Fatal("a FIFO as -events: the run waited for a writer that had come and gone")
	}
	if err := <-wrote; err != nil {
		t.Errorf("the FIFO's writer: %v", err)
	}
}

// TestRunRecordKeyUnknown: -record-key naming a field the ruleset's
// declared schema lacks is a usage error that names the field meant (a
// slip was accepted: the record keys went unchecked and every rule was
// repartitioned, without a word); one that no rule of an inferred schema
// reads is a warning (the topic may be keyed by a field no rule reads).
func TestRunRecordKeyUnknown(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	code, _, stderr := cepheus(t, "run", "-rules", "../../rulesets/cards.cep", "-input-topic", "t", "-alerts-topic", "a", "-group", "g",
		"-brokers", "127.0.0.1:1", "-state", state, "-record-key", "cardid")
	if want := "cepheus: run: -record-key cardid: ruleset cards declares no event field cardid (did you mean card_id?)\n"; code != 2 || !strings.Contains(stderr, want) {
		t.Errorf("-record-key cardid with cards.cep: exit %d, stderr\n%s\nwant 2 and %q", code, stderr, want)
	}
	if _, err := os.Stat(state); !os.IsNotExist(err) {
		t.Errorf("the refused run made its state directory (stat: %v)", err)
	}
	// (The run over an inferred schema goes on to the brokers: the check
	// alone, which the command's warning prints.)
	rs, err := rules.Load("r.cep", []byte(goodSrc))
	if err != nil {
		t.Fatal(err)
	}
	if refused, warning := checkRecordKey(rs, "kard"); refused != "" ||
		!strings.HasPrefix(warning, "-record-key kard: no rule of ruleset good reads field kard") || !strings.HasSuffix(warning, ": the records' keys are not checked, and every rule is repartitioned") {
		t.Errorf("-record-key kard with an inferred schema: refused %q, warning %q", refused, warning)
	}
	if refused, warning := checkRecordKey(rs, rs.Schema.Field(rs.IDSlots[0]).Name); refused != "" || warning != "" {
		t.Errorf("-record-key of a field the rules read: refused %q, warning %q", refused, warning)
	}
}

// TestKafkaTimesBefore1970: -start and backtest's -from and -to before
// 1970 are usage errors, before anything is made: Kafka's record
// timestamps begin there, and the source refused them only once the run
// had locked its state directory and made its alerts output (exit 1).
func TestKafkaTimesBefore1970(t *testing.T) {
	dir := t.TempDir()
	state, alerts := filepath.Join(dir, "state"), filepath.Join(dir, "alerts.jsonl")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "-rules", "../../rulesets/cards.cep", "-input-topic", "t", "-alerts", alerts, "-state", state, "-bounded", "-start", "1960-01-01T00:00:00Z"},
			"cepheus: run: -start 1960-01-01T00:00:00Z is before 1970-01-01T00:00:00Z, where record timestamps begin\n"},
		{[]string{"backtest", "-rules", "../../rulesets/cards.cep", "-topic", "t", "-alerts", alerts, "-to", "1969-12-31T23:59:59.999Z"},
			"cepheus: backtest: -to 1969-12-31T23:59:59.999Z is before 1970-01-01T00:00:00Z, where record timestamps begin\n"},
	} {
		code, _, stderr := cepheus(t, append(c.args, "-brokers", "127.0.0.1:1")...)
		if code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("%q: exit %d, stderr\n%s\nwant 2 and %q", c.args, code, stderr, c.want)
		}
		for _, p := range []string{state, alerts} {
			if _, err := os.Stat(p); !os.IsNotExist(err) {
				t.Errorf("%q: %s was made (stat: %v)", c.args, p, err)
			}
		}
	}
}

// TestMixedKinds: a field of no declared type that some events give as a
// number and others as a string is warned of by backtest and run, with
// the counts and the rules that read it (the messy-data trial: a
// producer's "amount": "0.00" never equalled 0, with no word); a key
// field's warning says that "7" and 7 are two keys. Fields of one kind are
// not warned of. A field that no event had is warned of by both.
func TestMixedKinds(t *testing.T) {
	dir := t.TempDir()
	rules := writeFile(t, dir, "m.cep", "ruleset m\nevent time ts\nrule zero {\n  key card\n  pattern {\n    begin a where amount == 0\n  }\n}\n")
	mixed := writeFile(t, dir, "mixed.jsonl", `{"ts":"2026-01-01T00:00:01Z","card":"c1","amount":0}
{"ts":"2026-01-01T00:00:02Z","card":"c1","amount":"0.00"}
{"ts":"2026-01-01T00:00:03Z","card":7,"amount":1}
`)
	same := writeFile(t, dir, "same.jsonl", `{"ts":"2026-01-01T00:00:01Z","card":"c1","amount":0}
{"ts":"2026-01-01T00:00:02Z","card":"c2","amount":0.5}
`)
	amount := "warning: field amount (of no declared type; read by rule zero) came as a number in 2 events and as a string in 1: a string never equals a number (==, in), nor compares with one (<, >: a condition error); declare its type (the events of the other kind then go to the dead letters), or convert it where it is read (float(amount))\n"
	card := "warning: field card (of no declared type; read by rule zero) came as a number in 1 event and as a string in 2: as a key, \"7\" and 7 are two keys, whose events never match together; and a string never equals a number (==, in), nor compares with one (<, >: a condition error); declare its type (the events of the other kind then go to the dead letters), or have the producers agree\n"
	for _, cmd := range []string{"backtest", "run"} {
		for _, c := range []struct {
			events string
			want   []string
		}{{mixed, []string{amount, card}}, {same, nil}} {
			out := t.TempDir()
			args := []string{cmd, "-q", "-rules", rules, "-events", c.events, "-alerts", filepath.Join(out, "alerts")}
			if cmd == "run" {
				args = append(args, "-state", filepath.Join(out, "state"))
			}
			code, _, stderr := cepheus(t, args...)
			if code != 0 {
				t.Fatalf("%s %s: exit %d\n%s", cmd, c.events, code, stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(stderr, cmd+": "+w) {
					t.Errorf("%s %s: stderr\n%s\nwant %q", cmd, c.events, stderr, cmd+": "+w)
				}
			}
			if c.want == nil && strings.Contains(stderr, "came as a number") {
				t.Errorf("%s %s: a warning of fields of one kind each:\n%s", cmd, c.events, stderr)
			}
		}
		// A field no event had: run warns too, as backtest did alone
		// (the messy-data trial's renamed field).
		typo := writeFile(t, dir, "typo.cep", "ruleset m\nevent time ts\nrule zero {\n  key card\n  pattern {\n    begin a where amout == 0\n  }\n}\n")
		out := t.TempDir()
		args := []string{cmd, "-q", "-rules", typo, "-events", same, "-alerts", filepath.Join(out, "alerts")}
		if cmd == "run" {
			args = append(args, "-state", filepath.Join(out, "state"))
		}
		want := cmd + ": warning: no event had the field amout, which rule zero reads: each read of it is null (is it the field's name?)\n"
		if code, _, stderr := cepheus(t, args...); code != 0 || !strings.Contains(stderr, want) {
			t.Errorf("%s over a misspelt field: exit %d, stderr\n%s\nwant %q", cmd, code, stderr, want)
		}
	}
}
