package client

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/coder/websocket"
	"github.com/procwire/procwire/frames"
)

// errStop ends a connection whose process is destroyed.
var errStop = errors.New("procwire: process destroyed")

// autoDestroyTimeout bounds the destroy the client makes on its own after
// the server broke the protocol.
const autoDestroyTimeout = 10 * time.Second

// supervise serves connections, c first, and reconnects after each loss
// until the handle ends. It owns every goroutine of the handle.
func (p *Process) supervise(c *conn) {
	defer close(p.superDone)
	for c != nil {
		err := p.runConn(c)
		lost := time.Now()
		p.mu.Lock()
		ended := p.err != nil || p.closedForGoodLocked(err)
		p.mu.Unlock()
		if ended {
			break
		}
		p.log.Info("connection lost, resuming", "err", err)
		c = p.reconnect(lost)
	}
	p.autoDestroy()
}

// closedForGoodLocked ends the handle and reports true when err says the
// server closed the connection in a way that makes resuming pointless.
func (p *Process) closedForGoodLocked(err error) bool {
	fin := finalClose(err)
	if fin == nil {
		return false
	}
	p.endLocked(fin)
	switch websocket.CloseStatus(err) {
	case websocket.StatusGoingAway:
		// A server shutting down destroys every process (PROTOCOL.md
		// §4.7): nothing is left to destroy.
		p.settleDestroyLocked(nil)
	case 4001:
		p.abandoned = true // another client holds it now
	}
	return true
}

// finalClose returns the error that ends the handle when the server closed
// the connection in a way that makes resuming pointless, or nil.
func finalClose(err error) error {
	switch code := websocket.CloseStatus(err); code {
	case 4001:
		return fmt.Errorf("%w: the process was resumed on another connection", ErrConnectionLost)
	case websocket.StatusGoingAway:
		return fmt.Errorf("%w: the server is shutting down", ErrConnectionLost)
	case websocket.StatusProtocolError, websocket.StatusUnsupportedData, websocket.StatusInvalidFramePayloadData,
		websocket.StatusPolicyViolation, websocket.StatusMessageTooBig:
		return fmt.Errorf("%w: the server refused the connection: %v", ErrConnectionLost, err)
	}
	return nil
}

// runConn serves c until it fails or its process ends, then closes it.
func (p *Process) runConn(c *conn) error {
	ctx, cancel := context.WithCancel(context.Background())
	n := 2
	errc := make(chan error, 3)
	go func() { errc <- p.readLoop(c) }()
	go func() { errc <- p.writeLoop(ctx, c) }()
	if p.heartbeat > 0 {
		n++
		go func() { errc <- c.pingLoop(ctx, p.heartbeat) }()
	}
	err := <-errc
	cancel()
	c.close()
	for range n - 1 {
		// The close code the reader saw decides what the loss means, also
		// when the writer, failing on the same close, reported first.
		if e := <-errc; websocket.CloseStatus(err) == -1 && websocket.CloseStatus(e) != -1 {
			err = e
		}
	}
	p.mu.Lock()
	if p.conn == c {
		p.conn = nil
	}
	p.mu.Unlock()
	return err
}

// readLoop handles the frames of c. A frame that breaks the protocol ends
// the handle. runConn ends it by closing the connection, so reads take no
// context (one with a Done channel would cost an allocation per frame).
func (p *Process) readLoop(c *conn) error {
	for {
		f, err := c.read(context.Background())
		if err == nil {
			p.mu.Lock()
			err = p.handleLocked(c, f)
			if err != nil && err != errStop {
				p.endLocked(err)
			}
			if p.testHookFrame != nil {
				p.testHookFrame()
			}
			p.mu.Unlock()
		} else if isFinal(err) {
			p.mu.Lock()
			p.endLocked(err)
			p.mu.Unlock()
		}
		if err != nil {
			return err
		}
	}
}

// isFinal reports whether err ends the handle rather than the connection.
func isFinal(err error) bool {
	var pe *ProtocolError
	var re *RemoteError
	return errors.As(err, &pe) || errors.As(err, &re)
}

