//go:build !linux

package server

import (
	"net"
	"runtime"
)

// peerUID cannot tell a peer's user on this system.
func peerUID(net.Conn) (uint32, error) {
	return 0, peerUIDError("not supported on %s", runtime.GOOS)
}
