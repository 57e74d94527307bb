//go:build !unix

package runtime

import "os"

// unlinked is false where a file's stat does not count its names: a file
// deleted while open is told by its name's stat alone.
func unlinked(os.FileInfo) bool { return false }
