package main

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

// TestBacktestUnwrittenFIFOEnds: an output FIFO the backtest writes
// nothing to gives its waiting reader an end of file when the backtest
// ends: -alerts FIFO of a run that fails before its first alert (a
// missing lookup file), and -late FIFO of a run without late events.
// The reader (cat FIFO) waited for ever: the alerts FIFO, opened at the
// start before the alerts file was made at the first alert, was never
// opened.
func TestBacktestUnwrittenFIFOEnds(t *testing.T) {
	dir := t.TempDir()
	events := writeFile(t, dir, "e.jsonl", abEvents(10, 0, ""))
	for _, c := range []struct {
		name string
		flag string
		args []string
		code int
	}{
		{"alerts of a run failed before its first alert", "-alerts",
			[]string{"-rules", "../../rulesets/cards.cep", "-lookup", "customer=file:" + filepath.Join(dir, "missing.jsonl")}, 1},
		{"late of a run without late events", "-late",
			[]string{"-rules", writeFile(t, dir, "r.cep", goodSrc), "-alerts", os.DevNull}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			fifo := filepath.Join(t.TempDir(), "out.fifo")
			mkfifo(t, fifo)
			reader := exec.Command("cat", fifo)
			var out bytes.Buffer
			reader.Stdout = &out
			if err := reader.Start(); err != nil {
				t.Fatal(err)
			}
			ended := make(chan error, 1)
			go func() { ended <- reader.Wait() }()
			// The reader waits in its open of the FIFO for a writer.
			wchan := "/proc/" + strconv.Itoa(reader.Process.Pid) + "/wchan"
			for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
				if b, _ := os.ReadFile(wchan); strings.TrimSpace(string(b)) == "wait_for_partner" {
					break
				}
				if time.Now().After(deadline) {
					reader.Process.Kill()
					t.Fatal("cat did not wait on the FIFO within 20 s")
				}
			}
			args := append([]string{"backtest", "-events", events, "-time-unit", "ms", c.flag, fifo}, c.args...)
			if code, _, stderr := cepheus(t, args...); code != c.code {
				t.Errorf("exit %d, want %d\n%s", code, c.code, stderr)
			}
			select {
			case err := <-ended:
				if err != nil || out.Len() != 0 {
					t.Errorf("the reader: %v, read %q, want an empty end", err, out.String())
				}
			case <-time.After(20 * time.Second):
				// Release the reader before failing.
				if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
					w.Close()
				}
				<-ended
				t.Errorf("%s FIFO: its reader still waited 20 s after the backtest ended", c.flag)
			}
		})
	}
}
