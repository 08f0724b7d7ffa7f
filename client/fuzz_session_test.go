//go:build linux

package client

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"testing"
	"time"

	"github.com/procwire/procwire/frames"
)

// FuzzClientSession plays a hostile or broken server against the client's
// state machine, frame by frame: no socket, no goroutine, no clock. After
// an opened (faithful, or announcing more than was asked for), the model
// server sends the frames an input describes (valid and mutated stdout,
// stdout_eof, stderr, exit, credit, signaled, destroyed, frames out of
// place, error frames for a signal, for stdin and for the session), loses
// connections and answers the resumes that follow, faithfully or not, or
// lets time run past the grace; the same input has the test, acting as the
// Runner, write stdin, close it, signal, read and destroy.
//
// Whatever the server does, the machine must not panic; a frame that breaks
// the protocol ends the handle with a *ProtocolError; every end is typed;
// stdout reads exactly the bytes sent at their offsets, ends only with
// io.EOF at the offset a stdout_eof named, hands over every byte held
// before an error, and nothing after io.EOF (stderr neither); Wait settles
// once; the bytes held never exceed the windows asked for; the client sends
// only stdin the server granted, in order, with the bytes written, a signal
// only after the stdin written before it, acks only stdout sent and
// nothing once the handle ended.
func FuzzClientSession(f *testing.F) {
	for _, s := range sessionSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		runSession(t, data)
	})
}

const (
	sessionMaxOps = 48
	sessionInst   = "inst-1"
	sessionID     = "0123456789abcdef0123456789abcdef"
	sessionToken  = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	otherID       = "fedcba9876543210fedcba9876543210"
)

// The streams: byte i of each is a hash of i, so that a byte moved,
// dropped or repeated reads as a wrong byte.
const (
	stdoutSeed = 1
	stderrSeed = 2
	stdinSeed  = 3
)

func streamByte(seed uint64, i int64) byte {
	x := uint64(i) + seed*0x9e3779b97f4a7c15
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return byte(x)
}

func streamBytes(seed uint64, off int64, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = streamByte(seed, off+int64(i))
	}
	return b
}

// sessionParams are the opened the model sends and how it behaves.
type sessionParams struct {
	stdoutWindow, stdinWindow, stderrWindow, maxData int64
	graceMS, heartbeatMS                             int64
	manualSignals                                    bool // signals are answered only by the script
	manualCredit                                     bool // stdin is credited only by the script
	oversized                                        bool // opened announces more than was asked for
	destroyDrop                                      bool // a destroy in a session is answered by losing the connection
	stderrReader                                     bool // the Runner reads stderr too
	stderrBuffer                                     int  // Options.StderrBuffer
	readSize                                         int  // the Runner's stdout read buffer
	budget                                           int  // Options.ResumeBudget
}

type sessionOp struct{ code, a, b, c byte }

// Script operations, chosen by code % len(sessionOps).
const (
	opStdout       = iota // valid stdout at the next offset
	opStdoutBig           // stdout above max_data
	opStdoutOff           // stdout at a wrong offset
	opEOF                 // stdout_eof, mostly at the next offset
	opStderr              // stderr, with jumps, overlaps and sizes
	opExit                // exit, the same again or another
	opCredit              // credit, valid or not
	opSignaled            // signaled for a known or unknown id
	opDestroyed           // destroyed for this or another id
	opSessionFrame        // resumed, opened or a client frame in a session
	opDrop                // the connection is lost; the next op answers the resume
	opError               // an error frame: for a signal, for stdin, or for the session
	opWrite               // Runner: write stdin
	opCloseStdin          // Runner: close stdin
	opSignal              // Runner: signal
	opRead                // Runner: read stdout (and stderr)
	opFlush               // the client's frames reach the server
	opTime                // time passes
	opDestroy             // Runner: destroy
)

// sessionOps weighs the operations.
var sessionOps = [...]int{
	opStdout, opStdout, opStdout, opStdout, opStdoutBig, opStdoutOff, opEOF, opEOF,
	opStderr, opStderr, opExit, opExit, opCredit, opCredit, opSignaled, opDestroyed,
	opSessionFrame, opDrop, opDrop, opDrop, opError, opError, opWrite, opWrite,
	opWrite, opCloseStdin, opSignal, opSignal, opRead, opRead, opFlush, opFlush,
	opTime, opDestroy,
}

// Answers to a resume, chosen by code % 16 of the next operation.
const (
	resFaithful      = 8 // 0..8
	resEvidence      = 9
	resProcessID     = 10
	resStdinReceived = 11
	resStdinLimit    = 12
	resError         = 13
	resFail          = 14 // closed before an answer: a failed resume
	resLate          = 15 // the grace ran out first
)

