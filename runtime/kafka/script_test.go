//go:build unix

package kafka

import (
	"bytes"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// kafkaScript is the repository's broker script, from this package's
// directory.
const kafkaScript = "../../scripts/kafka.sh"

// runScript runs scripts/kafka.sh with args and returns its stdout,
// stderr and exit status.
func runScript(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := exec.Command(kafkaScript, args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return out.String(), errOut.String(), code
}

// TestKafkaScript starts a broker of its own with scripts/kafka.sh: the
// only line on stdout is its address, which takes records; a second start
// prints the same address; stop ends exactly the recorded processes. It
// needs Java and Maven: under CI their absence fails it.
func TestKafkaScript(t *testing.T) {
	if _, err := exec.LookPath("java"); err != nil {
		if ci := os.Getenv("CI"); ci != "" && ci != "false" && ci != "0" {
			t.Fatalf("java is not on PATH, and CI is set: %v", err)
		}
		t.Skip("needs java and mvn")
	}
	if testing.Short() {
		t.Skip("starts a Kafka broker (about 5 s)")
	}
	t.Parallel()
	dir := t.TempDir()
	out, errOut, code := runScript(t, "start", "-dir", dir)
	// Whatever fails below, the broker goes.
	t.Cleanup(func() { runScript(t, "stop", "-dir", dir) })
	if code != 0 {
		t.Fatalf("kafka.sh start: exit %d\n%s", code, errOut)
	}
	addr := strings.TrimSuffix(out, "\n")
	if strings.Contains(addr, "\n") {
		t.Fatalf("kafka.sh start printed more than the address on stdout:\n%s", out)
	}
	if host, port, err := net.SplitHostPort(addr); err != nil || host != "127.0.0.1" || port == "" {
		t.Fatalf("kafka.sh start printed %q, want 127.0.0.1:port (%v)", addr, err)
	}
	if !strings.Contains(errOut, "1 node(s) ready in ") {
		t.Errorf("kafka.sh start: stderr does not say the broker is ready:\n%s", errOut)
	}
	pids := recordedPIDs(t, dir)
	if len(pids) != 1 {
		t.Fatalf("kafka.sh start recorded %d PIDs, want 1", len(pids))
	}

	ctx := testContext(t)
	topic := topicName(t)
	if _, err := Produce(ctx, ProduceConfig{Brokers: []string{addr}, Topic: topic}, strings.NewReader("one\ntwo\n")); err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if _, err := Consume(ctx, ConsumeConfig{Brokers: []string{addr}, Topic: topic, Idle: 500 * time.Millisecond}, &got); err != nil {
		t.Fatal(err)
	}
	sameLines(t, got.String(), []string{"one", "two"})

	if again, errOut, code := runScript(t, "start", "-dir", dir); code != 0 || again != out || !strings.Contains(errOut, "already running") {
		t.Errorf("second kafka.sh start: exit %d, stdout %q, stderr\n%s\nwant exit 0 and the same address", code, again, errOut)
	}
	if _, errOut, code := runScript(t, "stop", "-dir", dir); code != 0 {
		t.Fatalf("kafka.sh stop: exit %d\n%s", code, errOut)
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("broker %d still exists after kafka.sh stop (kill -0: %v)", pid, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "pids")); !os.IsNotExist(err) {
		t.Errorf("kafka.sh stop left %s/pids (%v)", dir, err)
	}
}

// recordedPIDs returns the PIDs of dir/pids.
func recordedPIDs(t *testing.T, dir string) []int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "pids"))
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		pid, err := strconv.Atoi(strings.Fields(line)[0])
		if err != nil {
			t.Fatalf("%s/pids: %q: %v", dir, line, err)
		}
		pids = append(pids, pid)
	}
	return pids
}

// TestKafkaScriptUsage: bad command lines exit 2 and start nothing.
func TestKafkaScriptUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "no command given"},
		{[]string{"start", "-n", "2"}, "-n 2: a cluster has 1 or 3 nodes"},
		{[]string{"stop", "-n", "1"}, "start takes -n 1 or -n 3"},
		{[]string{"start", "-rm"}, "only stop takes -rm"},
		{[]string{"begin"}, "unknown command begin"},
	} {
		out, errOut, code := runScript(t, c.args...)
		if code != 2 || out != "" || !strings.Contains(errOut, c.want) || !strings.Contains(errOut, "usage: scripts/kafka.sh") {
			t.Errorf("kafka.sh %q: exit %d, stdout %q, stderr\n%s\nwant exit 2 saying %q", c.args, code, out, errOut, c.want)
		}
	}
}
