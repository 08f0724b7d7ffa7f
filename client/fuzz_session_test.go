package client_test

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/procwire/procwire/client"
	"github.com/procwire/procwire/frames"
)

// FuzzClientSession plays a hostile or broken server against one Process.
// After a faithful opened, the fake server sends the frames an input
// describes (valid and mutated stdout, stdout_eof, stderr, exit, credit,
// signaled, destroyed, frames out of place, garbage, binary messages,
// oversized messages, error frames), drops connections and answers the
// resumes that follow, faithfully or not; the same input also has the test,
// acting as the Runner, write stdin, close it, signal and wait, while it
// reads stdout throughout.
//
// Whatever the server does, the client must not panic; every call returns
// within its context; stdout reads exactly a prefix of the bytes sent at
// their offsets and ends only with io.EOF at an offset a stdout_eof named or
// with a typed error; Wait settles once; the bytes held never exceed the
// windows of opened; the client sends only stdin the server granted, in
// order, with the bytes written, and acks only stdout sent; after Destroy
// no goroutine is left.
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
	// sessionGuard bounds an input: reaching it is a hang.
	sessionGuard = 10 * time.Second
	// sessionSlack is how late a call may return after its context ended
	// (the race detector on two shared cores is slow, a hang is forever).
	sessionSlack = 2 * time.Second
	// callTimeout bounds the Runner's calls made while the script runs.
	callTimeout = 50 * time.Millisecond
	sessionInst = "inst-1"
	otherID     = "fedcba9876543210fedcba9876543210"
)

// The fake's streams: byte i of each is a hash of i, so that a byte moved,
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

// sessionParams are the opened the fake sends and how it behaves.
type sessionParams struct {
	stdoutWindow, stdinWindow, stderrWindow, maxData int64
	graceMS, heartbeatMS                             int64
	manualSignals                                    bool // signals are answered only by the script
	manualCredit                                     bool // stdin is credited only by the script
	badDestroyExit                                   bool // a first-frame destroy is answered with a different exit first
	destroyDrop                                      bool // a destroy in a session is answered by dropping the connection
	stderrReader                                     bool // the Runner reads stderr too
	stderrBuffer                                     int  // Options.StderrBuffer
	readSize                                         int  // the Runner's stdout read buffer
}

type sessionOp struct{ code, a, b, c byte }

// Script operations, chosen by code % len(sessionOps).
const (
	opStdout        = iota // valid stdout at the next offset
	opStdoutBig            // valid stdout above max_data
	opStdoutOff            // stdout at a wrong offset
	opEOF                  // stdout_eof, mostly at the next offset
	opStderr               // stderr, with jumps, overlaps and sizes
	opExit                 // exit, the same again or another
	opCredit               // credit, valid or not
	opSignaled             // signaled for a known or unknown id
	opDestroyed            // destroyed for this or another id
	opSessionFrame         // resumed, opened or a client frame in a session
	opGarbage              // a line that does not decode
	opBinary               // a binary message
	opDrop                 // the connection ends, abruptly or with a close code
	opError                // an error frame
	opOversize             // a message over MaxLine
	opWrite                // Runner: write stdin
	opCloseStdin           // Runner: close stdin
	opSignal               // Runner: signal
	opWait                 // Runner: wait briefly
	opSync                 // ping: the client has handled every frame before
	opRefuse               // the next dials get an HTTP error
	opDestroy              // Runner: destroy
	opDestroyAnswer        // the next first-frame destroys are answered wrongly
)

// sessionOps weighs the operations.
var sessionOps = [...]int{
	opStdout, opStdout, opStdout, opStdout, opDestroyAnswer, opStdoutBig, opStdoutOff, opStdoutOff,
	opEOF, opEOF, opStderr, opStderr, opExit, opExit, opCredit, opCredit,
	opSignaled, opDestroyed, opSessionFrame, opGarbage, opBinary, opDrop, opDrop, opDrop,
	opError, opOversize, opWrite, opWrite, opWrite, opCloseStdin, opSignal, opSignal,
	opWait, opSync, opRefuse, opDestroy,
}

// Answers to a resume, chosen by code % 16 of the next operation.
const (
	resFaithful      = 6 // 0..6
	resEvidence      = 7
	resProcessID     = 8
	resStdinReceived = 9
	resStdinLimit    = 10
	resError         = 11
	resGarbage       = 12
	resDrop          = 13
	resOtherFrame    = 14
	resReplayOffset  = 15
)

