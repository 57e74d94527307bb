//go:build unix

package control

import (
	"net"
	"syscall"
)

// listenPrivate listens on the Unix socket path, mode 0600 from its
// creation: a chmod after Listen would leave a moment in which anyone
// could connect and keep the connection. The umask is the process's,
// narrowed for an instant: a file another goroutine creates meanwhile is
// 0600 at most, and a directory loses its search bit (unusable), so call
// this before the goroutines that create files start (serve does).
func listenPrivate(path string) (net.Listener, error) {
	old := syscall.Umask(0o177)
	ln, err := net.Listen("unix", path)
	syscall.Umask(old)
	return ln, err
}
