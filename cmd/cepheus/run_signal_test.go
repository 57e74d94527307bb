//go:build linux

package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
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
)

// outputIDFile is the hidden file naming an output directory
// (runtime.OutputIDFile): not output.
const outputIDFile = ".cepheus-output-id"

// alertIDs returns the sorted alert ids of the JSON-lines files of paths.
func alertIDs(t *testing.T, paths ...string) []string {
	t.Helper()
	var ids []string
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.SplitAfter(string(b), "\n") {
			if i := strings.Index(l, `"alert_id":"`); i >= 0 {
				ids = append(ids, l[i+12:i+12+32])
			}
		}
	}
	slices.Sort(ids)
	return ids
}

// TestRunSignals runs the binary: SIGTERM takes a final checkpoint and
// exits 0, leaving only committed files, also when its process group gets
// a second SIGTERM at once (GNU timeout); the next run resumes, and the
// alerts committed in the end are those of cepheus backtest.
func TestRunSignals(t *testing.T) {
	bin := buildCepheus(t)
	dir := t.TempDir()
	rules := writeFile(t, dir, "r.cep", goodSrc)
	events := filepath.Join(dir, "events.jsonl")
	f, err := os.Create(events)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	for i := range 400_000 {
		fmt.Fprintf(w, `{"ts":%d,"k":"k%d","name":"%c"}`+"\n", t0+int64(i), i%1000, "ab"[i/1000%2])
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if code, _, stderr := cepheus(t, "backtest", "-q", "-rules", rules, "-events", events, "-alerts", filepath.Join(dir, "bt.jsonl")); code != 0 {
		t.Fatalf("backtest: exit %d\n%s", code, stderr)
	}
	want := alertIDs(t, filepath.Join(dir, "bt.jsonl"))
	if len(want) < 1000 {
		t.Fatalf("the backtest found %d alerts, want many", len(want))
	}
	run := func(state, alerts string) (*exec.Cmd, *syncBuffer) {
		cmd := exec.Command(bin, "run", "-rules", rules, "-events", events, "-state", state, "-alerts", alerts,
			"-checkpoint-interval", "50ms", "-parallelism", "2")
		// A syncBuffer: the run writes it while the test reads it.
		var stderr syncBuffer
		cmd.Stderr = &stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd, &stderr
	}
	waitCommitted := func(alerts string) {
		t.Helper()
		for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if m, _ := filepath.Glob(filepath.Join(alerts, "*.jsonl")); len(m) > 0 {
				return
			}
		}
		t.Fatalf("no part file committed in %s", alerts)
	}
	finish := func(state, alerts string) {
		t.Helper()
		cmd, stderr := run(state, alerts)
		if err := cmd.Wait(); err != nil {
			t.Fatalf("resumed run: %v\n%s", err, stderr)
		}
		if !strings.Contains(stderr.String(), "resuming from checkpoint") {
			t.Errorf("the resumed run does not say it resumes:\n%s", stderr)
		}
		parts, _ := filepath.Glob(filepath.Join(alerts, "*.jsonl"))
		if got := alertIDs(t, parts...); !slices.Equal(got, want) {
			t.Errorf("%d alerts committed after the resume, the backtest has %d (or they differ)", len(got), len(want))
		}
	}

	state, alerts := filepath.Join(dir, "st1"), filepath.Join(dir, "al1")
	cmd, stderr := run(state, alerts)
	waitCommitted(alerts)
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("after SIGTERM: %v, want exit 0\n%s", err, stderr)
	}
	if !strings.Contains(stderr.String(), "stopped at checkpoint") {
		t.Errorf("stderr lacks the stop message:\n%s", stderr)
	}
	entries, err := os.ReadDir(alerts)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() == outputIDFile {
			continue // the directory's id, not output
		}
		if !strings.HasSuffix(e.Name(), ".jsonl") || strings.HasPrefix(e.Name(), ".") {
			t.Errorf("after a clean stop, %s is left in %s", e.Name(), alerts)
		}
	}
	// Stopped again as GNU timeout stops a command: SIGTERM to the
	// process, then to its process group. The second signal killed one
	// run in six (exit 143, a chk-N.tmp left); sent 10 ms after the
	// first here, two runs in three (the others had ended).
	cmd, stderr = run(state, alerts)
	for deadline := time.Now().Add(60 * time.Second); !strings.Contains(stderr.String(), "resuming from checkpoint"); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the second run does not resume:\n%s", stderr)
		}
	}
	syscall.Kill(cmd.Process.Pid, syscall.SIGTERM)
	time.Sleep(10 * time.Millisecond)
	syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	if err := cmd.Wait(); err != nil || !strings.Contains(stderr.String(), "stopped at checkpoint") {
		t.Fatalf("after SIGTERM to the process and its group: %v, want exit 0 and the stop message\n%s", err, stderr)
	}
	// SIGHUP (the terminal closed) stops as SIGTERM does: it ended the
	// process at once, with no final checkpoint (exit 129).
	resumed := func() (*exec.Cmd, *syncBuffer) {
		t.Helper()
		cmd, stderr := run(state, alerts)
		for deadline := time.Now().Add(60 * time.Second); !strings.Contains(stderr.String(), "resuming from checkpoint"); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the run does not resume:\n%s", stderr)
			}
		}
		return cmd, stderr
	}
	cmd, stderr = resumed()
	syscall.Kill(cmd.Process.Pid, syscall.SIGHUP)
	if err := cmd.Wait(); err != nil || !regexp.MustCompile(`stopped at checkpoint \d+ on SIGHUP;`).MatchString(stderr.String()) {
		t.Fatalf("after SIGHUP: %v, want exit 0 and the stop on SIGHUP\n%s", err, stderr)
	}
	// Under nohup SIGHUP stays ignored: the run goes on, and SIGTERM
	// 50 ms later stops it (a SIGHUP heard would have been the stop's
	// cause, named in its line).
	if nohup, err := exec.LookPath("nohup"); err == nil {
		args := append([]string{bin}, "run", "-rules", rules, "-events", events, "-state", state, "-alerts", alerts,
			"-checkpoint-interval", "50ms", "-parallelism", "2")
		cmd := exec.Command(nohup, args...)
		var stderr syncBuffer
		cmd.Stderr = &stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(60 * time.Second); !strings.Contains(stderr.String(), "resuming from checkpoint"); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the run under nohup does not resume:\n%s", stderr.String())
			}
		}
		syscall.Kill(cmd.Process.Pid, syscall.SIGHUP)
		time.Sleep(50 * time.Millisecond)
		syscall.Kill(cmd.Process.Pid, syscall.SIGTERM)
		if err := cmd.Wait(); err != nil || !regexp.MustCompile(`stopped at checkpoint \d+ on SIGTERM;`).MatchString(stderr.String()) {
			t.Fatalf("under nohup, after SIGHUP then SIGTERM: %v, want exit 0 and the stop on SIGTERM\n%s", err, stderr.String())
		}
	}
	finish(state, alerts)
}