func parseSession(data []byte) (sessionParams, []sessionOp) {
	var h [8]byte
	data = data[copy(h[:], data):]
	p := sessionParams{
		stdoutWindow:  1 + int64(h[0])*32,
		maxData:       1 + int64(h[1])*4,
		stdinWindow:   1 + int64(h[2])*16,
		stderrWindow:  1 + int64(h[3])*8,
		graceMS:       20 + int64(h[4]),
		manualSignals: h[5]&1 != 0,
		manualCredit:  h[5]&2 != 0,
		oversized:     h[5]&4 != 0 && h[6]&1 != 0 && h[0] > 0,
		destroyDrop:   h[5]&64 != 0,
		stderrReader:  h[5]&128 != 0,
		readSize:      1 + int(h[7])*4,
		budget:        1 + int(h[6]>>5),
	}
	if h[5]&32 != 0 {
		// Centuries: more than a time.Duration holds.
		p.graceMS = [...]int64{9223372036855, 18446744073710, math.MaxInt64}[h[4]%3]
	}
	if h[5]&8 != 0 {
		p.heartbeatMS = 10 + int64(h[6]%40)
	}
	if h[5]&16 != 0 {
		p.stderrBuffer = 1 + int(h[6])
	}
	var ops []sessionOp
	for len(data) >= 4 && len(ops) < sessionMaxOps {
		ops = append(ops, sessionOp{data[0], data[1], data[2], data[3]})
		data = data[4:]
	}
	return p, ops
}

// sessionReq is the request every input opens.
func sessionReq() frames.ProcessRequest {
	return frames.ProcessRequest{
		Executable:       "cat",
		Arguments:        []string{"-u"},
		WorkingDirectory: "/",
		Environment:      map[string]string{"PATH": "/usr/bin:/bin"},
	}
}

func sessionEvidence() frames.Evidence {
	r := sessionReq()
	return frames.Evidence{
		WireRevision:     frames.WireRevision,
		Provider:         "fuzz",
		ProviderRevision: "0",
		InstanceID:       sessionInst,
		ProcessID:        sessionID,
		Executable:       r.Executable,
		WorkingDirectory: r.WorkingDirectory,
		ArgumentsDigest:  frames.ArgumentsDigest(r.Arguments),
		StartedAt:        "2026-01-01T00:00:00.000Z",
	}
}

// session is one input: the machine, the model server and the Runner.
type session struct {
	t   *testing.T
	prm sessionParams
	m   *machine
	now time.Time
	out outFrames
	buf []byte

	// The server.
	attached  bool
	outSent   int64 // stdout sent
	acked     int64 // the last ack on any connection
	eofSent   bool
	exitSent  *ExitStatus
	errSent   int64 // stderr offset after the last byte sent
	inRecv    int64 // stdin received, on any connection
	inLimit   int64 // the stdin limit granted
	closeRecv bool  // stdin_close received
	sigSeen   int64 // the highest signal id on this connection
	destroyed bool  // a destroy was received and answered

	// The Runner.
	written  int64           // stdin the machine took
	sigAfter map[int64]int64 // stdin written when each signal was sent
	readOff  int64           // stdout read
	outEOF   bool            // stdout returned io.EOF
	errRead  int64           // stderr bytes read
	errEOF   bool            // stderr returned io.EOF
	waited   *waitAnswer
	violated string // the last violation sent: the handle must end with a *ProtocolError
}

type waitAnswer struct {
	st  ExitStatus
	err error
}

