//go:build !unix

package state

import "os"

// links says the number of hard links to the file of fi is not known
// here.
func links(fi os.FileInfo) (n uint64, ok bool) { return 0, false }
