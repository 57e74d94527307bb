package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// caseFile is one small nfa_harness case: start followedBy end. The
// expected match is filled in by the test.
const caseFile = `{"meta": {}, "skipped": [], "cases": [{
  "id": "T.simple", "driver": "nfa_harness",
  "pattern": {"stages": [
    {"name": "start", "contiguity": "begin", "condition": "name == \"a\"", "quantifier": {"kind": "one", "min": 1, "max": 1}, "until": null},
    {"name": "end", "contiguity": "followedBy", "condition": "name == \"b\"", "quantifier": {"kind": "one", "min": 1, "max": 1}, "until": null}],
    "within_ms": null, "skip": "noSkip"},
  "events": [
    {"seq": 1, "id": 1, "name": "a", "price": 1.0, "ts": 1, "type": "Event"},
    {"seq": 2, "id": 2, "name": "b", "price": 1.0, "ts": 2, "type": "Event"}],
  "expected_matches_seq": [EXPECTED], "compare_mode": "multiset"}]}`

func writeCase(t *testing.T, expected string) string {
	t.Helper()
	dir := t.TempDir()
	body := strings.Replace(caseFile, "EXPECTED", expected, 1)
	if err := os.WriteFile(filepath.Join(dir, "cases.json"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestRun(t *testing.T) {
	for _, mode := range []string{"text", "builder"} {
		dir := writeCase(t, "[1, 2]")
		out := filepath.Join(t.TempDir(), "nested", "results.json")
		var stdout, stderr bytes.Buffer
		if err := run(context.Background(), []string{"-dir", dir, "-out", out, "-mode", mode}, &stdout, &stderr); err != nil {
			t.Fatalf("%s: run: %v\nstdout:\n%s\nstderr:\n%s", mode, err, &stdout, &stderr)
		}
		if got, want := stdout.String(), "conformance: 1 passed, 0 failed\n"; got != want {
			t.Errorf("%s: stdout = %q, want %q", mode, got, want)
		}
		if _, err := os.Stat(out); err != nil {
			t.Errorf("%s: results file: %v", mode, err)
		}
	}
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"-mode", "both"}, &stdout, &stderr); err == nil {
		t.Errorf("run accepted -mode both")
	}
}

func TestRunFailing(t *testing.T) {
	dir := writeCase(t, "[1]")
	if err := os.WriteFile(filepath.Join(dir, "known-failing.txt"), []byte("T.simple # on purpose\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "results.json")
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"-dir", dir, "-out", out}, &stdout, &stderr)
	if !errors.Is(err, errFailed) {
		t.Fatalf("run = %v, want errFailed", err)
	}
	s := stdout.String()
	for _, want := range []string{"FAIL T.simple (known failing: on purpose)", "missing:    [1:a]", "conformance: 0 passed, 1 failed\n"} {
		if !strings.Contains(s, want) {
			t.Errorf("stdout does not contain %q:\n%s", want, s)
		}
	}
	if _, err := os.Stat(out); err != nil {
		t.Errorf("results file not written when a case fails: %v", err)
	}
}
