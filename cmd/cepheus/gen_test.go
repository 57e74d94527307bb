package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestGenConfigMessages: a bad value is reported in terms of its flag, as
// a usage error (exit 2), not in the generator's field names.
func TestGenConfigMessages(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-days", "-1"}, "cepheus: gen: -days -1 is outside 0..3660\n"},
		{[]string{"-history-days", "0", "-days", "1"}, "cepheus: gen: scenario dormant_card needs at least 61 days (-history-days and -days add up to 1); leave it out of -scenarios (-scenarios card_testing,account_takeover,impossible_travel,large_then_foreign,refund_abuse,velocity_burst,auth_not_captured) or add days\n"},
		{[]string{"-history-days", "2", "-scenarios", "dormant_card,card_testing"}, "cepheus: gen: scenario dormant_card needs at least 61 days (-history-days and -days add up to 3); leave it out of -scenarios (-scenarios card_testing) or add days\n"},
		{[]string{"-history-days", "0", "-days", "0", "-scenarios", "card_testing"}, "cepheus: gen: -history-days and -days add up to 0 days, want at least 1\n"},
		{[]string{"-max-delay", "2h", "-customers", "0"}, "cepheus: gen: -customers 0 is outside 1..10000000\ncepheus: gen: -max-delay 2h is outside 0..1h\n"},
		{[]string{"-fraud-rate", "-5"}, "cepheus: gen: -fraud-rate -5 is outside 0..100000 (instances per 100,000 normal events)\n"},
	} {
		code, out, errOut := cepheus(t, append([]string{"gen"}, c.args...)...)
		if code != 2 || out != "" || !strings.HasPrefix(errOut, c.want) || !strings.HasSuffix(errOut, "Run 'cepheus help gen' for usage.\n") {
			t.Errorf("gen %q: exit %d, stderr\n%s\nwant 2 and\n%s", c.args, code, errOut, c.want)
		}
	}
}

// TestGenWarnsOfMissingScenarios: a scenario asked for that gets no
// instance (its rate is per 100,000 normal events) is warned about.
func TestGenWarnsOfMissingScenarios(t *testing.T) {
	out := filepath.Join(t.TempDir(), "events.jsonl")
	code, _, errOut := cepheus(t, "gen", "-history-days", "0", "-days", "1", "-events-per-day", "1000", "-customers", "100",
		"-scenarios", "card_testing", "-o", out)
	want := "gen: warning: no instance of card_testing was injected: a rate of 10 per 100,000 normal events expects 0.1 in 1,000 normal events; raise -fraud-rate or -events-per-day\n"
	if code != 0 || !strings.Contains(errOut, "warning: no instance of card_testing was injected") {
		t.Errorf("gen of 1,000 events with card_testing: exit %d, stderr\n%s\nwant a warning like\n%s", code, errOut, want)
	}
	code, _, errOut = cepheus(t, "gen", "-history-days", "1", "-days", "0", "-history-events-per-day", "1000", "-customers", "100",
		"-scenarios", "card_testing", "-o", out)
	if code != 0 || !strings.Contains(errOut, "raise -fraud-rate or -history-events-per-day\n") {
		t.Errorf("gen of one history day with card_testing: exit %d, stderr\n%s\nwant the warning to name -history-events-per-day", code, errOut)
	}
	code, _, errOut = cepheus(t, "gen", "-history-days", "0", "-days", "1", "-events-per-day", "1000", "-customers", "100",
		"-scenarios", "card_testing", "-fraud-rate", "500", "-o", out)
	if code != 0 || strings.Contains(errOut, "warning") {
		t.Errorf("gen with card_testing at rate 500: exit %d, stderr\n%s\nwant no warning", code, errOut)
	}
}

// TestGenSummary: the summary groups thousands, as the other commands'
// summaries do, and says "1 instance" of a scenario injected once.
func TestGenSummary(t *testing.T) {
	out := filepath.Join(t.TempDir(), "events.jsonl")
	code, _, errOut := cepheus(t, "gen", "-days", "1", "-events-per-day", "20000", "-history-days", "0",
		"-scenarios", "card_testing,velocity_burst", "-start", "2026-01-02T00:00:00Z", "-seed", "2", "-o", out)
	first, rest, _ := strings.Cut(errOut, "\n")
	if want := "gen: 19,887 events (41 fraud) in "; code != 0 || !strings.HasPrefix(first, want) || !strings.HasSuffix(first, " to "+out) {
		t.Errorf("gen: exit %d, first line of stderr %q, want it to start %q", code, first, want)
	}
	if want := "  card_testing            2 instances     21 events\n  velocity_burst          1 instance      20 events\n"; rest != want {
		t.Errorf("gen: the scenarios' lines are\n%s\nwant\n%s", rest, want)
	}
}