func runSession(t *testing.T, data []byte) {
	prm, ops := parseSession(data)
	s := &session{t: t, prm: prm, now: time.Unix(0, 0), sigAfter: map[int64]int64{}}
	o := &frames.Opened{
		ProcessID: sessionID, Token: sessionToken, Evidence: sessionEvidence(),
		StdinLimit: prm.stdinWindow, StdoutWindow: prm.stdoutWindow, StderrWindow: prm.stderrWindow,
		GraceMS: prm.graceMS, HeartbeatMS: prm.heartbeatMS, ExitWaitMS: 1000, MaxData: prm.maxData,
	}
	l := limits{stdoutWindow: prm.stdoutWindow, stdinWindow: prm.stdinWindow, stderrBuffer: prm.stderrBuffer, budget: prm.budget}
	if prm.oversized {
		l.stdoutWindow = max(1, prm.stdoutWindow-1)
	}
	req := sessionReq()
	m, err := newMachine(o, sessionInst, &req, l)
	if prm.oversized {
		var pe *ProtocolError
		if !errors.As(err, &pe) || pe.Field != "opened.stdout_window" {
			t.Fatalf("opened over the window asked for: %v", err)
		}
		return
	}
	if err != nil {
		t.Fatalf("faithful opened refused: %v", err)
	}
	s.m, s.attached, s.inLimit = m, true, prm.stdinWindow
	for i := 0; i < len(ops); i++ {
		op := ops[i]
		if sessionOps[int(op.code)%len(sessionOps)] == opDrop {
			var answer sessionOp
			if i+1 < len(ops) {
				i++
				answer = ops[i]
			}
			s.drop(op, answer)
		} else {
			s.apply(op)
		}
		if op.c&1 == 0 {
			s.flush()
		}
		if op.c&2 == 0 {
			s.read()
		}
		s.check(fmt.Sprintf("op %d (%d)", i, sessionOps[int(op.code)%len(sessionOps)]))
	}
	// The end: the Runner destroys; every call then fails or settles.
	s.m.destroy(s.now)
	s.flush()
	for range 4 {
		s.read()
	}
	s.check("the end")
	if s.m.ended() {
		if err := s.m.usable(); err == nil {
			t.Fatalf("an ended handle is usable")
		}
	}
}

// closeConn closes the connection, as the server does after its last word
// and the supervisor once the handle ended.
func (s *session) closeConn() {
	s.attached = false
	s.m.lost(s.now)
}

// send delivers fr to the machine; violation names the rule fr breaks.
func (s *session) send(fr frames.Frame, violation string) {
	if !s.attached || s.m.ended() {
		return // the connection is gone; nothing reaches the machine
	}
	if f, ok := fr.(*frames.Stdout); ok && f.Enc == "" {
		// As the read loop delivers it: decoded straight into room
		// reserved at the end of the stdout queue (readLoop,
		// reserveStdout), which the machine commits, or not.
		dec := frames.Decoder{MaxLine: frames.MaxLine, Into: func(t frames.Type, n int) []byte {
			if t != frames.TypeStdout {
				return nil
			}
			return s.m.outBuf.reserve(n)
		}}
		d, err := dec.Decode(frames.Append(nil, f))
		if err != nil {
			s.t.Fatalf("a stdout frame does not decode: %v", err)
		}
		fr = d
	}
	s.m.receive(fr)
	if s.m.ended() {
		s.closeConn()
	}
	if violation != "" {
		s.violated = violation
		var pe *ProtocolError
		if !errors.As(s.m.err, &pe) {
			s.t.Fatalf("%s: the handle goes on (%v)", violation, s.m.err)
		}
	}
}

