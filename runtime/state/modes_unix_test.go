//go:build unix

package state

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestStateDirModes: the state directory and the directories made in it
// are 0700, whatever the umask allows (0 here; not parallel: the umask is
// the process's), so that the files in them (events, with their customer
// data, in the stores and the meta files) are the owner's alone. They were
// 0755 less the umask.
func TestStateDirModes(t *testing.T) {
	root := t.TempDir()
	old := syscall.Umask(0)
	run, err := LockRun(filepath.Join(root, "run", "state"))
	if err != nil {
		syscall.Umask(old)
		t.Fatal(err)
	}
	run.Close()
	d, err := OpenCheckpointDir(filepath.Join(root, "state"))
	if err != nil {
		syscall.Umask(old)
		t.Fatal(err)
	}
	m := NewMem()
	must(t, m.Put(Key{Operator: testOps[1], Key: "card-1"}, []byte("4111111111111111")))
	w, err := d.Begin(1)
	if err == nil {
		err = w.AddMem("subtask-0", m.Snapshot())
	}
	if err == nil {
		err = w.Commit()
	}
	syscall.Umask(old)
	d.Close()
	must(t, err)
	for _, dir := range []string{"run", "run/state", "state", "state/chk-1", "state/chk-1/state", "state/chk-1/meta"} {
		st, err := os.Stat(filepath.Join(root, dir))
		must(t, err)
		if got := st.Mode().Perm(); got != 0o700 {
			t.Errorf("%s: mode %04o, want 0700", dir, got)
		}
	}
}

// links is the number of hard links to the file of fi.
func links(fi os.FileInfo) (n uint64, ok bool) {
	return uint64(fi.Sys().(*syscall.Stat_t).Nlink), true
}