// TestRunFollowCloseInactive runs the binary over a followed directory:
// its files, quiet for -close-inactive, are closed (a directory of
// rotated files kept a descriptor of each for ever); a line appended to
// a closed file is read once, and after a kill -9 the resumed run
// starts from the checkpoint's positions of the closed files, closes
// them again and reads the next line appended.
func TestRunFollowCloseInactive(t *testing.T) {
	bin := buildCepheus(t)
	dir := t.TempDir()
	rules := writeFile(t, dir, "r.cep", goodSrc)
	in := filepath.Join(dir, "in")
	if err := os.Mkdir(in, 0o755); err != nil {
		t.Fatal(err)
	}
	const n = 40
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	line := func(i int, name string) string {
		return fmt.Sprintf(`{"ts":%d,"k":"k%d","name":%q}`+"\n", t0+int64(i)*1000, i, name)
	}
	appendLine := func(i int, name string) {
		t.Helper()
		f, err := os.OpenFile(filepath.Join(in, fmt.Sprintf("f%02d.jsonl", i)), os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteString(line(i, name)); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		appendLine(i, "a")
	}
	args := []string{"run", "-rules", rules, "-events", in, "-follow", "-state", filepath.Join(dir, "state"),
		"-alerts", filepath.Join(dir, "alerts"), "-close-inactive", "100ms", "-poll", "10ms",
		"-checkpoint-interval", "50ms", "-progress", "50ms"}
	// waitFor waits up to 30 s for cond of c, failing with what.
	waitFor := func(c *child, what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("after 30 s, %s:\n%s", what, c.out.String())
			}
		}
	}
	// fewFDs says that c holds fewer descriptors than half the files.
	fewFDs := func(c *child) func() bool {
		return func() bool {
			fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", c.pid))
			return err == nil && len(fds) < n/2
		}
	}
	// read says that c's latest progress line counts records records.
	read := func(c *child, records int) func() bool {
		return func() bool {
			lines := regexp.MustCompile(`run: (\d+) records`).FindAllStringSubmatch(c.out.String(), -1)
			return len(lines) > 0 && lines[len(lines)-1][1] == strconv.Itoa(records)
		}
	}

	// stop kills c unless it ended (its pid may be another's then).
	stop := func(c *child) {
		select {
		case <-c.done:
		default:
			c.kill()
		}
	}
	c := startChild(t, bin, args, "")
	defer stop(c)
	waitFor(c, "not every line read", read(c, n))
	waitFor(c, "the quiet files not closed", fewFDs(c))
	appendLine(5, "b")
	waitFor(c, "the line appended to a closed file not read", read(c, n+1))
	waitFor(c, "the file not closed again", fewFDs(c))
	c.kill()

	c2 := startChild(t, bin, args, "")
	defer stop(c2)
	waitFor(c2, "not resumed", func() bool { return strings.Contains(c2.out.String(), "run: resuming from checkpoint") })
	waitFor(c2, "the files not closed after the resume", fewFDs(c2))
	// Read twice, the line would make it n+2, and this wait would fail.
	waitFor(c2, "the resumed run not at the records of the first", read(c2, n+1))
	appendLine(6, "b")
	waitFor(c2, "the line appended after the resume not read", read(c2, n+2))
	if e := c2.terminate(t, 30*time.Second); e.code != 0 {
		t.Fatalf("after SIGTERM: exit %d\n%s", e.code, e.stderr)
	}
}

