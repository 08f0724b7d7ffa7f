//go:build unix

package coalesce

import (
	"net"
	"syscall"
)

// nonBlockingWriter returns a tryWriter for c when it is a socket whose
// descriptor Go's poller runs in non-blocking mode (a TCP or Unix
// connection), nil otherwise.
func nonBlockingWriter(c net.Conn) tryWriter {
	switch c.(type) {
	case *net.TCPConn, *net.UnixConn:
	default:
		return nil
	}
	rc, err := c.(syscall.Conn).SyscallConn()
	if err != nil {
		return nil
	}
	t := &sockTry{c: c, rc: rc}
	t.writeFd = t.write // bound once: a closure per call would escape
	return t.try
}

// sockTry is a socket's non-blocking write; its fields carry one call's
// argument and results through RawConn.Write's callback. The Coalescer's
// mutex serialises calls.
type sockTry struct {
	c       net.Conn
	rc      syscall.RawConn
	writeFd func(fd uintptr) bool // t.write
	b       []byte
	n       int
	err     error
}

func (t *sockTry) try(b []byte) (int, error) {
	t.b, t.n, t.err = b, 0, nil
	// RawConn.Write holds the descriptor's write lock around the callback
	// and, since it returns true, never waits.
	err := t.rc.Write(t.writeFd)
	if t.err == nil {
		t.err = err
	}
	n, err := t.n, t.err
	t.b, t.err = nil, nil
	return n, err
}

func (t *sockTry) write(fd uintptr) bool {
	for t.n < len(t.b) {
		k, e := syscall.Write(int(fd), t.b[t.n:])
		switch {
		case e == syscall.EINTR:
			continue
		case e == syscall.EAGAIN:
			return true
		case e != nil:
			t.err = &net.OpError{Op: "write", Net: t.c.RemoteAddr().Network(), Addr: t.c.RemoteAddr(), Err: e}
			return true
		}
		t.n += k
	}
	return true
}
