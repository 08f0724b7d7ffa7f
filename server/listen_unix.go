//go:build unix

package server

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"syscall"
)

// ListenUnix listens on a Unix socket at path whose file has mode perm
// from the start (it is set between bind and listen, so no connection is
// accepted before): 0600 lets only this user (and root) connect. A
// socket file left at path by a server that is gone (nothing answers on
// it) is removed first; any other file there is an error. Closing the
// listener removes the socket file.
func ListenUnix(path string, perm fs.FileMode) (net.Listener, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != fs.ModeSocket {
			return nil, fmt.Errorf("server: listen %s: a file that is not a socket is there", path)
		}
		if c, err := net.Dial("unix", path); err == nil {
			c.Close()
			return nil, fmt.Errorf("server: listen %s: %w", path, syscall.EADDRINUSE)
		} else if !errors.Is(err, syscall.ECONNREFUSED) {
			return nil, fmt.Errorf("server: listen %s: %w", path, err)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("server: listen %s: %w", path, err)
		}
	}
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		return nil, fmt.Errorf("server: listen %s: %w", path, err)
	}
	syscall.CloseOnExec(fd)
	f := os.NewFile(uintptr(fd), path)
	defer f.Close() // FileListener dups it
	if err := syscall.Bind(fd, &syscall.SockaddrUnix{Name: path}); err != nil {
		return nil, fmt.Errorf("server: listen %s: %w", path, err)
	}
	if err := os.Chmod(path, perm); err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("server: listen %s: %w", path, err)
	}
	if err := syscall.Listen(fd, syscall.SOMAXCONN); err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("server: listen %s: %w", path, err)
	}
	ln, err := net.FileListener(f)
	if err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("server: listen %s: %w", path, err)
	}
	return &unixListener{Listener: ln, path: path}, nil
}

// unixListener removes its socket file when closed.
type unixListener struct {
	net.Listener
	path string
}

func (l *unixListener) Close() error {
	err := l.Listener.Close()
	if rerr := os.Remove(l.path); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
		err = errors.Join(err, rerr)
	}
	return err
}
