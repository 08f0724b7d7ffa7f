//go:build !unix

package server

import (
	"fmt"
	"io/fs"
	"net"
	"runtime"
)

// ListenUnix is not supported on this system.
func ListenUnix(path string, _ fs.FileMode) (net.Listener, error) {
	return nil, fmt.Errorf("server: listen %s: Unix sockets are not supported on %s", path, runtime.GOOS)
}
