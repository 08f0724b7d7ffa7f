package fuzz

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/frames"
	"github.com/procwire/procwire/internal/testkit/fakeexec"
	"github.com/procwire/procwire/proc"
	"github.com/procwire/procwire/server"
)

// FuzzServerSession drives a real server.Server, over loopback WebSockets,
// as a hostile peer. Each input is a small program (see run.hostile): the
// first frame of one connection, then up to maxActions actions on it — frames
// valid or not, fuzzed offsets and ids, mutated and raw lines, binary,
// fragmented and oversized messages, abrupt and clean closes. Beside it, a
// well-behaved session round-trips bytes before, during and after.
//
// Children are fakeexec's in-memory cats, so an execution costs a few
// loopback round trips and no fork. Whatever the input, it checks that:
//   - every frame the server sends is canonical, allowed in its place, and
//     carries exactly the bytes that were sent as stdin (stdout and the
//     stderr tee), within the stdout window and the stdin credit;
//   - the connection ends with a close code of PROTOCOL.md §7 (never 1011),
//     or is still usable, and then drains losslessly on it;
//   - a process left behind resumes (§4.3), and every stdin byte the server
//     counted comes back as stdout, exactly once, up to its EOF;
//   - Stats never shows more stdout held than a window, nor more processes
//     than opens; the well-behaved session is never disturbed;
//   - afterwards, no connection, process, child or goroutine is left.
//
// One server serves every input of a fuzz worker, so state leaking from one
// input to the next shows up too.
func FuzzServerSession(f *testing.F) {
	e := newFuzzEnv(f)
	for _, s := range serverSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		newRun(t, e, in).exec()
	})
}

// The fuzzed server's configuration: small windows so that a few hundred
// bytes reach every bound.
const (
	fuzzToken         = "fuzz-token"
	fuzzWindow        = 1024
	fuzzMaxWindow     = 4096
	fuzzMaxData       = 256
	fuzzStderrRing    = 64
	fuzzMaxTombstones = 8
	fuzzMaxProcesses  = 2
	maxActions        = 24
	// inputLimit bounds an input: past it, the server is stuck. The
	// fuzzing engine takes an input slower than 10 s for a hang, and
	// reports it without a word.
	inputLimit = 7 * time.Second
)

// Instances used by the harness. Admit refuses instDenied.
const (
	instGood    = "good"
	instPrep    = "prep"
	instHostile = "hostile"
	instDenied  = "denied"
)

// fuzzEnv is the server shared by the inputs of one worker.
type fuzzEnv struct {
	srv      *server.Server
	hs       *httptest.Server
	url      string
	client   *http.Client
	exec     *fakeexec.Executor
	handlers sync.WaitGroup // ServeHTTP calls in progress
	inputs   atomic.Uint64
}

func newFuzzEnv(f *testing.F) *fuzzEnv {
	e := &fuzzEnv{exec: newCatExecutor()}
	srv, err := server.New(server.Config{
		Token:    fuzzToken,
		Executor: fakeExecutor{e.exec},
		Admit: func(_ context.Context, inst string) *frames.Error {
			if inst == instDenied {
				return &frames.Error{Code: frames.InstanceNotFound, Operation: "open_process"}
			}
			return nil
		},
		StdoutWindow:    fuzzWindow,
		MaxStdoutWindow: fuzzMaxWindow,
		StdinWindow:     fuzzWindow,
		MaxStdinWindow:  fuzzMaxWindow,
		StderrRing:      fuzzStderrRing,
		MaxFrameData:    fuzzMaxData,
		Grace:           time.Minute, // never expires within an input
		Heartbeat:       -1,
		MaxTombstones:   fuzzMaxTombstones,
		MaxProcesses:    fuzzMaxProcesses,
	})
	require.NoError(f, err)
	e.srv = srv
	e.hs = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.handlers.Add(1)
		defer e.handlers.Done()
		srv.ServeHTTP(w, r)
	}))
	e.url = "ws" + strings.TrimPrefix(e.hs.URL, "http")
	e.client = &http.Client{Transport: &http.Transport{}}
	f.Cleanup(func() {
		require.NoError(f, srv.Close())
		e.hs.Close()
		e.client.CloseIdleConnections()
	})
	return e
}

// ---------------------------------------------------------------------------
// The in-memory child.

// fakeExecutor is a fakeexec.Executor (in-memory cats) as a server.Executor.
type fakeExecutor struct{ *fakeexec.Executor }

func (e fakeExecutor) Start(ctx context.Context, req proc.Request, cfg proc.Config) (server.Process, error) {
	p, err := e.Executor.Start(ctx, req, cfg)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// newCatExecutor returns an executor of in-memory cats that records, as a
// misuse, a start with windows beyond the fuzzed server's configuration.
func newCatExecutor() *fakeexec.Executor {
	e := &fakeexec.Executor{}
	e.BeforeStart = func(_ context.Context, _ *proc.Request, cfg proc.Config) error {
		checkWindows(e, cfg)
		return nil
	}
	return e
}

// checkWindows records, as a misuse of e, windows beyond the fuzzed
// server's configuration.
func checkWindows(e *fakeexec.Executor, cfg proc.Config) {
	if cfg.StdoutWindow > fuzzMaxWindow || cfg.StdinWindow > fuzzMaxWindow || cfg.StderrRing != fuzzStderrRing {
		e.Fail(fmt.Sprintf("Start with windows beyond the config: %+v", cfg))
	}
}

// ---------------------------------------------------------------------------
// What the harness knows of one process.

// shadow is one process as its clients know it: the stdin stream it would
// have accepted (a frame counts if its offset follows the frames before it;
// the server accepts a prefix of that, since it closes the connection at
// the first frame it refuses), and what the server announced.
type shadow struct {
	name string
	seed uint64

	mu          sync.Mutex
	id, token   string
	evidence    frames.Evidence
	window      int64 // stdout window from opened
	stdinWindow int64 // stdin window from opened
	stream      []byte
	closed      bool  // stdin_close sent at the end of stream
	acked       int64 // an ack the server is known to have taken
	maxAck      int64 // the largest ack sent, accepted or not
	maxCredited int64 // the largest stdin_received the server announced
	held        int64 // stdout the client holds: where its last connection's ended
	signalSent  bool
	destroySent bool
	gone        bool // destroyed, and a destroyed frame was seen
	// concurrent: two connections may carry stdin at once (the prepared
	// process's stays open while the hostile one may take it over), so
	// the server may refuse stdin the shadow counted, and stdin_close is
	// only sent by the harness at the end.
	concurrent bool
}

func (s *shadow) length() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return int64(len(s.stream))
}

// pattern returns n bytes for stdin at off, distinct across offsets.
func (s *shadow) pattern(off int64, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		x := s.seed ^ uint64(off+int64(i))*0x9e3779b97f4a7c15
		x ^= x >> 31
		x *= 0xbf58476d1ce4e5b9
		b[i] = byte(x >> 56)
	}
	return b
}

// ---------------------------------------------------------------------------
// One client connection, with a goroutine reading and checking every frame.

type hconn struct {
	r       *run
	name    string
	ws      *websocket.Conn
	changed chan struct{} // capacity 1: the reader saw something
	done    chan struct{} // closed when the reader returns

	// Owned by the goroutine that sends (the input's).
	sent       int                  // messages sent
	selfClosed bool                 // the harness closed the connection
	oversized  bool                 // a message over the read limit was sent
	broken     bool                 // a write failed: the connection is gone
	tentative  bool                 // a resume was sent, its answer is not yet known
	verdict    websocket.StatusCode // the close the messages sent call for, if known
	uncertain  bool                 // a message was sent that may or may not end it
	ignored    bool                 // the resume was refused: later frames change nothing
	signalIDs  []int64

	ackMu   sync.Mutex // orders the acks of autoAck
	autoAck atomic.Bool

	mu        sync.Mutex // guards the rest, written by the reader
	sh        *shadow    // the process this connection serves, once known
	targets   []*shadow  // processes a destroyed frame may name
	hello     frames.Frame
	outEnd    int64 // contiguous stdout received
	errEnd    int64
	eof       int64 // -1 until stdout_eof
	exit      *frames.Exit
	exits     int
	destroyed bool
	credited  int64          // last stdin_received
	lastAck   int64          // the last ack sent, or what the server holds from
	limit     int64          // largest stdin_limit
	asked     map[int64]bool // signal ids sent
	bad       string         // the first thing the server did wrong
	readErr   error
}

// dial opens a connection with the token and the subprotocol.
func (r *run) dial(name string) *hconn {
	ctx, cancel := context.WithDeadline(context.Background(), r.deadline)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, r.e.url, &websocket.DialOptions{
		HTTPClient:   r.e.client,
		HTTPHeader:   http.Header{"Authorization": {"Bearer " + fuzzToken}},
		Subprotocols: []string{frames.Subprotocol},
	})
	if err != nil && ctx.Err() != nil {
		r.stuck("dial %s: %v", name, err)
	}
	r.require(err == nil, "dial %s: %v", name, err)
	ws.SetReadLimit(frames.MaxLine)
	c := &hconn{r: r, name: name, ws: ws, changed: make(chan struct{}, 1), done: make(chan struct{}), eof: -1}
	r.conns = append(r.conns, c)
	go c.readLoop()
	return c
}

