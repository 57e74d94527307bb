//go:build unix

package runtime

import (
	"os"
	"syscall"
)

// unlinked reports whether fi, the stat of an open file, says that the
// file has no name left: it was deleted while open.
func unlinked(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Nlink == 0
}
