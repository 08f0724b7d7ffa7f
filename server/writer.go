package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"

	"github.com/coder/websocket"

	"github.com/procwire/procwire/frames"
	"github.com/procwire/procwire/proc"
	"github.com/procwire/procwire/replay"
)

// writeLoop is the connection's writer: the greeting (opened or resumed),
// then answers and the session's streams as they come, then what the
// close requires and the close itself. The process's output pumps may
// write stream frames too (kick), in a turn they take from the writer
// (c.lw) when it is idle.
func (c *conn) writeLoop(log *slog.Logger) {
	defer close(c.writerDone)
	err := c.writeFrames()
	c.lw.Close() // no kick from now on
	if err == nil {
		err = c.writeFinal()
	}
	if ie, ok := errors.AsType[*internalError](err); ok {
		log.Error("internal error", "err", ie)
		c.closeWith(internalStatus("internal error"))
		err = nil
	}
	if err != nil {
		if c.ctx.Err() == nil && !errors.Is(err, net.ErrClosed) {
			log.Info("write failed", "err", err)
		}
		c.closeWith(closeStatus{code: websocket.StatusAbnormalClosure, reason: "write failed", abrupt: true})
		c.cancel()
		return
	}
	if st := c.status; st.abrupt || c.ctx.Err() != nil {
		_ = c.ws.CloseNow()
	} else {
		_ = c.ws.Close(st.code, st.reason)
	}
}

// writeFrames writes until closeWith.
func (c *conn) writeFrames() error {
	c.lw.Lock()
	var err error
	if c.greeting != nil {
		err = c.write(c.greeting)
	}
	if err == nil {
		c.lw.Opened() // stream frames may follow now
	}
	c.lw.Unlock()
	if err != nil {
		return err
	}
	for {
		select {
		case f := <-c.ctrl:
			if err := c.writeLocking(f); err != nil {
				return err
			}
			continue
		case <-c.stop:
			return nil
		default:
		}
		answered, progressed := false, false
		err := c.lw.Begin() // a kick's failed write, or what a kick left pending
		if err == nil {
			answered, err = c.writeAnswers()
		}
		if err == nil {
			progressed, err = c.sendStreams()
		}
		again := c.lw.End()
		if err != nil {
			return err
		}
		if progressed || answered || again {
			continue
		}
		select {
		case f := <-c.ctrl:
			if err := c.writeLocking(f); err != nil {
				return err
			}
		case <-c.lw.Woken():
		case <-c.stop:
			return nil
		case <-c.ctx.Done():
			return c.ctx.Err()
		}
	}
}

// writeLocking writes f in the writer's turn.
func (c *conn) writeLocking(f frames.Frame) error {
	c.lw.Lock()
	defer c.lw.Unlock()
	return c.write(f)
}

// kickMax is the most unsent stdout a kick sends itself; more is a flood,
// which the writer sends while the pump reads on.
const kickMax = 16 << 10

// kick sends what the session has ready from the calling goroutine (a
// process's output pump, holding no lock) when the writer is idle, without
// ever waiting on the network: a frame the socket does not take whole stays
// pending in the coalescer, and the writer, woken, sends it. It spares the
// writer's wakeup on every chunk of output: for an interactive child, a
// third of a round trip. Otherwise it wakes the writer (see link.Turn).
func (c *conn) kick() { c.lw.Kick(c.sendOut) }

// writeFinal writes what a kick left, the answers still queued and, after
// a destroy, exit and destroyed. c.lw is closed: nothing else writes.
func (c *conn) writeFinal() error {
	if err := c.lw.FlushPending(); err != nil {
		return err
	}
	if _, err := c.writeAnswers(); err != nil {
		return err
	}
	for {
		select {
		case f := <-c.ctrl:
			if err := c.write(f); err != nil {
				return err
			}
			continue
		default:
		}
		break
	}
	st := c.status
	if st.destroyed == "" {
		return nil
	}
	if st.exit != nil && !c.exitSent {
		c.exitSent = true
		if err := c.write(st.exit); err != nil {
			return err
		}
	}
	return c.write(&frames.Destroyed{ProcessID: st.destroyed})
}