func (c *hconn) readLoop() {
	defer close(c.done)
	for {
		typ, b, err := c.ws.Read(context.Background())
		c.mu.Lock()
		if err != nil {
			c.readErr = err
			c.mu.Unlock()
			c.wake()
			return
		}
		ack := c.onMessage(typ, b)
		c.mu.Unlock()
		c.wake()
		if ack >= 0 && c.autoAck.Load() {
			c.sendAck(ack)
		}
	}
}

func (c *hconn) wake() {
	select {
	case c.changed <- struct{}{}:
	default:
	}
}

// violation records the first thing the server did wrong. c.mu is held.
func (c *hconn) violation(format string, args ...any) {
	if c.bad == "" {
		c.bad = fmt.Sprintf(format, args...)
	}
}

// attached reports whether the connection serves a process. c.mu is held.
func (c *hconn) attached() bool {
	switch c.hello.(type) {
	case *frames.Opened, *frames.Resumed:
		return c.sh != nil
	}
	return false
}

// onMessage checks one message from the server and returns the stdout
// offset to acknowledge, or -1. c.mu is held.
func (c *hconn) onMessage(typ websocket.MessageType, b []byte) (ack int64) {
	ack = -1
	if typ != websocket.MessageText {
		c.violation("a binary message")
		return ack
	}
	f, err := frames.Decode(b)
	if err != nil {
		c.violation("undecodable frame %q: %v", trim(b), err)
		return ack
	}
	if canon := frames.Append(nil, f); !bytes.Equal(canon, b) {
		c.violation("non-canonical frame %q", trim(b))
	}
	if c.destroyed {
		c.violation("%s after destroyed", f.Type())
	}
	sh := c.sh
	switch f := f.(type) {
	case *frames.Opened:
		if c.hello != nil || sh == nil {
			c.violation("opened after %v, shadow %v", c.hello, sh != nil)
			return ack
		}
		c.hello = f
		c.limit = f.StdinLimit
		sh.mu.Lock()
		sh.id, sh.token, sh.evidence = f.ProcessID, f.Token, f.Evidence
		sh.window, sh.stdinWindow = f.StdoutWindow, f.StdinLimit
		sh.mu.Unlock()
		if f.MaxData != fuzzMaxData || f.StdoutWindow < 1024 || f.StdoutWindow > fuzzMaxWindow {
			c.violation("opened announces %+v", f)
		}
		return ack
	case *frames.Resumed:
		if c.hello != nil || sh == nil {
			c.violation("resumed after %v, shadow %v", c.hello, sh != nil)
			return ack
		}
		c.hello = f
		c.limit = f.StdinLimit
		c.credited = f.StdinReceived
		sh.mu.Lock()
		defer sh.mu.Unlock()
		switch {
		case f.ProcessID != sh.id || f.Evidence != sh.evidence:
			c.violation("resumed %+v differs from opened %s %+v", f, sh.id, sh.evidence)
		case f.StdinReceived > int64(len(sh.stream)):
			c.violation("resumed with stdin_received %d, only %d sent", f.StdinReceived, len(sh.stream))
		case f.StdinReceived < sh.maxCredited:
			c.violation("resumed with stdin_received %d, %d credited before: acknowledged stdin lost", f.StdinReceived, sh.maxCredited)
		case f.StdinLimit > f.StdinReceived+sh.stdinWindow:
			c.violation("resumed with stdin_limit %d beyond %d + window %d", f.StdinLimit, f.StdinReceived, sh.stdinWindow)
		}
		sh.maxCredited = max(sh.maxCredited, f.StdinReceived)
		return ack
	case *frames.Error:
		if c.hello != nil {
			c.violation("error %+v after %v", f, c.hello)
		}
		c.hello = f
		return ack
	case *frames.Destroyed:
		c.destroyed = true
		for _, t := range c.targets {
			t.mu.Lock()
			if t.id == f.ProcessID {
				t.gone = true
			}
			t.mu.Unlock()
		}
		if c.hello == nil && len(c.targets) == 0 {
			c.violation("destroyed %s unasked", f.ProcessID)
		}
		return ack
	}
	if e, ok := f.(*frames.Exit); ok && c.hello == nil && len(c.targets) > 0 {
		// A first-frame destroy is answered with exit and destroyed.
		c.exits++
		c.exit = e
		if c.exits > 1 {
			c.violation("second exit on one connection")
		}
		return ack
	}
	if !c.attached() {
		c.violation("%s before opened or resumed", f.Type())
		return ack
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	switch f := f.(type) {
	case *frames.Stdout:
		n := int64(len(f.Data))
		switch {
		case f.Off != c.outEnd:
			c.violation("stdout at %d, expected %d", f.Off, c.outEnd)
		case c.eof >= 0:
			c.violation("stdout after stdout_eof")
		case n > fuzzMaxData:
			c.violation("stdout of %d bytes", n)
		case f.Off+n-sh.window > sh.maxAck:
			c.violation("stdout up to %d, beyond ack %d + window %d", f.Off+n, sh.maxAck, sh.window)
		case f.Off+n > int64(len(sh.stream)) || !bytes.Equal(f.Data, sh.stream[f.Off:f.Off+n]):
			c.violation("stdout at %d is not the stdin sent there", f.Off)
		}
		c.outEnd = f.Off + n
		ack = c.outEnd
	case *frames.Stderr:
		n := int64(len(f.Data))
		switch {
		case f.Off < c.errEnd:
			c.violation("stderr at %d, below %d", f.Off, c.errEnd)
		case n > fuzzMaxData || n > fuzzStderrRing:
			c.violation("stderr of %d bytes", n)
		case f.Off+n > int64(len(sh.stream)) || !bytes.Equal(f.Data, sh.stream[f.Off:f.Off+n]):
			c.violation("stderr at %d is not the stdin tee'd there", f.Off)
		}
		c.errEnd = f.Off + n
	case *frames.StdoutEOF:
		switch {
		case c.eof >= 0:
			c.violation("second stdout_eof")
		case f.Off != c.outEnd:
			c.violation("stdout_eof at %d, stdout at %d", f.Off, c.outEnd)
		case !sh.closed && !sh.signalSent && !sh.concurrent:
			c.violation("stdout_eof but stdin is open and no signal sent")
		}
		c.eof = f.Off
	case *frames.Exit:
		c.exits++
		c.exit = f
		switch {
		case c.exits > 1:
			c.violation("second exit on one connection")
		case f.Signal == "" && (f.Code != 0 || c.eof < 0 && !sh.destroySent):
			// After destroy, the stdout not yet sent is dropped, EOF too.
			c.violation("exit %+v, stdout_eof %d", f, c.eof)
		case f.Signal != "" && !sh.signalSent && !sh.destroySent:
			c.violation("exit %+v but no signal nor destroy sent", f)
		case f.Signal != "" && c.eof < 0 && !sh.destroySent:
			c.violation("exit %+v without stdout_eof", f)
		}
	case *frames.Credit:
		switch {
		case f.StdinReceived < c.credited:
			c.violation("credit stdin_received %d after %d", f.StdinReceived, c.credited)
		case f.StdinReceived > int64(len(sh.stream)):
			c.violation("credit stdin_received %d, only %d sent", f.StdinReceived, len(sh.stream))
		case f.StdinLimit < f.StdinReceived || f.StdinLimit > f.StdinReceived+sh.stdinWindow:
			c.violation("credit %+v, stdin window %d", f, sh.stdinWindow)
		}
		c.credited = f.StdinReceived
		c.limit = max(c.limit, f.StdinLimit)
		sh.maxCredited = max(sh.maxCredited, f.StdinReceived)
	case *frames.Signaled:
		if !c.asked[f.ID] || f.Result != frames.SignalDelivered && f.Result != frames.SignalAlreadyExited {
			c.violation("signaled %+v", f)
		}
	default:
		c.violation("unexpected %s", f.Type())
	}
	return ack
}

// sendAck acknowledges stdout up to off unless a later ack went out.
func (c *hconn) sendAck(off int64) {
	c.ackMu.Lock()
	defer c.ackMu.Unlock()
	c.mu.Lock()
	sh := c.sh
	if off <= c.lastAck {
		c.mu.Unlock()
		return
	}
	c.lastAck = off
	c.mu.Unlock()
	sh.mu.Lock()
	sh.maxAck = max(sh.maxAck, off)
	sh.mu.Unlock()
	ctx, cancel := context.WithDeadline(context.Background(), c.r.deadline)
	defer cancel()
	_ = c.ws.Write(ctx, websocket.MessageText, frames.Append(nil, &frames.Ack{Stdout: off}))
}

// startAutoAck makes the reader acknowledge all stdout as it arrives.
func (c *hconn) startAutoAck() {
	c.autoAck.Store(true)
	c.mu.Lock()
	end := c.outEnd
	c.mu.Unlock()
	c.sendAck(end)
}

// ended reports whether the reader returned.
func (c *hconn) ended() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// waitUntil waits until cond (called with c.mu held) holds, and reports
// whether it does; false means the connection ended first. The input
// fails if the server is stuck.
func (c *hconn) waitUntil(what string, cond func() bool) bool {
	deadline := time.NewTimer(time.Until(c.r.deadline))
	defer deadline.Stop()
	for {
		c.mu.Lock()
		ok := cond()
		c.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-c.changed:
		case <-c.done:
			c.mu.Lock()
			ok := cond()
			c.mu.Unlock()
			return ok
		case <-deadline.C:
			c.r.stuck("%s: no %s", c.name, what)
		}
	}
}