func parseSession(data []byte) (sessionParams, []sessionOp) {
	var h [8]byte
	data = data[copy(h[:], data):]
	p := sessionParams{
		stdoutWindow:   1 + int64(h[0])*32,
		maxData:        1 + int64(h[1])*4,
		stdinWindow:    1 + int64(h[2])*16,
		stderrWindow:   1 + int64(h[3])*8,
		graceMS:        20 + int64(h[4]),
		manualSignals:  h[5]&1 != 0,
		manualCredit:   h[5]&2 != 0,
		badDestroyExit: h[5]&4 != 0,
		destroyDrop:    h[5]&64 != 0,
		stderrReader:   h[5]&128 != 0,
		readSize:       1 + int(h[7])*4,
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

// sessionFake is the server of one input. Its script runs across
// connections: each operation is taken once, by whichever connection is
// live, and a resume consumes one to choose its answer.
type sessionFake struct {
	t      *sessionReport
	prm    sessionParams
	ops    []sessionOp
	url    string
	hs     *httptest.Server
	ctx    context.Context // ends every connection of the fake
	cancel context.CancelFunc
	ready  chan struct{}  // closed by the Runner: the script may start
	done   chan struct{}  // closed once the script ran out and the client caught up
	runner chan sessionOp // the Runner's operations, in script order
	proc   atomic.Pointer[client.Process]

	doneOnce sync.Once
	wg       sync.WaitGroup // handlers

	mu           sync.Mutex
	stopped      bool
	conns        int // connections accepted
	pos          int
	refuse       int // dials still to refuse
	refuseStatus int
	badDestroys  int  // first-frame destroys still to answer wrongly
	destroyMode  byte // how, see serveDestroy
	opened       bool
	outNext      int64      // end of the valid stdout sent
	eofValid     bool       // a stdout_eof at outNext was sent
	eofs         []int64    // the offsets of every stdout_eof sent
	errMax       int64      // end of the stderr sent
	errSent      [][2]int64 // the ranges of stderr sent, [off, end)
	exits        []client.ExitStatus
	stdinRecv    int64 // stdin held, from 0
	limitBound   int64 // the highest stdin limit the client may have taken
	writes       int64 // stdin bytes the Runner was asked to write
	sigIDs       []int64
	closeAt      int64 // offset of stdin_close, or -1
	// mustEnd says why the handle has ended: the client closed a
	// connection after a frame it must refuse, or acknowledged a close
	// code that ends the handle. It must not resume after that.
	mustEnd      string
	endedByClose bool // mustEnd comes from the client closing after a violation
	finalClose   bool // a close code that ends the handle was sent
	synced       bool // the client answered the ping after the last operation
	withheld     bool // a replay left out stdout the client asked for
}

// sessionConn is one connection to the fake.
type sessionConn struct {
	kind frames.Type // of the first frame
	ws   *websocket.Conn
	dead chan struct{} // closed when the client's frames end

	// Guarded by sessionFake.mu.
	inNext      int64  // offset the next stdin frame must have
	lastSig     int64  // highest signal id on this connection
	lastAck     int64  // last ack on this connection
	stdinClosed bool   // stdin_close received
	destroyed   bool   // destroy received
	mustFail    string // why the client may send nothing more here
	violation   string // a frame sent here that the client must refuse
	fakeClosed  bool   // the fake closed the connection
}

func newSessionFake(t *sessionReport, prm sessionParams, ops []sessionOp) *sessionFake {
	f := &sessionFake{
		t:       t,
		prm:     prm,
		ops:     ops,
		ready:   make(chan struct{}),
		done:    make(chan struct{}),
		runner:  make(chan sessionOp, len(ops)),
		closeAt: -1,
	}
	f.limitBound = prm.stdinWindow
	f.ctx, f.cancel = context.WithCancel(context.Background())
	f.hs = httptest.NewServer(f)
	f.url = "ws" + strings.TrimPrefix(f.hs.URL, "http")
	return f
}

// close ends every connection and waits for the handlers.
func (f *sessionFake) close() {
	f.mu.Lock()
	f.stopped = true
	f.mu.Unlock()
	f.cancel()
	f.wg.Wait()
	f.hs.Close()
}

func (f *sessionFake) evidence() frames.Evidence {
	r := sessionReq()
	return frames.Evidence{
		WireRevision:     frames.WireRevision,
		Provider:         "fake",
		ProviderRevision: "0",
		InstanceID:       sessionInst,
		ProcessID:        fakeID,
		Executable:       r.Executable,
		WorkingDirectory: r.WorkingDirectory,
		ArgumentsDigest:  frames.ArgumentsDigest(r.Arguments),
		StartedAt:        "2026-11-29T09:30:00.000Z",
	}
}

func (f *sessionFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	if f.stopped {
		f.mu.Unlock()
		http.Error(w, "stopped", http.StatusServiceUnavailable)
		return
	}
	f.wg.Add(1)
	defer f.wg.Done()
	f.conns++
	if f.refuse > 0 {
		f.refuse--
		status := f.refuseStatus
		f.mu.Unlock()
		http.Error(w, "refused", status)
		return
	}
	f.mu.Unlock()

	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{frames.Subprotocol}})
	if err != nil {
		return
	}
	defer ws.CloseNow()
	ws.SetReadLimit(frames.MaxFirstLine)
	_, b, err := ws.Read(f.ctx)
	if err != nil {
		return
	}
	first, err := frames.Decode(b)
	if err != nil {
		f.t.Errorf("the client's first frame %q: %v", b, err)
		return
	}
	fc := &sessionConn{kind: first.Type(), ws: ws, dead: make(chan struct{})}
	go f.readClient(fc)
	defer func() {
		ws.CloseNow()
		<-fc.dead
	}()
	switch first := first.(type) {
	case *frames.Open:
		f.serveOpen(fc, first)
	case *frames.Resume:
		f.serveResume(fc, first)
	case *frames.Destroy:
		f.serveDestroy(fc, first)
	default:
		f.t.Errorf("the client's first frame is %s", first.Type())
	}
}

func (f *sessionFake) send(fc *sessionConn, fr frames.Frame) bool {
	return f.sendRaw(fc, websocket.MessageText, frames.Append(nil, fr))
}

func (f *sessionFake) sendRaw(fc *sessionConn, typ websocket.MessageType, b []byte) bool {
	return fc.ws.Write(f.ctx, typ, b) == nil
}

// nextOp takes the next operation of the script.
func (f *sessionFake) nextOp() (sessionOp, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.pos == len(f.ops) {
		return sessionOp{}, false
	}
	f.pos++
	return f.ops[f.pos-1], true
}

func (f *sessionFake) serveOpen(fc *sessionConn, o *frames.Open) {
	f.mu.Lock()
	again := f.opened
	f.opened = true
	f.mu.Unlock()
	if again {
		f.t.Errorf("a second open")
		return
	}
	want := &frames.Open{InstanceID: sessionInst, Request: sessionReq()}
	if !reflect.DeepEqual(want, o) {
		f.t.Errorf("open %+v, want %+v", o, want)
	}
	p := &f.prm
	f.send(fc, &frames.Opened{
		ProcessID:    fakeID,
		Token:        fakeToken,
		Evidence:     f.evidence(),
		StdinLimit:   p.stdinWindow,
		StdoutWindow: p.stdoutWindow,
		StderrWindow: p.stderrWindow,
		GraceMS:      p.graceMS,
		HeartbeatMS:  p.heartbeatMS,
		ExitWaitMS:   10,
		MaxData:      p.maxData,
	})
	select {
	case <-f.ready:
	case <-f.ctx.Done():
		return
	}
	f.script(fc)
}

// script runs operations on fc until one ends it or none is left.
func (f *sessionFake) script(fc *sessionConn) {
	for {
		select {
		case <-fc.dead:
			return
		default:
		}
		op, ok := f.nextOp()
		if !ok {
			f.finish(fc)
			return
		}
		if !f.apply(fc, op) {
			return
		}
	}
}

// finish reports the script done once the client has handled every frame
// sent before, then serves fc until it ends.
func (f *sessionFake) finish(fc *sessionConn) {
	f.doneOnce.Do(func() {
		ctx, cancel := context.WithTimeout(f.ctx, sessionGuard)
		err := fc.ws.Ping(ctx) // the pong follows every frame sent before
		cancel()
		f.mu.Lock()
		f.synced = err == nil
		f.mu.Unlock()
		close(f.done)
	})
	select {
	case <-fc.dead:
	case <-f.ctx.Done():
	}
}