func (s *session) apply(op sessionOp) {
	prm := &s.prm
	kind := sessionOps[int(op.code)%len(sessionOps)]
	if kind < opDrop && (!s.attached || s.m.ended()) {
		return // no connection: nothing the server sends arrives
	}
	switch kind {
	case opStdout:
		n := 1 + int64(op.a)%prm.maxData
		// A hostile server goes past the window the client granted.
		limit := s.m.outBase + s.m.outRecv.Limit()
		over := s.outSent+n > limit
		if s.eofSent {
			s.send(&frames.Stdout{Off: s.outSent, Data: streamBytes(stdoutSeed, s.outSent, int(n))}, "stdout after stdout_eof")
			return
		}
		if over && op.b&1 == 0 {
			n = limit - s.outSent
			if n < 1 {
				return
			}
			over = false
		}
		fr := &frames.Stdout{Off: s.outSent, Data: streamBytes(stdoutSeed, s.outSent, int(n))}
		if over {
			s.send(fr, "stdout past the window")
			return
		}
		s.outSent += n
		s.send(fr, "")
	case opStdoutBig:
		if prm.maxData < frames.MaxData {
			s.send(&frames.Stdout{Off: s.outSent, Data: make([]byte, prm.maxData+1)}, "stdout over max_data")
		}
	case opStdoutOff:
		off := s.outSent + 1 + int64(op.a)
		if op.b&1 == 0 && s.outSent > 0 {
			off = int64(op.a) % s.outSent
		}
		s.send(&frames.Stdout{Off: off, Data: []byte{1}}, "stdout at a wrong offset")
	case opEOF:
		switch {
		case op.a%4 == 3 && s.outSent > 0:
			s.send(&frames.StdoutEOF{Off: s.outSent - 1}, "stdout_eof early")
		case op.a%4 == 2:
			s.send(&frames.StdoutEOF{Off: s.outSent + 1}, "stdout_eof late")
		default:
			s.eofSent = true
			s.send(&frames.StdoutEOF{Off: s.outSent}, "")
		}
	case opStderr:
		n := 1 + int64(op.c)%prm.maxData
		off := max(0, s.errSent-int64(op.a)%8+int64(op.b)%8) // overlaps and jumps
		if op.a%16 == 15 && prm.maxData < frames.MaxData {
			s.send(&frames.Stderr{Off: off, Data: make([]byte, prm.maxData+1)}, "stderr over max_data")
			return
		}
		s.errSent = max(s.errSent, off+n)
		s.send(&frames.Stderr{Off: off, Data: streamBytes(stderrSeed, off, int(n))}, "")
	case opExit:
		st := ExitStatus{Code: int(op.a)}
		if op.b&1 != 0 {
			st = ExitStatus{Signal: "SIGTERM"}
		}
		if s.exitSent != nil && op.c&4 == 0 {
			st = *s.exitSent
		}
		fr := &frames.Exit{Code: st.Code, Signal: st.Signal}
		if s.exitSent != nil && *s.exitSent != st && s.m.err == nil {
			s.send(fr, "a second different exit")
			return
		}
		if s.exitSent == nil {
			s.exitSent = &st
		}
		s.send(fr, "")
	case opCredit:
		switch op.c % 4 {
		case 0: // valid: the child consumed some
			s.inLimit = max(s.inLimit, s.inRecv+int64(op.a)%(prm.stdinWindow+1))
			s.send(&frames.Credit{StdinReceived: s.inRecv, StdinLimit: s.inLimit}, "")
		case 1: // backwards: ignored
			s.send(&frames.Credit{StdinReceived: s.inRecv, StdinLimit: max(0, s.inLimit-int64(op.a))}, "")
		case 2:
			s.send(&frames.Credit{StdinReceived: s.inRecv, StdinLimit: s.inRecv + prm.stdinWindow + 1 + int64(op.a)}, "stdin credit beyond a window")
		case 3:
			if s.inRecv+1+int64(op.a) > s.m.out.stdinSent {
				s.send(&frames.Credit{StdinReceived: s.inRecv + 1 + int64(op.a), StdinLimit: s.inLimit + 1 + int64(op.a)}, "stdin credit beyond sent")
			}
		}
	case opSignaled:
		id := int64(op.a % 8)
		if id == 0 {
			id = s.m.nextSig + 1 // nobody asked: dropped
		}
		s.send(&frames.Signaled{ID: id, Result: frames.SignalDelivered}, "")
	case opDestroyed:
		if op.a&1 == 0 {
			s.send(&frames.Destroyed{ProcessID: otherID}, "destroyed for another process")
			return
		}
		s.send(&frames.Destroyed{ProcessID: sessionID}, "")
		s.closeConn() // the server closes after destroyed
	case opSessionFrame:
		switch op.a % 3 {
		case 0:
			s.send(&frames.Resumed{ProcessID: sessionID, Evidence: sessionEvidence(), StdinReceived: s.inRecv, StdinLimit: s.inLimit}, "resumed in a session")
		case 1:
			s.send(&frames.Opened{ProcessID: sessionID, Token: sessionToken, Evidence: sessionEvidence(), StdinLimit: 1, StdoutWindow: 1, StderrWindow: 1, MaxData: 1}, "opened in a session")
		case 2:
			s.send(&frames.Ack{Stdout: 0}, "a client frame")
		}
	case opError:
		switch op.a % 4 {
		case 0: // a signal the server failed to deliver
			if len(s.m.signals) > 0 && s.m.signals[0].id <= s.sigSeen {
				s.send(&frames.Error{Code: frames.OperationFailed, Operation: "signal_process", Reason: "signal_failed", ID: s.m.signals[0].id}, "")
			}
		case 1: // a refused stdin write: stdin fails, the handle goes on
			s.send(&frames.Error{Code: frames.OperationFailed, Operation: "write_stdin", Reason: "stdin_failed"}, "")
		case 2:
			s.send(&frames.Error{Code: frames.OperationFailed, Operation: "signal_process", Reason: "signal_failed", ID: s.m.nextSig + 1 + int64(op.b)}, "an error for a signal never sent")
		case 3:
			s.send(&frames.Error{Code: frames.LifecycleConflict, Operation: "resume_process", Actual: "process_not_found"}, "")
			s.closeConn()
		}
	case opWrite:
		n := 1 + int(op.a)
		k, _, err := s.m.write(streamBytes(stdinSeed, s.written, n))
		if err == nil && k > n || err != nil && k != 0 {
			s.t.Fatalf("write of %d took %d, %v", n, k, err)
		}
		s.written += int64(k)
	case opCloseStdin:
		s.m.closeStdin()
	case opSignal:
		if id, _, err := s.m.sendSignal(frames.SIGTERM); err == nil {
			s.sigAfter[id] = s.written
		}
	case opRead:
		s.read()
	case opFlush:
		s.flush()
	case opTime:
		s.now = s.now.Add(time.Duration(op.a) * time.Millisecond)
	case opDestroy:
		s.m.destroy(s.now)
	}
}

