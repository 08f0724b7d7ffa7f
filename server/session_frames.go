package server

import (
	"fmt"

	"github.com/coder/websocket"

	"github.com/procwire/procwire/frames"
	"github.com/procwire/procwire/internal/link"
	"github.com/procwire/procwire/replay"
)

// What a frame read inside a session does to its process is a session
// method here: it returns a result, or a violation when the peer broke the
// protocol. The connection only maps them to answers, wakeups and close
// statuses (conn.handle); it never reaches into the session's lock.

// violationClass says which close status a violation ends a connection with.
type violationClass uint8

const (
	protocolViolation violationClass = iota // 1002: a frame the protocol does not allow here or now
	creditViolation                         // 1008: stdin beyond the credit granted
)

// violation is what the peer did wrong: its connection ends with the
// status of its class and reason.
type violation struct {
	class  violationClass
	reason string
}

// violated is a protocol violation (1002).
func violated(format string, args ...any) *violation {
	return &violation{class: protocolViolation, reason: fmt.Sprintf(format, args...)}
}

// status is the close status a violation ends its connection with.
func (v *violation) status() closeStatus {
	if v.class == creditViolation {
		return closeStatus{code: websocket.StatusPolicyViolation, reason: link.Truncate(v.reason, frames.MaxCloseReason)}
	}
	return protocolError("%s", v.reason)
}

// ending says why a connection no longer serves its session: another
// connection took the process over (tomb nil), or it was destroyed.
type ending struct{ tomb *tombstone }

// status is the close status of a connection that ends so.
func (e *ending) status() closeStatus {
	if e.tomb == nil {
		return closeStatus{code: statusResumedElsewhere, reason: frames.ReasonResumedElsewhere}
	}
	return destroyedStatus(e.tomb)
}

// result is what serving a frame asks of the connection that read it.
type result struct {
	answer frames.Frame // an answer to send on it (stdin_failed, a destroy's failure)
	wake   *conn        // a connection whose writer has news: a stdin credit grant is due
	end    *ending      // it no longer serves the session: it ends so
	fault  error        // the server failed the frame: it ends with 1011
}

// servesLocked reports whether c serves s, waiting for a destroy in
// progress to end; when it does not, the ending says why. s.mu must be
// held; it is released while waiting.
func (s *session) servesLocked(c *conn) *ending {
	if s.attached == c && s.state == live {
		return nil
	}
	state := s.awaitDestroyLocked()
	switch {
	case s.attached == c && state == live: // a destroy failed; c still serves
		return nil
	case state == live:
		return &ending{}
	}
	return &ending{tomb: s.tomb}
}

// stdin serves a stdin frame read on c. The bytes are validated and taken
// from the credit under s.mu, then pushed to the process with only s.in
// held, which keeps pushes in the order of their offsets across a resume
// (a new connection's stdin waits for the old reader's push), and the
// outcome is recorded under s.mu again (pushed).
func (s *session) stdin(c *conn, f *frames.Stdin) (result, *violation) {
	s.in.Lock()
	defer s.in.Unlock()
	s.mu.Lock()
	if end := s.servesLocked(c); end != nil {
		s.mu.Unlock()
		return result{end: end}, nil
	}
	if v := s.receiveLocked(f); v != nil {
		s.mu.Unlock()
		return result{}, v
	}
	if s.stdinFailed {
		// Discarded but credited (PROTOCOL.md §5): the writer grants more.
		s.mu.Unlock()
		return result{wake: c}, nil
	}
	s.mu.Unlock()
	return s.pushed(c, s.p.PushStdin(f.Data))
}

// receiveLocked checks a stdin frame against the stream and takes its
// bytes from the credit. s.mu must be held.
func (s *session) receiveLocked(f *frames.Stdin) *violation {
	switch received := s.recv.Received(); {
	case s.stdinClosed:
		return violated("stdin after stdin_close")
	case f.Off != received:
		return violated("stdin.off %d, expected %d", f.Off, received)
	case f.Enc != "" && f.Enc != s.inEnc:
		return violated("stdin.enc %s, not negotiated", f.Enc)
	case len(f.Data) > s.srv.cfg.MaxFrameData:
		return violated("stdin.data: %d bytes, max_data is %d", len(f.Data), s.srv.cfg.MaxFrameData)
	}
	if err := s.recv.Receive(int64(len(f.Data))); err != nil {
		// The bytes are not pushed: the child receives nothing past the limit.
		return &violation{class: creditViolation, reason: err.Error()}
	}
	s.srv.m.stdinReceived(len(f.Data))
	return nil
}

