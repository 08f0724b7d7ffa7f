package client

import (
	"context"
	"time"
)

// The lending read. A frame read by the connection's read loop reaches a
// Read blocked for it through a hand-off: the loop's goroutine readies the
// caller's, and the runtime wakes an idle thread to run it. On a virtual
// machine that wake-up is tens of microseconds, most of a small request's
// round trip (bench's BenchmarkEchoHandOff prices it on a raw WebSocket).
// So a Read that would block, and may wait without end, reads the socket
// itself: the loop lends it the connection and steps aside.
//
// Who reads a connection is its reader state, guarded by Process.mu:
//
//	(a connection's loop starts, nothing waits) --> lent
//	(a connection's loop starts, a call waits) --> loopReads
//	loopReads --(a frame read with a lender waiting, no other waiter)--> lent
//	lent --(the lender reads)--> borrowed --(its frame handled)--> lent
//	lent --(a waiter, a ping, or unread for an idle period)--> loopReads
//	borrowed --(the lender's read failed, or ended the handle)--> failed
//	any --(the loop returned, after any borrower came back)--> closed
//
// Only one Read lends at a time (Process.lender): stdout's or stderr's,
// while no other call waits. A call that waits for something else (Wait,
// a write without credit, Signal, Destroy, a Read with a deadline) takes
// the socket back for the loop as it starts waiting, or, when the lender
// is reading, is served by the lender's reads until the lender's Read
// returns, which then gives the socket back. A read with a deadline never
// lends: ending a WebSocket read early closes the connection.
//
// The lending outlasts the Read that started it, so that a caller reading
// again soon reads the socket again at once (the request/response loop).
// While lent and unread, frames wait in the socket: the loop takes it back
// once it sat unread for an idle period (pings must be answered, an exit
// nobody waits for yet be received). The period starts at lendIdle and
// doubles while the socket is read, up to 16 times (a check wakes the
// loop, which a lender reading all the time would pay for), and never
// exceeds a quarter of the heartbeat.
type readerState uint8

const (
	loopReads readerState = iota // the read loop reads, or is about to
	lent                         // the lender reads; nobody reads at this moment
	borrowed                     // the lender is inside a read
	failed                       // the lender's read failed or ended the handle: the loop returns rerr
	closed                       // the loop returned: nobody reads the connection again
)

// lendIdle is the idle period's first length (Process.lendIdle, which
// tests change).
const lendIdle = 20 * time.Millisecond

// borrowLocked reads and handles one frame of the attached connection on
// the goroutine of s's blocked Read, when s may lend it: it reports false
// when the caller must wait for a change instead (the loop is inside a
// read and hands the socket over after it; another call waits; there is
// no connection). ctx is the Read's: one that can end never lends. p.mu is
// held, and released for the read.
func (p *Process) borrowLocked(ctx context.Context, s *Stream) bool {
	ws := p.rconn
	if ws == nil && ctx.Done() == nil && p.lender == nil && p.waiters == 0 {
		// No connection yet (its loop is starting, or a reconnection
		// runs): the next one's loop lends it to this Read at once.
		p.lender = s
		return false
	}
	if ws == nil || ctx.Done() != nil || ws.reader != lent && ws.reader != loopReads {
		return false
	}
	if p.lender != s {
		if p.lender != nil || p.waiters > 0 {
			return false
		}
		p.lender = s
	}
	if ws.reader == loopReads {
		return false // the loop steps aside after the read it is in
	}
	ws.reader = borrowed
	p.blockingLocked()
	p.mu.Unlock()
	f, err := ws.read(context.Background())
	p.mu.Lock()
	ws.uses++
	p.lentReads++
	// The loop waits for a borrower before it returns: ws is still the
	// connection the machine's frames come from.
	if err = p.receiveLocked(f, err); err != nil {
		ws.reader, ws.rerr = failed, err
		wakeLoop(ws)
	} else {
		ws.reader = lent
	}
	return true
}

// leaveReadLocked ends s's lending when its Read returns. When other calls
// wait, the loop takes the socket back: they may wait for frames that
// nobody would read now.
func (p *Process) leaveReadLocked(s *Stream) {
	if p.lender != s {
		return
	}
	p.lender = nil
	if p.waiters > 0 {
		p.unlendLocked()
	}
}

// needReaderLocked makes sure that somebody reads the attached connection
// for a call about to wait: the lender if one is inside its Read (it reads
// every frame until its Read returns), else the loop.
func (p *Process) needReaderLocked() {
	if p.lender == nil {
		p.unlendLocked()
	}
}

// unlendLocked gives a lent socket that nobody reads back to the loop.
func (p *Process) unlendLocked() {
	if ws := p.rconn; ws != nil && ws.reader == lent {
		ws.reader = loopReads
		wakeLoop(ws)
	}
}

func wakeLoop(ws *wsConn) {
	select {
	case ws.loopWake <- struct{}{}:
	default:
	}
}

// idleCheck is the read loop's look at a lent socket: a timer, and the
// period it runs for, which lengthens while the socket is read.
type idleCheck struct {
	t      *time.Timer
	period time.Duration
}

func (c *idleCheck) stop() {
	if c.t != nil {
		c.t.Stop()
	}
}

// lendingLocked waits, with p.mu released, while ws is lent, and returns
// once the loop should read it again (stop false) or return (stop true):
// with rerr when a borrower failed, nil when ctx ended.
func (p *Process) lendingLocked(ctx context.Context, ws *wsConn, idle *idleCheck) (stop bool, err error) {
	base, most := p.lendIdle, 16*p.lendIdle
	if hb := p.m.heartbeat; hb > 0 {
		// Server pings must be answered within the heartbeat.
		base, most = min(base, hb/4), min(most, hb/4)
	}
	for ws.reader == lent || ws.reader == borrowed {
		idle.period = max(idle.period, base)
		if idle.t == nil {
			idle.t = time.NewTimer(idle.period)
		} else {
			idle.t.Reset(idle.period)
		}
		uses := ws.uses
		p.mu.Unlock()
		select {
		case <-ws.loopWake:
			p.mu.Lock()
		case <-idle.t.C:
			p.mu.Lock()
			if ws.reader == lent && p.lender == nil && ws.uses == uses {
				ws.reader = loopReads // unread for a period: take it back
			} else {
				idle.period = min(2*idle.period, most)
			}
		case <-ctx.Done():
			p.mu.Lock()
			return true, nil
		}
	}
	idle.period = 0
	if ws.reader == failed {
		return true, ws.rerr
	}
	return false, nil
}

// endReadsLocked ends the reading of ws when its loop returns: it waits
// for a borrower inside a read (serve has closed ws, which ends it), so
// that no frame of ws is handled after serve returned, and wakes a lender
// waiting for ws to wait for the next connection.
func (p *Process) endReadsLocked(ws *wsConn) {
	for ws.reader == borrowed {
		p.mu.Unlock()
		<-ws.loopWake
		p.mu.Lock()
	}
	ws.reader = closed
	if p.rconn == ws {
		p.rconn = nil
	}
	p.broadcastLocked()
}
