package client

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/procwire/procwire/credit"
	"github.com/procwire/procwire/frames"
)

// state is where a handle is in its life. Which state it is in decides
// what a call may do and what the supervisor does next; the transitions
// are the methods of machine that assign m.st.
type state uint8

const (
	// stateOpen: the handle is usable; a connection is attached or being
	// resumed.
	stateOpen state = iota
	// stateDestroying: Destroy was called and its answer is pending. A
	// handle that had ended (failed or left) can get here too.
	stateDestroying
	// stateDestroyed: the destroy settled (m.destroyErr says how).
	stateDestroyed
	// stateFailed: the handle ended (m.err) while the process may still
	// run, unusable: the supervisor destroys it.
	stateFailed
	// stateLeft: the handle ended (m.err) leaving the process to the
	// server's grace or to another client, or the process is gone.
	stateLeft
)

var stateNames = [...]string{"open", "destroying", "destroyed", "failed", "left"}

func (s state) String() string { return stateNames[s] }

// stdinState is how far the half-close of stdin has got.
type stdinState uint8

const (
	stdinOpen    stdinState = iota
	stdinClosing            // Close was called; stdin_close not yet sent
	stdinClosed             // stdin_close handed to a connection
)

// events tell the handle what a transition of the machine calls for.
type events uint8

const (
	// A blocked call of one kind may proceed: wake its waiters (process.go,
	// wakeKind). A frame wakes the calls it concerns and no others: a
	// stdout frame the reader of stdout, not a Write waiting for credit.
	evWakeOut   events = 1 << iota // stdout: bytes, its EOF
	evWakeErr                      // stderr: bytes (its end is the exit's)
	evWakeIn                       // stdin: credit, its close sent, its refusal
	evWakeOther                    // the exit, a signal's answer
	evSend                         // a frame may be ready: wake the writer
	evEnd                          // the handle has just ended or settled
	evTried                        // a destroy attempt failed and may be retried

	// evWake wakes every waiter: the handle's state changed (it ended, a
	// destroy began, a connection was resumed) or the exit came, which
	// ends stderr.
	evWake = evWakeOut | evWakeErr | evWakeIn | evWakeOther
)

// sentOn is what was sent on the attached connection.
type sentOn struct {
	stdinSent   int64 // offset after the last stdin byte sent on it
	ackSent     int64 // last ack sent
	sigSent     int64 // highest signal id sent
	closeSent   bool  // stdin_close sent
	destroySent bool
	sizeSent    int64 // the last window size (machine.sizeGen) sent on it
}

// pendingSignal is a signal sent or to send and not yet answered.
type pendingSignal struct {
	id    int64
	sig   frames.SignalName
	after int64 // stdin written before the signal: sent first
	done  bool
	ok    bool  // delivered, once done
	err   error // a typed refusal, once done
}

// machine is the client's protocol state of one process: frames from the
// server go in, frames to send and events come out. It does no I/O,
// starts no goroutine and reads no clock (time is passed in), so it can be
// driven frame by frame (FuzzClientSession does). It is not safe for
// concurrent use: the handle guards it with its mutex.
type machine struct {
	st         state
	err        error // why the handle ended; set once, with st failed, left or destroyed
	destroyErr error // how the destroy settled, once st is destroyed
	preDestroy state // the state Destroy found, restored when an attempt fails
	triedErr   error // the last failed destroy attempt's answer

	// Set by newMachine, read-only afterwards.
	instanceID  string
	id          string
	token       string
	evidence    frames.Evidence
	grace       time.Duration
	heartbeat   time.Duration
	maxData     int
	outEnc      string // encoding the server may use for stdout and stderr, or ""
	inEnc       string // encoding stdin is sent in, or ""
	stdinWindow int64  // the most stdin the server may hold unconsumed
	errCap      int    // bound of the stderr buffer
	budget      int    // consecutive failed resumes allowed

	attached bool      // a connection carries the session
	out      sentOn    // what was sent on it
	lostAt   time.Time // when the last connection was lost, while detached
	failed   int       // consecutive resumes that failed
	lastFail error     // the last of them

	outBase  int64            // stdout offset of the receiver's 0 (Attach starts past 0)
	outRecv  *credit.Receiver // stdout accounting against the window, from outBase
	outBuf   byteQueue        // stdout received and not yet read
	outEOF   int64            // stdout length; -1 until stdout_eof
	ackTo    int64            // the last stdout ack decided
	outEnded bool             // stdout returned io.EOF

	errBuf     byteQueue // stderr received and not yet read (offsets unused)
	errRecv    int64     // stderr offset after the last byte received
	errDropped int64     // stderr bytes dropped by the server's ring or errBuf
	errEnded   bool      // stderr returned io.EOF: later bytes are dropped

	stdin    stdinState
	inBuf    byteQueue      // stdin from the server's stdin_received to what was written
	inSent   int64          // stdin offset after the last byte sent on any connection
	inCredit *credit.Sender // stdin written against the server's limit
	stdinErr error          // a write_stdin refusal: stdin fails with it

	exit    *ExitStatus
	nextSig int64
	signals []*pendingSignal // ascending ids

	tty     bool          // the process runs on a terminal (opened.tty, resumed.tty)
	size    frames.Resize // the last window size Resize asked for
	sizeGen int64         // how many times Resize asked; 0: never
}

