//go:build !unix

package failpoint

// stopSelf does nothing where there is no SIGSTOP: the tests that pause a
// process at a point run on Unix.
func stopSelf() {}