// apply runs op on fc and reports whether fc is still usable.
func (f *sessionFake) apply(fc *sessionConn, op sessionOp) bool {
	p := &f.prm
	a, b, c := op.a, op.b, op.c
	switch sessionOps[int(op.code)%len(sessionOps)] {
	case opStdout, opStdoutBig:
		n := 1 + int(int64(a)|int64(b)<<8)%int(p.maxData)
		if c&3 == 0 {
			n = int(p.maxData)
		}
		if sessionOps[int(op.code)%len(sessionOps)] == opStdoutBig {
			n = min(int(p.maxData)+1+int(a), frames.MaxData)
		}
		f.mu.Lock()
		off := f.outNext
		f.outNext += int64(n)
		f.eofValid = false
		f.mu.Unlock()
		fr := &frames.Stdout{Off: off, Data: streamBytes(stdoutSeed, off, n)}
		if int64(n) > p.maxData {
			return f.violate(fc, "stdout over max_data", fr)
		}
		return f.send(fc, fr)
	case opStdoutOff:
		n := 1 + int(b)%int(p.maxData)
		f.mu.Lock()
		next := f.outNext
		f.mu.Unlock()
		off := next + [...]int64{-3, -2, -1, 1, 2, 5, 1 << 40, math.MaxInt64 - next - int64(n) + 1}[a%8]
		if off < 0 {
			off = next + 1
		}
		return f.violate(fc, "stdout at a wrong offset", &frames.Stdout{Off: off, Data: streamBytes(stdoutSeed, off, n)})
	case opEOF:
		f.mu.Lock()
		off := f.outNext
		if a%4 == 3 {
			off += [...]int64{-2, -1, 1, 3}[b%4]
			off = max(off, 0)
		}
		f.eofs = append(f.eofs, off)
		valid := off == f.outNext
		f.eofValid = f.eofValid || valid
		f.mu.Unlock()
		if !valid {
			return f.violate(fc, "stdout_eof at a wrong offset", &frames.StdoutEOF{Off: off})
		}
		return f.send(fc, &frames.StdoutEOF{Off: off})
	case opStderr:
		n := 1 + int(c)%int(p.maxData)
		if a%8 == 4 && b%4 == 0 {
			n = min(int(p.maxData)+1+int(c), frames.MaxData)
		}
		f.mu.Lock()
		off := f.errMax
		switch a % 8 {
		case 5:
			off += 1 + int64(b) // the ring dropped bytes
		case 6:
			off = max(0, off-1-int64(b)) // bytes the client holds already
		case 7:
			off = math.MaxInt64 - int64(b) // the end may overflow
		}
		if off <= math.MaxInt64-int64(n) {
			f.errMax = max(f.errMax, off+int64(n))
			f.errSent = append(f.errSent, [2]int64{off, off + int64(n)})
		}
		f.mu.Unlock()
		fr := &frames.Stderr{Off: off, Data: streamBytes(stderrSeed, off, n)}
		if int64(n) > p.maxData {
			return f.violate(fc, "stderr over max_data", fr)
		}
		return f.send(fc, fr)
	case opExit:
		e := &frames.Exit{Code: int(a)}
		if b%3 == 0 {
			e = &frames.Exit{Signal: [...]string{"SIGKILL", "SIGTERM", "SIGSEGV", "SIGRTMIN+3"}[b/3%4]}
		}
		f.mu.Lock()
		if c&1 == 1 && len(f.exits) > 0 {
			e = &frames.Exit{Code: f.exits[0].Code, Signal: f.exits[0].Signal}
		}
		f.exits = append(f.exits, client.ExitStatus{Code: e.Code, Signal: e.Signal})
		f.mu.Unlock()
		return f.send(fc, e)
	case opCredit:
		f.mu.Lock()
		w := p.stdinWindow
		recv := f.stdinRecv
		limit := recv + w
		switch c % 6 {
		case 1: // backwards
			limit = max(0, limit-1-int64(a))
		case 2: // past one window
			limit += 1 + int64(a)
		case 3: // overflowing
			limit = math.MaxInt64
		case 4: // more received than sent
			recv += 1 + int64(a)
			limit = recv + w
		case 5: // received backwards
			recv = max(0, recv-1-int64(a))
			limit = recv + w
		}
		f.grantLocked(recv, limit)
		f.mu.Unlock()
		cr := &frames.Credit{StdinReceived: recv, StdinLimit: limit}
		if c%6 == 2 || c%6 == 3 {
			return f.violate(fc, "a credit past one window", cr)
		}
		return f.send(fc, cr)
	case opSignaled:
		s := &frames.Signaled{ID: 1000 + int64(b), Result: frames.SignalDelivered}
		if c&1 == 1 {
			s.Result = frames.SignalAlreadyExited
		}
		switch a % 3 {
		case 1:
			f.mu.Lock()
			if len(f.sigIDs) > 0 {
				s.ID = f.sigIDs[int(b)%len(f.sigIDs)]
			}
			f.mu.Unlock()
		case 2:
			s.ID = 0 // not a valid id
			return f.violate(fc, "signaled 0", s)
		}
		return f.send(fc, s)
	case opDestroyed:
		id := otherID
		if a&1 == 1 {
			id = fakeID
		}
		return f.violate(fc, "destroyed", &frames.Destroyed{ProcessID: id})
	case opSessionFrame:
		return f.violate(fc, "a frame out of place", [...]frames.Frame{
			&frames.Resumed{ProcessID: fakeID, Evidence: f.evidence(), StdinLimit: p.stdinWindow},
			&frames.Opened{ProcessID: fakeID, Token: fakeToken, Evidence: f.evidence(), StdinLimit: 1, StdoutWindow: 1,
				StderrWindow: 1, MaxData: 1},
			&frames.Ack{Stdout: 0},
			&frames.Stdin{Off: 0, Data: []byte("x")},
			&frames.Resume{ProcessID: fakeID, Token: fakeToken},
		}[a%5])
	case opGarbage:
		return f.violateRaw(fc, "garbage", websocket.MessageText, []byte(sessionGarbage[int(a)%len(sessionGarbage)]))
	case opBinary:
		return f.violateRaw(fc, "a binary message", websocket.MessageBinary,
			frames.Append(nil, &frames.Stdout{Off: 0, Data: []byte("x")}))
	case opDrop:
		f.drop(fc, a)
		return false
	case opError:
		return f.violate(fc, "an error frame", sessionErrors[int(a)%len(sessionErrors)])
	case opOversize:
		n := frames.MaxLine // without its '\n': one over
		if a&1 == 1 {
			n += 1 + int(b) // over the WebSocket read limit
		}
		return f.violateRaw(fc, "a message over MaxLine", websocket.MessageText,
			append([]byte("{"), bytes.Repeat([]byte(" "), n-1)...))
	case opWrite, opCloseStdin, opSignal, opWait, opDestroy:
		if sessionOps[int(op.code)%len(sessionOps)] == opWrite {
			f.mu.Lock()
			f.writes += 1 + int64(a%64)
			f.mu.Unlock()
		}
		f.runner <- op // buffered for every operation
	case opSync:
		ctx, cancel := context.WithTimeout(f.ctx, sessionGuard)
		defer cancel()
		return fc.ws.Ping(ctx) == nil
	case opDestroyAnswer:
		f.mu.Lock()
		f.badDestroys, f.destroyMode = 1+int(b%3), a
		f.mu.Unlock()
	case opRefuse:
		f.mu.Lock()
		f.refuse = 1 + int(b%3)
		f.refuseStatus = [...]int{http.StatusServiceUnavailable, http.StatusUnauthorized, http.StatusInternalServerError}[a%3]
		f.mu.Unlock()
	}
	return true
}

var sessionGarbage = [...]string{
	"not json\n",
	`{"type":"stdout"}` + "\n",
	`{"type":"stdout","off":0,"data":"AA=="} x` + "\n",
	`{"type":"exit","code":1,"signal":"SIGKILL"}` + "\n",
	"\xff\xfe\n",
	"",
	`{"type":"credit","stdin_received":0,"stdin_limit":1,"extra":1}` + "\n",
	`{"type":"stdout","off":-1,"data":"AA=="}` + "\n",
	`{"type":"exit","code":256}` + "\n",
	`{"type":"stdout_eof","off":1e3}` + "\n",
}

var sessionErrors = [...]*frames.Error{
	{Code: frames.LifecycleConflict, Operation: "resume_process", Actual: "process_not_found"},
	{Code: frames.LifecycleConflict, Operation: "resume_process", Expected: "running", Actual: "process_destroyed"},
	{Code: frames.LifecycleConflict, Operation: "resume_process", Expected: "running", Actual: "process_expired"},
	{Code: frames.OperationFailed, Operation: "resume_process", Reason: "replay_gap", Gap: &frames.Gap{Requested: 0, Oldest: 1}},
	{Code: frames.OperationFailed, Operation: "resume_process", Reason: "server_shutdown"},
	{Code: frames.CapabilityUnavailable, Requirement: "resources"},
}

// violate sends fr, which the client must refuse whatever its state, and
// records it.
func (f *sessionFake) violate(fc *sessionConn, why string, fr frames.Frame) bool {
	return f.violateRaw(fc, why, websocket.MessageText, frames.Append(nil, fr))
}