// TestRunFollowDeletedAfterKill: a followed directory's file closed for
// inactivity, then deleted while no run goes on after a kill -9, is let
// go at the restart, as one closed at a clean stop is. Two ways the
// latest checkpoint did not say it was closed, and the restart was
// refused ("a.jsonl, of position a.jsonl@67:1, is not an input of ..."):
//   - closed while nothing else happened: the checkpoints due were skipped
//     as quiet (no position moved), so none said it was closed (measured:
//     2.7 s after the close, the latest checkpoint, taken before it,
//     named no closed file);
//   - a gzip file closed at the checkpoint is opened again at a restart
//     (decompressed up to its position) and closed only once quiet again:
//     the checkpoints taken in between did not name it.
func TestRunFollowDeletedAfterKill(t *testing.T) {
	bin := buildCepheus(t)
	for _, gz := range []bool{false, true} {
		name := "a.jsonl"
		if gz {
			name += ".gz"
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			rules := writeFile(t, dir, "r.cep", goodSrc)
			in := filepath.Join(dir, "in")
			if err := os.Mkdir(in, 0o755); err != nil {
				t.Fatal(err)
			}
			a := []byte(`{"ts":1000,"k":"x","name":"a"}` + "\n")
			if gz {
				var b bytes.Buffer
				w := gzip.NewWriter(&b)
				w.Write(a)
				w.Close()
				a = b.Bytes()
			}
			writeFile(t, in, name, string(a))
			writeFile(t, in, "live.jsonl", `{"ts":2000,"k":"y","name":"a"}`+"\n")
			closeInactive := 200 * time.Millisecond
			if gz {
				closeInactive = 3 * time.Second
			}
			args := []string{"run", "-rules", rules, "-events", in, "-follow", "-state", filepath.Join(dir, "state"),
				"-alerts", filepath.Join(dir, "alerts"), "-close-inactive", closeInactive.String(), "-idle-timeout", "50ms",
				"-poll", "10ms", "-checkpoint-interval", "50ms", "-progress", "20ms"}
			waitFor := func(c *child, what string, cond func() bool) {
				t.Helper()
				for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatalf("after 30 s, %s:\n%s", what, c.out.String())
					}
				}
			}
			// open says whether c holds a descriptor of in/file.
			open := func(c *child, file string) bool {
				fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", c.pid))
				for _, fd := range fds {
					if l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", c.pid, fd.Name())); err == nil && l == filepath.Join(in, file) {
						return true
					}
				}
				return false
			}
			checkpoints := regexp.MustCompile(`checkpoint (\d+) \(`)
			latest := func(c *child) int {
				m := checkpoints.FindAllStringSubmatch(c.out.String(), -1)
				if len(m) == 0 {
					return 0
				}
				n, _ := strconv.Atoi(m[len(m)-1][1])
				return n
			}
			c := startChild(t, bin, args, "")
			defer c.kill()
			waitFor(c, "the files not read", func() bool { return strings.Contains(c.out.String(), "run: 2 records") })
			waitFor(c, "the files not closed", func() bool { return !open(c, name) && !open(c, "live.jsonl") })
			if gz {
				// Closed at the checkpoint of a clean stop; opened again
				// at the restart, the restart's checkpoint taken.
				if e := c.terminate(t, 30*time.Second); e.code != 0 {
					t.Fatalf("after SIGTERM: exit %d\n%s", e.code, e.stderr)
				}
				c = startChild(t, bin, args, "")
				defer c.kill()
				waitFor(c, "not resumed", func() bool { return strings.Contains(c.out.String(), "run: resuming from checkpoint") })
				first := latest(c)
				waitFor(c, "no checkpoint after the restart", func() bool { return latest(c) > first })
				if !open(c, name) {
					t.Fatalf("%s is not open again after the restart: the test checks nothing", name)
				}
			} else {
				// The close's checkpoint: the next one, unless it came
				// before first was read (none follows it: the job is
				// quiet then). Waited for up to 2 s (it was a sleep of
				// 500 ms, ten checkpoint intervals, too short on a
				// loaded host); the restart below fails without it.
				first := latest(c)
				for deadline := time.Now().Add(2 * time.Second); latest(c) == first && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				}
			}
			c.kill()
			if err := os.Remove(filepath.Join(in, name)); err != nil {
				t.Fatal(err)
			}
			c = startChild(t, bin, args, "")
			defer c.kill()
			waitFor(c, "not resumed", func() bool {
				return strings.Contains(c.out.String(), "run: resuming from checkpoint") || strings.Contains(c.out.String(), "cepheus:")
			})
			if strings.Contains(c.out.String(), "cepheus:") {
				<-c.done
				t.Fatalf("the restart after the deletion failed:\n%s", c.out.String())
			}
			want := name + ", closed for inactivity at the checkpoint (read to line 1), was deleted since: its partition ends"
			waitFor(c, "the deleted file not let go", func() bool { return strings.Contains(c.out.String(), want) })
			if e := c.terminate(t, 30*time.Second); e.code != 0 {
				t.Fatalf("after SIGTERM: exit %d\n%s", e.code, e.stderr)
			}
		})
	}
}

