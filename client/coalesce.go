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
type coalescer struct {
	mu      sync.Mutex
	conn    net.Conn // set when dialled; guarded by mu
	holding bool     // guarded by mu
	buf     []byte   // held bytes; guarded by mu
}

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
	return &coalescedConn{Conn: c, co: co}
}

func (c *coalescedConn) Write(p []byte) (int, error) {
	co := c.co
	co.mu.Lock()
	defer co.mu.Unlock()
	if co.holding && co.conn == c.Conn {
		co.buf = append(co.buf, p...)
		return len(p), nil
	}
	return c.Conn.Write(p)
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
	_, err := co.conn.Write(co.buf)
	co.buf = co.buf[:0]
	if cap(co.buf) > maxKept {
		co.buf = nil
	}
	return err
}