// limits are what the client accepts from the server (Options).
type limits struct {
	stdoutWindow, stdinWindow int64 // the most the server may announce
	stderrBuffer              int   // 0: the stderr window, up to defaultStderrCap
	budget                    int
	compress                  bool // the open listed s2 in both directions
}

func (o *Options) limits() limits {
	l := limits{stdoutWindow: o.StdoutWindow, stdinWindow: o.StdinWindow, stderrBuffer: o.StderrBuffer, budget: o.ResumeBudget, compress: o.Compress}
	if l.stdoutWindow == 0 {
		l.stdoutWindow = defaultStdoutCap
	}
	if l.stdinWindow == 0 {
		l.stdinWindow = defaultStdinCap
	}
	return l
}

// newMachine returns the state of the process that o opened, after
// checking o against what was asked for.
func newMachine(o *frames.Opened, instanceID string, req *frames.ProcessRequest, l limits) (*machine, error) {
	if err := checkOpened(o, instanceID, req); err != nil {
		return nil, err
	}
	switch {
	case o.MaxData < 1 || o.MaxData > frames.MaxData:
		return nil, protocolErrorf("opened.max_data", "%d outside 1..%d", o.MaxData, frames.MaxData)
	case o.StdoutWindow < 1 || o.StdoutWindow > l.stdoutWindow:
		return nil, protocolErrorf("opened.stdout_window", "%d outside the 1..%d asked for", o.StdoutWindow, l.stdoutWindow)
	case o.StderrWindow < 1:
		return nil, protocolErrorf("opened.stderr_window", "%d", o.StderrWindow)
	case o.StdinLimit < 1 || o.StdinLimit > l.stdinWindow:
		return nil, protocolErrorf("opened.stdin_limit", "%d outside the 1..%d asked for", o.StdinLimit, l.stdinWindow)
	case o.OutputEnc != "" && !l.compress:
		return nil, protocolErrorf("opened.output_enc", "%s, but the open listed none", o.OutputEnc)
	case o.StdinEnc != "" && !l.compress:
		return nil, protocolErrorf("opened.stdin_enc", "%s, but the open listed none", o.StdinEnc)
	}
	m := &machine{
		instanceID:  instanceID,
		id:          o.ProcessID,
		token:       o.Token,
		evidence:    o.Evidence,
		grace:       milliseconds(o.GraceMS),
		heartbeat:   milliseconds(o.HeartbeatMS),
		maxData:     int(o.MaxData),
		outEnc:      o.OutputEnc,
		inEnc:       o.StdinEnc,
		stdinWindow: o.StdinLimit,
		errCap:      l.stderrBuffer,
		budget:      l.budget,
		attached:    true,
		outRecv:     credit.NewReceiver(o.StdoutWindow),
		outEOF:      -1,
		inCredit:    credit.NewSender(o.StdinLimit),
		tty:         o.TTY,
	}
	if m.errCap == 0 {
		m.errCap = int(min(o.StderrWindow, defaultStderrCap))
	}
	return m, nil
}