// TestRunSignalAfterGrace: a run whose stop cannot end (its alerts go to
// a pipe nobody reads, full) is killed by a signal sent a second or more
// after the first, as run's help says: the signals within the second are
// the same stop (TestRunSignals), not every later one.
func TestRunSignalAfterGrace(t *testing.T) {
	bin := buildCepheus(t)
	dir := t.TempDir()
	rules := writeFile(t, dir, "r.cep", goodSrc)
	var b strings.Builder
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	for i := range 20_000 {
		fmt.Fprintf(&b, `{"ts":%d,"k":"k%d","name":"%c"}`+"\n", t0+int64(i), i%1000, "ab"[i/1000%2])
	}
	events := writeFile(t, dir, "events.jsonl", b.String())
	cmd := exec.Command(bin, "run", "-rules", rules, "-events", events, "-state", filepath.Join(dir, "state"), "-alerts", "-",
		"-checkpoint-interval", "50ms", "-progress", "1h")
	// stdout is a pipe the test never reads: once its buffer is full,
	// the run's writes, and so its stop, wait for ever.
	if _, err := cmd.StdoutPipe(); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ended := make(chan error, 1)
	go func() { ended <- cmd.Wait() }()
	time.Sleep(2 * time.Second) // the pipe fills
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-ended:
		t.Fatalf("the run ended on the first SIGTERM with its alerts' pipe full: %v\n%s", err, stderr.String())
	case <-time.After(1500 * time.Millisecond):
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-ended:
		ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
		if err == nil || !ok || !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
			t.Errorf("after a second SIGTERM 1.5 s after the first: %v; want killed by SIGTERM\n%s", err, stderr.String())
		}
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		<-ended
		t.Fatalf("still running 10 s after a second SIGTERM sent 1.5 s after the first\n%s", stderr.String())
	}
}