func (f *sessionFake) violateRaw(fc *sessionConn, why string, typ websocket.MessageType, b []byte) bool {
	if !f.sendRaw(fc, typ, b) {
		return false
	}
	f.mu.Lock()
	if fc.violation == "" {
		fc.violation = why
	}
	f.mu.Unlock()
	return true
}

// drop ends fc as kind says: abruptly or with a close code.
func (f *sessionFake) drop(fc *sessionConn, kind byte) {
	codes := [...]websocket.StatusCode{0, websocket.StatusNormalClosure, websocket.StatusGoingAway,
		websocket.StatusProtocolError, websocket.StatusInvalidFramePayloadData, websocket.StatusPolicyViolation,
		websocket.StatusInternalError, 4001, 4000}
	code := codes[int(kind)%len(codes)]
	f.mu.Lock()
	fc.fakeClosed = true
	final := code != 0 && code != websocket.StatusNormalClosure && code != websocket.StatusInternalError && code != 4000
	f.finalClose = f.finalClose || final
	f.mu.Unlock()
	if code == 0 {
		fc.ws.CloseNow()
		return
	}
	if fc.ws.Close(code, "fuzz") == nil && final {
		// The client answered the close: it has read the code.
		f.mu.Lock()
		if f.mustEnd == "" {
			f.mustEnd = fmt.Sprintf("close code %d", code)
		}
		f.mu.Unlock()
	}
}

// grantLocked records a stdin limit announced with received: one the client
// may take raises the bound on what it may send.
func (f *sessionFake) grantLocked(received, limit int64) {
	if limit-received <= f.prm.stdinWindow {
		f.limitBound = max(f.limitBound, limit)
	}
}

// serveResume answers r as the next operation says, faithfully when none
// is left.
func (f *sessionFake) serveResume(fc *sessionConn, r *frames.Resume) {
	f.mu.Lock()
	if r.ProcessID != fakeID || r.Token != fakeToken {
		f.t.Errorf("resume of %q with token %q", r.ProcessID, r.Token)
	}
	if r.StdoutReceived > f.outNext {
		f.t.Errorf("resume claims %d stdout bytes, %d were sent", r.StdoutReceived, f.outNext)
	}
	if r.StderrReceived > f.errMax {
		f.t.Errorf("resume claims %d stderr bytes, %d were sent", r.StderrReceived, f.errMax)
	}
	if f.mustEnd != "" {
		f.t.Errorf("the client resumed after %s", f.mustEnd)
	}
	f.mu.Unlock()
	if p := f.proc.Load(); p != nil {
		select {
		case <-client.Ended(p):
			f.t.Errorf("the client resumed after its handle ended")
		default:
		}
	}
	op, ok := f.nextOp()
	a, b := op.a, op.b
	variant := int(op.code % 16)
	if !ok {
		variant = 0
	}
	mustFail := func(why string) {
		f.mu.Lock()
		fc.mustFail = why
		f.mu.Unlock()
	}
	switch variant {
	case resEvidence:
		ev := f.evidence()
		switch a % 8 {
		case 0:
			ev.Provider = "other"
		case 1:
			ev.ProviderRevision = "1"
		case 2:
			ev.InstanceID = "inst-2"
		case 3:
			ev.ProcessID = otherID
		case 4:
			ev.Executable = "/bin/cat"
		case 5:
			ev.WorkingDirectory = "/tmp"
		case 6:
			ev.ArgumentsDigest = frames.ArgumentsDigest(nil)
		case 7:
			ev.StartedAt = "2026-11-29T09:30:00.001Z"
		}
		mustFail("resumed with tampered evidence")
		f.send(fc, &frames.Resumed{ProcessID: fakeID, Evidence: ev, StdinLimit: f.prm.stdinWindow})
	case resProcessID:
		mustFail("resumed of another process")
		f.send(fc, &frames.Resumed{ProcessID: otherID, Evidence: f.evidence(), StdinLimit: f.prm.stdinWindow})
	case resStdinReceived:
		f.mu.Lock()
		recv := max(0, f.stdinRecv-1-int64(b))
		if a&1 == 1 {
			recv = f.writes + 1 + int64(b) // more than the client can hold
			fc.mustFail = "resumed with stdin_received beyond what was written"
		}
		f.mu.Unlock()
		if f.resume(fc, r.StdoutReceived, recv) {
			f.script(fc)
		}
	case resStdinLimit:
		f.mu.Lock()
		recv := f.stdinRecv
		fc.mustFail = "resumed with a stdin_limit past one window"
		f.mu.Unlock()
		f.send(fc, &frames.Resumed{ProcessID: fakeID, Evidence: f.evidence(), StdinReceived: recv,
			StdinLimit: recv + f.prm.stdinWindow + 1 + int64(a)})
	case resError:
		mustFail("an error answering resume")
		f.send(fc, sessionErrors[int(a)%len(sessionErrors)])
	case resGarbage:
		mustFail("garbage answering resume")
		if a&1 == 1 {
			f.sendRaw(fc, websocket.MessageBinary, []byte("{}\n"))
		} else {
			f.sendRaw(fc, websocket.MessageText, []byte(sessionGarbage[int(b)%len(sessionGarbage)]))
		}
	case resDrop:
		f.drop(fc, a)
	case resOtherFrame:
		mustFail("another frame answering resume")
		f.send(fc, [...]frames.Frame{
			&frames.Stdout{Off: r.StdoutReceived, Data: streamBytes(stdoutSeed, r.StdoutReceived, 1)},
			&frames.Destroyed{ProcessID: fakeID},
			&frames.Exit{Code: 0},
			&frames.Opened{ProcessID: fakeID, Token: fakeToken, Evidence: f.evidence(), StdinLimit: 1, StdoutWindow: 1,
				StderrWindow: 1, MaxData: 1},
		}[a%4])
	case resReplayOffset:
		from := r.StdoutReceived + 1
		if a&1 == 1 && from > 1 {
			from -= 2
		}
		if from > r.StdoutReceived {
			f.mu.Lock()
			f.withheld = true
			f.mu.Unlock()
		}
		if f.resume(fc, from, -1) {
			f.script(fc)
		}
	default:
		if f.resume(fc, r.StdoutReceived, -1) {
			f.script(fc)
		}
	}
	select { // the client ends fc
	case <-fc.dead:
	case <-f.ctx.Done():
	}
}

// resume answers a resume as a server would, replaying stdout from from,
// and saying it holds recv stdin bytes (-1: those it holds).
func (f *sessionFake) resume(fc *sessionConn, from, recv int64) bool {
	f.mu.Lock()
	if recv < 0 {
		recv = f.stdinRecv
	}
	limit := recv + f.prm.stdinWindow
	f.grantLocked(recv, limit)
	fc.inNext = recv
	next, eof := f.outNext, f.eofValid
	var exit *frames.Exit
	if len(f.exits) > 0 {
		exit = &frames.Exit{Code: f.exits[0].Code, Signal: f.exits[0].Signal}
	}
	f.mu.Unlock()
	if !f.send(fc, &frames.Resumed{ProcessID: fakeID, Evidence: f.evidence(), StdinReceived: recv, StdinLimit: limit}) {
		return false
	}
	for off := from; off < next; {
		n := min(next-off, f.prm.maxData)
		if !f.send(fc, &frames.Stdout{Off: off, Data: streamBytes(stdoutSeed, off, int(n))}) {
			return false
		}
		off += n
	}
	if eof && !f.send(fc, &frames.StdoutEOF{Off: next}) {
		return false
	}
	if exit != nil && !f.send(fc, exit) {
		return false
	}
	return f.send(fc, &frames.Credit{StdinReceived: recv, StdinLimit: limit})
}

