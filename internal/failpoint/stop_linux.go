//go:build linux

package failpoint

import (
	goruntime "runtime"
	"syscall"
)

// stopSelf stops the process as SIGSTOP from outside would; it goes on
// from here on SIGCONT. The signal goes to the calling thread itself
// (tgkill), which the kernel stops on its way back from the call, before
// it runs on: sent to the process (kill), the signal may be taken by
// another thread while this one runs on for a moment, past the point (a
// checkpoint's timeout, started just after it, then counted the pause).
func stopSelf() {
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	_ = syscall.Tgkill(syscall.Getpid(), syscall.Gettid(), syscall.SIGSTOP)
}
