//go:build linux

package failpoint

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// helperEnv makes the test binary a helper process: it hits the point
// "p" once a 10 ms tick, the variable's value times (200 if it is not a
// number), printing each hit, then exits 0.
const helperEnv = "FAILPOINT_TEST_HELPER"

// unlistedEnv makes the helper also hit a point not listed, at its
// second tick.
const unlistedEnv = "FAILPOINT_TEST_UNLISTED"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		hits, err := strconv.Atoi(os.Getenv(helperEnv))
		if err != nil {
			hits = 200
		}
		for i := 1; i <= hits; i++ {
			if os.Getenv(unlistedEnv) != "" && i == 2 {
				Hit("unlisted")
			}
			Hit("other")
			Hit("p")
			os.Stdout.WriteString("hit " + strconv.Itoa(i) + "\n")
			time.Sleep(10 * time.Millisecond)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// helper starts the test binary as a helper process armed with the
// failpoint fp; out gets its standard output and error. hits, if given,
// is how many times it hits p; a second value makes it also hit a point
// not listed.
func helper(t *testing.T, fp string, hits ...int) (*exec.Cmd, *bytes.Buffer, chan error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	n := "200"
	if len(hits) > 0 {
		n = strconv.Itoa(hits[0])
	}
	cmd.Env = append(os.Environ(), helperEnv+"="+n, EnvVar+"="+fp)
	if len(hits) > 1 {
		cmd.Env = append(cmd.Env, unlistedEnv+"=1")
	}
	out := new(bytes.Buffer)
	cmd.Stdout = out
	cmd.Stderr = out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	return cmd, out, done
}

// TestKillAtNth: "p@3" kills the process at the third hit of p, not
// before, with SIGKILL; other points pass.
func TestKillAtNth(t *testing.T) {
	cmd, out, done := helper(t, "p@3")
	err := <-done
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if err == nil || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("the helper: %v, want killed by SIGKILL", err)
	}
	if got := out.String(); got != "hit 1\nhit 2\n" {
		t.Errorf("the helper printed %q, want two hits before the third killed it", got)
	}
}

// TestStopWhen: "p/stop-when=FILE" lets the process run while FILE is
// missing, stops it at the next hit of p once FILE is there, and only
// once: resumed with SIGCONT, it runs to its end.
func TestStopWhen(t *testing.T) {
	file := filepath.Join(t.TempDir(), "pause")
	cmd, _, done := helper(t, "p"+stopWhenSep+file)
	defer cmd.Process.Kill()
	time.Sleep(100 * time.Millisecond)
	if state(t, cmd.Process.Pid) == "T" {
		t.Fatal("the helper stopped before the file was made")
	}
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for state(t, cmd.Process.Pid) != "T" {
		if time.Now().After(deadline) {
			t.Fatal("the helper did not stop within 10 s of the file")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the helper, resumed: %v, want exit 0 (stopped once)", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the helper, resumed, did not end within 30 s (stopped again?)")
	}
}

// state is the state letter of process pid (R, S, T, Z...) from /proc.
func state(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	// pid (comm) state ...: comm may hold spaces and parentheses.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	return f[0]
}

// TestSleep: "p/sleep=D" makes every hit of p sleep D, and the process
// runs to its end; a D that is no duration arms nothing.
func TestSleep(t *testing.T) {
	began := time.Now()
	_, out, done := helper(t, "p"+sleepSep+"40ms", 10)
	if err := <-done; err != nil {
		t.Fatalf("the helper: %v, want exit 0", err)
	}
	// 10 hits of p at 40 ms each, besides the 10 ms ticks.
	if took := time.Since(began); took < 400*time.Millisecond || strings.Count(out.String(), "hit ") != 10 {
		t.Errorf("the helper ran %v and printed %q, want at least 400 ms and 10 hits", took, out.String())
	}
	// A sleep that is no duration would arm nothing: refused.
	cmd, out, done := helper(t, "p"+sleepSep+"soon", 3)
	if err := <-done; err == nil || cmd.ProcessState.ExitCode() != 2 || strings.Contains(out.String(), "hit ") {
		t.Errorf("a sleep that is no duration: %v, %q; want exit status 2 before any hit", err, out.String())
	}
}

// TestCountRefused: a stop or a sleep takes no count; "p@3/stop-when=FILE"
// and "p@3/sleep=D" would never hit (no point is named "p@3"), so the
// process refuses them at its first hit of any point, exit status 2, the
// spec named, before a single hit of p.
func TestCountRefused(t *testing.T) {
	file := filepath.Join(t.TempDir(), "pause")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, fp := range []string{"p@3" + stopWhenSep + file, "p@3" + sleepSep + "10ms"} {
		cmd, out, done := helper(t, fp, 5)
		err := <-done
		if code := cmd.ProcessState.ExitCode(); err == nil || code != 2 {
			t.Errorf("%s: the helper: %v (exit status %d), want exit status 2", fp, err, code)
		}
		want := "failpoint: " + EnvVar + "=" + strconv.Quote(fp) + ": a stop (NAME/stop-when=FILE) or a sleep (NAME/sleep=DURATION) takes no count; only a kill does (NAME@N)\n"
		if got := out.String(); got != want {
			t.Errorf("%s: the helper printed %q, want %q", fp, got, want)
		}
	}
}

// TestUnlistedHitRefused: an armed process that hits a point missing from
// the list (which no spec could arm) stops there, exit status 2, naming
// it; unarmed, the same hit passes.
func TestUnlistedHitRefused(t *testing.T) {
	cmd, out, done := helper(t, "p@100", 5, 1)
	err := <-done
	if code := cmd.ProcessState.ExitCode(); err == nil || code != 2 {
		t.Errorf("the helper: %v (exit status %d), want exit status 2", err, code)
	}
	if want := "hit 1\nfailpoint: the point \"unlisted\" is hit but not listed in package failpoint\n"; out.String() != want {
		t.Errorf("the helper printed %q, want %q", out.String(), want)
	}
	cmd = exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=3", unlistedEnv+"=1", EnvVar+"=")
	got, err := cmd.CombinedOutput()
	if err != nil || string(got) != "hit 1\nhit 2\nhit 3\n" {
		t.Errorf("unarmed, the helper: %v, %q; want 3 hits and exit 0", err, got)
	}
}