// drop loses the connection and answers the resume the supervisor makes
// as answer says.
func (s *session) drop(op, answer sessionOp) {
	m := s.m
	m.lost(s.now)
	s.attached = false
	if m.ended() {
		return
	}
	s.now = s.now.Add(time.Duration(op.a) * time.Millisecond)
	variant := int(answer.code % 16)
	if variant == resLate {
		s.now = s.now.Add(m.grace)
	}
	if m.expired(s.now) {
		// The supervisor gives up, as would the server.
		m.leave(ErrConnectionLost)
		return
	}
	if m.st == stateDestroying {
		// A destroy as the first frame: settled by the answer.
		m.settleDestroy(nil)
		return
	}
	r := m.resumeFrame()
	if r.ProcessID != sessionID || r.Token != sessionToken || r.StdoutReceived != s.readOff+int64(m.outBuf.len()) {
		s.t.Fatalf("resume %+v: stdout received %d", r, s.readOff+int64(m.outBuf.len()))
	}
	resumed := &frames.Resumed{ProcessID: sessionID, Evidence: sessionEvidence(), StdinReceived: s.inRecv, StdinLimit: s.inLimit}
	violation := ""
	switch {
	case variant <= resFaithful:
	case variant == resEvidence:
		resumed.Evidence.StartedAt = "2026-01-01T00:00:00.001Z"
		violation = "evidence changed"
	case variant == resProcessID:
		resumed.ProcessID = otherID
		violation = "another process"
	case variant == resStdinReceived:
		if m.inSent+1 > m.inBuf.start {
			resumed.StdinReceived = m.inSent + 1 + int64(answer.a)
			resumed.StdinLimit = resumed.StdinReceived
			violation = "stdin never sent"
		}
	case variant == resStdinLimit:
		resumed.StdinLimit = s.inRecv + s.prm.stdinWindow + 1
		violation = "stdin limit beyond a window"
	case variant == resError:
		m.end(&RemoteError{Frame: frames.Error{Code: frames.LifecycleConflict, Operation: "resume_process", Actual: "process_expired"}})
		return
	case variant == resFail:
		m.resumeFailed(errors.New("closed"))
		return
	}
	_, err := m.resumed(resumed)
	if violation != "" {
		var pe *ProtocolError
		if !errors.As(err, &pe) {
			s.t.Fatalf("resume answered with %s: %v", violation, err)
		}
		m.end(err)
		s.violated = violation
		return
	}
	if err != nil {
		s.t.Fatalf("a faithful resumed refused: %v", err)
	}
	s.attached, s.sigSeen = true, 0
	// The server replays from what the client holds: all it sent, as
	// nothing is lost in flight here.
	if r.StdoutReceived != s.outSent {
		s.t.Fatalf("resume from %d, %d sent", r.StdoutReceived, s.outSent)
	}
	if s.eofSent {
		s.send(&frames.StdoutEOF{Off: s.outSent}, "")
	}
	if s.exitSent != nil {
		s.send(&frames.Exit{Code: s.exitSent.Code, Signal: s.exitSent.Signal}, "")
	}
	s.send(&frames.Credit{StdinReceived: s.inRecv, StdinLimit: s.inLimit}, "")
}

// flush hands every frame the client has to send to the server, checking
// each.
func (s *session) flush() {
	for range 1 << 12 {
		var ev events
		s.buf, ev = s.m.next(s.buf[:0], &s.out)
		_ = ev
		if len(s.buf) == 0 {
			return
		}
		if !s.attached {
			s.t.Fatalf("a frame with no connection: %s", s.buf)
		}
		if s.m.ended() {
			s.t.Fatalf("a frame after the end (%v): %s", s.m.err, s.buf)
		}
		fr, err := (&frames.Decoder{MaxLine: frames.MaxLine}).Decode(s.buf)
		if err != nil {
			s.t.Fatalf("the client sent %q: %v", s.buf, err)
		}
		s.fromClient(fr)
	}
	s.t.Fatalf("the client never stops sending")
}

