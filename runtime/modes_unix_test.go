//go:build unix

package runtime

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// withUmask runs f with the process's umask set to mask (not in parallel
// with other tests: the umask is the process's).
func withUmask(mask int, f func()) {
	old := syscall.Umask(mask)
	defer syscall.Umask(old)
	f()
}

// TestOutputModes: the directories the outputs create are 0700 and their
// files 0600, whatever the umask allows (an umask of 0 here): alerts, late
// events and dead letters hold customer data. They were 0755 and 0644
// (0666 for a dead letters file), less the umask: readable by every user.
func TestOutputModes(t *testing.T) {
	dir := t.TempDir()
	withUmask(0, func() {
		lock, err := LockOutputDir(filepath.Join(dir, "locked", "out"))
		if err != nil {
			t.Fatal(err)
		}
		lock.Close()
		s := newRecovered(t, filepath.Join(dir, "alerts"), "alerts", 0, PendingState{})
		mustWrite(t, s, 0, 3)
		if _, err := s.PreCommit(1); err != nil {
			t.Fatal(err)
		}
		if err := s.Commit(1); err != nil {
			t.Fatal(err)
		}
		w, err := CreateDeadLetterFile(filepath.Join(dir, "dead.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		w.Close()
	})
	for path, want := range map[string]os.FileMode{
		"locked/out":              0o700,
		"locked":                  0o700,
		"alerts":                  0o700,
		"alerts/alerts-0-1.jsonl": 0o600,
		"dead.jsonl":              0o600,
	} {
		st, err := os.Stat(filepath.Join(dir, path))
		if err != nil {
			t.Fatal(err)
		}
		if got := st.Mode().Perm(); got != want {
			t.Errorf("%s: mode %04o, want %04o", path, got, want)
		}
	}
}
