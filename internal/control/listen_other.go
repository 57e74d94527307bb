//go:build !unix

package control

import "net"

// listenPrivate listens on the Unix socket path. There is no umask
// here: the socket takes the access its directory gives.
func listenPrivate(path string) (net.Listener, error) { return net.Listen("unix", path) }