// waitEnd waits for the reader to return.
func (c *hconn) waitEnd() {
	c.waitUntil("end of the connection", func() bool { return false })
}

// waitHello waits for the answer to the first frame, if one was sent.
func (c *hconn) waitHello() {
	if c.sent > 0 {
		c.waitUntil("answer to the first frame", func() bool { return c.hello != nil })
	}
}

// ping reports whether the server still reads: a pong comes only after
// every message before the ping was handled.
func (c *hconn) ping() bool {
	if c.broken || c.ended() {
		return false
	}
	ctx, cancel := context.WithDeadline(context.Background(), c.r.deadline)
	defer cancel()
	// A read error (a reset) does not end a pending Ping: the reader's end
	// must.
	go func() {
		select {
		case <-c.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	err := c.ws.Ping(ctx)
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		c.r.stuck("%s: no pong", c.name)
	}
	if err == nil && c.verdict != 0 && !c.uncertain {
		c.mu.Lock()
		attached := c.attached()
		c.mu.Unlock()
		c.r.require(!attached, "%s still open, but the messages sent call for close %d", c.name, c.verdict)
	}
	return err == nil
}

// send writes one message. A text message is decoded as the server would
// decode it, so that what the shadow expects follows what was really sent.
func (c *hconn) send(typ websocket.MessageType, msg []byte) {
	if c.broken {
		return
	}
	first := c.sent == 0
	c.sent++
	if typ == websocket.MessageText {
		c.note(msg, first)
	} else {
		c.expect(websocket.StatusProtocolError)
	}
	ctx, cancel := context.WithDeadline(context.Background(), c.r.deadline)
	defer cancel()
	if err := c.ws.Write(ctx, typ, msg); err != nil {
		if ctx.Err() != nil {
			c.r.stuck("%s: a write blocked", c.name)
		}
		c.broken = true
	}
}

func (c *hconn) sendFrame(f frames.Frame) {
	c.send(websocket.MessageText, frames.Append(nil, f))
}

// note updates the shadows for a text message about to be sent.
func (c *hconn) note(msg []byte, first bool) {
	r := c.r
	limit := frames.MaxLine
	if first {
		limit = frames.MaxFirstLine
	}
	d := frames.Decoder{MaxLine: limit}
	f, err := d.Decode(msg)
	if err != nil {
		// §7: a frame that does not decode is 1007, a message over its
		// line limit 1009.
		if de, ok := errors.AsType[*frames.DecodeError](err); ok && de.Kind == frames.KindLineTooLong {
			c.expect(websocket.StatusMessageTooBig)
		} else {
			c.expect(websocket.StatusInvalidFramePayloadData)
		}
		return
	}
	if first {
		switch f := f.(type) {
		case *frames.Destroy:
			if f.ProcessID == "" {
				c.expect(websocket.StatusProtocolError)
			} else {
				c.expect(websocket.StatusNormalClosure) // destroyed, or an error
			}
		case *frames.Open, *frames.Resume:
		default:
			c.expect(websocket.StatusProtocolError)
		}
		switch f := f.(type) {
		case *frames.Open:
			r.opens++
			c.mu.Lock()
			if c.sh == nil {
				sh := r.newShadow(f.InstanceID)
				c.sh, c.targets = sh, []*shadow{sh}
			}
			c.mu.Unlock()
		case *frames.Resume:
			if p := r.prep; p != nil && p.is(f.ProcessID, f.Token) {
				p.mu.Lock()
				acked, end, concurrent := p.acked, int64(len(p.stream)), p.concurrent
				p.mu.Unlock()
				c.mu.Lock()
				c.sh, c.targets = p, []*shadow{p}
				c.outEnd, c.lastAck = f.StdoutReceived, acked
				if !concurrent {
					// stderr resumes from stderr_received, or from where
					// the ring ends (the tee'd stdin) if that is less.
					c.errEnd = min(f.StderrReceived, end)
				}
				c.mu.Unlock()
				c.tentative = true
			}
		case *frames.Destroy:
			if p := r.prep; p != nil && p.is(f.ProcessID, f.Token) {
				p.mu.Lock()
				p.destroySent = true
				p.mu.Unlock()
				c.mu.Lock()
				c.targets = []*shadow{p}
				c.mu.Unlock()
			}
		}
		return
	}
	if c.tentative {
		// A refused resume must not count what follows it against the
		// process: the server ignores it.
		c.tentative = false
		c.waitHello()
		c.mu.Lock()
		if _, ok := c.hello.(*frames.Resumed); !ok {
			c.ignored = true
		}
		c.mu.Unlock()
	}
	c.mu.Lock()
	sh := c.sh
	c.mu.Unlock()
	if sh == nil || c.ignored {
		return
	}
	c.mu.Lock()
	credit, received, acked := c.limit, c.outEnd, c.lastAck
	switch f := f.(type) {
	case *frames.Ack:
		c.lastAck = f.Stdout
	case *frames.Signal:
		if c.asked == nil {
			c.asked = map[int64]bool{}
		}
		c.asked[f.ID] = true
	}
	c.mu.Unlock()
	// Lock order: c.mu, then sh.mu, as the reader.
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.concurrent {
		c.unsure() // which connection's stdin comes first is a race
	}
	end := int64(len(sh.stream))
	switch f := f.(type) {
	case *frames.Stdin:
		switch n := int64(len(f.Data)); {
		case sh.closed || f.Off != end || n > fuzzMaxData:
			c.expect(websocket.StatusProtocolError)
		case f.Off+n > credit:
			c.unsure() // unless more credit was granted meanwhile: 1008
		}
		switch n := int64(len(f.Data)); {
		case sh.closed:
		case f.Off == end:
			sh.stream = append(sh.stream, f.Data...)
		case sh.concurrent && f.Off < end && f.Off+n > end && n <= fuzzMaxData && bytes.Equal(f.Data, sh.pattern(f.Off, int(n))):
			// Two connections race stdin at the same offset (the kept
			// prepared one, and one that resumed the process): the server
			// takes whichever it reads first while attached. The bytes at
			// an offset are the same from either (pattern), so the stream
			// is what the longer one would make it.
			sh.stream = append(sh.stream, f.Data[end-f.Off:]...)
		}
	case *frames.StdinClose:
		if f.Off == end {
			sh.closed = true
		} else {
			c.expect(websocket.StatusProtocolError)
		}
	case *frames.Ack:
		sh.maxAck = max(sh.maxAck, f.Stdout)
		// The server holds stdout from the last ack, at most a window of
		// it, and cat writes no more than its stdin.
		switch {
		case f.Stdout < acked || f.Stdout > min(end, acked+sh.window):
			c.expect(websocket.StatusProtocolError)
		case f.Stdout > received:
			c.unsure() // unless sent and not yet read
		}
	case *frames.Signal:
		sh.signalSent = true
		c.signalIDs = append(c.signalIDs, f.ID)
	case *frames.Destroy:
		if f.ProcessID == "" || f.ProcessID == sh.id && f.Token == sh.token {
			sh.destroySent = true
			c.expect(websocket.StatusNormalClosure)
		} else {
			c.expect(websocket.StatusProtocolError)
		}
	default: // open, resume, or a server frame
		c.expect(websocket.StatusProtocolError)
	}
}

// expect records how the server must close the connection because of the
// message being sent, unless an earlier message decided it already or
// left it uncertain.
func (c *hconn) expect(code websocket.StatusCode) {
	if c.verdict == 0 && !c.uncertain {
		c.verdict = code
	}
}

// unsure records that the message being sent may or may not end the
// connection: from then on, how it ends is not predicted.
func (c *hconn) unsure() {
	if c.verdict == 0 {
		c.uncertain = true
	}
}

func (s *shadow) isConcurrent() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.concurrent
}

// is reports whether id and token name this process.
func (s *shadow) is(id, token string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.id != "" && id == s.id && token == s.token
}

// ---------------------------------------------------------------------------
// One input.