// handleLocked applies one frame from the server.
func (p *Process) handleLocked(c *conn, f frames.Frame) error {
	switch f := f.(type) {
	case *frames.Stdout:
		switch {
		case len(f.Data) > p.maxData:
			return protocolErrorf("stdout.data", "%d bytes, max_data is %d", len(f.Data), p.maxData)
		case p.outEOFOK:
			return protocolErrorf("stdout.off", "stdout at %d after stdout_eof at %d", f.Off, p.outEOF)
		case f.Off != p.outRecv.Received():
			return protocolErrorf("stdout.off", "offset %d, expected %d", f.Off, p.outRecv.Received())
		}
		if err := p.outRecv.Receive(int64(len(f.Data))); err != nil {
			return protocolErrorf("stdout.data", "%v", err)
		}
		p.outBuf.push(f.Data)
		p.broadcastLocked()
	case *frames.StdoutEOF:
		if f.Off != p.outRecv.Received() {
			return protocolErrorf("stdout_eof.off", "offset %d, expected %d", f.Off, p.outRecv.Received())
		}
		p.outEOF, p.outEOFOK = f.Off, true
		p.broadcastLocked()
	case *frames.Stderr:
		if len(f.Data) > p.maxData {
			return protocolErrorf("stderr.data", "%d bytes, max_data is %d", len(f.Data), p.maxData)
		}
		p.stderrLocked(f.Off, f.Data)
	case *frames.Exit:
		return p.exitLocked(f)
	case *frames.Credit:
		return p.creditLocked(c, f.StdinReceived, f.StdinLimit)
	case *frames.Signaled:
		for i, s := range p.signals {
			if s.id == f.ID {
				s.result <- f.Result
				p.signals = append(p.signals[:i], p.signals[i+1:]...)
				break
			}
		}
		// An answer nobody waits for any more is dropped.
	case *frames.Destroyed:
		if f.ProcessID != p.id {
			return protocolErrorf("destroyed.process_id", "%q, expected %q", f.ProcessID, p.id)
		}
		p.settleDestroyLocked(nil)
		return errStop
	case *frames.Error:
		return &RemoteError{Frame: *f}
	default:
		return protocolErrorf(f.Type().String(), "unexpected %s frame in a session", f.Type())
	}
	return nil
}

func (p *Process) exitLocked(f *frames.Exit) error {
	if p.err != nil {
		return nil // the handle has settled without it
	}
	s := ExitStatus{Code: f.Code, Signal: f.Signal}
	if p.exit == nil {
		p.exit = &s
		p.broadcastLocked()
		return nil
	}
	if *p.exit != s {
		return protocolErrorf("exit", "%v after %v", s, *p.exit)
	}
	return nil
}

// stderrLocked keeps the bytes of a stderr frame that are new, dropping the
// oldest held bytes beyond the bound.
func (p *Process) stderrLocked(off int64, data []byte) {
	end := off + int64(len(data))
	if end <= p.errRecv {
		return // held already
	}
	if off < p.errRecv {
		data = data[p.errRecv-off:]
		off = p.errRecv
	}
	p.errDropped += off - p.errRecv // the server's ring overflowed
	p.errRecv = end
	if over := len(data) - p.errCap; over > 0 {
		data = data[over:]
		p.errDropped += int64(over)
	}
	if over := p.errBuf.len() + len(data) - p.errCap; over > 0 {
		p.errBuf.discard(p.errBuf.start + int64(over))
		p.errDropped += int64(over)
	}
	p.errBuf.push(data)
	p.broadcastLocked()
}

// creditLocked applies the server's stdin accounting: bytes it holds need
// no re-sending, and the limit may have grown.
func (p *Process) creditLocked(c *conn, received, limit int64) error {
	if received > c.stdinSent {
		return protocolErrorf("credit.stdin_received", "%d, but %d bytes were sent", received, c.stdinSent)
	}
	if err := p.checkStdinLimit("credit.stdin_limit", received, limit); err != nil {
		return err
	}
	if received > p.inBuf.start {
		p.inBuf.discard(received)
	}
	if _, err := p.stdinWin.Update(limit); err != nil {
		return protocolErrorf("credit.stdin_limit", "%v", err)
	}
	return nil
}

// checkStdinLimit refuses a stdin limit more than one window (the first
// stdin_limit) beyond what the server received: the client would have to
// hold more than a window for re-sending.
func (p *Process) checkStdinLimit(field string, received, limit int64) error {
	if limit-received > p.stdinWindow {
		return protocolErrorf(field, "%d is more than the %d-byte window beyond the %d bytes received",
			limit, p.stdinWindow, received)
	}
	return nil
}