// TestGenQuiet: gen -q writes the same events without its summary, so
// that a cron job's gen says something only when something is wrong: its
// warnings are kept. gen had no -q (a usage error), as backtest, run,
// check and consume have.
func TestGenQuiet(t *testing.T) {
	dir := t.TempDir()
	args := []string{"gen", "-days", "1", "-events-per-day", "2000", "-history-days", "0", "-scenarios", "card_testing,velocity_burst", "-fraud-rate", "100"}
	loud, quiet := filepath.Join(dir, "loud.jsonl"), filepath.Join(dir, "quiet.jsonl")
	if code, _, errOut := cepheus(t, append(args, "-o", loud)...); code != 0 || !strings.HasPrefix(errOut, "gen: ") {
		t.Fatalf("gen: exit %d, stderr %q", code, errOut)
	}
	if code, out, errOut := cepheus(t, append(args, "-o", quiet, "-q")...); code != 0 || out != "" || errOut != "" {
		t.Errorf("gen -q: exit %d, stdout %q, stderr %q; want 0 and nothing", code, out, errOut)
	}
	a, err := os.ReadFile(loud)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(quiet); err != nil || !bytes.Equal(a, b) || len(a) == 0 {
		t.Errorf("gen -q wrote %d bytes (%v), gen %d: want the same events", len(b), err, len(a))
	}
	code, _, errOut := cepheus(t, "gen", "-days", "1", "-events-per-day", "100", "-history-days", "0", "-scenarios", "card_testing", "-o", quiet, "-q")
	if want := "gen: warning: no instance of card_testing was injected: "; code != 0 || !strings.HasPrefix(errOut, want) || strings.Count(errOut, "\n") != 1 {
		t.Errorf("gen -q with a scenario not injected: exit %d, stderr %q; want 0 and only the warning", code, errOut)
	}
}

// TestGenProfiles: -profiles DIR creates DIR and writes customer.jsonl,
// one line per customer, reported on stderr, with -o FILE and with
// stdout; the events are the same bytes as without -profiles.
func TestGenProfiles(t *testing.T) {
	dir := t.TempDir()
	small := []string{"gen", "-seed", "3", "-history-days", "0", "-days", "1", "-events-per-day", "3000", "-customers", "500",
		"-scenarios", "card_testing,impossible_travel", "-fraud-rate", "200"}
	args := func(extra ...string) []string { return append(append([]string{}, small...), extra...) }
	hash := func(path string) [sha256.Size]byte {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return sha256.Sum256(b)
	}

	plain := filepath.Join(dir, "plain.jsonl")
	if code, _, errOut := cepheus(t, args("-o", plain)...); code != 0 {
		t.Fatalf("gen -o: exit %d, stderr\n%s", code, errOut)
	}
	withProfiles := filepath.Join(dir, "with.jsonl")
	profiles := filepath.Join(dir, "a", "profiles") // two levels, neither there yet
	code, out, errOut := cepheus(t, args("-o", withProfiles, "-profiles", profiles)...)
	customers := filepath.Join(profiles, "customer.jsonl")
	if want := "gen: profiles of 500 customers to " + customers + "\n"; code != 0 || out != "" || !strings.Contains(errOut, want) {
		t.Fatalf("gen -o -profiles: exit %d, stdout %q, stderr\n%s\nwant 0, nothing and a line\n%s", code, out, errOut, want)
	}
	if hash(plain) != hash(withProfiles) {
		t.Error("-profiles changes the events")
	}
	first := hash(customers)

	// The events read: every customer_id has exactly one profile line.
	lines := map[string]int{}
	b, err := os.ReadFile(customers)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		var p struct {
			CustomerID string `json:"customer_id"`
		}
		if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
			t.Fatalf("%s: %v: %s", customers, err, sc.Bytes())
		}
		lines[p.CustomerID]++
	}
	if len(lines) != 500 {
		t.Errorf("%s has %d customers, want 500", customers, len(lines))
	}
	ev, err := os.ReadFile(plain)
	if err != nil {
		t.Fatal(err)
	}
	for l := range bytes.Lines(ev) {
		var e struct {
			CustomerID string `json:"customer_id"`
		}
		if err := json.Unmarshal(l, &e); err != nil {
			t.Fatal(err)
		}
		if lines[e.CustomerID] != 1 {
			t.Fatalf("customer %s of the events has %d profile lines, want 1", e.CustomerID, lines[e.CustomerID])
		}
	}

	// To stdout, into the existing directory: the same events and the
	// same profiles, rewritten.
	code, out, errOut = cepheus(t, args("-profiles", profiles)...)
	if code != 0 || !strings.Contains(errOut, "gen: profiles of 500 customers to "+customers+"\n") {
		t.Fatalf("gen -profiles to stdout: exit %d, stderr\n%s", code, errOut)
	}
	if sha256.Sum256([]byte(out)) != hash(plain) {
		t.Error("gen -profiles to stdout writes other events than gen -o")
	}
	if hash(customers) != first {
		t.Error("a second run writes other profiles")
	}
}