type run struct {
	t     *testing.T
	e     *fuzzEnv
	p     program
	trace []string
	conns []*hconn

	good     *hconn
	prep     *shadow // the process prepared for resume and destroy, if any
	prepConn *hconn  // its connection, when kept open
	shadows  []*shadow
	opens    int // open frames sent
	seq      uint64
	deadline time.Time // for the whole input
}

func newRun(t *testing.T, e *fuzzEnv, in []byte) *run {
	r := &run{t: t, e: e, p: program{b: in}, seq: e.inputs.Add(1), deadline: time.Now().Add(inputLimit)}
	t.Cleanup(r.cleanup)
	return r
}

// cleanup, after a failed input, destroys what it can so that the next
// inputs (in seed-corpus mode, or while minimizing) start afresh. It is
// bounded: the fuzzing engine takes an input slower than 10 s for a hang.
func (r *run) cleanup() {
	if !r.t.Failed() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, c := range r.conns {
		_ = c.ws.CloseNow()
	}
	for _, sh := range r.shadows {
		sh.mu.Lock()
		f := &frames.Destroy{ProcessID: sh.id, Token: sh.token}
		sh.mu.Unlock()
		if f.ProcessID == "" {
			continue
		}
		ws, _, err := websocket.Dial(ctx, r.e.url, &websocket.DialOptions{
			HTTPClient:   r.e.client,
			HTTPHeader:   http.Header{"Authorization": {"Bearer " + fuzzToken}},
			Subprotocols: []string{frames.Subprotocol},
		})
		if err != nil {
			continue
		}
		_ = ws.Write(ctx, websocket.MessageText, frames.Append(nil, f))
		for err == nil {
			_, _, err = ws.Read(ctx)
		}
		_ = ws.CloseNow()
	}
}

func (r *run) newShadow(name string) *shadow {
	s := &shadow{name: name, seed: r.seq<<8 ^ uint64(len(r.shadows))}
	r.shadows = append(r.shadows, s)
	return s
}

func (r *run) log(format string, args ...any) {
	elapsed := time.Since(r.deadline.Add(-inputLimit))
	r.trace = append(r.trace, fmt.Sprintf("%6.1fms ", float64(elapsed.Microseconds())/1000)+fmt.Sprintf(format, args...))
}

func (r *run) fail(format string, args ...any) {
	r.t.Helper()
	var b strings.Builder
	for _, c := range r.conns {
		c.mu.Lock()
		fmt.Fprintf(&b, "  conn %s: hello %T out %d err %d eof %d exit %+v destroyed %v credited %d limit %d bad %q readErr %v\n",
			c.name, c.hello, c.outEnd, c.errEnd, c.eof, c.exit, c.destroyed, c.credited, c.limit, c.bad, c.readErr)
		c.mu.Unlock()
	}
	r.t.Fatalf("%s\ntrace:\n  %s\nconnections:\n%s", fmt.Sprintf(format, args...), strings.Join(r.trace, "\n  "), b.String())
}

// stuck fails the input with every goroutine's stack.
func (r *run) stuck(format string, args ...any) {
	r.t.Helper()
	buf := make([]byte, 4<<20)
	r.log("stuck")
	r.fail("stuck: %s\ngoroutines:\n%s", fmt.Sprintf(format, args...), buf[:runtime.Stack(buf, true)])
}

func (r *run) require(ok bool, format string, args ...any) {
	r.t.Helper()
	if !ok {
		r.fail(format, args...)
	}
}

// checkConn fails the input if the reader saw the server do wrong.
func (r *run) checkConn(c *hconn) {
	r.t.Helper()
	c.mu.Lock()
	bad := c.bad
	c.mu.Unlock()
	r.require(bad == "", "%s: %s", c.name, bad)
	if p := r.e.exec.Misuse(); p != "" {
		r.fail("the server misused a process: %s", p)
	}
}

// checkStats checks the bounds Stats must always show.
func (r *run) checkStats() {
	r.t.Helper()
	st := r.e.srv.Stats()
	r.require(len(st.Processes) <= min(r.opens, fuzzMaxProcesses), "%d processes after %d opens: %+v", len(st.Processes), r.opens, st.Processes)
	r.require(st.Tombstones <= fuzzMaxTombstones, "%d tombstones", st.Tombstones)
	seen := map[string]bool{}
	for _, p := range st.Processes {
		r.require(p.StdoutHeld >= 0 && p.StdoutHeld <= p.StdoutWindow && p.StdoutWindow <= fuzzMaxWindow,
			"process %+v holds more stdout than its window", p)
		r.require(!seen[p.InstanceID], "two processes on instance %s", p.InstanceID)
		seen[p.InstanceID] = true
	}
}

// closeCodes are the codes of PROTOCOL.md §7 a misbehaving peer may get.
var closeCodes = map[websocket.StatusCode]bool{
	websocket.StatusNormalClosure:           true,
	websocket.StatusProtocolError:           true,
	websocket.StatusInvalidFramePayloadData: true,
	websocket.StatusPolicyViolation:         true,
	websocket.StatusMessageTooBig:           true,
}

// checkEnd checks how an ended connection ended.
func (r *run) checkEnd(c *hconn) {
	r.t.Helper()
	r.checkConn(c)
	c.mu.Lock()
	err, destroyed, hello := c.readErr, c.destroyed, c.hello
	c.mu.Unlock()
	var ce websocket.CloseError
	if !errors.As(err, &ce) {
		// Only our own close, or the server dropping a connection that
		// overran its read limit, may lose the close frame.
		r.require(c.selfClosed || c.oversized || c.verdict == websocket.StatusMessageTooBig,
			"%s ended without a close frame: %v", c.name, err)
		return
	}
	resumedElsewhere := ce.Code == 4001 && c.sh != nil && c.sh.isConcurrent()
	r.require(closeCodes[ce.Code] || resumedElsewhere,
		"%s closed with %d %q", c.name, ce.Code, ce.Reason)
	r.require(len(ce.Reason) <= 123, "%s: close reason of %d bytes", c.name, len(ce.Reason))
	_, refused := hello.(*frames.Error)
	if destroyed || refused {
		r.require(ce.Code == websocket.StatusNormalClosure, "%s closed with %d %q after %T", c.name, ce.Code, ce.Reason, hello)
	}
	r.checkVerdict(c, ce.Code, ce.Reason)
}

// checkVerdict checks that the server closed the connection as the
// messages sent on it call for.
func (r *run) checkVerdict(c *hconn, code websocket.StatusCode, reason string) {
	r.t.Helper()
	c.mu.Lock()
	attached, answered := c.attached(), c.hello != nil
	c.mu.Unlock()
	if c.selfClosed || c.uncertain || c.sent == 0 || !attached && answered {
		return
	}
	if c.verdict != 0 {
		r.require(code == c.verdict, "%s closed with %d %q, but the messages sent call for %d", c.name, code, reason, c.verdict)
		return
	}
	r.require(!attached || code == websocket.StatusNormalClosure && c.destroyed,
		"%s closed with %d %q, but every message sent was valid", c.name, code, reason)
}

// exec runs the input.
func (r *run) exec() {
	r.t.Helper()
	base := runtime.NumGoroutine()

	r.openGood()
	r.roundTrip(32)
	r.hostile()
	r.roundTrip(48)
	r.settleAll()
	r.destroyGood()

	// Everything is gone: connections, processes, children, goroutines.
	done := make(chan struct{})
	go func() { r.e.handlers.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Until(r.deadline)):
		r.stuck("a connection is still being served")
	}
	st := r.e.srv.Stats()
	r.require(st.Connections == 0 && len(st.Processes) == 0, "left behind: %+v", st)
	r.require(r.e.exec.Live() == 0, "%d children not destroyed", r.e.exec.Live())
	r.checkStats()
	for runtime.NumGoroutine() > base {
		if time.Now().After(r.deadline) {
			r.stuck("%d goroutines, %d before the input", runtime.NumGoroutine(), base)
		}
		runtime.Gosched()
	}
}

// openGood opens the well-behaved session.
func (r *run) openGood() {
	c := r.dial("good")
	r.good = c
	sh := r.newShadow(instGood)
	c.autoAck.Store(true)
	c.mu.Lock()
	c.sh, c.targets = sh, []*shadow{sh}
	c.mu.Unlock()
	c.sendFrame(catOpen(instGood, 0, 0))
	c.waitHello()
	c.mu.Lock()
	hello := c.hello
	c.mu.Unlock()
	_, ok := hello.(*frames.Opened)
	r.checkConn(c)
	r.require(ok, "the well-behaved session was not opened: %+v, %+v", hello, r.e.srv.Stats())
}

// roundTrip sends n bytes through the well-behaved session and waits for
// them to come back.
func (r *run) roundTrip(n int) {
	r.t.Helper()
	c := r.good
	sh := c.sh
	off := sh.length()
	c.sendFrame(&frames.Stdin{Off: off, Data: sh.pattern(off, n)})
	ok := c.waitUntil("well-behaved echo", func() bool { return c.outEnd >= off+int64(n) || c.bad != "" })
	r.checkConn(c)
	r.require(ok && !c.broken, "the well-behaved session ended")
}

