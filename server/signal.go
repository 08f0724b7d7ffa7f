package server

import (
	"errors"
	"syscall"

	"github.com/procwire/procwire/frames"
	"github.com/procwire/procwire/proc"
)

// Signals are delivered in the order received, each only once every stdin
// byte received before it has left the stdin queue: written to the child's
// pipe, or discarded because the pipe broke (PROTOCOL.md §5) — unless the
// pipe is full: a child that does not read its stdin can still be
// signalled. A signal whose stdin is still queued waits in session.sigq;
// the session's pump delivers it when the process reports stdin consumed,
// its pipe full, or its exit. The answer,
// signaled or the signal_failed error, goes to the connection that asked if
// it is still attached, through that connection's answer queue.

// signalHistory is how many signal results a session remembers (§3 signaled).
const signalHistory = 64

// maxSignalsInFlight bounds the signals one connection has waiting for
// delivery or for their answer to be written; its reader waits beyond it.
const maxSignalsInFlight = 16

const (
	opSignal     = "signal_process"
	opWriteStdin = "write_stdin"
)

// signalRecord is the answer recorded for one signal id.
type signalRecord struct {
	id     int64
	result string // SignalDelivered or SignalAlreadyExited; "" when failed
	failed string // the failure's message, when delivery failed
}

// frame returns the answer the record gives.
func (r signalRecord) frame() frames.Frame {
	if r.result == "" {
		return &frames.Error{Code: frames.OperationFailed, Operation: opSignal, Reason: "signal_failed",
			Message: r.failed, ID: r.id}
	}
	return &frames.Signaled{ID: r.id, Result: r.result}
}

// pendingSignal is a signal waiting for the stdin received before it.
type pendingSignal struct {
	id    int64
	name  frames.SignalName
	mark  int64 // stdin received when the signal arrived
	asker *conn // the connection to answer, if it is still attached then
}

// signalLocked serves a signal frame from connection c: a repeated id is
// answered from the history (or when it is delivered, if it still waits), a
// new one is queued and delivered as soon as the stdin before it is written.
// It reports whether c will get an answer. s.mu must be held.
func (s *session) signalLocked(c *conn, id int64, name frames.SignalName) (answered bool) {
	if id <= s.lastSignal {
		for i := range s.sigq {
			if s.sigq[i].id == id {
				if s.sigq[i].asker == c {
					return false // already asked on c: one answer for both
				}
				s.sigq[i].asker = c
				return true
			}
		}
		r, ok := s.recordLocked(id)
		if !ok {
			r = signalRecord{id: id, result: frames.SignalAlreadyExited}
		}
		c.answer(r.frame())
		return true
	}
	s.lastSignal = id
	s.sigq = append(s.sigq, pendingSignal{id: id, name: name, mark: s.recv.Received(), asker: c})
	s.deliverSignalsLocked()
	return true
}

// recordLocked returns the recorded answer for id, if it is among the last
// signalHistory. s.mu must be held.
func (s *session) recordLocked(id int64) (signalRecord, bool) {
	for i := range min(s.nsignals, signalHistory) {
		if r := s.signals[i]; r.id == id {
			return r, true
		}
	}
	return signalRecord{}, false
}

// deliverSignalsLocked delivers the queued signals whose stdin has been
// consumed, in order, and answers them. After the exit nothing waits: the
// answer is already_exited. s.mu must be held.
func (s *session) deliverSignalsLocked() {
	// Set before the stdin counts are read: a change the process makes
	// after this reading sees the flag and kicks the pump.
	s.sigWaiting.Store(len(s.sigq) > 0)
	for len(s.sigq) > 0 {
		ps := s.sigq[0]
		_, exited := s.p.Exit()
		if !exited && !s.stdinFailed && s.p.StdinConsumed() < ps.mark && !stdinBlocked(s.p) {
			return
		}
		s.sigq[0] = pendingSignal{}
		s.sigq = s.sigq[1:]
		r := s.deliverLocked(ps.id, ps.name)
		if ps.asker != nil && ps.asker == s.attached {
			ps.asker.answer(r.frame())
		}
	}
	s.sigq = nil // let a drained queue's array go
	s.sigWaiting.Store(false)
}

// deliverLocked sends the signal of id once and records its answer.
// s.mu must be held.
func (s *session) deliverLocked(id int64, name frames.SignalName) signalRecord {
	var sig syscall.Signal
	switch name {
	case frames.SIGINT:
		sig = syscall.SIGINT
	case frames.SIGTERM:
		sig = syscall.SIGTERM
	default:
		sig = syscall.SIGKILL
	}
	r := signalRecord{id: id, result: frames.SignalAlreadyExited}
	switch delivered, err := s.p.Signal(sig); {
	case err != nil:
		// Answered in-band and recorded: a repeat of the id gets the same
		// error rather than a second attempt.
		r.result, r.failed = "", cleanMessage(err.Error())
		s.log.Warn("signal failed", "id", id, "signal", string(name), "err", err)
	case delivered:
		r.result = frames.SignalDelivered
	}
	if r.result != "" {
		// At debug: a client may send thousands a second.
		s.log.Debug("signal", "id", id, "signal", string(name), "result", r.result)
	}
	s.signals[s.nsignals%signalHistory] = r
	s.nsignals++
	return r
}

// StdinBlocker is implemented by a Process that can tell when its stdin
// waits on a full pipe (*bridge.Process does). A signal is then delivered
// without waiting for the stdin queued before it, which would otherwise
// wait for ever on a child that reads nothing until it is signalled. A
// Process without it has its signals wait for all stdin before them.
type StdinBlocker interface {
	// StdinBlocked reports whether stdin bytes wait because the child's
	// pipe is full; a change is announced on Notify.
	StdinBlocked() bool
}

func stdinBlocked(p Process) bool {
	b, ok := p.(StdinBlocker)
	return ok && b.StdinBlocked()
}

// stdinFailure is the error answering a stdin write the process failed, or
// nil when err is not such a failure but the server's own (1011).
func stdinFailure(err error) *frames.Error {
	if _, overflow := errors.AsType[*proc.StdinOverflowError](err); overflow {
		return nil // the server pushed past the window it granted
	}
	return &frames.Error{Code: frames.OperationFailed, Operation: opWriteStdin, Reason: "stdin_failed",
		Message: cleanMessage(err.Error())}
}
