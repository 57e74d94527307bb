//go:build linux

package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// crashSeedEnv names the environment variable that seeds every random
// choice of the crash tests: the generated events, the lines injected into
// them, the moments of the random kills and the configurations of the
// restarts. Unset, the seed is 1, so that CI runs the same suite every
// time.
const crashSeedEnv = "CEPHEUS_CRASH_SEED"

// crashSeed is the seed of the crash tests, from crashSeedEnv.
func crashSeed(t *testing.T) uint64 {
	t.Helper()
	v := os.Getenv(crashSeedEnv)
	if v == "" {
		return 1
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		t.Fatalf("%s=%q: want an unsigned integer", crashSeedEnv, v)
	}
	return n
}

// crashRand is the random source of one part of the suite (stream): each
// part draws from its own, so that a subtest run alone with -run makes the
// same choices as in the whole suite.
func crashRand(seed, stream uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, stream)) }

// crashInjected is what crashInput put into the generated events, by line
// number of the events file (from 1, as the dead letters and late events
// number them).
type crashInjected struct {
	dead []int64 // malformed lines
	late []int64 // valid events far behind the watermark
}

// The malformed lines crashInput injects; each must be a dead letter (one
// more kind, a cut-off copy of a real line, is made from the input).
var crashMalformed = []string{
	`this is not json`,
	`[1,2,3]`,
	`{"type":"auth","customer_id":"cust_1","card_id":"card_1"}`,
	`{"ts":"2026-13-45T00:00:00Z","type":"auth","customer_id":"cust_1"}`,
	`{"ts":12,"type":"auth","customer_id":"cust_1"}`,
	`{"ts":"2026-01-01T00:00:00Z","type":`,
}

// crashInput writes the crash tests' events into dir: cepheus gen's card
// transactions (about 44,000 lines, seeded), with a malformed line and a
// late event injected after about one line in 300 each, and a few blank
// lines. A late event is a copy of the line 2,000 to 3,000 lines before
// it (hours behind in event time, so far behind the watermark) with
// another event_id, or an event of the input's first instant whose key
// holds invalid UTF-8.
func crashInput(t *testing.T, bin, dir string, seed uint64) (string, crashInjected) {
	t.Helper()
	raw := filepath.Join(dir, "gen.jsonl")
	cmd := exec.Command(bin, "gen", "-seed", strconv.FormatUint(seed, 10),
		"-history-days", "1", "-history-events-per-day", "3000", "-days", "1", "-events-per-day", "40000",
		"-customers", "2000", "-merchants", "500", "-fraud-rate", "50",
		"-scenarios", "card_testing,account_takeover,impossible_travel,large_then_foreign,refund_abuse,velocity_burst,auth_not_captured",
		"-o", raw)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cepheus gen: %v\n%s", err, out)
	}
	b, err := os.ReadFile(raw)
	if err != nil {
		t.Fatal(err)
	}
	gen := bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n"))
	r := crashRand(seed, 0)
	var out bytes.Buffer
	var inj crashInjected
	line := int64(0)
	emit := func(l []byte) {
		out.Write(l)
		out.WriteByte('\n')
		line++
	}
	for i, l := range gen {
		emit(l)
		if r.IntN(300) == 0 {
			if k := r.IntN(len(crashMalformed) + 1); k < len(crashMalformed) {
				emit([]byte(crashMalformed[k]))
			} else {
				emit(l[:len(l)/2])
			}
			inj.dead = append(inj.dead, line)
		}
		if i >= 3000 && r.IntN(300) == 0 {
			if r.IntN(10) == 0 {
				emit([]byte(`{"ts":"2026-01-01T00:00:00Z","type":"auth","event_id":"late_utf8","customer_id":"cust_` +
					"\xff\xfe" + `","card_id":"card_` + "\xc3" + `","amount":1}`))
			} else {
				old := gen[i-2000-r.IntN(1000)]
				emit(bytes.Replace(old, []byte(`"event_id":"evt_`), []byte(`"event_id":"late_evt_`), 1))
			}
			inj.late = append(inj.late, line)
		}
		if r.IntN(5000) == 0 {
			out.WriteByte('\n') // a blank line: neither an event nor a dead letter
			line++
		}
	}
	events := filepath.Join(dir, "events.jsonl")
	if err := os.WriteFile(events, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return events, inj
}