func (r *run) destroyGood() {
	c := r.good
	c.sendFrame(&frames.Destroy{})
	c.waitEnd()
	r.checkEnd(c)
	c.mu.Lock()
	destroyed, exits := c.destroyed, c.exits
	c.mu.Unlock()
	r.require(destroyed && exits == 1, "well-behaved destroy: destroyed %v, %d exits", destroyed, exits)
}

// catOpen is an open of cat on inst with the given windows (0: default).
func catOpen(inst string, stdoutWindow, stdinWindow int64) *frames.Open {
	return &frames.Open{
		InstanceID: inst,
		Request: frames.ProcessRequest{
			Executable:       "cat",
			Arguments:        []string{},
			WorkingDirectory: "/",
			Environment:      map[string]string{"PATH": "/bin"},
		},
		StdoutWindow: stdoutWindow,
		StdinWindow:  stdinWindow,
	}
}

// ---------------------------------------------------------------------------
// The program: the input read as a sequence of choices. Past its end every
// read returns 0.

type program struct {
	b []byte
	i int
}

func (p *program) more() bool { return p.i < len(p.b) }

func (p *program) byte() byte {
	if p.i >= len(p.b) {
		return 0
	}
	p.i++
	return p.b[p.i-1]
}

func (p *program) take(n int) []byte {
	n = min(n, len(p.b)-p.i)
	s := p.b[p.i : p.i+n]
	p.i += n
	return s
}

func (p *program) int64() int64 {
	var b [8]byte
	copy(b[:], p.take(8))
	return int64(binary.BigEndian.Uint64(b[:]) &^ (1 << 63))
}

// First frames of the hostile connection (header bits 0-2).
const (
	firstOpen       = iota // open cat on a fresh instance
	firstOpenGood          // open on the well-behaved session's instance
	firstOpenPrep          // open on the prepared process's instance
	firstOpenDenied        // open an instance Admit refuses
	firstOpenFail          // open an executable that does not start
	firstResume            // resume the prepared process, fuzzed offsets
	firstDestroy           // destroy the prepared process
	firstRaw               // a mutated first frame, or raw bytes
)

// Header bits beyond the first frame.
const (
	hdrPrep        = 1 << 3 // prepare a detached process first
	hdrWindowShift = 4      // 2 bits: the windows asked for
	hdrPrepShift   = 6      // 2 bits: how the prepared process was read
)

// Actions on the hostile connection.
const (
	opStdin          = iota // stdin, fuzzed size and offset
	opStdinClose            // stdin_close, fuzzed offset
	opAck                   // ack, fuzzed value
	opSignal                // signal, fuzzed id and name
	opDestroy               // destroy inside the session, fuzzed ids
	opRaw                   // raw bytes
	opMutated               // a valid frame, mutated
	opBinary                // a valid frame as a binary message
	opOversized             // a message at or over the read limit
	opSync                  // ping, then wait for the echo
	opAbrupt                // drop the connection
	opCloseHandshake        // close it cleanly
	opSecondFirst           // open or resume inside the session
	opBurst                 // stdin up to the credit limit, maybe one byte more
	opGood                  // a round trip on the well-behaved session
	opFragmented            // a valid stdin frame in WebSocket fragments
	opPrep                  // stdin or ack on the prepared process's open connection
	numOps
)

// windows are the windows an open asks for (header bits 4-5).
var windows = [4][2]int64{{0, 0}, {1024, 1024}, {4096, 2048}, {1 << 30, 1 << 30}}

// hostile runs the hostile connection: the header, the first frame, the
// actions.
func (r *run) hostile() {
	p := &r.p
	hdr := p.byte()
	if hdr&hdrPrep != 0 {
		n, flags := p.byte(), p.byte()
		r.prepare(n, hdr>>hdrPrepShift&3, flags&1 == 1)
	}
	c := r.dial("hostile")
	w := windows[hdr>>hdrWindowShift&3]
	switch kind := hdr & 7; kind {
	case firstOpen:
		r.log("first: open %v", w)
		c.sendFrame(catOpen(instHostile, w[0], w[1]))
	case firstOpenGood:
		r.log("first: open %s", instGood)
		c.sendFrame(catOpen(instGood, w[0], w[1]))
	case firstOpenPrep:
		r.log("first: open %s", instPrep)
		c.sendFrame(catOpen(instPrep, w[0], w[1]))
	case firstOpenDenied:
		r.log("first: open %s", instDenied)
		c.sendFrame(catOpen(instDenied, w[0], w[1]))
	case firstOpenFail:
		r.log("first: open fail")
		o := catOpen(instHostile, w[0], w[1])
		o.Request.Executable = "fail-to-start"
		c.sendFrame(o)
	case firstResume:
		f := r.resumeFrame(p)
		r.log("first: resume %+v", *f)
		c.sendFrame(f)
	case firstDestroy:
		f := r.destroyFrame(p.byte())
		r.log("first: destroy %+v", *f)
		c.sendFrame(f)
	case firstRaw:
		b := p.byte()
		var msg []byte
		if b < 128 {
			msg = r.mutate(p, r.firstTemplate(b))
		} else {
			msg = bytes.Clone(p.take(int(p.byte())))
		}
		r.log("first: raw %q", trim(msg))
		c.send(websocket.MessageText, msg)
	}
	// What follows is judged against the answer: no pipelining.
	c.waitHello()
	r.checkStats()

	oversized := false
	for n := 0; n < maxActions && p.more() && !c.broken && !c.selfClosed; n++ {
		switch op := p.byte() % numOps; op {
		case opStdin:
			size, off := p.byte(), p.byte()
			length := int(size) + 1
			if size >= 200 {
				length = int(size-200) * 8
			}
			at := r.offset(c, off)
			r.log("stdin off %d len %d", at, length)
			c.sendFrame(&frames.Stdin{Off: at, Data: r.data(c, at, length)})
		case opStdinClose:
			at := r.offset(c, p.byte())
			r.log("stdin_close %d", at)
			c.sendFrame(&frames.StdinClose{Off: at})
		case opAck:
			v := r.ackValue(c, p)
			r.log("ack %d", v)
			c.sendFrame(&frames.Ack{Stdout: v})
		case opSignal:
			f := r.signalFrame(c, p.byte(), p.byte())
			r.log("signal %+v", *f)
			c.sendFrame(f)
		case opDestroy:
			f := r.innerDestroy(c, p.byte())
			r.log("destroy %+v", *f)
			c.sendFrame(f)
		case opRaw:
			b := p.byte()
			msg := bytes.Clone(p.take(int(b & 0x7f)))
			if b&0x80 == 0 {
				msg = append(msg, '\n')
			}
			r.log("raw %q", trim(msg))
			c.send(websocket.MessageText, msg)
		case opMutated:
			msg := r.mutate(p, r.template(c, p.byte()))
			r.log("mutated %q", trim(msg))
			c.send(websocket.MessageText, msg)
		case opBinary:
			at := r.offset(c, 0)
			r.log("binary stdin %d", at)
			c.send(websocket.MessageBinary, frames.Append(nil, &frames.Stdin{Off: at, Data: r.data(c, at, 1)}))
		case opOversized:
			kind := p.byte() % 4
			if oversized {
				continue // one per input: they are slow
			}
			oversized = true
			// The close that answers it may overtake the server's hello.
			c.waitHello()
			msg := r.oversized(c, kind)
			r.log("oversized %d: %d bytes", kind, len(msg))
			c.oversized = c.oversized || len(msg) > frames.MaxLine
			c.send(websocket.MessageText, msg)
		case opSync:
			r.log("sync")
			r.sync(c)
		case opAbrupt:
			r.log("abrupt close")
			c.waitHello() // else the process is left behind unknown
			c.selfClosed = true
			_ = c.ws.CloseNow()
		case opCloseHandshake:
			r.log("close handshake")
			c.waitHello()
			c.selfClosed = true
			_ = c.ws.Close(websocket.StatusNormalClosure, "bye")
		case opSecondFirst:
			var f frames.Frame = catOpen(instHostile, 0, 0)
			if p.byte()&1 == 1 {
				f = r.resumeFrame(p)
			}
			r.log("second %s", f.Type())
			c.sendFrame(f)
		case opBurst:
			r.burst(c, p.byte()&1 == 1)
		case opGood:
			n := int(p.byte()%64) + 1
			r.log("good round trip %d", n)
			r.roundTrip(n)
		case opFragmented:
			r.fragmented(c, p.byte(), p.byte())
		case opPrep:
			r.onPrep(p.byte())
		}
		r.checkConn(c)
		r.checkStats()
	}
}

