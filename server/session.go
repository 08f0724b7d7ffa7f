package server

import (
	"log/slog"
	"sync"
	"syscall"
	"time"

	"github.com/procwire/procwire/credit"
	"github.com/procwire/procwire/frames"
	"github.com/procwire/procwire/replay"
)

// sessionState is where a session is in its life.
type sessionState uint8

const (
	live       sessionState = iota // the process runs or ran; resumable
	destroying                     // Destroy is in progress; back to live if it fails
	gone                           // destroyed; a tombstone answers for it
)

// signalHistory is how many signal results a session remembers (§3 signaled).
const signalHistory = 64

// signalRecord is the result recorded for one signal id.
type signalRecord struct {
	id     int64
	result string
}

// session is one process and the state that outlives its connections:
// identity, stdin credit, signal history, the attached connection and the
// grace timer. Its fields below mu are guarded by mu; lock order is
// session.mu, then the process's own locks (Stdout, Stderr, stdin), never
// the reverse, and Server.mu is never held while taking session.mu.
type session struct {
	srv        *Server
	id         string // process id, 32 hex digits
	token      string // resume token, 64 hex digits; never logged
	instanceID string
	openKey    string // the open's open_key, or ""; secret, never logged
	evidence   frames.Evidence
	opened     *frames.Opened // the first answer, repeated for a repeated open
	outEnc     string         // encoding chosen for stdout and stderr payloads, or ""
	inEnc      string         // encoding chosen for stdin payloads, or ""
	p          Process
	log        *slog.Logger

	stdoutWindow int
	stdinWindow  int
	stderrRing   int
	cost         int64 // taken from the memory budget from open to retire

	gone     chan struct{} // closed once the session is retired
	tomb     *tombstone    // set before gone is closed
	pumpDone chan struct{} // closed when pump returns

	mu          sync.Mutex
	state       sessionState
	settled     chan struct{}    // while destroying: closed when the attempt ends, whatever its result
	attached    *conn            // the connection serving the process, or nil when detached
	recv        *credit.Receiver // stdin credit
	stdinClosed bool             // stdin_close was received
	lastSignal  int64            // highest signal id seen
	signals     [signalHistory]signalRecord
	nsignals    int         // signals recorded so far; the last ones are in signals
	grace       *time.Timer // runs while detached
	detachedAt  time.Time   // when the last connection detached (for resume latency)
	graceGen    uint64      // bumped on every attach, so a stale timer does nothing
}

// pump is the single consumer of the process's Notify channel: it forwards
// every notification to whichever connection is attached, so that a
// connection replaced by a resume cannot swallow a wakeup meant for its
// successor. It returns when the session is retired.
func (s *session) pump() {
	defer close(s.pumpDone)
	done := s.p.Done()
	for {
		select {
		case <-s.p.Notify():
		case <-done:
			done = nil
			st, _ := s.p.Exit()
			s.log.Info("process exited", "status", st.String())
		case <-s.gone:
			return
		}
		s.mu.Lock()
		c := s.attached
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

// signal delivers a signal for id once and returns the result to answer,
// recorded for repeats. s.mu must be held.
func (s *session) signalLocked(id int64, name frames.SignalName) (string, error) {
	if id <= s.lastSignal {
		for i := range min(s.nsignals, signalHistory) {
			if r := s.signals[i]; r.id == id {
				return r.result, nil
			}
		}
		return frames.SignalAlreadyExited, nil
	}
	var sig syscall.Signal
	switch name {
	case frames.SIGINT:
		sig = syscall.SIGINT
	case frames.SIGTERM:
		sig = syscall.SIGTERM
	default:
		sig = syscall.SIGKILL
	}
	delivered, err := s.p.Signal(sig)
	if err != nil {
		return "", err
	}
	result := frames.SignalAlreadyExited
	if delivered {
		result = frames.SignalDelivered
	}
	s.lastSignal = id
	s.signals[s.nsignals%signalHistory] = signalRecord{id: id, result: result}
	s.nsignals++
	return result, nil
}

// exitFrame returns the published exit as a frame, or nil.
func (s *session) exitFrame() *frames.Exit {
	st, ok := s.p.Exit()
	if !ok {
		return nil
	}
	return &frames.Exit{Code: st.Code, Signal: st.Signal}
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
	s.attached = nil
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
