package client

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/coder/websocket"
	"github.com/procwire/procwire/frames"
	"github.com/procwire/procwire/internal/link"
)

// errStop ends a connection whose handle has ended.
var errStop = errors.New("procwire: handle ended")

// The supervisor: one goroutine per handle that serves the attached
// connection and, when it is lost, resumes on a new one with a jittered
// backoff until the handle ends; then destroys a process the handle failed
// on. What a frame or a loss means is the machine's to say.

// supervise serves connections, ws first, and reconnects after each loss
// until the handle ends. It owns every goroutine of the handle.
func (p *Process) supervise(ws *wsConn) {
	defer close(p.superDone)
	b := p.newBackoff()
	for ws != nil {
		start := time.Now()
		err := p.serve(ws)
		now := time.Now()
		lasted := now.Sub(start) > p.opts.ReconnectMax
		p.mu.Lock()
		p.m.lost(now)
		if !p.m.ended() {
			p.applyLocked(p.closedForGood(err))
		}
		ended, deadline := p.m.ended(), p.m.graceEnd()
		p.mu.Unlock()
		if ended || p.life.Err() != nil {
			break
		}
		p.log.Info("connection lost, resuming", "err", err)
		if lasted {
			b.reset() // a connection that lasted is no sign of a failing server
		} else {
			// Resumed and lost again at once (a server that closes after
			// every resume): back off, not a connection per round trip.
			ctx, cancel := context.WithDeadline(p.life, deadline)
			b.wait(ctx, p.redial)
			cancel()
		}
		ws = p.reconnect(b)
	}
	p.autoDestroy()
}

// closedForGood ends the handle when err says the server closed the
// connection in a way that makes resuming pointless. Any other close,
// without procwire's word before it (1001 and 1011 from a proxy, a reset),
// is a loss to resume from.
func (p *Process) closedForGood(err error) events {
	switch code := websocket.CloseStatus(err); code {
	case frames.CloseResumedElsewhere: // another client holds the process now
		return p.m.leave(fmt.Errorf("%w: the process was resumed on another connection: %w", ErrConnectionLost, err))
	case websocket.StatusProtocolError, websocket.StatusUnsupportedData, websocket.StatusInvalidFramePayloadData,
		websocket.StatusPolicyViolation, websocket.StatusMessageTooBig:
		return p.m.end(fmt.Errorf("%w: the server refused the connection: %w", ErrConnectionLost, err))
	}
	return 0
}

// serve serves ws until it fails, the handle ends or the handle stops,
// then closes it.
func (p *Process) serve(ws *wsConn) error {
	ctx, cancel := context.WithCancel(p.life)
	p.attach(ws)
	defer p.attach(nil)
	n := 2
	errc := make(chan error, 3)
	go func() { errc <- p.readLoop(ctx, ws) }()
	go func() { errc <- p.writeLoop(ctx) }()
	if p.m.heartbeat > 0 {
		n++
		go func() { errc <- p.pingLoop(ctx, ws, p.m.heartbeat) }()
	}
	var err error
	select {
	case err = <-errc:
		n--
	case <-p.life.Done():
		err = p.life.Err()
	}
	cancel()
	ws.close()
	for range n {
		// The close code the reader saw decides what the loss means, also
		// when the writer, failing on the same close, reported first.
		if e := <-errc; websocket.CloseStatus(err) == -1 && websocket.CloseStatus(e) != -1 {
			err = e
		}
	}
	return err
}