// prepare opens the prepared process on its own connection, sends it n
// bytes, reads them back or not, and drops the connection.
func (r *run) prepare(n, read byte, keep bool) {
	r.log("prepare %d bytes, read mode %d, keep %v", n, read, keep)
	c := r.dial("prep")
	sh := r.newShadow(instPrep)
	r.prep = sh
	c.mu.Lock()
	c.sh, c.targets = sh, []*shadow{sh}
	c.mu.Unlock()
	c.sendFrame(catOpen(instPrep, fuzzWindow, fuzzWindow))
	c.waitHello()
	c.mu.Lock()
	_, ok := c.hello.(*frames.Opened)
	c.mu.Unlock()
	r.checkConn(c)
	r.require(ok, "the prepared process was not opened")
	if n > 0 {
		c.sendFrame(&frames.Stdin{Off: 0, Data: sh.pattern(0, int(n))})
	}
	if read != 0 {
		r.require(c.waitUntil("prepared echo", func() bool { return c.outEnd == int64(n) }), "prepared connection ended")
		switch read {
		case 1:
			c.sendFrame(&frames.Ack{Stdout: int64(n)})
		case 2:
			c.sendFrame(&frames.Ack{Stdout: int64(n / 2)})
		}
	}
	r.require(c.ping(), "prepared connection ended")
	c.mu.Lock()
	sh.mu.Lock()
	sh.acked = c.lastAck
	sh.held = c.outEnd
	sh.concurrent = keep
	sh.mu.Unlock()
	c.mu.Unlock()
	if keep {
		r.prepConn = c
		c.uncertain = true // another connection may take the process over
		return
	}
	c.selfClosed = true
	_ = c.ws.CloseNow()
	c.waitEnd()
	r.checkEnd(c)
	c.mu.Lock()
	sh.mu.Lock()
	sh.held = c.outEnd
	sh.mu.Unlock()
	c.mu.Unlock()
}

// onPrep sends stdin or an ack on the prepared process's connection, if it
// is kept open: it races with what the hostile connection does to the
// process (resume, destroy).
func (r *run) onPrep(b byte) {
	c := r.prepConn
	if c == nil || c.broken || c.ended() {
		return
	}
	c.mu.Lock()
	sh, end := c.sh, c.outEnd
	c.mu.Unlock()
	if b&1 == 0 {
		r.log("prep ack %d", end)
		c.sendFrame(&frames.Ack{Stdout: end})
		return
	}
	at := sh.length()
	n := int(b>>1)%64 + 1
	r.log("prep stdin %d len %d", at, n)
	c.sendFrame(&frames.Stdin{Off: at, Data: sh.pattern(at, n)})
}

// resumeFrame is a resume of the prepared process (a made-up one without
// it) with a fuzzed token and offsets.
func (r *run) resumeFrame(p *program) *frames.Resume {
	b := p.byte()
	f := &frames.Resume{ProcessID: strings.Repeat("0", 32), Token: strings.Repeat("1", 64)}
	var held, acked, end int64
	if s := r.prep; s != nil {
		s.mu.Lock()
		f.ProcessID, f.Token = s.id, s.token
		held, acked, end = s.held, s.acked, int64(len(s.stream))
		s.mu.Unlock()
	}
	if c := r.prepConn; c != nil {
		c.mu.Lock()
		held = c.outEnd
		c.mu.Unlock()
	}
	corrupt(f, b&3)
	switch b >> 2 & 7 {
	case 0:
		f.StdoutReceived = held
	case 1:
		f.StdoutReceived = acked
	case 2:
		f.StdoutReceived = max(acked-1, 0)
	case 3:
		f.StdoutReceived = end + 1
	case 4:
		f.StdoutReceived = p.int64()
	case 5:
		f.StdoutReceived = 0
	case 6:
		f.StdoutReceived = held + int64(p.byte())
	case 7:
		f.StdoutReceived = end
	}
	switch b >> 5 & 3 {
	case 1:
		f.StderrReceived = end
	case 2:
		f.StderrReceived = p.int64()
	case 3:
		f.StderrReceived = int64(p.byte())
	}
	return f
}

// corrupt spoils a resume or destroy's credentials: 0 and 1 leave them, 2
// changes the token, 3 the process id.
func corrupt[F *frames.Resume | *frames.Destroy](f F, how byte) {
	var id, token *string
	switch f := any(f).(type) {
	case *frames.Resume:
		id, token = &f.ProcessID, &f.Token
	case *frames.Destroy:
		id, token = &f.ProcessID, &f.Token
	}
	flip := func(s string) string {
		if s == "" {
			return "0"
		}
		return s[:len(s)-1] + string("10"[s[len(s)-1]&1])
	}
	switch how {
	case 2:
		*token = flip(*token)
	case 3:
		*id = flip(*id)
	}
}

// destroyFrame is a first-frame destroy of the prepared process.
func (r *run) destroyFrame(b byte) *frames.Destroy {
	f := &frames.Destroy{ProcessID: strings.Repeat("0", 32), Token: strings.Repeat("1", 64)}
	if s := r.prep; s != nil {
		s.mu.Lock()
		f.ProcessID, f.Token = s.id, s.token
		s.mu.Unlock()
	}
	if b&4 != 0 {
		f.Token = "" // refused before lookup
	}
	corrupt(f, b&3)
	return f
}

// innerDestroy is a destroy inside the session: plain, naming its own
// process, naming another, or with a wrong token.
func (r *run) innerDestroy(c *hconn, b byte) *frames.Destroy {
	c.mu.Lock()
	sh := c.sh
	c.mu.Unlock()
	f := &frames.Destroy{}
	switch b % 4 {
	case 1, 3:
		if sh == nil {
			f.ProcessID, f.Token = strings.Repeat("a", 32), strings.Repeat("b", 64)
			break
		}
		c.waitHello()
		sh.mu.Lock()
		f.ProcessID, f.Token = sh.id, sh.token
		sh.mu.Unlock()
		if f.ProcessID == "" {
			f.ProcessID, f.Token = strings.Repeat("a", 32), strings.Repeat("b", 64)
		}
		if b%4 == 3 {
			corrupt(f, 2)
		}
	case 2:
		f.ProcessID, f.Token = strings.Repeat("c", 32), strings.Repeat("d", 64)
		if s := r.prep; s != nil && s != sh {
			s.mu.Lock()
			f.ProcessID, f.Token = s.id, s.token
			s.mu.Unlock()
		}
	}
	return f
}

// offset is the stdin offset the server expects, or near it.
func (r *run) offset(c *hconn, b byte) int64 {
	var at int64
	c.mu.Lock()
	sh := c.sh
	c.mu.Unlock()
	if sh != nil {
		at = sh.length()
	}
	if b >= 224 {
		at += int64(b) - 240
	}
	return at
}

// data is n bytes of stdin for offset at.
func (r *run) data(c *hconn, at int64, n int) []byte {
	c.mu.Lock()
	sh := c.sh
	c.mu.Unlock()
	if sh == nil {
		return bytes.Repeat([]byte{'x'}, n)
	}
	return sh.pattern(at, n)
}

// ackValue is an ack of what was received, or near it, or anything.
func (r *run) ackValue(c *hconn, p *program) int64 {
	a := p.byte()
	c.mu.Lock()
	recv, last := c.outEnd, c.lastAck
	c.mu.Unlock()
	k := int64(a >> 3)
	switch a & 7 {
	case 3:
		return recv - k - 1
	case 4:
		return recv + k + 1
	case 5:
		return last
	case 6:
		return 0
	case 7:
		return p.int64()
	}
	return recv
}

var signalNames = [...]frames.SignalName{frames.SIGINT, frames.SIGTERM, frames.SIGKILL, "SIGHUP"}

func (r *run) signalFrame(c *hconn, a, b byte) *frames.Signal {
	var last int64
	if n := len(c.signalIDs); n > 0 {
		last = c.signalIDs[n-1]
	}
	f := &frames.Signal{Signal: signalNames[b%4]}
	switch a & 3 {
	case 0:
		f.ID = last + 1
	case 1:
		f.ID = last
	case 2:
		f.ID = last - 1
	case 3:
		f.ID = int64(a >> 2)
	}
	return f
}

// firstTemplate is a valid first frame to mutate.
func (r *run) firstTemplate(b byte) []byte {
	switch b % 4 {
	case 1:
		f := &frames.Resume{ProcessID: strings.Repeat("0", 32), Token: strings.Repeat("1", 64)}
		if s := r.prep; s != nil {
			s.mu.Lock()
			f.ProcessID, f.Token, f.StdoutReceived = s.id, s.token, s.held
			s.mu.Unlock()
		}
		return frames.Append(nil, f)
	case 2:
		return frames.Append(nil, r.destroyFrame(0))
	case 3:
		o := catOpen(instHostile, 2048, 0)
		o.Request.Arguments = []string{"-u", "ü\x01"}
		o.Request.Environment = map[string]string{"A": "b", "LANG": "C.UTF-8"}
		return frames.Append(nil, o)
	}
	return frames.Append(nil, catOpen(instHostile, 0, 0))
}

