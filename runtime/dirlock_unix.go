//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package runtime

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// errDirLocked is the error of lockDir when another open of the
// directory (another process, or this one) holds its lock.
var errDirLocked = errors.New("locked")

// lockDir takes an exclusive flock(2) of the directory dir itself, held
// until the returned Closer closes it (or the process dies): nothing is
// made in dir. A flock belongs to the open file, so a second lockDir of
// the same directory fails in this process too.
func lockDir(dir string) (io.Closer, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, errDirLocked
		}
		return nil, &os.PathError{Op: "flock", Path: dir, Err: err}
	}
	return f, nil
}

// checkWritable fails when dir cannot take new names: a read-only file
// system, or (for a user other than root) a directory without write and
// search permission. access(2) makes nothing in dir.
func checkWritable(dir string) error {
	if err := syscall.Access(dir, 0x2|0x1); err != nil { // W_OK | X_OK
		return fmt.Errorf("%s is not writable: %w", dir, err)
	}
	return nil
}