// newAttachedMachine returns the state of the process h names, resumed by
// r with stdout from outFrom: a process opened elsewhere.
func newAttachedMachine(h *Handle, r *frames.Resumed, outFrom int64, l limits) (*machine, error) {
	if err := checkAttached(r, h); err != nil {
		return nil, err
	}
	if r.StdinLimit-r.StdinReceived > l.stdinWindow {
		return nil, protocolErrorf("resumed.stdin_limit", "%d is more than the %d-byte window beyond the %d bytes received",
			r.StdinLimit, l.stdinWindow, r.StdinReceived)
	}
	m := &machine{
		instanceID:  h.InstanceID,
		id:          h.ProcessID,
		token:       h.Token,
		evidence:    r.Evidence,
		grace:       milliseconds(h.GraceMS),
		heartbeat:   milliseconds(h.HeartbeatMS),
		maxData:     int(h.MaxData),
		outEnc:      h.OutputEnc,
		inEnc:       h.StdinEnc,
		stdinWindow: l.stdinWindow,
		errCap:      l.stderrBuffer,
		budget:      l.budget,
		attached:    true,
		outBase:     outFrom,
		outRecv:     credit.NewReceiver(l.stdoutWindow),
		outEOF:      -1,
		ackTo:       outFrom,
		inSent:      r.StdinReceived,
		inCredit:    credit.NewSender(max(r.StdinLimit, r.StdinReceived)),
		tty:         r.TTY,
	}
	m.inCredit.Reset(r.StdinReceived, max(r.StdinLimit, r.StdinReceived))
	m.inBuf.reset(r.StdinReceived)
	m.out.stdinSent = r.StdinReceived
	m.out.ackSent = outFrom
	if m.grace == 0 {
		m.grace = defaultGrace
	}
	if m.heartbeat == 0 {
		m.heartbeat = defaultHeartbeat
	}
	if m.maxData < 1 || m.maxData > frames.MaxData {
		m.maxData = defaultMaxData
	}
	if m.errCap == 0 {
		m.errCap = defaultStderrCap
	}
	return m, nil
}

// usable returns the error a new call must fail with, if any: what ended
// the handle first.
func (m *machine) usable() error {
	switch {
	case m.err != nil:
		return m.err
	case m.st == stateDestroying:
		return ErrDestroyed
	}
	return nil
}

// ended reports whether the handle ended: no connection is of use any more
// unless a destroy is pending.
func (m *machine) ended() bool { return m.st != stateOpen && m.st != stateDestroying }

// settled reports whether the supervisor has nothing left to do: the
// destroy settled, or the handle ended with nothing to destroy.
func (m *machine) settled() bool { return m.st == stateDestroyed || m.st == stateLeft }

// end ends the handle with err, once: every blocked and later call returns
// err (Wait the exit if one was seen first). A process the server no longer
// runs is left; otherwise it is to be destroyed.
func (m *machine) end(err error) events {
	if m.err != nil {
		return 0
	}
	m.err = err
	if m.st == stateOpen {
		m.st = stateFailed
		if processGone(err) {
			m.st = stateLeft
		}
	}
	return evWake | evEnd
}

// leave ends the handle with err, leaving the process to the server.
func (m *machine) leave(err error) events {
	ev := m.end(err)
	if m.st == stateFailed {
		m.st = stateLeft
	}
	return ev
}

// settleDestroy records the outcome of a destroy, once. A destroyed
// process ends the handle.
func (m *machine) settleDestroy(err error) events {
	if m.st == stateDestroyed {
		return 0
	}
	m.st, m.destroyErr = stateDestroyed, err
	if m.err == nil {
		m.err = ErrDestroyed
	}
	return evWake | evSend | evEnd
}

// destroy records a Destroy call. A destroy whose grace ran out locally (no
// connection since lostAt + grace) settles as expired at once: the server
// has destroyed the process, or will within its heartbeat.
func (m *machine) destroy(now time.Time) events {
	switch {
	case m.st == stateDestroying || m.st == stateDestroyed:
		return 0
	case errors.Is(m.err, ErrDetached):
		return 0 // another handle may hold the process now
	}
	if m.expired(now) {
		return m.settleDestroy(fmt.Errorf("%w: no connection for the %v grace", ErrExpired, m.grace))
	}
	m.preDestroy, m.st = m.st, stateDestroying
	return evWake | evSend
}

