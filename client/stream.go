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

// Read reads like ReadContext without a deadline.
func (s *Stream) Read(b []byte) (int, error) {
	return s.ReadContext(context.Background(), b)
}

// ReadContext reads up to len(b) bytes, blocking until some are available,
// the stream ends (io.EOF) or ctx ends. Once Destroy was called it returns
// ErrDestroyed. When the handle ended otherwise (connection lost, protocol
// error) it returns that error, unless the stream was complete: stdout's
// EOF, or stderr's exit, was received before.
func (s *Stream) ReadContext(ctx context.Context, b []byte) (int, error) {
	p := s.p
	p.mu.Lock()
	defer p.mu.Unlock()
	q := &p.outBuf
	if s.stderr {
		q = &p.errBuf
	}
	for {
		// A complete stream reads to its end whatever happens next.
		complete := p.outEOFOK
		if s.stderr {
			complete = p.exit != nil
		}
		switch {
		case p.destroyReq:
			return 0, ErrDestroyed
		case p.err != nil && !complete:
			return 0, p.err // what is held is not trusted any more
		case !q.empty() && len(b) > 0:
			n := copy(b, q.from(q.start, len(b)))
			q.discard(q.start + int64(n))
			if !s.stderr {
				p.outRecv.Consume(int64(n))
				if _, ok := p.outRecv.Grant(); ok {
					p.ackTo = p.outRecv.Consumed()
					p.kickLocked()
				}
			}
			return n, nil
		case complete && q.empty():
			return 0, io.EOF
		case len(b) == 0:
			return 0, nil
		}
		if err := p.waitLocked(ctx); err != nil {
			return 0, fmt.Errorf("procwire: read: %w", err)
		}
	}
}

// Dropped returns how many stderr bytes were lost for space so far (always
// 0 for stdout).
func (s *Stream) Dropped() int64 {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	if s.stderr {
		return s.p.errDropped
	}
	return 0
}

// Received returns the offset after the last byte received from the
// server, read or not.
func (s *Stream) Received() int64 {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	if s.stderr {
		return s.p.errRecv
	}
	return s.p.outRecv.Received()
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
// (ErrDestroyed) or when the handle ended. Bytes written after the process
// exited are discarded by the server.
func (s *Stdin) WriteContext(ctx context.Context, b []byte) (int, error) {
	p := s.p
	n := 0
	for n < len(b) {
		if err := s.usable(); err != nil {
			return n, err
		}
		k, err := p.stdinWin.Reserve(ctx, int64(len(b)-n))
		if err != nil {
			return n, fmt.Errorf("procwire: write: %w", err)
		}
		p.mu.Lock()
		if err := p.usableLocked(); err != nil {
			p.mu.Unlock()
			return n, err
		}
		if p.inClosed {
			p.mu.Unlock()
			return n, ErrStdinClosed
		}
		p.inBuf.push(b[n : n+int(k)])
		p.kickLocked()
		p.mu.Unlock()
		n += int(k)
	}
	return n, nil
}

// usable returns the error a write must fail with, if any.
func (s *Stdin) usable() error {
	p := s.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.inClosed {
		return ErrStdinClosed
	}
	if p.stdinWin.Available() == 0 {
		p.blockingLocked()
	}
	return p.usableLocked()
}

// Close closes like CloseContext without a deadline.
func (s *Stdin) Close() error {
	return s.CloseContext(context.Background())
}

// CloseContext half-closes stdin: after the last byte written, the process
// reads EOF. It returns once the close was handed to a connection (it is
// sent again after a resume if needed), or early when ctx ends or the handle
// ended. Closing again is harmless.
func (s *Stdin) CloseContext(ctx context.Context) error {
	p := s.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.inClosed {
		p.inClosed = true
		p.kickLocked()
	}
	for !p.closeSent {
		if err := p.usableLocked(); err != nil {
			return err
		}
		if err := p.waitLocked(ctx); err != nil {
			return fmt.Errorf("procwire: close stdin: %w", err)
		}
	}
	return nil
}
