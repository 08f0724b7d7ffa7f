// Package coalesce batches the writes of one WebSocket message into one
// write to its connection, and lets a goroutine that must not wait on the
// network send a message as far as the socket takes it now. The client
// and the server wrap their connections in it.
package coalesce

import (
	"net"
	"sync"
)

// Coalescer batches the writes of one WebSocket message into one write to
// the connection. coder/websocket writes a message through a 4 KiB
// bufio.Writer it does not let us size, and flushes it every 4 KiB: a
// 64 KiB stdin frame (87 KiB of NDJSON) would be 22 write syscalls. A
// writer holds the Coalescer around each ws.Write; what the library writes
// meanwhile is kept and written at Release, in one syscall. Writes outside
// a hold (pings, pongs, close frames from other goroutines) go straight
// through, after any pending bytes. A nil *Coalescer does nothing (the
// connection is not ours to wrap), and a zero one is ready to Wrap.
//
// The library serialises frames, so the bytes of two frames never
// interleave here; writes are ordered by mu.
//
// ReleaseNoWait lets a goroutine send a message without ever blocking on
// the network: it writes what the socket takes now and keeps the rest as
// pending, which every later write sends first.
type Coalescer struct {
	mu      sync.Mutex
	conn    net.Conn  // set when dialled; guarded by mu
	try     tryWriter // conn's non-blocking write, or nil; guarded by mu
	holding bool      // guarded by mu
	buf     *[]byte   // held bytes, from bufPool while held; guarded by mu
	pending []byte    // bytes of whole messages not yet written; guarded by mu
}

// tryWriter writes what a socket takes without waiting: n is what it
// took; an error is the socket's, never "would block".
type tryWriter func(b []byte) (n int, err error)

// WritesThrough is a net.Conn wrapper whose writes reach the connection
// it returns unchanged and in order (one that watches reads, or counts):
// a non-blocking write may go straight to that connection's socket. A
// wrapper that transforms what is written (TLS) must not implement it.
type WritesThrough interface {
	net.Conn
	WritesTo() net.Conn
}

// beneath returns the connection c's writes reach unchanged: c, or what
// its WritesThrough wrappers wrap.
func beneath(c net.Conn) net.Conn {
	for {
		w, ok := c.(WritesThrough)
		if !ok {
			return c
		}
		c = w.WritesTo()
	}
}

// coalescedConn is a net.Conn whose writes go through its Coalescer.
type coalescedConn struct {
	net.Conn
	co *Coalescer
}

// Wrap returns c with its writes going through co.
func (co *Coalescer) Wrap(c net.Conn) net.Conn {
	co.mu.Lock()
	defer co.mu.Unlock()
	co.conn = c
	co.try = nonBlockingWriter(beneath(c))
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
		*co.buf = append(*co.buf, p...)
		return len(p), nil
	}
	if err := co.writePendingLocked(); err != nil {
		return 0, err
	}
	return c.Conn.Write(p)
}

// writePendingLocked writes the pending bytes, waiting as long as the
// connection does. co.mu must be held.
func (co *Coalescer) writePendingLocked() error {
	if len(co.pending) == 0 {
		return nil
	}
	_, err := co.conn.Write(co.pending)
	co.pending = nil // a stall is rare: hold no second buffer after it
	return err
}

// FlushPending writes the pending bytes, waiting as long as the connection
// does.
func (co *Coalescer) FlushPending() error {
	if co == nil {
		return nil
	}
	co.mu.Lock()
	defer co.mu.Unlock()
	return co.writePendingLocked()
}

// CanTry reports whether ReleaseNoWait can write: the connection is a
// socket whose descriptor runs non-blocking.
func (co *Coalescer) CanTry() bool {
	if co == nil {
		return false
	}
	co.mu.Lock()
	defer co.mu.Unlock()
	return co.try != nil
}

// bufPool holds the buffers of holds between messages, shared by every
// connection, so that an idle connection holds none: memory follows the
// messages in flight, not the connections.
var bufPool = sync.Pool{New: func() any { return new([]byte) }}

// maxKept bounds a buffer returned to the pool: one 64 KiB frame encoded,
// with room to spare.
const maxKept = 128 << 10

// putBuf empties the held buffer and returns it to the pool.
func (co *Coalescer) putBuf() {
	if b := co.buf; b != nil && cap(*b) <= maxKept {
		*b = (*b)[:0]
		bufPool.Put(b)
	}
	co.buf = nil
}

// Hold keeps what is written until Release or ReleaseNoWait.
func (co *Coalescer) Hold() {
	if co == nil {
		return
	}
	co.mu.Lock()
	co.holding = true
	if co.buf == nil {
		co.buf = bufPool.Get().(*[]byte)
	}
	co.mu.Unlock()
}

// Release writes what was pending and what was held, waiting as long as
// the connection does, and stops holding.
func (co *Coalescer) Release() error {
	if co == nil {
		return nil
	}
	co.mu.Lock()
	defer co.mu.Unlock()
	co.holding = false
	defer co.putBuf()
	if len(*co.buf) == 0 {
		return nil
	}
	if err := co.writePendingLocked(); err != nil {
		return err
	}
	_, err := co.conn.Write(*co.buf)
	return err
}

// ReleaseNoWait stops holding and writes what was held as far as the
// socket takes it now; the rest becomes pending (after what already was),
// and written reports false: FlushPending, or any later write, sends it.
// It must follow a Hold on a Coalescer that CanTry.
func (co *Coalescer) ReleaseNoWait() (written bool, err error) {
	co.mu.Lock()
	defer co.mu.Unlock()
	co.holding = false
	b := *co.buf
	if len(co.pending) > 0 {
		co.pending = append(co.pending, b...)
		co.putBuf()
		return false, nil
	}
	n, err := co.try(b)
	if err == nil && n < len(b) {
		// The rest becomes pending where it lies, without a copy; the
		// next hold takes another buffer.
		co.pending, co.buf = b[n:], nil
		return false, nil
	}
	co.putBuf()
	return err == nil, err
}