// retryableDestroy reports whether f answers a destroy that freed nothing
// and may be tried again (PROTOCOL.md §4.5): something of the process
// outlived the server's destroy, or its teardown failed.
func retryableDestroy(f *frames.Error) bool {
	return f.Operation == "destroy_process" && f.Code == frames.OperationFailed
}

// destroyFailed records a destroy attempt the server answered with a
// retryable error: the process still runs and the handle is as Destroy
// found it; the call that asked returns the error, and a later one tries
// again.
func (m *machine) destroyFailed(re *RemoteError) events {
	if m.st != stateDestroying {
		return 0
	}
	m.st, m.triedErr = m.preDestroy, re
	m.out.destroySent = false
	return evWake | evTried
}

// expired reports whether the grace ran out with no connection attached.
func (m *machine) expired(now time.Time) bool {
	return !m.attached && !m.lostAt.IsZero() && !now.Before(m.lostAt.Add(m.grace))
}

// graceEnd returns when the grace of the current detachment runs out.
func (m *machine) graceEnd() time.Time { return m.lostAt.Add(m.grace) }

// lost records that the attached connection was lost at now.
func (m *machine) lost(now time.Time) {
	if m.attached {
		m.attached, m.lostAt = false, now
	}
}

// resumeFailed records a resume that reached the server and failed without
// an answer (closed, reset). After budget of them in a row the handle
// ends, naming the last cause; it reports whether it did.
func (m *machine) resumeFailed(err error) (events, bool) {
	m.failed++
	m.lastFail = err
	if m.budget > 0 && m.failed >= m.budget {
		return m.leave(fmt.Errorf("%w: %d resumes in a row failed, the last: %w", ErrConnectionLost, m.failed, err)), true
	}
	return 0, false
}

// resumeFrame returns the first frame of a resuming connection.
func (m *machine) resumeFrame() *frames.Resume {
	return &frames.Resume{
		ProcessID:      m.id,
		Token:          m.token,
		StdoutReceived: m.outReceived(),
		StderrReceived: m.errRecv,
	}
}

// destroyFrame returns the first frame of a connection that destroys.
func (m *machine) destroyFrame() *frames.Destroy {
	return &frames.Destroy{ProcessID: m.id, Token: m.token}
}

// resumed makes the connection that got r the attached one.
func (m *machine) resumed(r *frames.Resumed) (events, error) {
	if err := checkResumed(r, m.id, &m.evidence); err != nil {
		return 0, err
	}
	// The server cannot hold bytes never sent, though they may be written
	// by now: taking its word would skip them.
	if r.StdinReceived < m.inBuf.start || r.StdinReceived > m.inSent {
		return 0, protocolErrorf("resumed.stdin_received", "%d outside the %d..%d the client holds and sent",
			r.StdinReceived, m.inBuf.start, m.inSent)
	}
	if err := m.checkStdinLimit("resumed.stdin_limit", r.StdinReceived, r.StdinLimit); err != nil {
		return 0, err
	}
	m.inBuf.discard(r.StdinReceived)
	m.inCredit.UpdateLimit(r.StdinLimit) // a limit that moves backwards is ignored
	m.attached, m.lostAt = true, time.Time{}
	m.failed, m.lastFail = 0, nil
	m.out = sentOn{stdinSent: r.StdinReceived}
	return evWake | evSend, nil
}

func (m *machine) outReceived() int64 { return m.outBase + m.outRecv.Received() }

// receive applies one frame from the server on the attached connection.
// A frame that breaks the protocol ends the handle.
func (m *machine) receive(f frames.Frame) events {
	ev, err := m.apply(f)
	if err != nil {
		ev |= m.end(err)
	}
	return ev
}

