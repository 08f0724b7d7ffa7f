package server

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/procwire/procwire/credit"
	"github.com/procwire/procwire/frames"
	"github.com/procwire/procwire/proc"
	"github.com/procwire/procwire/replay"
)

// sessionState is where a session is in its life.
type sessionState uint8

const (
	live       sessionState = iota // the process runs or ran; resumable
	destroying                     // Destroy is in progress; back to live if it fails
	gone                           // destroyed; a tombstone answers for it
)

// session is one process and the state that outlives its connections:
// identity, stdin credit, signal history, the attached connection and the
// grace timer. Its fields below mu are guarded by mu. The lock order is in
// doc.go: in, then mu, then the process's own locks (Stdout, Stderr,
// stdin), never the reverse; no pipe is written while mu is held.
type session struct {
	srv         *Server
	id          string // process id, 32 hex digits
	token       string // resume token, 64 hex digits; never logged
	instanceID  string
	openKey     string // the open's open_key, or ""; secret, never logged
	evidence    frames.Evidence
	opened      *frames.Opened // the first answer, repeated for a repeated open
	outEnc      string         // encoding chosen for stdout and stderr payloads, or ""
	exitReasons string         // the open's exit_reasons: the reasons exit may carry
	inEnc       string         // encoding chosen for stdin payloads, or ""
	p           Process
	log         *slog.Logger

	stdoutWindow int
	stdinWindow  int
	stderrRing   int
	cost         int64 // taken from the memory budget from open to retire

	gone     chan struct{} // closed once the session is retired
	tomb     *tombstone    // set before gone is closed
	pumpDone chan struct{} // closed when pump returns
	kick     chan struct{} // capacity 1: signals may be deliverable (see changed)

	// att mirrors attached for changed, which must not take mu; sigWaiting
	// is set while sigq holds a signal.
	att        atomic.Pointer[conn]
	sigWaiting atomic.Bool

	// in orders the stdin stream: held from a stdin frame's check to the
	// end of its push (or stdin_close's), so that pushes reach the process
	// in the order of their offsets, even across a resume, while mu is
	// free. It is taken before mu, never while mu is held.
	in sync.Mutex

	mu          sync.Mutex
	state       sessionState
	settled     chan struct{}    // while destroying: closed when the attempt ends, whatever its result
	attached    *conn            // the connection serving the process, or nil when detached; set with setAttachedLocked
	recv        *credit.Receiver // stdin credit
	stdinClosed bool             // stdin_close was received; set holding in and mu, read holding either
	stdinFailed bool             // the process failed a stdin write: stdin is discarded from then on; as stdinClosed
	lastSignal  int64            // highest signal id seen (delivered, failed or waiting)
	signals     [signalHistory]signalRecord
	nsignals    int             // signals recorded so far; the last ones are in signals
	sigq        []pendingSignal // signals waiting for the stdin received before them
	grace       *time.Timer     // runs while detached
	detachedAt  time.Time       // when the last connection detached (for resume latency)
	graceGen    uint64          // bumped on every attach, so a stale timer does nothing
}

// ChangeNotifier is implemented by a Process that can call a function on
// each change it would otherwise announce on Notify (*bridge.Process
// does). The server registers one right after Start: it wakes the attached
// connection's writer from the goroutine that made the change, which
// spares a goroutine hand-off on every stdout chunk and every echo.
type ChangeNotifier interface {
	// OnChange makes fn be called after every change, in place of a value
	// on Notify, saying what changed; changes before OnChange returns may
	// still be announced on Notify. fn takes no lock of the process's and
	// does not wait, so it may be called with them held; except that a
	// call for proc.ChangeOutput alone must come with no lock of the
	// process held, from a goroutine that may be delayed by the time the
	// server takes to write the output to the connection without waiting
	// on the network (the process's output pump): the server then writes
	// it from there, sparing its writer's wakeup.
	OnChange(fn func(proc.Change))
}

// setAttachedLocked makes c (or nil) the attached connection. s.mu must be
// held, unless s is not yet shared.
func (s *session) setAttachedLocked(c *conn) {
	s.attached = c
	s.att.Store(c)
}