// writeLoop sends what nextFrameLocked finds to send, whenever woken.
func (p *Process) writeLoop(ctx context.Context, c *conn) error {
	for {
		select {
		case <-c.wake:
		case <-ctx.Done():
			return nil
		}
		for {
			p.mu.Lock()
			c.wbuf = p.nextFrameLocked(c, c.wbuf[:0])
			p.mu.Unlock()
			if len(c.wbuf) == 0 {
				break
			}
			// Closing the connection ends a blocked write (see readLoop).
			if err := c.ws.Write(context.Background(), websocket.MessageText, c.wbuf); err != nil {
				return fmt.Errorf("write: %w", err)
			}
		}
	}
}

// nextFrameLocked appends to dst the next frame c has to send, if any, and
// records it as sent. Destroy comes first and alone, then acks (they keep
// stdout flowing), signals, stdin and its close.
func (p *Process) nextFrameLocked(c *conn, dst []byte) []byte {
	f := &c.out // reused: a fresh frame per call would escape to the heap
	if p.destroyReq {
		if c.destroySent {
			return dst
		}
		c.destroySent = true
		return frames.Append(dst, &f.destroy)
	}
	if p.ackTo > c.ackSent {
		c.ackSent = p.ackTo
		f.ack.Stdout = p.ackTo
		return frames.Append(dst, &f.ack)
	}
	for _, s := range p.signals {
		if s.id > c.sigSent {
			c.sigSent = s.id
			f.signal = frames.Signal{ID: s.id, Signal: s.sig}
			return frames.Append(dst, &f.signal)
		}
	}
	if c.stdinSent < p.inBuf.end() {
		f.stdin.Off, f.stdin.Data = c.stdinSent, p.inBuf.from(c.stdinSent, p.maxData)
		dst = frames.Append(dst, &f.stdin)
		c.stdinSent += int64(len(f.stdin.Data))
		p.inSent = max(p.inSent, c.stdinSent)
		f.stdin.Data = nil
		return dst
	}
	if p.inClosed && !c.closeSent {
		c.closeSent = true
		if !p.closeSent {
			p.closeSent = true
			p.broadcastLocked()
		}
		f.stdinClose.Off = p.inBuf.end()
		return frames.Append(dst, &f.stdinClose)
	}
	return dst
}

// pingLoop checks that the server answers pings within the heartbeat.
func (c *conn) pingLoop(ctx context.Context, every time.Duration) error {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, every)
		err := c.ws.Ping(pctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("heartbeat: %w", err)
		}
	}
}

// reconnect resumes the process on a new connection, retrying with backoff
// within the grace measured from lost. It returns nil when the handle ended
// instead.
func (p *Process) reconnect(lost time.Time) *conn {
	ctx, cancel := context.WithDeadline(context.Background(), lost.Add(p.grace))
	defer cancel()
	b := p.newBackoff()
	var last error
	for attempt := 1; ; attempt++ {
		c, err := p.reattach(ctx)
		switch {
		case err == nil:
			p.log.Info("resumed", "attempt", attempt, "after", time.Since(lost))
			return c
		case errors.Is(err, errStop):
			return nil
		case isFinal(err):
			p.mu.Lock()
			p.endLocked(err)
			p.mu.Unlock()
			return nil
		}
		p.mu.Lock()
		// A resume closed with such a code would be refused again.
		ended := p.closedForGoodLocked(err)
		p.mu.Unlock()
		if ended {
			return nil
		}
		last = err
		p.log.Debug("reconnect failed", "attempt", attempt, "err", err)
		if !b.wait(ctx, p.redial) {
			p.mu.Lock()
			p.endLocked(fmt.Errorf("%w: no resume within the %v grace: %v", ErrConnectionLost, p.grace, last))
			p.abandoned = true // the server expires it, if it is there at all
			p.mu.Unlock()
			return nil
		}
	}
}

// reattach dials and resumes, or destroys if a Destroy is pending (then
// returning errStop on success).
func (p *Process) reattach(ctx context.Context) (*conn, error) {
	ws, err := p.dial(ctx)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	destroy := p.destroyReq
	resume := &frames.Resume{
		ProcessID:      p.id,
		Token:          p.token,
		StdoutReceived: p.outRecv.Received(),
		StderrReceived: p.errRecv,
	}
	p.mu.Unlock()
	if destroy {
		err := p.destroyVia(ctx, ws)
		ws.close()
		if err == nil {
			return nil, errStop
		}
		return nil, err
	}
	f, err := ws.exchange(ctx, resume)
	if err == nil {
		r, ok := f.(*frames.Resumed)
		if !ok {
			err = protocolErrorf(f.Type().String(), "unexpected answer to resume")
		} else if err = checkResumed(r, p.id, &p.evidence); err == nil {
			p.mu.Lock()
			defer p.mu.Unlock()
			return p.attachLocked(ws, r)
		}
	}
	ws.close()
	return nil, err
}