// serveDestroy answers a first-frame destroy: an exit, then destroyed.
func (f *sessionFake) serveDestroy(fc *sessionConn, d *frames.Destroy) {
	if d.ProcessID != fakeID || d.Token != fakeToken {
		f.t.Errorf("destroy of %q with token %q", d.ProcessID, d.Token)
	}
	f.mu.Lock()
	fc.destroyed = true
	if f.badDestroys > 0 {
		f.badDestroys--
		mode := f.destroyMode % 4
		f.mu.Unlock()
		switch mode {
		case 0: // a refusal: the destroy settles with it
			f.send(fc, &frames.Error{Code: frames.LifecycleConflict, Operation: "destroy_process", Actual: "process_busy"})
		case 1: // the answer is lost
			fc.ws.CloseNow()
		case 2:
			f.sendRaw(fc, websocket.MessageText, []byte("destroyed\n"))
		case 3: // output still in flight, then the answer
			f.send(fc, &frames.Stdout{Off: 1 << 40, Data: []byte("x")})
			f.send(fc, &frames.Signaled{ID: 1 << 40, Result: frames.SignalDelivered})
			f.send(fc, &frames.Destroyed{ProcessID: fakeID})
		}
		return
	}
	exit := f.destroyExitLocked()
	if f.prm.badDestroyExit {
		exit = &frames.Exit{Code: 77}
		if len(f.exits) > 0 && f.exits[0] == (client.ExitStatus{Code: 77}) {
			exit.Code = 78
		}
		f.exits = append(f.exits, client.ExitStatus{Code: exit.Code})
	}
	f.mu.Unlock()
	if f.send(fc, exit) && f.send(fc, &frames.Destroyed{ProcessID: fakeID}) {
		f.mu.Lock()
		fc.fakeClosed = true
		f.mu.Unlock()
		_ = fc.ws.Close(websocket.StatusNormalClosure, "")
	}
}

// destroyExitLocked returns the exit a destroy reports: the first one sent,
// or SIGKILL.
func (f *sessionFake) destroyExitLocked() *frames.Exit {
	if len(f.exits) == 0 {
		f.exits = append(f.exits, client.ExitStatus{Signal: "SIGKILL"})
	}
	return &frames.Exit{Code: f.exits[0].Code, Signal: f.exits[0].Signal}
}

// readClient checks and answers the client's frames on fc until it ends.
func (f *sessionFake) readClient(fc *sessionConn) {
	defer close(fc.dead)
	var dec frames.Decoder
	for {
		typ, b, err := fc.ws.Read(f.ctx)
		if err != nil {
			f.mu.Lock()
			// Without a heartbeat, only a frame it refused makes the
			// client close a connection the fake keeps open.
			if fc.violation != "" && !fc.fakeClosed && f.prm.heartbeatMS == 0 && f.ctx.Err() == nil && f.mustEnd == "" {
				f.mustEnd, f.endedByClose = fc.violation, true
			}
			f.mu.Unlock()
			return
		}
		if typ != websocket.MessageText {
			f.t.Errorf("the client sent a binary message")
			return
		}
		fr, err := dec.Decode(b)
		if err != nil {
			f.mu.Lock()
			closing := fc.fakeClosed
			f.mu.Unlock()
			// The WebSocket library's Close, waiting for the client's close
			// frame, discards what it reads: a message being read then
			// comes out cut short.
			if !closing {
				f.t.Errorf("the client sent %q on a connection opened with %s: %v", b, fc.kind, err)
			}
			return
		}
		f.mu.Lock()
		answers, closing := f.fromClientLocked(fc, fr)
		f.mu.Unlock()
		for _, a := range answers {
			f.send(fc, a)
		}
		if closing {
			f.mu.Lock()
			fc.fakeClosed = true
			f.mu.Unlock()
			if len(answers) == 0 {
				fc.ws.CloseNow()
			} else {
				_ = fc.ws.Close(websocket.StatusNormalClosure, "")
			}
		}
	}
}

// fromClientLocked checks a frame of the client against what the fake
// sent, and returns what to answer.
func (f *sessionFake) fromClientLocked(fc *sessionConn, fr frames.Frame) (answers []frames.Frame, closing bool) {
	t := f.t
	if fc.mustFail != "" {
		t.Errorf("the client sent %s after %s", fr.Type(), fc.mustFail)
	}
	if fc.destroyed {
		t.Errorf("the client sent %s after destroy", fr.Type())
	}
	switch fr := fr.(type) {
	case *frames.Stdin:
		end := fr.Off + int64(len(fr.Data))
		switch {
		case fc.stdinClosed:
			t.Errorf("stdin after stdin_close")
		case fr.Off != fc.inNext:
			t.Errorf("stdin at %d, expected %d", fr.Off, fc.inNext)
		case end > f.limitBound:
			t.Errorf("stdin up to %d, past every limit granted (%d)", end, f.limitBound)
		case int64(len(fr.Data)) > f.prm.maxData:
			t.Errorf("stdin of %d bytes, max_data is %d", len(fr.Data), f.prm.maxData)
		case !bytes.Equal(fr.Data, streamBytes(stdinSeed, fr.Off, len(fr.Data))):
			t.Errorf("stdin at %d is not what was written", fr.Off)
		}
		fc.inNext = end
		f.stdinRecv = max(f.stdinRecv, end)
		if !f.prm.manualCredit {
			limit := f.stdinRecv + f.prm.stdinWindow
			f.grantLocked(f.stdinRecv, limit)
			answers = append(answers, &frames.Credit{StdinReceived: f.stdinRecv, StdinLimit: limit})
		}
	case *frames.StdinClose:
		if fr.Off != fc.inNext {
			t.Errorf("stdin_close at %d, expected %d", fr.Off, fc.inNext)
		}
		if f.closeAt >= 0 && fr.Off != f.closeAt {
			t.Errorf("stdin_close at %d, then at %d", f.closeAt, fr.Off)
		}
		f.closeAt = fr.Off
		fc.stdinClosed = true
	case *frames.Ack:
		// Per connection: the fake may read a connection's last frames
		// after the next connection's first ones.
		if fr.Stdout < fc.lastAck || fr.Stdout > f.outNext {
			t.Errorf("ack of %d after %d, with %d stdout bytes sent", fr.Stdout, fc.lastAck, f.outNext)
		}
		fc.lastAck = fr.Stdout
	case *frames.Signal:
		if fr.ID <= fc.lastSig {
			t.Errorf("signal %d after %d on one connection", fr.ID, fc.lastSig)
		}
		fc.lastSig = fr.ID
		if !slices.Contains(f.sigIDs, fr.ID) {
			f.sigIDs = append(f.sigIDs, fr.ID)
		}
		if !f.prm.manualSignals || f.pos == len(f.ops) {
			answers = append(answers, &frames.Signaled{ID: fr.ID, Result: frames.SignalDelivered})
		}
	case *frames.Destroy:
		if fr.ProcessID != "" || fr.Token != "" {
			t.Errorf("a destroy in a session names %q", fr.ProcessID)
		}
		fc.destroyed = true
		closing = true
		if f.prm.destroyDrop {
			break // the answer is lost: the client destroys on a connection of its own
		}
		answers = append(answers, f.destroyExitLocked(), &frames.Destroyed{ProcessID: fakeID})
	default:
		t.Errorf("the client sent %s in a session", fr.Type())
	}
	return answers, closing
}