// readLoop hands the frames of ws to the machine. serve ends it by closing
// the connection, so reads take no context (one with a Done channel would
// cost an allocation per frame). While a blocked Read reads the socket
// itself (lend.go) the loop steps aside, until it gets the socket back;
// it returns once no Read is inside a read of ws, so that no frame of ws
// is handled after serve returned.
func (p *Process) readLoop(ctx context.Context, ws *wsConn) error {
	// A compressed payload is refused (bad_payload) when its block declares
	// more than the announced max_data, before anything is allocated.
	// Stdout is decoded straight into the queue the caller reads from: the
	// room is reserved under the lock, filled without it (whoever reads the
	// socket is the queue's only producer, and a reservation stays in place
	// until it produces again), and taken by the machine's commit.
	p.mu.Lock()
	ws.rd.Dec.MaxData = p.m.maxData
	ws.rd.Dec.Into = p.reserveStdout
	ws.loopWake = make(chan struct{}, 1)
	p.rconn = ws
	if p.waiters == 0 {
		// Nothing waits for a frame: a Read waiting for the connection,
		// or the first to come, reads the socket itself rather than take
		// the loop's hand-off of the first frame (a cold start's first
		// output); unread, it comes back to the loop after the idle period.
		ws.reader = lent
		p.broadcastLocked()
	}
	var idle idleCheck
	defer func() {
		idle.stop()
		p.mu.Lock()
		p.endReadsLocked(ws)
		p.mu.Unlock()
	}()
	for {
		if stop, err := p.lendingLocked(ctx, ws, &idle); stop {
			p.mu.Unlock()
			return err
		}
		p.mu.Unlock()
		f, err := ws.read(context.Background())
		p.mu.Lock()
		if err = p.receiveLocked(f, err); err != nil {
			p.mu.Unlock()
			return err
		}
		if p.lender != nil && p.waiters == 0 {
			// A Read waits and nothing else does: it reads from now on.
			ws.reader = lent
			p.broadcastLocked()
		}
	}
}