// attachLocked makes ws the attached connection after resumed r.
func (p *Process) attachLocked(ws *wsConn, r *frames.Resumed) (*conn, error) {
	// The server cannot hold bytes never sent, though they may be written
	// by now: taking its word would skip them.
	if r.StdinReceived < p.inBuf.start || r.StdinReceived > p.inSent {
		ws.close()
		return nil, protocolErrorf("resumed.stdin_received", "%d outside the %d..%d the client holds and sent",
			r.StdinReceived, p.inBuf.start, p.inSent)
	}
	if err := p.checkStdinLimit("resumed.stdin_limit", r.StdinReceived, r.StdinLimit); err != nil {
		ws.close()
		return nil, err
	}
	p.inBuf.discard(r.StdinReceived)
	p.stdinWin.Update(r.StdinLimit) // a limit that moves backwards is ignored
	c := newConn(ws)
	c.stdinSent = r.StdinReceived
	p.conn = c
	c.kick()
	return c, nil
}

// destroyVia destroys the process as the first frame of ws and settles
// the destroy with the answer.
func (p *Process) destroyVia(ctx context.Context, ws *wsConn) error {
	err := p.destroyOn(ctx, ws, &frames.Destroy{ProcessID: p.id, Token: p.token})
	var re *RemoteError
	if err == nil || errors.As(err, &re) {
		p.mu.Lock()
		p.settleDestroyLocked(err)
		p.mu.Unlock()
	}
	return err
}

// destroyOn sends d on ws and reads until the answer: nil for destroyed, a
// *RemoteError for a refusal. An exit on the way is recorded.
func (p *Process) destroyOn(ctx context.Context, ws *wsConn, d *frames.Destroy) error {
	if err := ws.write(ctx, d); err != nil {
		return err
	}
	for {
		f, err := ws.read(ctx)
		if err != nil {
			return err
		}
		switch f := f.(type) {
		case *frames.Destroyed:
			if p.id != "" && f.ProcessID != p.id {
				return protocolErrorf("destroyed.process_id", "%q, expected %q", f.ProcessID, p.id)
			}
			return nil
		case *frames.Error:
			return &RemoteError{Frame: *f}
		case *frames.Exit:
			p.mu.Lock()
			err := p.exitLocked(f)
			p.mu.Unlock()
			if err != nil {
				return err
			}
		}
		// Output still in flight is of no use any more.
	}
}

// destroyRemote destroys the process on connections of its own, retrying
// with backoff until the destroy settles or ctx ends.
func (p *Process) destroyRemote(ctx context.Context) error {
	b := p.newBackoff()
	for {
		ws, err := p.dial(ctx)
		if err == nil {
			err = p.destroyVia(ctx, ws)
			ws.close()
			if err == nil || isFinal(err) {
				return err
			}
		}
		p.log.Debug("destroy failed", "err", err)
		if !b.wait(ctx, nil) {
			return fmt.Errorf("procwire: destroy: %w (last: %v)", ctx.Err(), err)
		}
	}
}

// autoDestroy destroys a process whose handle ended while the process may
// still run on the server, unusable: the server broke the protocol, refused
// a resume (a replay gap) or closed the connection for good.
func (p *Process) autoDestroy() {
	p.mu.Lock()
	err, abandoned := p.err, p.abandoned
	p.mu.Unlock()
	if abandoned || p.destroySettled() || processGone(err) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), autoDestroyTimeout)
	defer cancel()
	if err := p.destroyExclusive(ctx); err != nil {
		p.log.Warn("destroy after a failure", "err", err)
	}
}

// backoff is a jittered exponential backoff.
type backoff struct{ min, max, cur time.Duration }

func (p *Process) newBackoff() *backoff {
	return &backoff{min: p.opts.ReconnectMin, max: p.opts.ReconnectMax}
}

// wait waits for the next delay, a wake-up or the end of ctx, and reports
// whether to try again.
func (b *backoff) wait(ctx context.Context, wake <-chan struct{}) bool {
	if b.cur == 0 {
		b.cur = b.min
	} else {
		b.cur = min(2*b.cur, b.max)
	}
	t := time.NewTimer(b.cur/2 + rand.N(b.cur/2+1))
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-wake:
		return true
	case <-ctx.Done():
		return false
	}
}