// crashPartitions writes the events of file into a directory of three
// partitions, the second one gzip-compressed, of consecutive thirds of its
// lines; it returns the directory and the partitions' names.
func crashPartitions(t *testing.T, file, dir string) (string, []string) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(b, []byte("\n"))
	parts := filepath.Join(dir, "partitions")
	if err := os.Mkdir(parts, 0o755); err != nil {
		t.Fatal(err)
	}
	names := []string{"p1.jsonl", "p2.jsonl.gz", "p3.jsonl"}
	for i, name := range names {
		var buf bytes.Buffer
		var w io.Writer = &buf
		var zw *gzip.Writer
		if strings.HasSuffix(name, ".gz") {
			zw = gzip.NewWriter(&buf)
			w = zw
		}
		for _, l := range lines[i*len(lines)/3 : (i+1)*len(lines)/3] {
			w.Write(l)
		}
		if zw != nil {
			if err := zw.Close(); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(parts, name), buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return parts, names
}

// multiset counts strings.
type multiset map[string]int

// diff describes how got differs from want ("" when equal): up to 5 of
// the entries missing from got and of those it has too often, shortened
// to 200 bytes.
func (want multiset) diff(got multiset) string {
	var missing, extra []string
	for k, n := range want {
		if g := got[k]; g < n {
			missing = append(missing, fmt.Sprintf("%d of %d missing: %s", n-g, n, shorten(k)))
		}
	}
	for k, n := range got {
		if w := want[k]; n > w {
			extra = append(extra, fmt.Sprintf("%d too many (want %d, got %d): %s", n-w, w, n, shorten(k)))
		}
	}
	if len(missing)+len(extra) == 0 {
		return ""
	}
	slices.Sort(missing)
	slices.Sort(extra)
	var b strings.Builder
	fmt.Fprintf(&b, "%d entries missing or short, %d entries in excess", len(missing), len(extra))
	for _, l := range [][]string{missing, extra} {
		for i, s := range l {
			if i == 5 {
				fmt.Fprintf(&b, "\n  ... %d more", len(l)-i)
				break
			}
			b.WriteString("\n  " + s)
		}
	}
	return b.String()
}

// exceeds describes the entries of got beyond want ("" when got is a
// sub-multiset of want): what a run killed midway must never have
// committed.
func (want multiset) exceeds(got multiset) string {
	extra := multiset{}
	for k, n := range got {
		if n > want[k] {
			extra[k] = n
		}
	}
	if len(extra) == 0 {
		return ""
	}
	part := multiset{}
	for k := range extra {
		part[k] = want[k]
	}
	return part.diff(extra)
}

func shorten(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}

// crashOutputs are the outputs of a run or a backtest, as multisets:
// alert ids and whole alert lines, whole late-event lines, and dead
// letters as their line, offset, reason and data (a backtest's dead
// letters have no "file").
type crashOutputs struct {
	alertIDs, alerts, late, dead multiset
}

func (o crashOutputs) String() string {
	return fmt.Sprintf("%d alerts, %d late events, %d dead letters", sum(o.alerts), sum(o.late), sum(o.dead))
}

func sum(m multiset) int {
	n := 0
	for _, c := range m {
		n += c
	}
	return n
}

// diff describes how got differs from want, kind by kind ("" when equal).
func (want crashOutputs) diff(got crashOutputs) string {
	return want.each(got, multiset.diff)
}

// exceeds describes what got holds beyond want, kind by kind ("" when
// none).
func (want crashOutputs) exceeds(got crashOutputs) string {
	return want.each(got, multiset.exceeds)
}

// each joins what f says of each kind of output of want and got.
func (want crashOutputs) each(got crashOutputs, f func(want, got multiset) string) string {
	var b strings.Builder
	for _, k := range []struct {
		what      string
		want, got multiset
	}{
		{"alert ids", want.alertIDs, got.alertIDs},
		{"alert lines", want.alerts, got.alerts},
		{"late events", want.late, got.late},
		{"dead letters", want.dead, got.dead},
	} {
		if d := f(k.want, k.got); d != "" {
			fmt.Fprintf(&b, "\n%s: %s", k.what, d)
		}
	}
	return b.String()
}

// addAlert adds an alert line (without its newline).
func (o *crashOutputs) addAlert(t *testing.T, where string, line []byte) {
	t.Helper()
	var a struct {
		ID string `json:"alert_id"`
	}
	if err := json.Unmarshal(line, &a); err != nil || len(a.ID) != 32 {
		t.Fatalf("%s: not an alert with a 32-digit alert_id (%v): %s", where, err, shorten(string(line)))
	}
	o.alertIDs[a.ID]++
	o.alerts[string(line)]++
}

// addLate adds a late-event line.
func (o *crashOutputs) addLate(t *testing.T, where string, line []byte) {
	t.Helper()
	var l struct {
		Line  *int64          `json:"line"`
		Time  *string         `json:"time"`
		Event json.RawMessage `json:"event"`
	}
	if err := json.Unmarshal(line, &l); err != nil || l.Line == nil || l.Time == nil || len(l.Event) == 0 {
		t.Fatalf("%s: not a late event {line, time, event} (%v): %s", where, err, shorten(string(line)))
	}
	o.late[string(line)]++
}

// addDead adds a dead letter; files are the names its "file" may be (a
// backtest's, for which files is nil, name none).
func (o *crashOutputs) addDead(t *testing.T, where string, files []string, line []byte) {
	t.Helper()
	var d struct {
		Ruleset string  `json:"ruleset"`
		File    *string `json:"file"`
		Line    int64   `json:"line"`
		Offset  int64   `json:"offset"`
		Reason  string  `json:"reason"`
		Data    string  `json:"data"`
	}
	if err := json.Unmarshal(line, &d); err != nil || d.Ruleset != "cards" || d.Line <= 0 || d.Reason == "" {
		t.Fatalf("%s: not a dead letter of ruleset cards (%v): %s", where, err, shorten(string(line)))
	}
	file := ""
	switch {
	case files == nil && d.File != nil:
		t.Fatalf("%s: a backtest's dead letter names a file: %s", where, line)
	case files != nil && (d.File == nil || !slices.Contains(files, *d.File)):
		t.Fatalf("%s: dead letter does not name one of the input files %v: %s", where, files, line)
	case len(files) > 1:
		file = "file " + *d.File + " " // one input: as a backtest's
	}
	o.dead[fmt.Sprintf("%sline %d offset %d reason %q data %q", file, d.Line, d.Offset, d.Reason, d.Data)]++
}

func newCrashOutputs() crashOutputs {
	return crashOutputs{alertIDs: multiset{}, alerts: multiset{}, late: multiset{}, dead: multiset{}}
}

// jsonLines calls f with each line of the file at path, which must be
// whole JSON lines: a committed part file or a backtest's output is never
// torn. A missing file has no lines.
func jsonLines(t *testing.T, path string, f func(where string, line []byte)) {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 0 && b[len(b)-1] != '\n' {
		t.Fatalf("%s: the last line lacks its newline: %q", path, b[max(0, len(b)-80):])
	}
	n := 0
	for l := range bytes.Lines(b) {
		n++
		l = l[:len(l)-1]
		where := fmt.Sprintf("%s:%d", path, n)
		if !json.Valid(l) {
			t.Fatalf("%s: not JSON: %q", where, shorten(string(l)))
		}
		f(where, l)
	}
}

// backtestOutputs are the outputs of a backtest's files.
func backtestOutputs(t *testing.T, alerts, late, dead string) crashOutputs {
	t.Helper()
	o := newCrashOutputs()
	jsonLines(t, alerts, func(w string, l []byte) { o.addAlert(t, w, l) })
	jsonLines(t, late, func(w string, l []byte) { o.addLate(t, w, l) })
	jsonLines(t, dead, func(w string, l []byte) { o.addDead(t, w, nil, l) })
	return o
}

// partFile matches the name of a committed part file.
var partFile = regexp.MustCompile(`^(alerts|late|dead)-[0-9]+-[0-9]+\.jsonl$`)

// crashDirs are the directories of one chain of runs.
type crashDirs struct {
	state, alerts, late, dead string
	// consumed holds the committed part files a consumer took, in a
	// directory per output directory (consume).
	consumed string
}

func newCrashDirs(root string) crashDirs {
	return crashDirs{
		state:    filepath.Join(root, "state"),
		consumed: filepath.Join(root, "consumed"),
		alerts:   filepath.Join(root, "alerts"),
		late:     filepath.Join(root, "late"),
		dead:     filepath.Join(root, "dead"),
	}
}

// consume moves every committed part file (*.jsonl) of the output
// directories into the consumed directory, as a consumer that takes each
// file once does.
func (d crashDirs) consume(t *testing.T) {
	t.Helper()
	for _, dir := range []string{d.alerts, d.late, d.dead} {
		names, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		to := filepath.Join(d.consumed, filepath.Base(dir))
		if err := os.MkdirAll(to, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, name := range names {
			if err := os.Rename(name, filepath.Join(to, filepath.Base(name))); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// committed reads what a reader of the output directories sees: every
// *.jsonl file, and those a consumer took (consume); files are the names
// of the input's partitions. It also returns the directories' other names
// (in-progress and pending files, or anything else), as dir/name.
func (d crashDirs) committed(t *testing.T, files []string) (crashOutputs, []string) {
	t.Helper()
	o := newCrashOutputs()
	var others []string
	for _, out := range []struct {
		dir, prefix string
		add         func(where string, line []byte)
	}{
		{d.alerts, "alerts-", func(w string, l []byte) { o.addAlert(t, w, l) }},
		{d.late, "late-", func(w string, l []byte) { o.addLate(t, w, l) }},
		{d.dead, "dead-0-", func(w string, l []byte) { o.addDead(t, w, files, l) }},
	} {
		for _, dir := range []string{out.dir, filepath.Join(d.consumed, filepath.Base(out.dir))} {
			entries, err := os.ReadDir(dir)
			if os.IsNotExist(err) {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				name := e.Name()
				if name == outputIDFile {
					continue // the directory's id, for the checkpoints
				}
				if !strings.HasSuffix(name, ".jsonl") {
					others = append(others, filepath.Join(filepath.Base(dir), name))
					continue
				}
				if !partFile.MatchString(name) || !strings.HasPrefix(name, out.prefix) {
					t.Fatalf("%s: %s is no part file name of this directory", dir, name)
				}
				jsonLines(t, filepath.Join(dir, name), out.add)
			}
		}
	}
	return o, others
}

// fingerprint is every name and content under the output directories, to
// show that a run changed nothing.
func (d crashDirs) fingerprint(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for _, dir := range []string{d.alerts, d.late, d.dead} {
		entries, err := os.ReadDir(dir)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		for _, e := range entries {
			c, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, "%s/%s %d %x\n", filepath.Base(dir), e.Name(), len(c), sha256.Sum256(c))
		}
	}
	return b.String()
}

// crashConfig is how one child run is started.
type crashConfig struct {
	parallelism int
	backend     string // memory or pebble
	interval    time.Duration
	records     int // -checkpoint-records; 0 for none
	// failpoint is CEPHEUS_FAILPOINT: the child must die there.
	failpoint string
	// killAfter > 0 sends SIGKILL that long after the start, unless the
	// child ended before.
	killAfter time.Duration
}

func (c crashConfig) String() string {
	s := fmt.Sprintf("-parallelism %d -state-backend %s -checkpoint-interval %v", c.parallelism, c.backend, c.interval)
	if c.records > 0 {
		s += fmt.Sprintf(" -checkpoint-records %d", c.records)
	}
	if c.failpoint != "" {
		s += " CEPHEUS_FAILPOINT=" + c.failpoint
	}
	if c.killAfter > 0 {
		s += fmt.Sprintf(" kill after %v", c.killAfter)
	}
	return s
}

// crashExit is how a child run ended.
type crashExit struct {
	killed  bool // by SIGKILL: a failpoint's or the test's
	code    int  // the exit status when not killed
	elapsed time.Duration
	stderr  string
}

// crashChildTimeout bounds a child run: one that takes longer hangs.
const crashChildTimeout = 60 * time.Second

// runChild runs cepheus with args as a child process in its own process
// group, which dies with the test (Pdeathsig), so a failed test leaves
// nothing running; failpoint is its CEPHEUS_FAILPOINT, and killAfter > 0
// sends SIGKILL that long after the start, unless it ended before; env
// is added to its environment.
func runChild(t *testing.T, bin string, args []string, failpoint string, killAfter time.Duration, env ...string) crashExit {
	t.Helper()
	c := startChild(t, bin, args, failpoint, env...)
	var kill <-chan time.Time
	if killAfter > 0 {
		k := time.NewTimer(killAfter)
		defer k.Stop()
		kill = k.C
	}
	hang := time.NewTimer(crashChildTimeout)
	defer hang.Stop()
	select {
	case <-c.done:
	case <-kill:
		c.kill()
	case <-hang.C:
		_ = syscall.Kill(-c.pid, syscall.SIGKILL)
		<-c.done
		t.Fatalf("cepheus %s: still running after %v: killed\n%s", strings.Join(args, " "), crashChildTimeout, c.out.String())
	}
	return c.exit()
}

// child is a cepheus child process started by startChild.
type child struct {
	cmd   *exec.Cmd
	pid   int
	start time.Time
	done  chan struct{} // closed once it has ended
	out   *syncBuffer   // its stdout and stderr
}

// startChild starts cepheus with args as runChild does and returns at
// once; the test ends it (kill, or waiting on done) before it returns.
func startChild(t *testing.T, bin string, args []string, failpoint string, env ...string) *child {
	t.Helper()
	cmd := exec.Command(bin, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CEPHEUS_FAILPOINT=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	if failpoint != "" {
		cmd.Env = append(cmd.Env, "CEPHEUS_FAILPOINT="+failpoint)
	}
	cmd.Env = append(cmd.Env, env...)
	c := &child{cmd: cmd, done: make(chan struct{}), out: &syncBuffer{}}
	cmd.Stdout = c.out
	cmd.Stderr = c.out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	c.start = time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c.pid = cmd.Process.Pid
	go func() {
		_ = cmd.Wait() // the outcome is in cmd.ProcessState
		close(c.done)
	}()
	return c
}

// kill sends SIGKILL and waits for the end. The child is not reaped
// before done, so pid is still its own (a zombie at worst, for which the
// kill does nothing).
func (c *child) kill() {
	_ = syscall.Kill(c.pid, syscall.SIGKILL)
	<-c.done
}

// stacks ends a child that seems stuck with SIGQUIT, which makes the Go
// runtime print every goroutine's stack before it exits, and returns its
// output then (the stacks at its end): where it waits, for the failure's
// message. A child that does not end within 10 s is killed.
func (c *child) stacks() string {
	_ = syscall.Kill(c.pid, syscall.SIGQUIT)
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		c.kill()
	}
	return c.out.String()
}

// terminate sends SIGTERM and waits for the end, at most within: a child
// still running then fails the test (and is killed by its deferred clean-up).
func (c *child) terminate(t *testing.T, within time.Duration) crashExit {
	t.Helper()
	if err := syscall.Kill(c.pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.done:
	case <-time.After(within):
		t.Fatalf("%s still runs %v after SIGTERM", c.cmd.Args[1], within)
	}
	return c.exit()
}

// exit is how the child ended; it must have.
func (c *child) exit() crashExit {
	ws := c.cmd.ProcessState.Sys().(syscall.WaitStatus)
	return crashExit{
		killed:  ws.Signaled() && ws.Signal() == syscall.SIGKILL,
		code:    ws.ExitStatus(),
		elapsed: time.Since(c.start),
		stderr:  c.out.String(),
	}
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// resumedFrom and finishedAt find what a run said of the checkpoint it
// started from, for the logs.
var (
	resumedFrom = regexp.MustCompile(`run: resuming from checkpoint [0-9]+`)
	finishedAt  = regexp.MustCompile(`run: the run of .* (finished at checkpoint [0-9]+)`)
)

// describe is one line about how a child run ended, for the logs.
func (e crashExit) describe() string {
	s := fmt.Sprintf("exit %d", e.code)
	if e.killed {
		s = "killed by SIGKILL"
	}
	s += fmt.Sprintf(" after %v", e.elapsed.Round(time.Millisecond))
	if m := resumedFrom.FindString(e.stderr); m != "" {
		s += " (" + strings.TrimPrefix(m, "run: ") + ")"
	} else if m := finishedAt.FindStringSubmatch(e.stderr); m != nil {
		s += " (the state's run " + m[1] + ")"
	} else if strings.Contains(e.stderr, "nothing to do") {
		s += " (nothing to do: the job had finished)"
	} else if !e.killed {
		s += " (fresh start)"
	}
	return s
}

// tail is the child's output, at most its last 40 lines.
func (e crashExit) tail() string {
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(e.stderr))
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return strings.Join(lines[max(0, len(lines)-40):], "\n")
}