func (m *machine) apply(f frames.Frame) (events, error) {
	switch f := f.(type) {
	case *frames.Stdout:
		switch {
		case f.Enc != "" && f.Enc != m.outEnc:
			return 0, protocolErrorf("stdout.enc", "%s, but none was negotiated", f.Enc)
		case len(f.Data) > m.maxData:
			return 0, protocolErrorf("stdout.data", "%d bytes, max_data is %d", len(f.Data), m.maxData)
		case m.outEOF >= 0:
			return 0, protocolErrorf("stdout.off", "stdout at %d after stdout_eof at %d", f.Off, m.outEOF)
		case f.Off != m.outReceived():
			return 0, protocolErrorf("stdout.off", "offset %d, expected %d", f.Off, m.outReceived())
		}
		if err := m.outRecv.Receive(int64(len(f.Data))); err != nil {
			return 0, protocolErrorf("stdout.data", "%w", err)
		}
		m.outBuf.commit(f.Data) // no copy when decoded into its reservation
		return evWakeOut, nil
	case *frames.StdoutEOF:
		if f.Off != m.outReceived() {
			return 0, protocolErrorf("stdout_eof.off", "offset %d, expected %d", f.Off, m.outReceived())
		}
		m.outEOF = f.Off
		return evWakeOut, nil
	case *frames.Stderr:
		if f.Enc != "" && f.Enc != m.outEnc {
			return 0, protocolErrorf("stderr.enc", "%s, but none was negotiated", f.Enc)
		}
		if len(f.Data) > m.maxData {
			return 0, protocolErrorf("stderr.data", "%d bytes, max_data is %d", len(f.Data), m.maxData)
		}
		return m.stderr(f.Off, f.Data), nil
	case *frames.Exit:
		return m.exited(f)
	case *frames.Credit:
		return m.credit(f.StdinReceived, f.StdinLimit)
	case *frames.Signaled:
		// An answer nobody waits for any more is dropped.
		if s := m.signal(f.ID); s != nil && !s.done {
			s.done, s.ok = true, f.Result == frames.SignalDelivered
			return evWakeOther, nil
		}
		return 0, nil
	case *frames.Destroyed:
		if f.ProcessID != m.id {
			return 0, protocolErrorf("destroyed.process_id", "%q, expected %q", f.ProcessID, m.id)
		}
		// The server destroyed the process: asked to, or shutting down.
		return m.settleDestroy(nil), nil
	case *frames.Error:
		return m.remoteError(f)
	}
	return 0, protocolErrorf(f.Type().String(), "unexpected %s frame in a session", f.Type())
}

// remoteError applies an error frame: a refused operation fails that
// operation; any other ends the handle.
func (m *machine) remoteError(f *frames.Error) (events, error) {
	re := &RemoteError{Frame: *f}
	switch {
	case f.ID != 0 && f.Operation == "signal_process":
		if f.ID > m.nextSig {
			return 0, protocolErrorf("error.id", "%d names no signal sent", f.ID)
		}
		// An answer nobody waits for any more is dropped.
		if s := m.signal(f.ID); s != nil && !s.done {
			s.done, s.err = true, re
		}
		return evWakeOther, nil
	case f.Operation == "write_stdin":
		if m.stdinErr == nil {
			m.stdinErr = re
		}
		return evWakeIn, nil
	case retryableDestroy(f) && m.st == stateDestroying:
		return m.destroyFailed(re), nil
	}
	return 0, re
}

func (m *machine) signal(id int64) *pendingSignal {
	for _, s := range m.signals {
		if s.id == id {
			return s
		}
	}
	return nil
}

func (m *machine) exited(f *frames.Exit) (events, error) {
	if m.exit == nil && m.err != nil {
		return 0, nil // the handle has settled without it
	}
	s := ExitStatus{Code: f.Code, Signal: f.Signal, Reason: f.Reason}
	if m.exit == nil {
		m.exit = &s
		return evWake, nil // Wait, and stderr's readers: the exit ends stderr
	}
	if *m.exit != s {
		return 0, protocolErrorf("exit", "%v after %v", s, *m.exit)
	}
	return 0, nil
}

// stderr keeps the bytes of a stderr frame that are new, dropping the
// oldest held bytes beyond the bound.
func (m *machine) stderr(off int64, data []byte) events {
	end := off + int64(len(data))
	if end <= m.errRecv {
		return 0 // held already
	}
	if off < m.errRecv {
		data = data[m.errRecv-off:]
		off = m.errRecv
	}
	m.errDropped += off - m.errRecv // the server's ring overflowed
	m.errRecv = end
	if m.errEnded {
		m.errDropped += int64(len(data)) // nobody reads past EOF
		return 0
	}
	if over := len(data) - m.errCap; over > 0 {
		data = data[over:]
		m.errDropped += int64(over)
	}
	if over := m.errBuf.len() + len(data) - m.errCap; over > 0 {
		m.errBuf.discard(m.errBuf.start + int64(over))
		m.errDropped += int64(over)
	}
	m.errBuf.push(data)
	return evWakeErr
}

