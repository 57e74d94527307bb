//go:build unix

package main

import (
	"os"
	"syscall"
)

// fileLinks returns how many names (hard links) the file st describes
// has.
func fileLinks(st os.FileInfo) uint64 {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return uint64(s.Nlink)
	}
	return 1
}

// chownLike gives f the owner and group of the file st describes, where
// they differ (a file made in a set-group-id directory, another user's
// file): only root may give a file away, and a user a group of theirs.
func chownLike(f *os.File, st os.FileInfo) error {
	want, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	got, err := f.Stat()
	if err != nil {
		return err
	}
	if s, ok := got.Sys().(*syscall.Stat_t); ok && s.Uid == want.Uid && s.Gid == want.Gid {
		return nil
	}
	return f.Chown(int(want.Uid), int(want.Gid))
}