// writeAnswers writes the signal answers queued, in order, and makes room
// for the reader to take more signals.
func (c *conn) writeAnswers() (wrote bool, err error) {
	c.ansMu.Lock()
	answers := c.answers
	c.answers = nil
	c.ansMu.Unlock()
	for _, f := range answers {
		if err := c.write(f); err != nil {
			return wrote, err
		}
		wrote = true
		c.sigInFlight.Add(-1)
		select {
		case c.sigRoom <- struct{}{}:
		default:
		}
	}
	return wrote, nil
}

// sendStreams sends what the session has ready: one stdout frame (or
// stdout_eof), the stderr held, the exit, a credit. progressed reports
// whether it sent anything; the writer (or a kick) calls it again until it
// did not.
func (c *conn) sendStreams() (progressed bool, err error) {
	se := c.sess
	if se == nil {
		return false, nil
	}
	// One trip into the process: its stdout and its exit under one lock
	// (an exit seen there comes with its EOF).
	from := c.stdoutSent.Load()
	v := &c.view
	v.from, v.max, v.enc = from, c.srv.cfg.MaxFrameData, se.outEnc
	se.p.StdoutExit(c.viewStdout)
	exit, exited := v.exit, v.exited
	switch {
	case c.lw.Stalled():
		return false, nil // a kick met a backlog: the writer takes over
	case v.err != nil && c.stopping():
		// Replaced by a resume whose client acked past what this
		// connection sent; it is closing with 4001.
		return false, nil
	case v.err != nil:
		return false, &internalError{fmt.Errorf("stdout from %d: %w", from, v.err)}
	}
	eof := v.eof
	if progressed, err = c.sendStdout(from); err != nil {
		return false, err
	}
	if sent, err := c.sendStderr(se); err != nil {
		return false, err
	} else if sent {
		progressed = true
	}
	// exit follows stdout_eof when the stream ended; when it did not (a
	// descendant holds stdout, or the window is full), the bridge has
	// already waited ExitWait and stdout goes on after exit.
	if exited && !c.exitSent && (!eof || c.eofSent) {
		c.exitSent = true
		if err := c.write(se.exitOf(exit)); err != nil {
			return false, err
		}
		progressed = true
	}
	credited, err := c.sendCredit(se)
	if err != nil {
		return false, err
	}
	return progressed || credited, nil
}

// sendStdout sends the stdout frame the view encoded from offset from, or
// the stdout_eof.
func (c *conn) sendStdout(from int64) (sent bool, err error) {
	v := &c.view
	switch n := v.n; {
	case n > 0:
		// Published before the write: the peer may ack the frame before
		// Write returns.
		c.stdoutSent.Store(from + int64(n))
		c.srv.m.stdoutSent(n) // counted before too: the peer may see it before Write returns
		if err := c.writeBuffered(); err != nil {
			return false, err
		}
		return true, nil
	case v.eof && from == v.eofOff && !c.eofSent:
		c.eofSent = true
		if err := c.write(&frames.StdoutEOF{Off: v.eofOff}); err != nil {
			return false, err
		}
		return true, nil
	}
	return false, nil
}

// sendStderr sends all the stderr held now (at most the ring, so a flood
// cannot starve stdout), so that an exit sent after it follows the stderr
// before it.
func (c *conn) sendStderr(se *session) (sent bool, err error) {
	v := &c.view
	for v.end = -1; v.end < 0 || c.stderrSent < v.end; {
		v.from = c.stderrSent
		se.p.Stderr(c.viewStderr)
		n, from := v.n, v.from
		if n == 0 {
			break
		}
		c.srv.m.stderrSkipped(from - c.stderrSent)
		c.srv.m.stderrSent(n)
		if err := c.writeBuffered(); err != nil {
			return false, err
		}
		c.stderrSent = from + int64(n)
		sent = true
	}
	return sent, nil
}