// sessionReport reports the failures of one input from any goroutine. A
// report after the input ended, from a goroutine the input leaked (which
// goleak reports), goes to stderr rather than crash the fuzzing process.
type sessionReport struct {
	t    *testing.T
	mu   sync.Mutex
	over bool
}

func (r *sessionReport) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.over {
		fmt.Fprintf(os.Stderr, "FuzzClientSession: after the input ended: "+format+"\n", args...)
		return
	}
	r.t.Errorf(format, args...)
}

func (r *sessionReport) end() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.over = true
}

// isTyped reports whether err is one of the errors that end a handle.
func isTyped(err error) bool {
	var pe *client.ProtocolError
	var re *client.RemoteError
	return errors.As(err, &pe) || errors.As(err, &re) ||
		errors.Is(err, client.ErrConnectionLost) || errors.Is(err, client.ErrDestroyed)
}

// timed runs call, which must return within its context's deadline d (plus
// slack), and fails the test if it does not.
func timed(t *testing.T, what string, d time.Duration, call func()) {
	t.Helper()
	done := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(done)
		call()
	}()
	timer := time.NewTimer(d + sessionSlack)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		t.Fatalf("%s did not return within %v", what, d+sessionSlack)
	}
	if el := time.Since(start); el > d+sessionSlack {
		t.Errorf("%s returned after %v, its deadline was %v", what, el, d)
	}
}

// isStderrOf reports whether got can be bytes of the stderr ranges sent,
// taken in offset order.
func isStderrOf(got []byte, sent [][2]int64) bool {
	slices.SortFunc(sent, func(a, b [2]int64) int { return cmp.Compare(a[0], b[0]) })
	var offs []int64 // every offset sent, ascending, once
	for _, r := range sent {
		from := r[0]
		if len(offs) > 0 {
			from = max(from, offs[len(offs)-1]+1)
		}
		for o := from; o < r[1]; o++ {
			offs = append(offs, o)
		}
	}
	i := 0
	for _, c := range got {
		for i < len(offs) && streamByte(stderrSeed, offs[i]) != c {
			i++
		}
		if i == len(offs) {
			return false
		}
		i++
	}
	return true
}

// waitResult is a settled answer of Wait.
type waitResult struct {
	st  client.ExitStatus
	err error
}

