package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestMakeTestSaysWhatIsMissing: without Java 17 or Maven, make test stops
// before the Go tests and says what is missing and how to install it;
// make test-go runs the Go tests without them.
func TestMakeTestSaysWhatIsMissing(t *testing.T) {
	if testing.Short() {
		t.Skip("runs make")
	}
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	dir := t.TempDir()
	oldJava := filepath.Join(dir, "java11")
	if err := os.WriteFile(oldJava, []byte("#!/bin/sh\necho 'openjdk version \"11.0.2\" 2019-01-15' >&2\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		vars []string
		want string
	}{
		{[]string{"JAVA=" + filepath.Join(dir, "no-java")}, "needs java (Java 17 or later), not found on PATH"},
		{[]string{"JAVA=" + oldJava}, `needs Java 17 or later (found: openjdk version "11.0.2" 2019-01-15)`},
		{[]string{"MVN=" + filepath.Join(dir, "no-mvn") + " -q"}, "needs mvn (Maven), not found on PATH"},
	} {
		// flink-tools is make test's first prerequisite: it fails before
		// lint and the Go tests start.
		out, err := exec.Command("make", append([]string{"-s", "-C", "../..", "test"}, c.vars...)...).CombinedOutput()
		got := string(out)
		if err == nil || !strings.Contains(got, c.want) || !strings.Contains(got, "apt-get install openjdk-17-jdk-headless maven") ||
			!strings.Contains(got, "make test-go") || strings.Contains(got, "go test") || strings.Contains(got, "gofmt") {
			t.Errorf("make test %v: %v\n%s\nwant a failure before the Go tests saying %q", c.vars, err, got, c.want)
		}
	}
	out, err := exec.Command("make", "-n", "-C", "../..", "test-go").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "go test -count=1") || strings.Contains(string(out), "diffflink") {
		t.Errorf("make -n test-go: %v\n%s\nwant the Go tests without the differential run", err, out)
	}
}