// reserveStdout is the room for a stdout payload of n bytes at the end of
// the stdout queue (see frames.Decoder.Into).
func (p *Process) reserveStdout(t frames.Type, n int) []byte {
	if t != frames.TypeStdout {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.m.outBuf.reserve(n)
}

// receiveLocked hands a frame read from the attached connection to the
// machine, or records the failure to read one. It returns the error that
// ends the connection: err, or errStop once the handle ended.
func (p *Process) receiveLocked(f frames.Frame, err error) error {
	if err == nil {
		p.applyLocked(p.m.receive(f))
		if p.testHookFrame != nil {
			p.testHookFrame()
		}
		if p.m.ended() {
			err = errStop
		}
	} else if isFinal(err) {
		p.applyLocked(p.m.end(err))
	}
	return err
}

// attach makes ws, or nil, the connection the machine's frames go out on.
// Its open or resume went out before: callers may write at once.
func (p *Process) attach(ws *wsConn) {
	p.turn.Lock()
	p.cur = ws
	if ws == nil {
		p.turn.Reset(nil) // callers leave their frames to the next writer
	} else {
		p.turn.Reset(ws.co)
		p.turn.Opened()
	}
	p.turn.Unlock()
}

// writeLoop sends what the machine has to send, whenever woken, and what
// a caller's write left pending, holding the turn for each round. Closing
// the connection ends a blocked write (see readLoop).
func (p *Process) writeLoop(ctx context.Context) error {
	for {
		err := p.turn.Begin()
		for more := err == nil; more; {
			more, err = p.sendNext(context.Background())
		}
		again := p.turn.End()
		if err != nil {
			return fmt.Errorf("write: %w", err)
		}
		if again {
			continue
		}
		select {
		case <-p.turn.Woken():
		case <-ctx.Done():
			return nil
		}
	}
}

// sendNext writes the machine's next frames to the attached connection as
// one message and reports whether there were any. The holder of the turn
// calls it: the writer, waiting as long as the connection does, or a
// caller, never waiting on the network (what the socket does not take stays
// pending for the writer, and the turn stalls). It can still wait for a
// ping or pong another goroutine is writing, which ctx bounds (by closing
// the connection, which the supervisor resumes).
func (p *Process) sendNext(ctx context.Context) (bool, error) {
	ws := p.cur
	if ws == nil {
		return false, nil
	}
	p.mu.Lock()
	var ev events
	ws.wbuf, ev = p.m.next(ws.wbuf[:0], &p.out)
	p.applyLocked(ev &^ evSend) // the holder sends until next has nothing
	p.mu.Unlock()
	if len(ws.wbuf) == 0 {
		return false, nil
	}
	_, err := p.turn.Write(ctx, ws.ws, ws.wbuf)
	return true, err
}

// sendKicked is sendNext in a caller's turn (Process.kick).
func (p *Process) sendKicked() (bool, error) { return p.sendNext(p.kickCtx) }

// flush sends the machine's frames from the calling goroutine when no one
// else is writing and the socket takes them without waiting, sparing the
// hand-off to the writer goroutine (a round trip's worth of latency for a
// small stdin write); otherwise it leaves them to the writer
// (link.Turn.Kick), or to the next connection's, which sends first. p.mu
// must not be held.
func (p *Process) flush(ctx context.Context) {
	p.kickCtx = ctx
	p.turn.Kick(p.kick)
	p.kickCtx = nil
}

// pingLoop checks that the server answers pings within the heartbeat.
// The pong is read by whoever reads the connection: the loop takes the
// socket back from a lender that is not reading first.
func (p *Process) pingLoop(ctx context.Context, w *wsConn, every time.Duration) error {
	ping := func(ctx context.Context) error {
		p.mu.Lock()
		p.needReaderLocked()
		p.mu.Unlock()
		return w.ws.Ping(ctx)
	}
	if err := link.Heartbeat(ctx, every, ping); err != nil {
		return fmt.Errorf("heartbeat: %w", err)
	}
	return nil
}

// reconnect resumes the process on a new connection, retrying with backoff
// within the grace, or destroys it there if a Destroy is pending. It
// returns nil when the handle ended instead.
func (p *Process) reconnect(b *backoff) *wsConn {
	var last error
	for attempt := 1; ; attempt++ {
		p.mu.Lock()
		if p.m.ended() || p.life.Err() != nil {
			p.mu.Unlock()
			return nil
		}
		if p.m.expired(time.Now()) {
			if last == nil {
				last = errors.New("no attempt in time")
			}
			p.applyLocked(p.m.leave(fmt.Errorf("%w: no resume within the %v grace: %w", ErrConnectionLost, p.m.grace, last)))
			p.mu.Unlock()
			return nil
		}
		destroying := p.m.st == stateDestroying
		resume, destroy := p.m.resumeFrame(), p.m.destroyFrame()
		deadline, bound := p.m.graceEnd(), attemptBound(p.m.heartbeat)
		p.mu.Unlock()

		ctx, cancel := context.WithDeadline(p.life, deadline)
		actx, acancel := ctx, context.CancelFunc(func() {})
		if !destroying {
			// A dial or resume the network swallows (a handshake whose
			// answer never comes) is abandoned and retried, rather than
			// waited for until the grace ends. A destroy is bounded by
			// DestroyTimeout instead: the server's answer may take its
			// destroy wait.
			actx, acancel = context.WithTimeout(ctx, bound)
		}
		ws, reached, err := p.attempt(actx, destroying, resume, destroy)
		acancel()
		if ws != nil {
			cancel()
			p.log.Info("resumed", "attempt", attempt)
			return ws
		}
		p.mu.Lock()
		var ev events
		var re *RemoteError
		switch {
		case errors.Is(err, errStop):
		case errors.As(err, &re) && retryableDestroy(&re.Frame):
			// The Destroy that asked has its answer; resume the process,
			// which still runs.
		case isFinal(err):
			ev = p.m.end(err)
		default:
			ev = p.closedForGood(err)
			if ev == 0 && reached {
				ev, _ = p.m.resumeFailed(err)
			}
		}
		p.applyLocked(ev)
		ended := p.m.ended()
		p.mu.Unlock()
		if ended {
			cancel()
			return nil
		}
		last = err
		p.log.Debug("reconnect failed", "attempt", attempt, "err", err)
		b.wait(ctx, p.redial)
		cancel()
	}
}

// attemptBound is how long a reconnection's dial and resume may go
// unanswered before the attempt is abandoned and another made: the
// session's heartbeat, the bound within which the server answers a live
// connection, but at least a second, which a loaded machine may need.
func attemptBound(heartbeat time.Duration) time.Duration {
	return max(heartbeat, time.Second)
}

// attempt dials and resumes, or destroys if destroying (then returning
// errStop once it settled). reached reports whether the server was
// reached: the upgrade was answered.
func (p *Process) attempt(ctx context.Context, destroying bool, resume *frames.Resume, destroy *frames.Destroy) (_ *wsConn, reached bool, _ error) {
	var first frames.Frame = resume
	if destroying {
		first = nil // destroyVia sends the destroy
	}
	ws, err := p.dial(ctx, resume.ProcessID, first)
	if err != nil {
		var he *httpError
		return nil, errors.As(err, &he), err
	}
	if destroying {
		err := p.destroyVia(ctx, ws, destroy)
		ws.close()
		if err == nil {
			err = errStop
		}
		return nil, true, err
	}
	f, err := ws.exchange(ctx, resume)
	if err == nil {
		r, ok := f.(*frames.Resumed)
		if !ok {
			err = protocolErrorf(f.Type().String(), "unexpected answer to resume")
		} else {
			p.mu.Lock()
			var ev events
			ev, err = p.m.resumed(r)
			p.applyLocked(ev)
			p.mu.Unlock()
			if err == nil {
				return ws, true, nil
			}
		}
	}
	ws.close()
	return nil, true, err
}

// destroyVia destroys the process with d as the first frame of ws and
// settles the destroy with the answer.
func (p *Process) destroyVia(ctx context.Context, ws *wsConn, d *frames.Destroy) error {
	err := p.destroyOn(ctx, ws, d)
	var re *RemoteError
	if err == nil || errors.As(err, &re) {
		p.mu.Lock()
		if re != nil && retryableDestroy(&re.Frame) {
			p.applyLocked(p.m.destroyFailed(re))
		} else {
			p.applyLocked(p.m.settleDestroy(err))
		}
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
			if id := p.processID(); id != "" && f.ProcessID != id {
				return protocolErrorf("destroyed.process_id", "%q, expected %q", f.ProcessID, id)
			}
			return nil
		case *frames.Error:
			return &RemoteError{Frame: *f}
		case *frames.Exit:
			p.mu.Lock()
			var err error
			if p.m != nil {
				var ev events
				ev, err = p.m.exited(f)
				p.applyLocked(ev)
			}
			p.mu.Unlock()
			if err != nil {
				return err
			}
		}
		// Output still in flight is of no use any more.
	}
}