// changed is the ChangeNotifier callback: it wakes the attached
// connection's writer, and the pump when a signal waits for stdin to be
// consumed. It takes no lock (the process may hold its own): a connection
// replaced by a resume may get the wakeup meant for its successor, but the
// successor's writer steps once after it attached, so nothing it must send
// waits for a wakeup that went astray. Stdin that a PushStdin call wrote
// itself wakes no one: the reader that pushed it wakes the writer when a
// credit grant is due (session.pushed), which spares a futile wakeup on every
// interactive write.
func (s *session) changed(what proc.Change) {
	switch c := s.att.Load(); {
	case c == nil:
	case what == proc.ChangeOutput:
		// From an output pump, and no more output is waiting: it writes
		// itself (interactive output). A flood goes to the writer, so
		// that the pump reads on while the writer sends.
		c.kick()
	case what&^proc.ChangeStdinPushed != 0:
		c.wakeUp()
	}
	if s.sigWaiting.Load() {
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
}

// pump forwards the process's Notify values to whichever connection is
// attached, so that a connection replaced by a resume cannot swallow a
// wakeup meant for its successor, and delivers the signals that waited for
// stdin. With a ChangeNotifier, Notify falls silent and pump wakes only
// for those signals (kick) and the exit. It returns when the session is
// retired.
func (s *session) pump() {
	defer close(s.pumpDone)
	done := s.p.Done()
	for {
		select {
		case <-s.p.Notify():
		case <-s.kick:
		case <-done:
			done = nil
			st, _ := s.p.Exit()
			s.log.Info("process exited", "status", st.String())
		case <-s.gone:
			return
		}
		s.mu.Lock()
		c := s.attached
		if s.state == live {
			s.deliverSignalsLocked() // stdin was consumed, or the exit published
		}
		s.mu.Unlock()
		if c != nil {
			c.wakeUp()
		}
	}
}

// syncStdinLocked counts into the credit receiver what the process has
// consumed since the last call. s.mu must be held.
func (s *session) syncStdinLocked() {
	consumed := s.p.StdinConsumed()
	if s.stdinFailed {
		consumed = s.recv.Received() // discarded, as after a broken pipe
	}
	if d := min(consumed-s.recv.Consumed(), s.recv.Received()-s.recv.Consumed()); d > 0 {
		s.recv.Consume(d)
	}
}

// credit returns a credit frame for connection c when a grant is due (or
// always, with force), or ok false when there is none or c is no longer
// attached.
func (s *session) credit(c *conn, force bool) (cr frames.Credit, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.attached != c || s.state != live {
		return cr, false
	}
	s.syncStdinLocked()
	limit, grant := s.recv.Grant()
	if !grant && !force {
		return cr, false
	}
	return frames.Credit{StdinReceived: s.recv.Received(), StdinLimit: limit}, true
}

// exitFrame returns the published exit as a frame, or nil.
func (s *session) exitFrame() *frames.Exit {
	st, ok := s.p.Exit()
	if !ok {
		return nil
	}
	return s.exitOf(st)
}

// exitOf is the exit frame of st: with its reason only when the client's
// open listed it in exit_reasons (an earlier client refuses a field it does
// not know).
func (s *session) exitOf(st proc.ExitStatus) *frames.Exit {
	f := &frames.Exit{Code: st.Code, Signal: st.Signal}
	if st.Reason != "" && frames.EncListHas(s.exitReasons, st.Reason) {
		f.Reason = st.Reason
	}
	return f
}

// awaitDestroyLocked waits, while a destroy is in progress, until it
// ended, and returns the state it left: gone, or live again when it failed.
// s.mu must be held; it is released while waiting.
func (s *session) awaitDestroyLocked() sessionState {
	for s.state == destroying {
		ch := s.settled
		s.mu.Unlock()
		<-ch
		s.mu.Lock()
	}
	return s.state
}

// stopGraceLocked stops the grace timer, if any. s.mu must be held.
func (s *session) stopGraceLocked() {
	s.graceGen++
	if s.grace != nil {
		if s.grace.Stop() {
			s.srv.wg.Done() // the timer's callback will never run
		}
		s.grace = nil
	}
}

// detach releases the session from connection c, if c still serves it, and
// starts the grace timer.
func (s *session) detach(c *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.attached != c || s.state != live {
		return
	}
	s.setAttachedLocked(nil)
	s.detachedAt = s.srv.now()
	s.armGraceLocked()
	s.log.Info("process detached", "grace", s.srv.cfg.Grace)
	s.srv.hook(hookDetached, s.id)
}

// armGraceLocked (re)starts the grace timer of a detached session. s.mu
// must be held.
func (s *session) armGraceLocked() {
	s.stopGraceLocked()
	gen := s.graceGen
	s.srv.wg.Add(1)
	s.grace = time.AfterFunc(s.srv.cfg.Grace, func() {
		defer s.srv.wg.Done()
		s.srv.expire(s, gen)
	})
}

// stdoutHeld returns the bytes held in the stdout replay buffer.
func (s *session) stdoutHeld() (held int) {
	s.p.Stdout(func(b *replay.Buffer) { held = int(b.End() - b.Start()) })
	return held
}

// tombstone remembers a destroyed or expired process for Config.TombstoneTTL.
type tombstone struct {
	id         string // "" for an open key destroyed before anything started
	token      string
	instanceID string
	openKey    string       // the open's key, or ""
	expired    bool         // destroyed by grace expiry, not by destroy
	exit       *frames.Exit // the final exit, when known
	at         time.Time
}

// actual is the lifecycle state a resume of the tombstone reports.
func (t *tombstone) actual() string {
	if t.expired {
		return "process_expired"
	}
	return "process_destroyed"
}