// pushed records the outcome err of the push of stdin read on c. The
// session may have been taken over meanwhile (the outcome is the
// session's, and a grant due wakes the connection attached now) or
// destroyed (c then ends). s.in must be held, s.mu not.
func (s *session) pushed(c *conn, err error) (result, *violation) {
	if err != nil {
		answer := stdinFailure(err)
		if answer == nil {
			s.log.Error("push stdin", "err", err)
			return result{fault: fmt.Errorf("push stdin: %w", err)}, nil
		}
		wake, end := s.failStdin(err)
		if end != nil {
			return result{end: end}, nil
		}
		// The writer of the connection attached takes the failure to
		// grant credit.
		return result{answer: answer, wake: wake}, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.awaitDestroyLocked() == gone {
		return result{end: &ending{tomb: s.tomb}}, nil
	}
	// What PushStdin wrote itself woke no one (session.changed).
	s.syncStdinLocked()
	if s.recv.Due() {
		return result{wake: s.attached}, nil
	}
	return result{}, nil
}

// failStdin ends the stdin stream after the process failed a write or the
// half-close: the child's stdin is closed (best effort), and every byte
// received from then on is discarded but credited, as after a broken pipe.
// It returns the connection attached, or an ending when the process was
// destroyed meanwhile. s.in must be held, s.mu not.
func (s *session) failStdin(err error) (attached *conn, end *ending) {
	if !s.stdinClosed {
		if cerr := s.p.CloseStdin(); cerr != nil {
			s.log.Warn("close stdin after its failure", "err", cerr)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.awaitDestroyLocked() == gone {
		return nil, &ending{tomb: s.tomb}
	}
	s.log.Warn("stdin failed; stdin is discarded from now on", "err", err)
	s.stdinFailed = true
	s.deliverSignalsLocked() // nothing waits for stdin now
	return s.attached, nil
}

// stdinClose serves a stdin_close frame read on c: the child's stdin is
// closed after the last byte pushed (s.in orders it after them), with no
// session lock held.
func (s *session) stdinClose(c *conn, off int64) (result, *violation) {
	s.in.Lock()
	defer s.in.Unlock()
	s.mu.Lock()
	if end := s.servesLocked(c); end != nil {
		s.mu.Unlock()
		return result{end: end}, nil
	}
	received := s.recv.Received()
	s.mu.Unlock()
	// stdinClosed and stdinFailed change only under s.in, held here.
	switch {
	case off != received:
		return result{}, violated("stdin_close.off %d, expected %d", off, received)
	case s.stdinClosed: // a repeat after a resume is harmless
		return result{}, nil
	}
	var answer *frames.Error
	if !s.stdinFailed {
		if err := s.p.CloseStdin(); err != nil {
			if answer = stdinFailure(err); answer != nil {
				if _, end := s.failStdin(err); end != nil {
					return result{end: end}, nil
				}
			}
		}
	}
	s.mu.Lock()
	s.stdinClosed = true
	s.mu.Unlock()
	if answer != nil { // not a nil *frames.Error in the interface
		return result{answer: answer}, nil
	}
	return result{}, nil
}

// ack serves an ack frame read on c, already checked against the stdout c
// sent: the replay buffer lets go of what the client has.
func (s *session) ack(c *conn, stdout int64) (result, *violation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if end := s.servesLocked(c); end != nil {
		return result{end: end}, nil
	}
	var err error
	var start int64
	s.p.Stdout(func(b *replay.Buffer) {
		start = b.Start()
		err = b.Ack(stdout)
	})
	if err != nil {
		return result{}, violated("ack.stdout %d below the previous ack %d", stdout, start)
	}
	return result{}, nil
}

// signal serves a signal frame read on c (signalLocked); answered reports
// whether c will get an answer.
func (s *session) signal(c *conn, f *frames.Signal) (r result, answered bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if end := s.servesLocked(c); end != nil {
		return result{end: end}, false
	}
	return result{}, s.signalLocked(c, f.ID, f.Signal)
}

// destroy serves a destroy frame read on c: it must name this session's
// process, if it names one.
func (s *session) destroy(c *conn, f *frames.Destroy) (result, *violation) {
	if f.ProcessID != "" || f.Token != "" {
		if f.ProcessID != s.id || !tokenEqual(f.Token, s.token) {
			return result{}, violated("destroy inside a session names another process")
		}
	}
	if f.InstanceID != "" || f.OpenKey != "" {
		if f.InstanceID != s.instanceID || !keyEqual(f.OpenKey, s.openKey) {
			return result{}, violated("destroy inside a session names another process")
		}
	}
	s.mu.Lock()
	end := s.servesLocked(c)
	s.mu.Unlock()
	if end != nil {
		return result{end: end}, nil
	}
	ts, err := s.srv.destroySession(s, c, false)
	if err != nil {
		// Nothing is destroyed: say so, and stay, so the client may retry.
		return result{answer: destroyFailure(err)}, nil
	}
	return result{end: &ending{tomb: ts}}, nil
}

// resize serves a resize frame read on c: allowed only on a session with a
// terminal, applied at once, not answered, ignored after the exit.
func (s *session) resize(c *conn, f *frames.Resize) (result, *violation) {
	if !s.opened.TTY {
		return result{}, violated("resize on a session without a terminal")
	}
	s.mu.Lock()
	end := s.servesLocked(c)
	s.mu.Unlock()
	if end != nil {
		return result{end: end}, nil
	}
	if _, exited := s.p.Exit(); exited {
		return result{}, nil
	}
	if tp, ok := s.p.(TTYProcess); ok {
		if err := tp.Resize(uint16(f.Rows), uint16(f.Cols), uint16(f.XPixel), uint16(f.YPixel)); err != nil {
			s.log.Debug("resize", "err", err)
		}
	}
	return result{}, nil
}