// sendCredit sends the stdin credit due, once a resume's replay is
// complete.
func (c *conn) sendCredit(se *session) (sent bool, err error) {
	force := false
	if m := c.replay; m != nil {
		if c.stdoutSent.Load() < m.stdout || c.stderrSent < m.stderr || m.eof && !c.eofSent || m.exit && !c.exitSent {
			return false, nil // credit waits for the replay
		}
		c.replay = nil
		force = true
	}
	if c.lw.Calling() && !force {
		// A kick (an output pump writing its own output) leaves credit to
		// the writer: whatever makes a grant due wakes it (the reader
		// after a push, the stdin pump after a write). Taking the
		// session's lock here would meet the reader holding it across its
		// pipe write, once per exchange.
		return false, nil
	}
	if cr, ok := se.credit(c, force); ok {
		// c.frame's: a local's address, passed on as a Frame, would move
		// it to the heap on every call, credit sent or not.
		c.frame.credit = cr
		if err := c.write(&c.frame.credit); err != nil {
			return false, err
		}
		return true, nil
	}
	return false, nil
}

// stepView carries sendStreams's arguments into, and its results out of, the
// views of the process's buffers, which run as callbacks under the
// process's locks. The callbacks are method values bound once per
// connection: a closure would escape to the heap on every call.
type stepView struct {
	from   int64  // in: the offset to read from; stderr out: where the bytes read start
	max    int    // in: max_data
	enc    string // in: the payload encoding
	n      int    // out: bytes encoded into wbuf
	eofOff int64  // stdout out: the EOF offset, when eof
	eof    bool
	exit   proc.ExitStatus // stdout out: the exit, when exited
	exited bool
	err    error // stdout out: the slice failed
	end    int64 // stderr: the ring's end at the first view, or -1
}

// stdoutView encodes a stdout frame from c.view.from into wbuf, one frame
// per contiguous segment: the ring's wrap point ends a frame, so bytes are
// encoded straight from the view.
func (c *conn) stdoutView(b *replay.Buffer, exit proc.ExitStatus, exited bool) {
	v := &c.view
	v.n, v.err = 0, nil
	v.exit, v.exited = exit, exited
	v.eofOff, v.eof = b.EOF()
	if c.lw.Calling() && b.End()-v.from > kickMax {
		c.lw.Stall() // a backlog: the writer sends it, the pump reads on
		return
	}
	a, _, err := b.Slice(v.from, v.max)
	if err != nil {
		v.err = err
		return
	}
	if v.n = len(a); v.n > 0 {
		c.frame.stdout = frames.Stdout{Off: v.from, Data: a, Enc: v.enc}
		c.wbuf = frames.Append(c.wbuf[:0], &c.frame.stdout)
		c.frame.stdout.Data = nil
	}
}

// stderrView encodes a stderr frame from c.view.from into wbuf.
func (c *conn) stderrView(r *replay.Ring) {
	v := &c.view
	if v.end < 0 {
		v.end = r.End()
	}
	var a []byte
	a, _, v.from = r.Slice(v.from, v.max)
	if v.n = len(a); v.n > 0 {
		c.frame.stderr = frames.Stderr{Off: v.from, Data: a, Enc: v.enc}
		c.wbuf = frames.Append(c.wbuf[:0], &c.frame.stderr)
		c.frame.stderr.Data = nil
	}
}

// write encodes f into the reused buffer and sends it as one message.
func (c *conn) write(f frames.Frame) error {
	c.wbuf = frames.Append(c.wbuf[:0], f)
	return c.writeBuffered()
}

// writeBuffered sends the frame encoded in wbuf. In a kick's turn the
// message is held and written, in one write, as far as the socket takes
// it; the rest stays pending and the turn stalls. Otherwise it is written
// through (after anything pending), waiting as long as the connection
// does, holding no copy of it. It has no context: c.ctx closes c.ws.
func (c *conn) writeBuffered() error {
	written, err := c.lw.Write(context.Background(), c.ws, c.wbuf)
	if !written {
		// The pending rest is the one copy of the frame this
		// connection holds while its peer is slow.
		c.wbuf = nil
	}
	return err
}