// processID returns the id of the process, "" while opening.
func (p *Process) processID() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		return ""
	}
	return p.m.id
}

// destroyRemote destroys the process on connections of its own, retrying
// with backoff until the destroy settles or ctx ends.
func (p *Process) destroyRemote(ctx context.Context) error {
	b := p.newBackoff()
	for {
		p.mu.Lock()
		if p.m.expired(time.Now()) {
			p.applyLocked(p.m.settleDestroy(fmt.Errorf("%w: no connection for the %v grace", ErrExpired, p.m.grace)))
		}
		settled, d := p.m.st == stateDestroyed, p.m.destroyFrame()
		p.mu.Unlock()
		if settled {
			return nil
		}
		ws, err := p.dial(ctx, d.ProcessID, nil)
		if err == nil {
			err = p.destroyVia(ctx, ws, d)
			ws.close()
			if err == nil || isFinal(err) {
				return err
			}
		}
		p.log.Debug("destroy failed", "err", err)
		if !b.wait(ctx, nil) {
			return fmt.Errorf("procwire: destroy: %w (last: %w)", ctx.Err(), err)
		}
	}
}

// autoDestroy destroys a process whose handle failed while the process may
// still run on the server, unusable: the server broke the protocol,
// refused a resume (a replay gap) or the connection for good.
func (p *Process) autoDestroy() {
	p.mu.Lock()
	failed := p.m.st == stateFailed
	p.mu.Unlock()
	if !failed || p.life.Err() != nil {
		return
	}
	ctx, cancel := context.WithTimeout(p.life, p.opts.DestroyTimeout)
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

func (b *backoff) reset() { b.cur = 0 }

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
