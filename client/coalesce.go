package client

import (
	"net"
	"sync"
)

// coalescer batches the writes of one WebSocket message into one write to
// the connection. coder/websocket masks a client's message through a 4 KiB
// bufio.Writer it does not let us size, and flushes it every 4 KiB: a
// 64 KiB stdin frame (87 KiB of NDJSON) would be 22 write syscalls. The
// write loop holds the coalescer around each ws.Write; what the library
// writes meanwhile is kept and written at release, in one syscall. Writes
// outside a hold (pings, pongs, close frames from other goroutines) go
// straight through. A nil *coalescer does nothing: the caller's own
// RoundTripper dialled the connection.
//
// The library serialises frames, so the bytes of two frames never
// interleave here; writes are ordered by mu.
//
// releaseNoWait lets a caller's goroutine send a message without ever
// blocking on the network: it writes what the socket takes now and keeps
// the rest as pending, which every later write sends first.
type coalescer struct {
	mu      sync.Mutex
	conn    net.Conn  // set when dialled; guarded by mu
	try     tryWriter // conn's non-blocking write, or nil; guarded by mu
	holding bool      // guarded by mu
	buf     []byte    // held bytes; guarded by mu
	pending []byte    // bytes of whole messages not yet written; guarded by mu
}

// tryWriter writes what a socket takes without waiting: n is what it
// took; an error is the socket's, never "would block".
type tryWriter func(b []byte) (n int, err error)

// coalescedConn is a net.Conn whose writes go through its coalescer.
type coalescedConn struct {
	net.Conn
	co *coalescer
}

// wrap returns c with its writes going through co.
func (co *coalescer) wrap(c net.Conn) net.Conn {
	co.mu.Lock()
	defer co.mu.Unlock()
	co.conn = c
	co.try = nonBlockingWriter(c)
	return &coalescedConn{Conn: c, co: co}
}

func (c *coalescedConn) Write(p []byte) (int, error) {
	co := c.co
	co.mu.Lock()
	defer co.mu.Unlock()
	if co.conn != c.Conn {
		return c.Conn.Write(p)
	}
	if co.holding {
		co.buf = append(co.buf, p...)
		return len(p), nil
	}
	if err := co.writePendingLocked(); err != nil {
		return 0, err
	}
	return c.Conn.Write(p)
}

// writePendingLocked writes the pending bytes, waiting as long as the
// connection does. co.mu must be held.
func (co *coalescer) writePendingLocked() error {
	if len(co.pending) == 0 {
		return nil
	}
	_, err := co.conn.Write(co.pending)
	co.pending = trim(co.pending)
	return err
}

// flushPending writes the pending bytes, waiting as long as the connection
// does.
func (co *coalescer) flushPending() error {
	if co == nil {
		return nil
	}
	co.mu.Lock()
	defer co.mu.Unlock()
	return co.writePendingLocked()
}

// canTry reports whether releaseNoWait can write: the connection is a
// socket of ours.
func (co *coalescer) canTry() bool {
	if co == nil {
		return false
	}
	co.mu.Lock()
	defer co.mu.Unlock()
	return co.try != nil
}

// trim empties b, dropping its array when it grew past maxKept.
func trim(b []byte) []byte {
	if cap(b) > maxKept {
		return nil
	}
	return b[:0]
}

// hold keeps what is written until release.
func (co *coalescer) hold() {
	if co == nil {
		return
	}
	co.mu.Lock()
	co.holding = true
	co.mu.Unlock()
}

// maxKept bounds the buffer kept between messages: one 64 KiB stdin frame
// encoded, with room to spare.
const maxKept = 128 << 10

// release writes what was held, in one write, and stops holding.
func (co *coalescer) release() error {
	if co == nil {
		return nil
	}
	co.mu.Lock()
	defer co.mu.Unlock()
	co.holding = false
	if len(co.buf) == 0 {
		return nil
	}
	if err := co.writePendingLocked(); err != nil {
		co.buf = trim(co.buf)
		return err
	}
	_, err := co.conn.Write(co.buf)
	co.buf = trim(co.buf)
	return err
}

// releaseNoWait stops holding and writes what was held as far as the
// socket takes it now; the rest becomes pending (after what already was),
// and written reports false: flushPending, or any later write, sends it.
// It must follow a hold on a coalescer that canTry.
func (co *coalescer) releaseNoWait() (written bool, err error) {
	co.mu.Lock()
	defer co.mu.Unlock()
	co.holding = false
	if len(co.pending) > 0 {
		co.pending = append(co.pending, co.buf...)
		co.buf = trim(co.buf)
		return false, nil
	}
	n, err := co.try(co.buf)
	if err == nil && n < len(co.buf) {
		co.pending = append(co.pending, co.buf[n:]...)
	}
	written = err == nil && n == len(co.buf)
	co.buf = trim(co.buf)
	return written, err
}
