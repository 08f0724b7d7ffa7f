package client

import (
	"context"
	"fmt"
	"io"
)

// Stream is the process's stdout or stderr, an io.Reader. One goroutine at
// a time may read it; reads are safe alongside every other call.
//
// Stdout is lossless: it ends with io.EOF exactly where the process's
// output ended, and reading it is what lets the process write more (the
// server holds at most one window unread). Stderr is best effort: bytes the
// server or the client had to drop for space are counted by Dropped, and it
// ends with io.EOF once the process has exited.
type Stream struct {
	p      *Process
	stderr bool
}

var _ io.Reader = (*Stream)(nil)

// Read reads like ReadContext without a deadline. While nothing else of
// the handle waits, a blocked Read reads the connection itself instead of
// waiting for the handle's read loop to hand it the data: one thread
// wake-up less per message, the latency of a request/response exchange.
// Such a Read, blocked when Destroy is called, returns ErrDestroyed once
// the next frame or the connection's end reaches it (the destroy's answer,
// or Destroy's bound), not at the call.
func (s *Stream) Read(b []byte) (int, error) {
	return s.ReadContext(context.Background(), b)
}

// ReadContext reads up to len(b) bytes, blocking until some are available,
// the stream ends (io.EOF) or ctx ends. Every byte the client holds is
// handed over before an error: after the stream's end (stdout's EOF, or
// stderr once the exit was received) it returns io.EOF, and after that no
// data; when the handle ended before the stream did it returns what ended
// it (ErrDestroyed once Destroy was called, ErrConnectionLost, ...).
func (s *Stream) ReadContext(ctx context.Context, b []byte) (int, error) {
	p := s.p
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		n, err, ev, ok := p.m.read(s.stderr, b)
		if ok {
			p.applyLocked(ev)
			p.leaveReadLocked(s)
			return n, err
		}
		if p.borrowLocked(ctx, s) {
			continue
		}
		k := waitOut
		if s.stderr {
			k = waitErr
		}
		var werr error
		if p.lender == s {
			werr = p.waitChangeLocked(ctx, k) // also for the socket, which the loop hands over with a broadcast
		} else {
			werr = p.waitLocked(ctx, k)
		}
		if werr != nil {
			p.leaveReadLocked(s)
			return 0, fmt.Errorf("procwire: read: %w", werr)
		}
	}
}

// Dropped returns how many stderr bytes were lost for space so far (always
// 0 for stdout).
func (s *Stream) Dropped() int64 {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	if s.stderr {
		return s.p.m.errDropped
	}
	return 0
}

// Received returns the offset after the last byte received from the
// server, read or not.
func (s *Stream) Received() int64 {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	if s.stderr {
		return s.p.m.errRecv
	}
	return s.p.m.outReceived()
}

// Stdin is the process's standard input, an io.WriteCloser. One goroutine
// at a time may write or close it; that is safe alongside every other call.
//
// A write returns once its bytes are held by the client, which keeps them
// until the server reports them received (so a lost connection loses none).
// It blocks while the server's stdin window is full, that is while the
// process does not read.
type Stdin struct {
	p *Process
}

var _ io.WriteCloser = (*Stdin)(nil)

// Write writes like WriteContext without a deadline.
func (s *Stdin) Write(b []byte) (int, error) {
	return s.WriteContext(context.Background(), b)
}

// WriteContext writes b, blocking while there is no credit. It returns
// early, with the count of bytes written, when ctx ends, on Destroy
// (ErrDestroyed), when the server refused a stdin write (a *RemoteError
// with operation write_stdin) or when the handle ended. Bytes written after
// the process exited are discarded by the server.
func (s *Stdin) WriteContext(ctx context.Context, b []byte) (int, error) {
	p := s.p
	p.mu.Lock()
	n := 0
	for n < len(b) {
		k, ev, err := p.m.write(b[n:])
		if err != nil {
			p.mu.Unlock()
			return n, err
		}
		n += k
		if ev&evSend != 0 && n < len(b) {
			// More to write: the writer sends this part meanwhile.
			p.applyLocked(ev)
		} else {
			p.applyLocked(ev &^ evSend)
		}
		if k == 0 {
			if err := p.waitLocked(ctx, waitIn); err != nil {
				p.mu.Unlock()
				return n, fmt.Errorf("procwire: write: %w", err)
			}
		}
	}
	p.mu.Unlock()
	p.flush(ctx) // the last part, from this goroutine if the writer is idle
	return n, nil
}

// Close closes like CloseContext without a deadline.
func (s *Stdin) Close() error {
	return s.CloseContext(context.Background())
}

// CloseContext half-closes stdin: after the last byte written, the process
// reads EOF. It returns once the close was handed to a connection (it is
// sent again after a resume if needed), or early when ctx ends, the server
// refused a stdin write or the handle ended. Closing again is harmless.
func (s *Stdin) CloseContext(ctx context.Context) error {
	p := s.p
	p.mu.Lock()
	defer p.mu.Unlock()
	p.applyLocked(p.m.closeStdin())
	for {
		done, err := p.m.stdinCloseDone()
		if done {
			return nil
		}
		if err != nil {
			return err
		}
		if err := p.waitLocked(ctx, waitIn); err != nil {
			return fmt.Errorf("procwire: close stdin: %w", err)
		}
	}
}
