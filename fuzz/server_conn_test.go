package fuzz

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/procwire/procwire/frames"
)

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
