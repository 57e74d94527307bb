package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

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
// exits 0, leaving only committed files; the next run resumes, and the
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
	run := func(state, alerts string) (*exec.Cmd, *bytes.Buffer) {
		cmd := exec.Command(bin, "run", "-rules", rules, "-events", events, "-state", state, "-alerts", alerts,
			"-checkpoint-interval", "50ms", "-parallelism", "2")
		var stderr bytes.Buffer
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
		if !strings.HasSuffix(e.Name(), ".jsonl") || strings.HasPrefix(e.Name(), ".") {
			t.Errorf("after a clean stop, %s is left in %s", e.Name(), alerts)
		}
	}
	finish(state, alerts)
}
