//go:build !unix

package main

import "testing"

// mkfifo skips the test: this system has no named pipes in its file
// system.
func mkfifo(t *testing.T, path string) {
	t.Skip("no named pipes on this system")
}
