//go:build unix && !linux

package failpoint

import "syscall"

// stopSelf stops the process as SIGSTOP from outside would; it goes on
// from here on SIGCONT.
func stopSelf() { _ = syscall.Kill(syscall.Getpid(), syscall.SIGSTOP) }