func (s *session) fromClient(fr frames.Frame) {
	t := s.t
	switch fr := fr.(type) {
	case *frames.Ack:
		if fr.Stdout < s.acked || fr.Stdout > s.outSent || fr.Stdout > s.readOff {
			t.Fatalf("ack %d: previous %d, sent %d, read %d", fr.Stdout, s.acked, s.outSent, s.readOff)
		}
		s.acked = fr.Stdout
	case *frames.Stdin:
		switch {
		case s.closeRecv:
			t.Fatalf("stdin after stdin_close")
		case fr.Off != s.inRecv:
			t.Fatalf("stdin at %d, received %d", fr.Off, s.inRecv)
		case fr.Off+int64(len(fr.Data)) > s.inLimit:
			t.Fatalf("stdin to %d past the limit %d", fr.Off+int64(len(fr.Data)), s.inLimit)
		case int64(len(fr.Data)) > s.prm.maxData:
			t.Fatalf("stdin of %d bytes, max_data %d", len(fr.Data), s.prm.maxData)
		case !bytes.Equal(fr.Data, streamBytes(stdinSeed, fr.Off, len(fr.Data))):
			t.Fatalf("stdin at %d: not the bytes written", fr.Off)
		}
		s.inRecv += int64(len(fr.Data))
		if !s.prm.manualCredit {
			s.inLimit = s.inRecv + s.prm.stdinWindow // the child reads at once
			s.send(&frames.Credit{StdinReceived: s.inRecv, StdinLimit: s.inLimit}, "")
		}
	case *frames.StdinClose:
		if fr.Off != s.inRecv || fr.Off != s.written {
			t.Fatalf("stdin_close at %d, received %d, written %d", fr.Off, s.inRecv, s.written)
		}
		s.closeRecv = true
	case *frames.Signal:
		if fr.ID <= s.sigSeen {
			t.Fatalf("signal %d after %d", fr.ID, s.sigSeen)
		}
		if after := s.sigAfter[fr.ID]; s.inRecv < after {
			t.Fatalf("signal %d overtook stdin: %d received, %d written before it", fr.ID, s.inRecv, after)
		}
		s.sigSeen = fr.ID
		if !s.prm.manualSignals {
			s.send(&frames.Signaled{ID: fr.ID, Result: frames.SignalDelivered}, "")
		}
	case *frames.Destroy:
		if s.prm.destroyDrop {
			s.m.lost(s.now)
			s.attached = false
			s.m.settleDestroy(nil) // the supervisor's first-frame destroy
			return
		}
		if s.exitSent == nil {
			s.exitSent = &ExitStatus{Signal: "SIGKILL"}
			s.send(&frames.Exit{Signal: "SIGKILL"}, "")
		}
		s.send(&frames.Destroyed{ProcessID: sessionID}, "")
		s.closeConn()
	default:
		t.Fatalf("the client sent %s", fr.Type())
	}
}

// read reads stdout (and stderr) as the Runner would, checking the bytes.
func (s *session) read() {
	b := make([]byte, s.prm.readSize)
	n, err, _, ok := s.m.read(false, b)
	if ok {
		s.readChecked(n, err, b)
	}
	if s.prm.stderrReader {
		n, err, _, ok := s.m.read(true, b)
		if ok {
			if s.errEOF && (n > 0 || err != io.EOF) {
				s.t.Fatalf("stderr after io.EOF: %d, %v", n, err)
			}
			s.errRead += int64(n)
			s.errEOF = s.errEOF || err == io.EOF
			if s.errRead+s.m.errDropped+int64(s.m.errBuf.len()) != s.m.errRecv {
				s.t.Fatalf("stderr: read %d, dropped %d, held %d, received %d", s.errRead, s.m.errDropped, s.m.errBuf.len(), s.m.errRecv)
			}
		}
	}
}

func (s *session) readChecked(n int, err error, b []byte) {
	t := s.t
	if s.outEOF && (n > 0 || err != io.EOF) {
		t.Fatalf("stdout after io.EOF: %d, %v", n, err)
	}
	if !bytes.Equal(b[:n], streamBytes(stdoutSeed, s.readOff, n)) {
		t.Fatalf("stdout at %d: wrong bytes", s.readOff)
	}
	s.readOff += int64(n)
	switch {
	case err == io.EOF:
		if !s.eofSent || s.readOff != s.outSent {
			t.Fatalf("io.EOF at %d; stdout_eof sent %v at %d", s.readOff, s.eofSent, s.outSent)
		}
		s.outEOF = true
	case err != nil:
		if n > 0 {
			t.Fatalf("%d bytes with %v", n, err)
		}
		if s.m.outBuf.len() > 0 {
			t.Fatalf("%v before the %d bytes held", err, s.m.outBuf.len())
		}
		if !isTyped(err) {
			t.Fatalf("read: untyped %v", err)
		}
	}
}