// TestGenProfilesError: a -profiles that cannot be a directory fails the
// command (exit 1) before any event is written.
func TestGenProfilesError(t *testing.T) {
	dir := t.TempDir()
	file := writeFile(t, dir, "taken", "")
	events := filepath.Join(dir, "events.jsonl")
	code, _, errOut := cepheus(t, "gen", "-days", "1", "-history-days", "0", "-scenarios", "card_testing", "-customers", "100",
		"-o", events, "-profiles", filepath.Join(file, "profiles"))
	if code != 1 || !strings.Contains(errOut, "gen: -profiles: ") {
		t.Errorf("gen -profiles under a file: exit %d, stderr\n%s\nwant 1 and a -profiles error", code, errOut)
	}
	if _, err := os.Stat(events); !os.IsNotExist(err) {
		t.Errorf("the events were written anyway (stat: %v)", err)
	}
}

// TestGenOutputDirectory: -o naming a directory is refused before the
// work, saying so (it failed after generating everything, with "rename
// .dd.partial dd: file exists"), and nothing is left in it.
func TestGenOutputDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "dd")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := cepheus(t, "gen", "-days", "1", "-history-days", "0", "-scenarios", "card_testing", "-customers", "100", "-o", dir)
	if want := "gen: -o " + dir + " is a directory: name the file to write (for example " + filepath.Join(dir, "events.jsonl.gz") + ")"; code != 1 || !strings.Contains(errOut, want) {
		t.Errorf("gen -o DIR: exit %d, stderr\n%s\nwant 1 and %q", code, errOut, want)
	}
	if strings.Contains(errOut, " events (") || strings.Contains(errOut, "instances") {
		t.Errorf("gen -o DIR generated before refusing:\n%s", errOut)
	}
	left, err := os.ReadDir(filepath.Dir(dir))
	if err != nil || len(left) != 1 {
		t.Errorf("beside the directory: %v (%v), want it alone", left, err)
	}
	if in, err := os.ReadDir(dir); err != nil || len(in) != 0 {
		t.Errorf("in the directory: %v (%v), want nothing", in, err)
	}
}

// TestGenOutputBesideProfiles: -o naming the -profiles directory or a
// file -profiles writes is a usage error, before anything is written (the
// events were written over the profiles without a word, or -profiles made
// the directory that -o was then refused as).
func TestGenOutputBesideProfiles(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "P")
	for _, c := range []struct{ out, want string }{
		{p, "gen: -o " + p + " is the -profiles directory: name the events file"},
		{p + "/", "gen: -o " + p + "/ is the -profiles directory"},
		{filepath.Join(p, "customer.jsonl"), "gen: -o " + filepath.Join(p, "customer.jsonl") + " is a file -profiles writes: name another events file"},
	} {
		code, _, errOut := cepheus(t, "gen", "-days", "1", "-history-days", "0", "-scenarios", "card_testing", "-customers", "100", "-o", c.out, "-profiles", p)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("gen -o %s -profiles %s: exit %d, stderr\n%s\nwant 2 and %q", c.out, p, code, errOut, c.want)
		}
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Fatalf("gen -o %s -profiles %s wrote the profiles before refusing (stat: %v)", c.out, p, err)
		}
	}
}