func runSession(t *testing.T, data []byte) {
	rep := &sessionReport{t: t}
	defer rep.end()
	leaks := goleak.IgnoreCurrent()
	prm, ops := parseSession(data)
	f := newSessionFake(rep, prm, ops)
	tr := &http.Transport{}
	defer func() {
		f.close()
		tr.CloseIdleConnections()
		if err := goleak.Find(leaks); err != nil {
			t.Errorf("goroutines left: %v", err)
		}
	}()

	opts := &client.Options{
		HTTPClient:   &http.Client{Transport: tr},
		ReconnectMin: time.Millisecond,
		ReconnectMax: 4 * time.Millisecond,
		StderrBuffer: prm.stderrBuffer,
	}
	octx, ocancel := context.WithTimeout(context.Background(), sessionGuard)
	p, err := client.Open(octx, f.url, sessionInst, sessionReq(), opts)
	ocancel()
	require.NoError(t, err)

	errCap := int(prm.stderrWindow)
	if prm.stderrBuffer > 0 {
		errCap = prm.stderrBuffer
	}
	checkHeld := func(h client.Held) {
		if h.Stdout > int(prm.stdoutWindow) || h.Stderr > errCap || h.Stdin > int(prm.stdinWindow) {
			rep.Errorf("holds %+v, windows: stdout %d, stderr %d, stdin %d", h, prm.stdoutWindow, errCap, prm.stdinWindow)
		}
		if h.StdoutCap > 4*int(prm.stdoutWindow)+1024 || h.StderrCap > 4*errCap+1024 || h.StdinCap > 4*int(prm.stdinWindow)+1024 {
			rep.Errorf("holds %+v, windows: stdout %d, stderr %d, stdin %d", h, prm.stdoutWindow, errCap, prm.stdinWindow)
		}
	}
	client.SetFrameHook(p, checkHeld)
	f.proc.Store(p)
	close(f.ready)

	var (
		waitMu sync.Mutex
		waits  []waitResult
	)
	wait := func(c context.Context) {
		st, err := p.Wait(c)
		switch {
		case err == nil || isTyped(err):
			waitMu.Lock()
			waits = append(waits, waitResult{st, err})
			waitMu.Unlock()
		case c.Err() == nil || !errors.Is(err, c.Err()):
			rep.Errorf("Wait: %v", err)
		}
	}

	// The Runner: a reader of stdout, a waiter, and the script's calls.
	stop, stopAll := context.WithCancel(context.Background())
	defer stopAll()
	var got []byte
	var readErr error
	reader := make(chan struct{})
	go func() {
		defer close(reader)
		buf := make([]byte, prm.readSize)
		for {
			n, err := p.Stdout().ReadContext(stop, buf)
			got = append(got, buf[:n]...)
			if err != nil {
				readErr = err
				return
			}
		}
	}()
	var errGot []byte
	var errErr error
	errReader := make(chan struct{})
	go func() {
		defer close(errReader)
		if !prm.stderrReader {
			return
		}
		buf := make([]byte, 1+prm.readSize/2)
		for {
			n, err := p.Stderr().ReadContext(stop, buf)
			errGot = append(errGot, buf[:n]...)
			if err != nil {
				errErr = err
				return
			}
		}
	}()
	waiter := make(chan struct{})
	go func() {
		defer close(waiter)
		wait(stop)
	}()
	calls := make(chan struct{})
	go func() {
		defer close(calls)
		var written int64
		for {
			var op sessionOp
			select {
			case op = <-f.runner:
			case <-stop.Done():
				return
			}
			c, cancel := context.WithTimeout(stop, callTimeout)
			start := time.Now()
			switch sessionOps[int(op.code)%len(sessionOps)] {
			case opWrite:
				n, err := p.Stdin().WriteContext(c, streamBytes(stdinSeed, written, 1+int(op.a%64)))
				written += int64(n)
				if err != nil && !isTyped(err) && !errors.Is(err, client.ErrStdinClosed) && !errors.Is(err, c.Err()) {
					rep.Errorf("Write: %v", err)
				}
			case opCloseStdin:
				if err := p.Stdin().CloseContext(c); err != nil && !isTyped(err) && !errors.Is(err, c.Err()) {
					rep.Errorf("Close: %v", err)
				}
			case opSignal:
				sig := [...]frames.SignalName{frames.SIGINT, frames.SIGTERM, frames.SIGKILL}[op.a%3]
				if _, err := p.Signal(c, sig); err != nil && !isTyped(err) && !errors.Is(err, c.Err()) {
					rep.Errorf("Signal: %v", err)
				}
			case opWait:
				wait(c)
			case opDestroy:
				var re *client.RemoteError
				var pe *client.ProtocolError
				if err := p.Destroy(c); err != nil && !errors.Is(err, c.Err()) && !errors.As(err, &re) && !errors.As(err, &pe) {
					rep.Errorf("Destroy: %v", err)
				}
			}
			if el := time.Since(start); el > callTimeout+sessionSlack {
				rep.Errorf("a call took %v, its deadline was %v", el, callTimeout)
			}
			cancel()
		}
	}()

	guard := time.NewTimer(sessionGuard)
	live := false // the script ran out with the client attached and its handle going on
	select {
	case <-f.done:
		f.mu.Lock()
		live = f.synced && !f.withheld
		f.mu.Unlock()
		select {
		case <-client.Ended(p):
			live = false
		default:
		}
	case <-client.Ended(p):
	case <-guard.C:
		t.Errorf("the session neither finished nor ended within %v", sessionGuard)
	}
	guard.Stop()

	// Stop the Runner: every blocked call returns with the context.
	stopAll()
	for _, ch := range []chan struct{}{reader, errReader, waiter, calls} {
		timed(t, "the Runner", 0, func() { <-ch })
	}
	// Read what is left without blocking.
	buf := make([]byte, 4096)
	if errors.Is(readErr, context.Canceled) {
		for {
			n, err := p.Stdout().ReadContext(stop, buf)
			got = append(got, buf[:n]...)
			if err != nil {
				readErr = err
				break
			}
		}
	}
	if errErr == nil || errors.Is(errErr, context.Canceled) {
		for {
			n, err := p.Stderr().ReadContext(stop, buf)
			errGot = append(errGot, buf[:n]...)
			if err != nil {
				errErr = err
				break
			}
		}
	}
	if errErr != io.EOF && !errors.Is(errErr, context.Canceled) && !isTyped(errErr) {
		t.Errorf("stderr ended with %v", errErr)
	}
	checkHeld(client.HeldNow(p))
	f.mu.Lock()
	mustEnd, byClose := f.mustEnd, f.endedByClose
	f.mu.Unlock()
	if byClose {
		// The client closes after it ended the handle, or, for a message
		// over the read limit, the WebSocket library closes just before.
		timer := time.NewTimer(sessionSlack)
		select {
		case <-client.Ended(p):
		case <-timer.C:
			t.Errorf("the handle goes on after %s", mustEnd)
		}
		timer.Stop()
	}

	f.mu.Lock()
	outNext, eofs, errMax, errSent, finalClose := f.outNext, slices.Clone(f.eofs), f.errMax, slices.Clone(f.errSent), f.finalClose
	eofValid := f.eofValid
	f.mu.Unlock()
	// A live client has every stdout byte sent, and the reader has read
	// them, unless the Runner destroyed the process meanwhile.
	if live && !errors.Is(readErr, client.ErrDestroyed) {
		if int64(len(got)) != outNext {
			t.Errorf("read %d stdout bytes of %d sent, then %v", len(got), outNext, readErr)
		}
		if eofValid && readErr != io.EOF {
			t.Errorf("stdout_eof was sent at %d, stdout ended with %v", outNext, readErr)
		}
	}
	if !isStderrOf(errGot, errSent) {
		t.Errorf("stderr read is not bytes sent in offset order")
	}
	if prm.graceMS > 1e12 && errors.Is(readErr, client.ErrConnectionLost) && !finalClose {
		t.Errorf("a grace of %d ms ran out: %v", prm.graceMS, readErr)
	}
	if int64(len(got)) > outNext {
		t.Errorf("read %d stdout bytes, %d were sent", len(got), outNext)
	}
	for i := range got {
		if got[i] != streamByte(stdoutSeed, int64(i)) {
			t.Errorf("stdout byte %d is %#x, %#x was sent", i, got[i], streamByte(stdoutSeed, int64(i)))
			break
		}
	}
	switch {
	case readErr == io.EOF:
		if !slices.Contains(eofs, int64(len(got))) {
			t.Errorf("stdout ended at %d, stdout_eof was sent at %v", len(got), eofs)
		}
	case errors.Is(readErr, context.Canceled), isTyped(readErr):
	default:
		t.Errorf("stdout ended with %v", readErr)
	}
	if d := p.Stderr().Dropped(); d < 0 {
		t.Errorf("stderr dropped %d", d)
	}
	if r := p.Stderr().Received(); r > errMax {
		t.Errorf("stderr received %d, %d were sent", r, errMax)
	}

	dctx, dcancel := context.WithTimeout(context.Background(), sessionGuard)
	defer dcancel()
	timed(t, "Destroy", sessionGuard, func() {
		// A destroy answered with garbage fails; a later one tries again.
		var err error
		for range 5 {
			var pe *client.ProtocolError
			if err = p.Destroy(dctx); !errors.As(err, &pe) {
				break
			}
		}
		var re *client.RemoteError
		if err != nil && !errors.As(err, &re) {
			rep.Errorf("Destroy: %v", err)
		}
	})
	timed(t, "Wait after Destroy", 0, func() { wait(dctx) })
	if _, err := p.Stdout().ReadContext(dctx, buf); !errors.Is(err, client.ErrDestroyed) {
		t.Errorf("read after Destroy: %v", err)
	}

	f.mu.Lock()
	exits := slices.Clone(f.exits)
	t.Logf("%d/%d operations, %d connections; read %d of %d stdout bytes, then %v; Wait %v",
		f.pos, len(f.ops), f.conns, len(got), outNext, readErr, waits)
	f.mu.Unlock()
	for i, w := range waits {
		if w != waits[0] {
			t.Errorf("Wait returned %v, %v, then %v, %v", waits[0].st, waits[0].err, w.st, w.err)
		}
		if i == 0 && w.err == nil && !slices.Contains(exits, w.st) {
			t.Errorf("Wait returned %v, the exits sent were %v", w.st, exits)
		}
	}
}

// sessionSeed builds an input from the opened parameters and operations.
func sessionSeed(h [8]byte, ops ...sessionOp) []byte {
	b := h[:]
	for _, op := range ops {
		b = append(b, op.code, op.a, op.b, op.c)
	}
	return b
}