// check checks what holds after every operation.
func (s *session) check(where string) {
	t, m := s.t, s.m
	if m.outBuf.len() > int(s.prm.stdoutWindow) || m.errBuf.len() > m.errCap || m.inBuf.len() > int(s.prm.stdinWindow) {
		t.Fatalf("%s: holds stdout %d (window %d), stderr %d (cap %d), stdin %d (window %d)", where,
			m.outBuf.len(), s.prm.stdoutWindow, m.errBuf.len(), m.errCap, m.inBuf.len(), s.prm.stdinWindow)
	}
	if m.err != nil && !isTyped(m.err) {
		t.Fatalf("%s: the handle ended with an untyped %v", where, m.err)
	}
	if s.violated != "" {
		var pe *ProtocolError
		if !errors.As(m.err, &pe) && !errors.Is(m.err, ErrDestroyed) && !errors.Is(m.err, ErrConnectionLost) {
			t.Fatalf("%s: after %s the handle ended with %v", where, s.violated, m.err)
		}
	}
	if st, err, ok := m.wait(); ok {
		if s.waited != nil && (s.waited.st != st || s.waited.err != err) {
			t.Fatalf("%s: Wait said %v, %v, now %v, %v", where, s.waited.st, s.waited.err, st, err)
		}
		s.waited = &waitAnswer{st, err}
	}
}

// isTyped reports whether err is one of the errors that end a handle.
func isTyped(err error) bool {
	var pe *ProtocolError
	var re *RemoteError
	return errors.As(err, &pe) || errors.As(err, &re) ||
		errors.Is(err, ErrConnectionLost) || errors.Is(err, ErrDestroyed) || errors.Is(err, ErrExpired)
}

// sessionSeed builds an input from the opened parameters and operations.
func sessionSeed(h [8]byte, ops ...sessionOp) []byte {
	b := h[:]
	for _, o := range ops {
		b = append(b, o.code, o.a, o.b, o.c)
	}
	return b
}

// op returns an operation whose code selects kind.
func op(kind int, a, b, c byte) sessionOp {
	for i, k := range sessionOps {
		if k == kind {
			return sessionOp{byte(i), a, b, c}
		}
	}
	panic("no such operation")
}

// resumeAnswer returns an operation that, taken by a resume, answers it
// with variant.
func resumeAnswer(variant int, a, b byte) sessionOp {
	return sessionOp{byte(variant), a, b, 0}
}

