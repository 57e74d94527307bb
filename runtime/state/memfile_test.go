package state

import (
	"errors"
	iofs "io/fs"
	"strings"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// fullFS is a file system whose files fail every write as a full disk
// does (a *fs.PathError naming the file).
type fullFS struct{ vfs.FS }

func (f fullFS) Create(name string, cat vfs.DiskWriteCategory) (vfs.File, error) {
	file, err := f.FS.Create(name, cat)
	return fullFile{file, name}, err
}

type fullFile struct {
	vfs.File
	name string
}

func (f fullFile) Write([]byte) (int, error) {
	return 0, &iofs.PathError{Op: "write", Path: f.name, Err: syscall.ENOSPC}
}

// TestWriteMemFileFull: a table written on a full disk fails with the
// cause and the file's path once (it said "write P: write P: no space
// left on device", the fs trial).
func TestWriteMemFileFull(t *testing.T) {
	err := writeMemFile(fullFS{vfs.NewMem()}, "sub-0.mem", &MemSnapshot{recs: map[string][]byte{"k": []byte("v")}})
	if err == nil || !errors.Is(err, syscall.ENOSPC) || strings.Count(err.Error(), "sub-0.mem") != 1 {
		t.Errorf("writeMemFile on a full disk: %v; want ENOSPC with the path once", err)
	}
}