// template is a valid frame inside a session, to mutate.
func (r *run) template(c *hconn, b byte) []byte {
	at := r.offset(c, 0)
	c.mu.Lock()
	recv := c.outEnd
	c.mu.Unlock()
	var f frames.Frame
	switch b % 8 {
	case 0:
		f = &frames.Stdin{Off: at, Data: r.data(c, at, 4)}
	case 1:
		f = &frames.StdinClose{Off: at}
	case 2:
		f = &frames.Ack{Stdout: recv}
	case 3:
		f = &frames.Signal{ID: int64(len(c.signalIDs)) + 1, Signal: frames.SIGTERM}
	case 4:
		f = &frames.Destroy{}
	case 5:
		f = catOpen(instHostile, 0, 0)
	case 6:
		f = r.resumeFrame(&program{})
	case 7:
		f = r.innerDestroy(c, 1)
	}
	return frames.Append(nil, f)
}

// interesting are bytes a mutation inserts: JSON's structure, digits,
// escapes, the line end and invalid UTF-8.
const interesting = "{}[]\",:\\ 0123456789-+.eEtrufalsn\n\t\r\x00\xff\xc3"

// mutate applies up to four mutations from the program to line.
func (r *run) mutate(p *program, line []byte) []byte {
	for range p.byte() % 5 {
		pos, v := p.byte(), p.byte()
		i := int(pos) * (len(line) + 1) / 256
		ch := interesting[int(v>>2)%len(interesting)]
		switch v & 3 {
		case 0:
			if i < len(line) {
				line[i] = v
			}
		case 1:
			line = slices.Insert(line, i, ch)
		case 2:
			if i < len(line) {
				line = slices.Delete(line, i, i+1)
			}
		case 3:
			if i < len(line) {
				line[i] = ch
			}
		}
	}
	return line
}

// oversized is an ack padded with whitespace (allowed inside the object)
// to exactly the read limit with its '\n' (valid), the limit without it
// (a line over the limit), one byte over, or 1 MiB.
func (r *run) oversized(c *hconn, kind byte) []byte {
	c.mu.Lock()
	v := c.lastAck
	c.mu.Unlock()
	size, nl := frames.MaxLine, true
	switch kind {
	case 1:
		nl = false
	case 2:
		size++
	case 3:
		size = 1 << 20
	}
	head := fmt.Appendf(nil, `{"type":"ack","stdout":%d`, v)
	pad := size - len(head) - 1
	if nl {
		pad--
	}
	msg := append(head, bytes.Repeat([]byte{' '}, pad)...)
	msg = append(msg, '}')
	if nl {
		msg = append(msg, '\n')
	}
	return msg
}

// sync waits until the server handled everything sent, and for the stdout
// that cat must then have echoed: up to the stdin sent, or a window past
// the last ack.
func (r *run) sync(c *hconn) {
	if !c.ping() {
		return
	}
	c.waitHello()
	c.mu.Lock()
	sh, attached, acked := c.sh, c.attached(), c.lastAck
	c.mu.Unlock()
	if !attached {
		return
	}
	// The server took every ack sent on c, in order.
	sh.mu.Lock()
	sh.acked = max(sh.acked, acked)
	end := int64(len(sh.stream))
	want := min(end, sh.acked+sh.window)
	concurrent, closed, stdinWindow := sh.concurrent, sh.closed, sh.stdinWindow
	sh.mu.Unlock()
	if concurrent {
		return // the stdin sent may not all be taken
	}
	c.waitUntil(fmt.Sprintf("echo up to %d", want), func() bool {
		return c.outEnd >= want || c.eof >= 0 || c.destroyed || c.bad != ""
	})
	// Once cat consumed all its stdin (echoed it, or died), credit never
	// stalls on a remainder (§5): the whole window is granted again, or
	// the grant is held back only while less than a quarter window of
	// growth is pending, so the client has more than three quarters left.
	c.mu.Lock()
	consumed := c.outEnd == end || c.eof >= 0
	c.mu.Unlock()
	if consumed && !closed {
		least := end + stdinWindow - max(stdinWindow/4, 1) + 1
		c.waitUntil(fmt.Sprintf("credit up to %d", least), func() bool {
			return c.limit >= least || c.destroyed || c.bad != ""
		})
	}
}

// burst sends stdin up to the credit limit (at most 8 KiB), and with extra
// one byte beyond it.
func (r *run) burst(c *hconn, extra bool) {
	c.waitHello()
	c.mu.Lock()
	sh, limit := c.sh, c.limit
	c.mu.Unlock()
	if sh == nil {
		return
	}
	at := sh.length()
	stop := min(limit, at+8<<10)
	r.log("burst %d..%d extra %v", at, stop, extra)
	for at < stop && !c.broken {
		n := min(stop-at, fuzzMaxData)
		c.sendFrame(&frames.Stdin{Off: at, Data: sh.pattern(at, int(n))})
		at += n
	}
	if extra {
		c.sendFrame(&frames.Stdin{Off: at, Data: sh.pattern(at, 1)})
	}
}

// fragmented sends a valid stdin frame in up to three WebSocket fragments.
func (r *run) fragmented(c *hconn, a, b byte) {
	at := r.offset(c, 0)
	msg := frames.Append(nil, &frames.Stdin{Off: at, Data: r.data(c, at, 8)})
	i := int(a) % (len(msg) + 1)
	j := max(i, int(b)%(len(msg)+1))
	r.log("fragmented stdin %d at %d, %d", at, i, j)
	if c.broken {
		return
	}
	c.sent++
	c.note(msg, c.sent == 1)
	ctx, cancel := context.WithDeadline(context.Background(), r.deadline)
	defer cancel()
	w, err := c.ws.Writer(ctx, websocket.MessageText)
	if err != nil {
		c.broken = true
		return
	}
	for _, part := range [][]byte{msg[:i], msg[i:j], msg[j:]} {
		if _, err := w.Write(part); err != nil {
			c.broken = true
		}
	}
	if err := w.Close(); err != nil {
		c.broken = true
	}
}

// ---------------------------------------------------------------------------
// After the input: every process left is drained, checked and destroyed.

// settleAll ends the hostile connection, then drains and destroys every
// process still live.
func (r *run) settleAll() {
	for _, c := range r.conns {
		if c != r.good {
			r.settle(c)
		}
	}
	for _, sh := range r.shadows {
		sh.mu.Lock()
		pending := sh.id != "" && !sh.gone && sh.name != instGood
		held := sh.held
		sh.mu.Unlock()
		if pending {
			r.resumeAndDrain(sh, held)
		}
	}
}

// settle ends connection c: drained and destroyed on itself if it is still
// usable, else checked to have closed as PROTOCOL.md §7 allows.
func (r *run) settle(c *hconn) {
	if !c.ended() {
		c.waitHello()
		alive := c.ping()
		c.mu.Lock()
		attached := c.attached() && !c.destroyed
		c.mu.Unlock()
		concurrent := attached && c.sh.isConcurrent()
		switch {
		case alive && attached && !concurrent:
			r.log("drain %s on itself", c.name)
			r.drain(c, c.sh.length())
		case alive && attached:
			// Usable, but how much of the stdin sent the server took is
			// told only by a resume.
			c.selfClosed = true
			_ = c.ws.CloseNow()
		case alive && c.sent == 0:
			c.selfClosed = true
			_ = c.ws.CloseNow()
		}
		c.waitEnd()
	}
	r.checkEnd(c)
	c.mu.Lock()
	if c.attached() {
		c.sh.mu.Lock()
		c.sh.held = c.outEnd
		c.sh.mu.Unlock()
	}
	c.mu.Unlock()
}

// resumeAndDrain resumes a detached process from offset from (or, after a
// replay_gap, from the oldest byte held), then drains and destroys it.
func (r *run) resumeAndDrain(sh *shadow, from int64) {
	for attempt := 0; ; attempt++ {
		r.log("resume %s from %d", sh.name, from)
		c := r.dial("resume-" + sh.name)
		c.mu.Lock()
		c.sh, c.targets, c.outEnd, c.lastAck = sh, []*shadow{sh}, from, -1
		c.mu.Unlock()
		sh.mu.Lock()
		f := &frames.Resume{ProcessID: sh.id, Token: sh.token, StdoutReceived: from}
		sh.mu.Unlock()
		c.sendFrame(f)
		c.waitHello()
		r.checkConn(c)
		c.mu.Lock()
		hello := c.hello
		c.mu.Unlock()
		switch h := hello.(type) {
		case *frames.Resumed:
			c.autoAck.Store(true)
			r.drain(c, h.StdinReceived)
			c.waitEnd()
			r.checkEnd(c)
			return
		case *frames.Error:
			c.waitEnd()
			r.checkEnd(c)
			sh.mu.Lock()
			destroySent := sh.destroySent
			sh.mu.Unlock()
			switch {
			case h.Reason == "replay_gap" && attempt == 0 && h.Gap != nil && h.Gap.Requested == from && h.Gap.Oldest > from:
				from = h.Gap.Oldest
				continue
			case h.Actual == "process_destroyed" && destroySent:
				return
			}
			r.fail("resume of %s refused: %+v (a process outlives a violation of its connection)", sh.name, h)
		default:
			r.fail("resume of %s: no answer", sh.name)
		}
	}
}