// TestGenHelpNamesProfiles: the help says what -profiles writes and how a
// ruleset binds it.
func TestGenHelpNamesProfiles(t *testing.T) {
	code, out, errOut := cepheus(t, "gen", "--help")
	for _, want := range []string{"-profiles dir", "customer.jsonl", "-lookup customer=file:DIR/customer.jsonl"} {
		if !strings.Contains(out+errOut, want) {
			t.Errorf("gen --help (exit %d) does not say %q:\n%s%s", code, want, out, errOut)
		}
	}
}

// TestGenInterrupted: a gen stopped by Ctrl-C (its context cancelled)
// exits 130 saying that its output was not written, and leaves no
// partial file that would pass for a whole one: an older file of the
// name stays as it was, and nothing else is left in the directory. A gen
// that ends writes its file whole.
func TestGenInterrupted(t *testing.T) {
	dir := t.TempDir()
	out := writeFile(t, dir, "events.jsonl.gz", "older")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var stdout, stderr bytes.Buffer
	err := run(ctx, []string{"gen", "-days", "2", "-o", out}, &stdout, &stderr)
	if code := exitCode(err, &stderr); code != 130 || !strings.Contains(stderr.String(), "gen interrupted: "+out+" not written") {
		t.Errorf("exit %d\n%s", code, stderr.String())
	}
	if b, _ := os.ReadFile(out); string(b) != "older" {
		t.Errorf("%s was replaced: %q", out, b)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("the directory holds %v, want only events.jsonl.gz", ents)
	}
	code, _, errOut := cepheus(t, "gen", "-history-days", "0", "-days", "1", "-events-per-day", "500", "-scenarios", "card_testing", "-o", out)
	if code != 0 {
		t.Fatalf("gen: exit %d\n%s", code, errOut)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("the directory holds %v, want only events.jsonl.gz", ents)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	var want int
	if _, serr := fmt.Sscanf(errOut, "gen: %d events", &want); serr != nil || want == 0 {
		t.Fatalf("gen does not say how many events it wrote: %v\n%s", serr, errOut)
	}
	if n := bytes.Count(b, []byte("\n")); err != nil || n != want {
		t.Errorf("%s: %d lines, %v; want the %d events gen wrote, whole", out, n, err, want)
	}
}

// genReference writes a small gen output to a plain file in dir and
// returns the command line that made it, up to its -o (a test appends
// another output), and the bytes it wrote.
func genReference(t *testing.T, dir string) (args []string, want []byte) {
	t.Helper()
	args = []string{"gen", "-days", "1", "-events-per-day", "2000", "-history-days", "0", "-scenarios", "card_testing", "-seed", "3", "-o"}
	file := filepath.Join(dir, "events.jsonl")
	if code, _, errOut := cepheus(t, append(slices.Clip(args), file)...); code != 0 {
		t.Fatalf("gen -o %s: exit %d\n%s", file, code, errOut)
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return args, want
}

// TestGenOutputFIFO: -o naming a FIFO (or a device, /dev/null) writes
// into it and leaves it as it is: renamed over, a FIFO became a regular
// file, and so did /dev/null under root.
func TestGenOutputFIFO(t *testing.T) {
	dir := t.TempDir()
	args, want := genReference(t, dir)
	fifo := filepath.Join(dir, "events.fifo")
	mkfifo(t, fifo)
	read := make(chan []byte, 1)
	go func() {
		f, err := os.Open(fifo)
		if err != nil {
			read <- nil
			return
		}
		defer f.Close()
		b, _ := io.ReadAll(f)
		read <- b
	}()
	if code, _, errOut := cepheus(t, append(args, fifo)...); code != 0 {
		t.Fatalf("gen -o FIFO: exit %d\n%s", code, errOut)
	}
	if st, err := os.Lstat(fifo); err != nil || st.Mode()&os.ModeNamedPipe == 0 {
		t.Fatalf("after gen -o FIFO the FIFO is %v (%v): replaced", st.Mode(), err)
	}
	if got := <-read; !bytes.Equal(got, want) {
		t.Errorf("the FIFO's reader got %d bytes, the file has %d", len(got), len(want))
	}
	if entries, err := os.ReadDir(dir); err != nil || len(entries) != 2 {
		t.Errorf("the directory holds %d entries (%v), want the file and the FIFO", len(entries), err)
	}
}