// credit applies the server's stdin accounting: bytes it holds need no
// re-sending, and the limit may have grown.
func (m *machine) credit(received, limit int64) (events, error) {
	if received > m.out.stdinSent {
		return 0, protocolErrorf("credit.stdin_received", "%d, but %d bytes were sent", received, m.out.stdinSent)
	}
	if err := m.checkStdinLimit("credit.stdin_limit", received, limit); err != nil {
		return 0, err
	}
	if received > m.inBuf.start {
		m.inBuf.discard(received)
	}
	grew, err := m.inCredit.UpdateLimit(limit)
	if err != nil {
		return 0, protocolErrorf("credit.stdin_limit", "%w", err)
	}
	if grew {
		return evWakeIn, nil
	}
	return 0, nil
}

// checkStdinLimit refuses a stdin limit more than one window beyond what
// the server received: the client would have to hold more than a window
// for re-sending.
func (m *machine) checkStdinLimit(field string, received, limit int64) error {
	if limit-received > m.stdinWindow {
		return protocolErrorf(field, "%d is more than the %d-byte window beyond the %d bytes received",
			limit, m.stdinWindow, received)
	}
	return nil
}

// next appends to dst the next frame the attached connection has to send,
// if any, and records it as sent. Destroy comes first and alone, then acks
// (they keep stdout flowing), then signals and stdin in the order they were
// written, then stdin's close (which wakes Close). f holds the frames,
// reused.
func (m *machine) next(dst []byte, f *outFrames) ([]byte, events) {
	if !m.attached {
		return dst, 0
	}
	switch m.st {
	case stateDestroying:
		if m.out.destroySent {
			return dst, 0
		}
		m.out.destroySent = true
		return frames.Append(dst, &f.destroy), 0
	case stateOpen:
	default:
		return dst, 0
	}
	if m.ackTo > m.out.ackSent {
		m.out.ackSent = m.ackTo
		f.ack.Stdout = m.ackTo
		return frames.Append(dst, &f.ack), 0
	}
	if m.sizeGen > m.out.sizeSent {
		// The latest size only, again on every new connection.
		m.out.sizeSent = m.sizeGen
		f.resize = m.size
		return frames.Append(dst, &f.resize), 0
	}
	for _, s := range m.signals {
		if s.id > m.out.sigSent && !s.done && s.after <= m.out.stdinSent {
			m.out.sigSent = s.id
			f.signal = frames.Signal{ID: s.id, Signal: s.sig}
			return frames.Append(dst, &f.signal), 0
		}
	}
	if m.out.stdinSent < m.inBuf.end() {
		f.stdin.Off, f.stdin.Data, f.stdin.Enc = m.out.stdinSent, m.inBuf.from(m.out.stdinSent, m.maxData), m.inEnc
		dst = frames.Append(dst, &f.stdin)
		m.out.stdinSent += int64(len(f.stdin.Data))
		m.inSent = max(m.inSent, m.out.stdinSent)
		f.stdin.Data = nil
		return dst, 0
	}
	if m.stdin != stdinOpen && !m.out.closeSent {
		m.out.closeSent = true
		m.stdin = stdinClosed
		f.stdinClose.Off = m.inBuf.end()
		return frames.Append(dst, &f.stdinClose), evWakeIn
	}
	return dst, 0
}

// outFrames are the frames next encodes, reused: a fresh frame per call
// would escape to the heap.
type outFrames struct {
	destroy    frames.Destroy
	ack        frames.Ack
	signal     frames.Signal
	stdin      frames.Stdin
	stdinClose frames.StdinClose
	resize     frames.Resize
}