// drain closes stdin at offset total (the stdin the server holds), reads
// and acknowledges all stdout up to its EOF and the exit, checks that it
// is exactly the stdin (a prefix of it, for a killed cat), and destroys
// the process.
func (r *run) drain(c *hconn, total int64) {
	sh := c.sh
	// What the server did not take was refused with the connection that
	// carried it; no more stdin is sent.
	sh.mu.Lock()
	sh.stream = sh.stream[:min(total, int64(len(sh.stream)))]
	sh.mu.Unlock()
	c.sendFrame(&frames.StdinClose{Off: total})
	c.startAutoAck()
	ok := c.waitUntil("stdout_eof and exit", func() bool { return c.eof >= 0 && c.exit != nil || c.bad != "" })
	r.checkConn(c)
	r.require(ok, "%s ended before stdout_eof and exit", c.name)
	c.mu.Lock()
	eof, exit := c.eof, *c.exit
	c.mu.Unlock()
	sh.mu.Lock()
	signalSent := sh.signalSent
	sh.mu.Unlock()
	if exit.Signal == "" {
		r.require(eof == total, "%s: stdout ended at %d, but the server held %d bytes of stdin: lost or invented", c.name, eof, total)
	} else {
		r.require(signalSent && eof <= total, "%s: killed (%+v) with stdout ending at %d of %d", c.name, exit, eof, total)
	}
	c.sendFrame(&frames.Destroy{})
	ok = c.waitUntil("destroyed", func() bool { return c.destroyed || c.bad != "" })
	r.checkConn(c)
	r.require(ok, "%s ended before destroyed", c.name)
	c.waitEnd()
	r.checkEnd(c)
	sh.mu.Lock()
	sh.gone = true
	sh.mu.Unlock()
}

// trim shortens a message for the trace.
func trim(b []byte) []byte {
	if len(b) > 200 {
		return append(b[:200:200], "..."...)
	}
	return b
}

// ---------------------------------------------------------------------------
// Seeds.

// seed builds a program.
type seed []byte

func (s seed) op(op byte, args ...byte) seed { return append(append(s, op), args...) }

func serverSeeds() [][]byte {
	hdr := func(first byte, bits ...byte) seed {
		h := first
		for _, b := range bits {
			h |= b
		}
		return seed{h}
	}
	prep := func(first byte, n, read byte, windows byte) seed {
		return seed{first | hdrPrep | windows<<hdrWindowShift | read<<hdrPrepShift, n, 0}
	}
	// keep leaves the prepared process's connection open.
	keep := func(first byte, n, read byte) seed {
		return seed{first | hdrPrep | read<<hdrPrepShift, n, 1}
	}
	return [][]byte{
		// A polite session: stdin, echo, ack, stdin_close.
		hdr(firstOpen).op(opStdin, 9, 0).op(opSync).op(opAck, 0).op(opStdinClose, 0).op(opSync),
		// Wrong offsets, sizes over max_data, empty data.
		hdr(firstOpen).op(opStdin, 9, 0).op(opStdin, 4, 250),
		hdr(firstOpen).op(opStdin, 255, 0),
		hdr(firstOpen).op(opStdin, 200, 0),
		hdr(firstOpen).op(opStdinClose, 230),
		hdr(firstOpen).op(opStdinClose, 0).op(opStdinClose, 0).op(opStdin, 3, 0),
		// Acks backwards and beyond.
		hdr(firstOpen).op(opStdin, 99, 0).op(opSync).op(opAck, 0).op(opAck, 3|5<<3),
		hdr(firstOpen).op(opAck, 4),
		hdr(firstOpen).op(opAck, 7, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff),
		// Signals: repeats, zero, unknown names; a killed cat.
		hdr(firstOpen).op(opStdin, 50, 0).op(opSignal, 0, 1).op(opSignal, 1, 0).op(opSignal, 2, 2).op(opSync),
		hdr(firstOpen).op(opSignal, 3, 0),
		hdr(firstOpen).op(opSignal, 0, 3),
		// Destroy inside: plain, self, another, wrong token.
		hdr(firstOpen).op(opStdin, 10, 0).op(opDestroy, 0),
		hdr(firstOpen).op(opDestroy, 1),
		prep(firstOpenFail, 10, 1, 0).op(opDestroy, 2),
		hdr(firstOpen).op(opDestroy, 3),
		// Credit: exactly to the limit, then one byte past.
		hdr(firstOpen, 1<<hdrWindowShift).op(opBurst, 0).op(opSync).op(opBurst, 1),
		hdr(firstOpen, 3<<hdrWindowShift).op(opBurst, 1),
		// Framing: raw, binary, fragmented, oversized.
		hdr(firstOpen).op(opRaw, 5, 'h', 'e', 'l', 'l', 'o'),
		hdr(firstOpen).op(opRaw, 0x80),
		hdr(firstOpen).op(opBinary),
		hdr(firstOpen).op(opFragmented, 10, 30).op(opSync).op(opFragmented, 0, 0),
		hdr(firstOpen).op(opOversized, 0).op(opSync),
		hdr(firstOpen).op(opOversized, 1),
		hdr(firstOpen).op(opOversized, 2),
		// Mutated frames inside a session.
		hdr(firstOpen).op(opMutated, 0, 1, 128, 1).op(opMutated, 2, 2, 100, 2, 180, 4<<2|3),
		hdr(firstOpen).op(opSecondFirst, 0),
		prep(firstOpen, 5, 1, 0).op(opSecondFirst, 1, 0),
		// Ending: abrupt, clean, in the middle of stdin.
		hdr(firstOpen).op(opStdin, 100, 0).op(opAbrupt),
		hdr(firstOpen).op(opStdin, 100, 0).op(opSync).op(opAck, 4|2<<3).op(opAbrupt),
		hdr(firstOpen).op(opStdin, 100, 0).op(opCloseHandshake),
		// First frames that are refused.
		hdr(firstOpenGood),
		prep(firstOpenPrep, 0, 0, 0),
		prep(firstOpen, 0, 0, 0),
		hdr(firstOpenDenied),
		hdr(firstOpenFail).op(opStdin, 1, 0),
		// Resume of the prepared process: from what it holds, from the ack,
		// across a gap, beyond the end, with wrong credentials.
		prep(firstResume, 200, 2, 0).op(0<<2).op(opStdin, 20, 0).op(opSync).op(opGood, 10),
		prep(firstResume, 200, 2, 0).op(1<<2).op(opAck, 0),
		prep(firstResume, 200, 1, 0).op(2 << 2),
		prep(firstResume, 200, 3, 0).op(3 << 2),
		prep(firstResume, 200, 0, 0).op(7<<2|1<<5).op(opStdinClose, 0),
		prep(firstResume, 100, 1, 0).op(2),
		prep(firstResume, 100, 1, 0).op(3),
		prep(firstResume, 100, 1, 0).op(4<<2|2<<5, 0, 0, 0, 0, 0, 0, 0, 50, 0, 0, 0, 0, 0, 0, 0, 9),
		// Destroy of the prepared process as a first frame.
		prep(firstDestroy, 30, 1, 0).op(0),
		prep(firstDestroy, 30, 1, 0).op(2),
		prep(firstDestroy, 30, 1, 0).op(4),
		// Raw and mutated first frames.
		hdr(firstRaw).op(200, 9, '{', '"', 't', 'y', 'p', 'e', '"', ':', '1'),
		hdr(firstRaw).op(0, 1, 40, 1),
		prep(firstRaw, 10, 1, 0).op(1, 0).op(opStdin, 3, 0),
		prep(firstRaw, 10, 1, 0).op(2, 0),
		hdr(firstRaw).op(3, 0).op(opStdin, 3, 0),
		// The prepared process's connection still open: it is resumed
		// elsewhere (4001) or destroyed under it, while it sends stdin.
		keep(firstResume, 20, 1).op(0).op(opPrep, 5).op(opStdin, 4, 0).op(opPrep, 7).op(opSync),
		keep(firstResume, 20, 1).op(0).op(opStdin, 4, 0).op(opPrep, 0),
		keep(firstDestroy, 20, 1).op(0).op(opPrep, 9),
		keep(firstOpen, 20, 1).op(opPrep, 9).op(opPrep, 0).op(opDestroy, 2),
		keep(firstRaw, 20, 1).op(1, 0).op(opPrep, 3),
		// The well-behaved session while the hostile one floods it.
		hdr(firstOpen).op(opBurst, 0).op(opGood, 20).op(opSignal, 0, 2).op(opGood, 30),
	}
}