// op returns an operation whose code selects kind.
func op(kind int, a, b, c byte) sessionOp {
	return sessionOp{byte(slices.Index(sessionOps[:], kind)), a, b, c}
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
	out := func(n byte) sessionOp { return op(opStdout, n, 0, 1) }
	full := op(opStdout, 0, 0, 0)
	eof := op(opEOF, 0, 0, 0)
	exit := op(opExit, 3, 1, 0)
	drop := func(kind byte) sessionOp { return op(opDrop, kind, 0, 0) }
	write := func(n byte) sessionOp { return op(opWrite, n, 0, 0) }
	faithful := resumeAnswer(0, 0, 0)
	manual := std
	manual[5] = 1 | 2
	return [][]byte{
		sessionSeed(std),
		sessionSeed(std, out(10), full, eof, exit),
		sessionSeed(std, write(20), out(5), op(opCloseStdin, 0, 0, 0), eof, exit, op(opWait, 0, 0, 0)),
		// stdout at wrong offsets, sizes, past the window
		sessionSeed(std, out(10), op(opStdoutOff, 0, 4, 0)),
		sessionSeed(std, out(10), op(opStdoutOff, 3, 4, 0)),
		sessionSeed(std, op(opStdoutOff, 7, 4, 0)),
		sessionSeed(std, op(opStdoutBig, 10, 0, 0)),
		sessionSeed(std, full, full, full, full, full, full),
		// stdout_eof early, late, twice, different
		sessionSeed(std, out(10), op(opEOF, 3, 0, 0)),
		sessionSeed(std, out(10), op(opEOF, 3, 2, 0)),
		sessionSeed(std, out(10), eof, eof, exit),
		sessionSeed(std, out(10), eof, op(opEOF, 3, 3, 0)),
		sessionSeed(std, out(10), eof, out(3)),
		// stderr with drops, overlaps and an overflowing end
		sessionSeed(std, op(opStderr, 0, 0, 10), op(opStderr, 5, 7, 10), op(opStderr, 6, 3, 10), op(opStderr, 7, 2, 10)),
		sessionSeed(std, op(opStderr, 4, 0, 5)), // over max_data
		// exit twice, different
		sessionSeed(std, exit, op(opExit, 3, 1, 1), op(opExit, 4, 1, 0)),
		// credit backwards, past a window, overflowing, received beyond
		sessionSeed(manual, write(60), op(opCredit, 0, 0, 0), op(opCredit, 5, 0, 1), write(60), op(opCredit, 0, 0, 0)),
		sessionSeed(manual, op(opCredit, 0, 0, 2)),
		sessionSeed(manual, op(opCredit, 0, 0, 3)),
		sessionSeed(manual, write(10), op(opCredit, 200, 0, 4)),
		sessionSeed(manual, write(10), op(opSync, 0, 0, 0), op(opCredit, 2, 0, 5)),
		// signaled: unknown ids, a known id, id 0
		sessionSeed(manual, op(opSignal, 1, 0, 0), op(opSignaled, 0, 9, 0), op(opSync, 0, 0, 0), op(opSignaled, 1, 0, 1)),
		sessionSeed(std, op(opSignaled, 2, 0, 0)),
		// destroyed for another id, and for this one
		sessionSeed(std, out(3), op(opDestroyed, 0, 0, 0)),
		sessionSeed(std, out(3), op(opDestroyed, 1, 0, 0)),
		// frames out of place, garbage, binary, oversized, error frames
		sessionSeed(std, op(opSessionFrame, 0, 0, 0)),
		sessionSeed(std, op(opSessionFrame, 1, 0, 0)),
		sessionSeed(std, op(opSessionFrame, 2, 0, 0)),
		sessionSeed(std, op(opGarbage, 0, 0, 0)),
		sessionSeed(std, op(opGarbage, 4, 0, 0)),
		sessionSeed(std, op(opBinary, 0, 0, 0)),
		sessionSeed(std, out(5), op(opOversize, 0, 0, 0)),
		sessionSeed(std, out(5), op(opOversize, 1, 0, 0), faithful),
		sessionSeed(std, op(opError, 3, 0, 0)),
		sessionSeed(std, op(opError, 0, 0, 0)),
		// drops, resumed faithfully with replay
		sessionSeed(std, write(30), out(20), drop(0), faithful, out(20), eof, exit),
		sessionSeed(std, out(20), drop(1), faithful, drop(6), faithful, eof, exit),
		sessionSeed(std, op(opSignal, 2, 0, 0), drop(0), faithful, exit),
		sessionSeed(std, out(5), op(opCloseStdin, 0, 0, 0), op(opSync, 0, 0, 0), drop(0), faithful),
		// close codes that end the handle
		sessionSeed(std, out(5), drop(2)),
		sessionSeed(std, out(5), drop(3)),
		sessionSeed(std, out(5), drop(7)),
		// resumes answered wrongly
		sessionSeed(std, drop(0), resumeAnswer(resEvidence, 7, 0)),
		sessionSeed(std, drop(0), resumeAnswer(resEvidence, 3, 0)),
		sessionSeed(std, drop(0), resumeAnswer(resProcessID, 0, 0)),
		sessionSeed(std, write(10), drop(0), resumeAnswer(resStdinReceived, 1, 0)),
		sessionSeed(std, write(10), op(opSync, 0, 0, 0), drop(0), resumeAnswer(resStdinReceived, 0, 3)),
		sessionSeed(std, drop(0), resumeAnswer(resStdinLimit, 0, 0)),
		sessionSeed(std, drop(0), resumeAnswer(resError, 3, 0)),
		sessionSeed(std, drop(0), resumeAnswer(resError, 2, 0)),
		sessionSeed(std, drop(0), resumeAnswer(resGarbage, 1, 0)),
		sessionSeed(std, drop(0), resumeAnswer(resGarbage, 0, 3)),
		sessionSeed(std, drop(0), resumeAnswer(resDrop, 0, 0), faithful),
		sessionSeed(std, drop(0), resumeAnswer(resOtherFrame, 1, 0)),
		sessionSeed(std, out(9), op(opSync, 0, 0, 0), drop(0), resumeAnswer(resReplayOffset, 0, 0)),
		sessionSeed(std, out(9), op(opSync, 0, 0, 0), drop(0), resumeAnswer(resReplayOffset, 1, 0)),
		// dials refused, then answered
		sessionSeed(std, op(opRefuse, 0, 2, 0), drop(0), faithful, eof),
		// first-frame destroys refused, lost, answered with garbage, or
		// after output
		sessionSeed(std, op(opDestroyAnswer, 0, 0, 0), out(3), drop(3)),
		sessionSeed(std, op(opDestroyAnswer, 1, 2, 0), out(3), drop(3)),
		sessionSeed(std, op(opDestroyAnswer, 2, 1, 0), out(3), drop(3)),
		sessionSeed(std, op(opDestroyAnswer, 3, 0, 0), drop(0), resumeAnswer(resError, 3, 0)),
		sessionSeed([8]byte{8, 16, 64, 8, 100, 64, 0, 16}, op(opDestroyAnswer, 0, 0, 0), out(5), op(opDestroy, 0, 0, 0)),
		// a bad exit answering the first-frame destroy
		sessionSeed([8]byte{8, 16, 64, 8, 100, 4, 0, 16}, exit, drop(0), resumeAnswer(resError, 0, 0)),
		// heartbeat, small stderr buffer
		sessionSeed([8]byte{8, 16, 64, 8, 100, 8 | 16, 5, 16}, op(opStderr, 0, 0, 60), out(5), eof),
		// stderr read as it comes, with drops and overlaps
		sessionSeed([8]byte{8, 16, 64, 8, 100, 128 | 16, 20, 16}, op(opStderr, 0, 0, 30), op(opStderr, 5, 7, 30),
			op(opStderr, 6, 3, 30), drop(0), faithful, op(opStderr, 0, 0, 30), exit),
		// Destroy while the script runs; its answer lost
		sessionSeed(std, out(5), op(opDestroy, 0, 0, 0), out(5), exit),
		sessionSeed([8]byte{8, 16, 64, 8, 100, 64, 0, 16}, out(5), op(opDestroy, 0, 0, 0), op(opSync, 0, 0, 0), out(5)),
		// a grace longer than a time.Duration holds
		sessionSeed([8]byte{8, 16, 64, 8, 0, 32, 0, 16}, out(5), drop(0), faithful, out(5), eof),
		sessionSeed([8]byte{8, 16, 64, 8, 1, 32, 0, 16}, out(5), drop(0), faithful, out(5), eof),
		sessionSeed([8]byte{8, 16, 64, 8, 2, 32, 0, 16}, out(5), drop(0), faithful, out(5), eof),
	}
}