// sessionSeeds has one input per misbehaviour.
func sessionSeeds() [][]byte {
	// stdout window 256+1, max_data 64+1, stdin window 1024+1, stderr
	// window 64+1, grace 120 ms.
	std := [8]byte{8, 16, 64, 8, 100, 0, 0, 16}
	out := func(n byte) sessionOp { return op(opStdout, n, 0, 0) }
	full := op(opStdout, 255, 1, 0)
	eof := op(opEOF, 0, 0, 0)
	exit := op(opExit, 3, 0, 0)
	drop := func(ms byte) sessionOp { return op(opDrop, ms, 0, 0) }
	write := func(n byte) sessionOp { return op(opWrite, n, 0, 0) }
	read := op(opRead, 0, 0, 0)
	faithful := resumeAnswer(0, 0, 0)
	manual := std
	manual[5] = 1 | 2
	return [][]byte{
		sessionSeed(std),
		sessionSeed(std, out(10), full, eof, exit, read, read),
		sessionSeed(std, write(20), out(5), op(opCloseStdin, 0, 0, 0), eof, exit, read),
		// stdout at wrong offsets, sizes, past the window
		sessionSeed(std, out(10), op(opStdoutOff, 0, 0, 0)),
		sessionSeed(std, out(10), op(opStdoutOff, 3, 1, 0)),
		sessionSeed(std, op(opStdoutBig, 10, 0, 0)),
		sessionSeed(std, full, full, full, full, full, full),
		sessionSeed(std, op(opStdout, 255, 0, 2), op(opStdout, 255, 0, 2), op(opStdout, 255, 0, 2), op(opStdout, 255, 0, 2), op(opStdout, 255, 0, 2)),
		// stdout_eof early, late, twice, data after it
		sessionSeed(std, out(10), op(opEOF, 3, 0, 0)),
		sessionSeed(std, out(10), op(opEOF, 2, 0, 0)),
		sessionSeed(std, out(10), eof, eof, exit),
		sessionSeed(std, out(10), eof, out(3)),
		// stderr with drops, overlaps, over max_data, read past its end
		sessionSeed([8]byte{8, 16, 64, 8, 100, 128 | 16, 20, 16}, op(opStderr, 0, 0, 10), op(opStderr, 5, 7, 10), op(opStderr, 6, 3, 10),
			exit, op(opStderr, 7, 2, 10), read, read),
		sessionSeed(std, op(opStderr, 15, 0, 5)),
		// exit twice, different
		sessionSeed(std, exit, op(opExit, 3, 0, 0), op(opExit, 4, 1, 4)),
		// credit backwards, past a window, received beyond sent
		sessionSeed(manual, write(60), op(opCredit, 0, 0, 0), op(opCredit, 5, 0, 1), write(60), op(opCredit, 9, 0, 0)),
		sessionSeed(manual, op(opCredit, 0, 0, 2)),
		sessionSeed(manual, write(10), op(opCredit, 0, 0, 3)),
		// signals: answered, unknown ids, failed, behind stdin
		sessionSeed(manual, op(opSignal, 0, 0, 0), op(opSignaled, 0, 0, 0), op(opSignaled, 1, 0, 0)),
		sessionSeed(manual, write(200), op(opSignal, 0, 0, 1), write(10), op(opFlush, 0, 0, 0), op(opError, 0, 0, 0)),
		sessionSeed(std, op(opError, 2, 0, 0)),
		sessionSeed(std, write(20), op(opError, 1, 0, 0), write(5), op(opCloseStdin, 0, 0, 0)),
		// destroyed for another id, and for this one
		sessionSeed(std, out(3), op(opDestroyed, 0, 0, 0)),
		sessionSeed(std, out(3), op(opDestroyed, 1, 0, 0), read),
		// frames out of place, error frames
		sessionSeed(std, op(opSessionFrame, 0, 0, 0)),
		sessionSeed(std, op(opSessionFrame, 1, 0, 0)),
		sessionSeed(std, op(opSessionFrame, 2, 0, 0)),
		sessionSeed(std, out(4), op(opError, 3, 0, 2), read, read),
		// losses, resumed faithfully with replay
		sessionSeed(std, write(30), out(20), drop(0), faithful, out(20), eof, exit),
		sessionSeed(std, out(20), op(opRead, 0, 0, 0), drop(1), faithful, drop(6), faithful, eof, exit),
		sessionSeed(std, op(opSignal, 2, 0, 1), drop(0), faithful, exit),
		sessionSeed(std, out(5), op(opCloseStdin, 0, 0, 1), drop(0), faithful),
		// resumes answered wrongly, failing, late
		sessionSeed(std, drop(0), resumeAnswer(resEvidence, 0, 0)),
		sessionSeed(std, drop(0), resumeAnswer(resProcessID, 0, 0)),
		sessionSeed(std, write(10), drop(0), resumeAnswer(resStdinReceived, 1, 0)),
		sessionSeed(std, drop(0), resumeAnswer(resStdinLimit, 0, 0)),
		sessionSeed(std, drop(0), resumeAnswer(resError, 0, 0)),
		sessionSeed(std, drop(0), resumeAnswer(resFail, 0, 0), drop(0), resumeAnswer(resFail, 0, 0), drop(0), faithful),
		sessionSeed(std, drop(0), resumeAnswer(resLate, 0, 0)),
		// Destroy while the script runs; its answer lost
		sessionSeed(std, out(5), op(opDestroy, 0, 0, 0), out(5), exit),
		sessionSeed([8]byte{8, 16, 64, 8, 100, 64, 0, 16}, out(5), op(opDestroy, 0, 0, 1), drop(3), faithful),
		// Destroy after the grace ran out
		sessionSeed(std, drop(0), op(opTime, 200, 0, 0), op(opDestroy, 0, 0, 0)),
		// opened over the window asked for
		sessionSeed([8]byte{8, 16, 64, 8, 100, 4, 1, 16}),
		// a grace longer than a time.Duration holds
		sessionSeed([8]byte{8, 16, 64, 8, 0, 32, 0, 16}, out(5), drop(0), faithful, out(5), eof),
		sessionSeed([8]byte{8, 16, 64, 8, 2, 32, 0, 16}, out(5), drop(0), op(opTime, 255, 0, 0), faithful, out(5), eof),
	}
}