// read moves up to len(b) held bytes of stdout (or stderr) into b. It
// hands over every byte held before it reports the end of the stream or
// of the handle; ok false means there is nothing to report yet.
func (m *machine) read(stderr bool, b []byte) (n int, err error, ev events, ok bool) {
	q, complete, ended := &m.outBuf, m.outEOF >= 0, &m.outEnded
	if stderr {
		q, complete, ended = &m.errBuf, m.exit != nil, &m.errEnded
	}
	switch {
	case *ended:
		return 0, io.EOF, 0, true
	case !q.empty() && len(b) > 0:
		n = copy(b, q.from(q.start, len(b)))
		q.discard(q.start + int64(n))
		if !stderr {
			ev = m.consumed(n)
		}
		return n, nil, ev, true
	case complete && q.empty():
		*ended = true
		return 0, io.EOF, 0, true
	case m.st != stateOpen:
		return 0, m.usable(), 0, true
	case len(b) == 0:
		return 0, nil, 0, true
	}
	return 0, nil, 0, false
}

// consumed records n stdout bytes handed to the reader, and asks for an ack
// when a grant is due.
func (m *machine) consumed(n int) events {
	m.outRecv.Consume(int64(n))
	if _, grant := m.outRecv.Grant(); grant {
		m.ackTo = m.outBase + m.outRecv.Consumed()
		return evSend
	}
	return 0
}

// write takes as much of b as the server's stdin credit allows; n 0 with a
// nil error means there is no credit now.
func (m *machine) write(b []byte) (int, events, error) {
	if err := m.stdinUsable(); err != nil {
		return 0, 0, err
	}
	k := int(m.inCredit.Take(int64(len(b))))
	if k == 0 {
		return 0, 0, nil
	}
	m.inBuf.push(b[:k])
	return k, evSend, nil
}

// stdinUsable returns the error a write must fail with, if any.
func (m *machine) stdinUsable() error {
	if err := m.usable(); err != nil {
		return err
	}
	if m.stdinErr != nil {
		return m.stdinErr
	}
	if m.stdin != stdinOpen {
		return ErrStdinClosed
	}
	return nil
}

// closeStdin asks for stdin's half-close.
func (m *machine) closeStdin() events {
	if m.stdin == stdinOpen {
		m.stdin = stdinClosing
		return evSend
	}
	return 0
}

// stdinCloseDone reports whether the close was handed to a connection, or
// the error it fails with.
func (m *machine) stdinCloseDone() (bool, error) {
	if m.stdin == stdinClosed {
		return true, nil
	}
	if err := m.usable(); err != nil {
		return false, err
	}
	return false, m.stdinErr
}

// sendSignal queues sig behind the stdin written so far and returns its id.
func (m *machine) sendSignal(sig frames.SignalName) (int64, events, error) {
	if err := m.usable(); err != nil {
		return 0, 0, err
	}
	m.nextSig++
	m.signals = append(m.signals, &pendingSignal{id: m.nextSig, sig: sig, after: m.inBuf.end()})
	return m.nextSig, evSend, nil
}

// signalDone returns the answer to signal id once there is one, and
// forgets the signal then.
func (m *machine) signalDone(id int64) (done, delivered bool, err error) {
	s := m.signal(id)
	switch {
	case s == nil:
		return true, false, ErrDestroyed
	case s.done:
		m.dropSignal(id)
		return true, s.ok, s.err
	}
	if err := m.usable(); err != nil {
		m.dropSignal(id)
		return true, false, err
	}
	return false, false, nil
}

func (m *machine) dropSignal(id int64) {
	for i, s := range m.signals {
		if s.id == id {
			m.signals = append(m.signals[:i], m.signals[i+1:]...)
			return
		}
	}
}

// wait returns the settled answer of Wait, if there is one.
func (m *machine) wait() (ExitStatus, error, bool) {
	switch {
	case m.exit != nil:
		return *m.exit, nil, true
	case m.err != nil:
		return ExitStatus{}, m.err, true
	}
	return ExitStatus{}, nil, false
}

// detach ends the handle locally, leaving the process to the grace.
func (m *machine) detach() events {
	if m.st == stateDestroying {
		return 0 // a destroy in progress goes on
	}
	return m.leave(ErrDetached)
}

// isFinal reports whether err ends the handle rather than the connection.
func isFinal(err error) bool {
	var pe *ProtocolError
	var re *RemoteError
	return errors.As(err, &pe) || errors.As(err, &re)
}
