package fuzz

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/procwire/procwire/frames"
)

// Connections.

// lconn is one connection; a goroutine reads its frames into got, and the
// input's goroutine checks them in order (pump).
type lconn struct {
	l      *life
	name   string
	ws     *websocket.Conn
	served chan struct{} // closed when the server's handler returned
	done   chan struct{} // closed when the reader returned

	mu      sync.Mutex
	got     []frames.Frame
	bad     string // a message that is not a canonical frame
	readErr error
	changed chan struct{}

	// The rest belongs to the input's goroutine.
	pos        int
	first      frames.Type // the first frame sent
	p          *lproc      // the process it is about
	reopen     bool        // an open that may attach to p
	hello      frames.Frame
	attached   bool // opened or resumed seen, and not ended
	outEnd     int64
	errEnd     int64
	eof        bool
	exit       *frames.Exit
	destroyed  bool
	credits    int
	asked      map[int64]int // signal ids asked on c, and how many answers are due
	answers    []frames.Frame
	want       websocket.StatusCode // the close its frames call for; 0: it stays open
	wantAny    bool                 // an uncertain close: any code of PROTOCOL.md §7 but 1011
	wantReason string               // what the close reason must name, if known
	selfClosed bool                 // the harness cut or closed it
	ended      bool                 // its end was checked
}

// dial opens a connection with the given routing headers.
func (l *life) dial(inst, proc string) *lconn {
	l.nconn++
	c := &lconn{l: l, name: fmt.Sprintf("c%d", l.nconn), served: make(chan struct{}), done: make(chan struct{}),
		changed: make(chan struct{}, 1), asked: map[int64]int{}}
	tag := fmt.Sprintf("%d/%d", l.seq, l.nconn)
	l.e.mu.Lock()
	l.e.served[tag] = c.served
	l.e.mu.Unlock()
	h := http.Header{"Authorization": {"Bearer " + fuzzToken}, connHeader: {tag}}
	if inst != "" {
		h.Set(frames.HeaderInstance, inst)
	}
	if proc != "" {
		h.Set(frames.HeaderProcess, proc)
	}
	ctx, cancel := context.WithDeadline(context.Background(), l.deadline)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, l.e.url, &websocket.DialOptions{
		HTTPClient: l.e.client, HTTPHeader: h, Subprotocols: []string{frames.Subprotocol},
	})
	if err != nil {
		l.e.mu.Lock()
		delete(l.e.served, tag)
		l.e.mu.Unlock()
		l.fail("dial %s: %v", c.name, err)
	}
	ws.SetReadLimit(frames.MaxLine)
	c.ws = ws
	l.conns = append(l.conns, c)
	go c.read()
	return c
}

func (c *lconn) read() {
	defer close(c.done)
	for {
		typ, b, err := c.ws.Read(context.Background())
		c.mu.Lock()
		switch {
		case err != nil:
			c.readErr = err
		case typ != websocket.MessageText:
			if c.bad == "" {
				c.bad = "a binary message"
			}
		default:
			f, derr := frames.Decode(b)
			switch {
			case derr != nil:
				if c.bad == "" {
					c.bad = fmt.Sprintf("undecodable frame %q: %v", trim(b), derr)
				}
			case !bytes.Equal(frames.Append(nil, f), b):
				if c.bad == "" {
					c.bad = fmt.Sprintf("non-canonical frame %q", trim(b))
				}
			default:
				c.got = append(c.got, f)
			}
		}
		c.mu.Unlock()
		select {
		case c.changed <- struct{}{}:
		default:
		}
		if err != nil {
			return
		}
	}
}

// send writes one text message; a failed write means the server closed
// the connection, which pump then checks.
func (c *lconn) send(msg []byte) {
	c.l.log("%s <- %s", c.name, trim(bytes.TrimSuffix(msg, []byte("\n"))))
	ctx, cancel := context.WithDeadline(context.Background(), c.l.deadline)
	defer cancel()
	if err := c.ws.Write(ctx, websocket.MessageText, msg); err != nil && ctx.Err() != nil {
		c.l.stuck("%s: a write blocked", c.name)
	}
}

func (c *lconn) sendFrame(f frames.Frame) { c.send(frames.Append(nil, f)) }

// sendPart sends the first half of msg as a WebSocket fragment, then cuts
// the connection: the server never has the frame.
func (c *lconn) sendPart(msg []byte) {
	c.l.log("%s <- part of %s, then cut", c.name, trim(msg))
	ctx, cancel := context.WithDeadline(context.Background(), c.l.deadline)
	defer cancel()
	if w, err := c.ws.Writer(ctx, websocket.MessageText); err == nil {
		_, _ = w.Write(msg[:len(msg)/2])
	}
	c.cut()
}

// cut drops the connection without a close handshake.
func (c *lconn) cut() {
	c.l.log("%s cut", c.name)
	c.selfClosed = true
	_ = c.ws.CloseNow()
	c.detach()
}

// detach forgets that c serves its process.
func (c *lconn) detach() {
	if c.p != nil && c.p.conn == c {
		c.p.conn = nil
	}
}

// awaitServed waits until the server's handler for c returned: whatever
// c's frames did is done, and its process is detached.
func (c *lconn) awaitServed() {
	select {
	case <-c.served:
	case <-time.After(time.Until(c.l.deadline)):
		c.l.stuck("%s is still being served", c.name)
	}
}

// pump checks the frames c received since the last call, and its end.
func (c *lconn) pump() {
	l := c.l
	l.t.Helper()
	c.mu.Lock()
	got, bad, ended := c.got[c.pos:], c.bad, c.readErr
	c.pos = len(c.got)
	c.mu.Unlock()
	l.require(bad == "", "%s: %s", c.name, bad)
	for _, f := range got {
		l.log("%s -> %s", c.name, trim(bytes.TrimSuffix(frames.Append(nil, f), []byte("\n"))))
		if v := c.onFrame(f); v != "" {
			l.fail("%s: %s", c.name, v)
		}
	}
	if ended != nil && !c.ended {
		c.ended = true
		c.checkEnd(ended)
	}
}

// onFrame checks one frame from the server against the model, and returns
// what is wrong with it.
func (c *lconn) onFrame(f frames.Frame) string {
	if c.destroyed {
		return fmt.Sprintf("%s after destroyed", f.Type())
	}
	p := c.p
	switch f := f.(type) {
	case *frames.Opened:
		if c.hello != nil || c.first != frames.TypeOpen || p == nil {
			return fmt.Sprintf("opened after %T, or where an error was due", c.hello)
		}
		c.hello, c.attached = f, true
		if !c.reopen {
			if p.id == "" { // a race: the step learns it here
				p.id = f.ProcessID
			}
			if p.token == "" { // a race, where destroyed may have told the id first
				p.token = f.Token
			}
			if f.ProcessID != p.id || f.Token != p.token {
				return fmt.Sprintf("opened %s, the same open elsewhere opened %s", f.ProcessID, p.id)
			}
			if f.MaxData != fuzzMaxData || f.StderrWindow != fuzzStderrRing || f.GraceMS != time.Minute.Milliseconds() {
				return fmt.Sprintf("opened announces %+v", f)
			}
			return ""
		}
		if p.sure != 0 {
			return fmt.Sprintf("opened again after %d bytes of stdin", p.sure)
		}
		p.stream = nil
		if p.opened == nil {
			// Its first opened was cut off: this one tells.
			if f.ProcessID != p.id || f.Evidence.InstanceID != c.l.insts[p.inst] {
				return fmt.Sprintf("opened again %s, Stats listed %s", f.ProcessID, p.id)
			}
			o := *f
			p.opened, p.token = &o, f.Token
			p.inEnc, p.outEnc = f.StdinEnc == frames.EncS2, f.OutputEnc == frames.EncS2
			return ""
		}
		// The same process again: same id, token, evidence, windows and
		// encodings; its stdin limit is the current one.
		want := *p.opened
		want.StdinLimit = f.StdinLimit
		if p.token == "" {
			want.Token = f.Token // learnt here, after a cut open
		}
		if *f != want {
			return fmt.Sprintf("repeated open answers %+v, the first %+v", f, p.opened)
		}
		p.token, p.opened.Token = f.Token, f.Token
		return ""
	case *frames.Resumed:
		if c.hello != nil || c.first != frames.TypeResume || p == nil {
			return fmt.Sprintf("resumed after %T", c.hello)
		}
		c.hello, c.attached = f, true
		switch {
		case f.ProcessID != p.id || f.Evidence != p.opened.Evidence:
			return fmt.Sprintf("resumed %+v differs from opened %+v", f, p.opened)
		case f.StdinReceived != int64(p.sure) && f.StdinReceived != int64(len(p.stream)):
			return fmt.Sprintf("resumed with stdin_received %d, sent %d surely and %d maybe", f.StdinReceived, p.sure, len(p.stream))
		case f.StdinLimit < f.StdinReceived:
			return fmt.Sprintf("resumed with stdin_limit %d below stdin_received %d", f.StdinLimit, f.StdinReceived)
		}
		p.stream = p.stream[:f.StdinReceived]
		p.sure = len(p.stream)
		return ""
	case *frames.Error:
		if f.ID != 0 {
			return c.onAnswer(f, f.ID)
		}
		if c.hello != nil {
			return fmt.Sprintf("error %+v after %T", f, c.hello)
		}
		c.hello = f
		return ""
	case *frames.Signaled:
		return c.onAnswer(f, f.ID)
	case *frames.Destroyed:
		if p != nil && p.id == "" { // a race: the step learns it here
			p.id = f.ProcessID
		}
		if p == nil || f.ProcessID != p.id {
			return fmt.Sprintf("destroyed %s, not the process asked", f.ProcessID)
		}
		if c.first == frames.TypeDestroy && c.hello == nil {
			c.hello = f
		}
		c.destroyed = true
		c.attached = false
		return ""
	case *frames.Exit:
		if p == nil {
			return "exit, no process named"
		}
		if c.exit != nil {
			return "a second exit on one connection"
		}
		if !c.attached && !(c.first == frames.TypeDestroy && c.hello == nil) {
			return "exit before opened or resumed"
		}
		c.exit = f
		switch {
		case p.exit == nil:
			p.exit = f
		case *p.exit != *f:
			return fmt.Sprintf("exit %+v, before %+v", f, p.exit)
		}
		return ""
	}
	if !c.attached {
		return fmt.Sprintf("%s before opened or resumed", f.Type())
	}
	switch f := f.(type) {
	case *frames.Stdout:
		n := int64(len(f.Data))
		switch {
		case f.Off != c.outEnd:
			return fmt.Sprintf("stdout at %d, expected %d", f.Off, c.outEnd)
		case c.eof:
			return "stdout after stdout_eof"
		case n > fuzzMaxData:
			return fmt.Sprintf("stdout of %d bytes", n)
		case f.Enc != "" && !p.outEnc:
			return "stdout compressed, not negotiated"
		case !p.is(f.Off, f.Data):
			return fmt.Sprintf("stdout at %d is not what cat writes there", f.Off)
		}
		c.outEnd += n
		p.maxOut = max(p.maxOut, c.outEnd)
	case *frames.Stderr:
		n := int64(len(f.Data))
		switch {
		case f.Off < c.errEnd:
			return fmt.Sprintf("stderr at %d, below %d", f.Off, c.errEnd)
		case n > fuzzStderrRing:
			return fmt.Sprintf("stderr of %d bytes", n)
		case f.Enc != "" && !p.outEnc:
			return "stderr compressed, not negotiated"
		case f.Off+n > int64(len(p.stream)) || !bytes.Equal(f.Data, p.stream[f.Off:f.Off+n]):
			return fmt.Sprintf("stderr at %d is not the stdin tee'd there", f.Off)
		}
		c.errEnd = f.Off + n
	case *frames.StdoutEOF:
		switch {
		case c.eof:
			return "a second stdout_eof"
		case f.Off != c.outEnd:
			return fmt.Sprintf("stdout_eof at %d, stdout at %d", f.Off, c.outEnd)
		case p.eofAt >= 0 && p.eofAt != f.Off:
			return fmt.Sprintf("stdout_eof at %d, before at %d", f.Off, p.eofAt)
		}
		c.eof, p.eofAt = true, f.Off
	case *frames.Credit:
		if f.StdinReceived > int64(len(p.stream)) || f.StdinLimit < f.StdinReceived {
			return fmt.Sprintf("credit %+v, %d bytes sent", f, len(p.stream))
		}
		c.credits++
	default:
		return fmt.Sprintf("%s is not a server frame", f.Type())
	}
	return ""
}

// is reports whether stdout data at off is what cat writes there.
func (p *lproc) is(off int64, data []byte) bool {
	want, ok := p.outAt(off, int64(len(data)))
	return ok && bytes.Equal(data, want)
}

// onAnswer checks the answer to a signal asked on c.
func (c *lconn) onAnswer(f frames.Frame, id int64) string {
	if !c.attached || c.asked[id] == 0 {
		return fmt.Sprintf("an answer for signal %d, not asked", id)
	}
	c.asked[id]--
	c.answers = append(c.answers, f)
	return ""
}

// checkEnd checks how c ended.
func (c *lconn) checkEnd(err error) {
	l := c.l
	l.t.Helper()
	c.detach()
	if c.selfClosed {
		return
	}
	var ce websocket.CloseError
	l.require(errors.As(err, &ce), "%s ended without a close frame: %v", c.name, err)
	l.log("%s closed %d %q", c.name, ce.Code, ce.Reason)
	l.require(len(ce.Reason) <= 123, "%s: close reason of %d bytes", c.name, len(ce.Reason))
	l.require(ce.Code != websocket.StatusInternalError, "%s closed with 1011 %q", c.name, ce.Reason)
	l.require(ce.Code == websocket.StatusNormalClosure || ce.Reason != "", "%s closed with %d and no reason", c.name, ce.Code)
	l.require(c.wantReason == "" || strings.Contains(ce.Reason, c.wantReason), "%s closed with %d %q, not naming %s", c.name, ce.Code, ce.Reason, c.wantReason)
	_, refused := c.hello.(*frames.Error)
	if c.destroyed || refused {
		l.require(ce.Code == websocket.StatusNormalClosure, "%s closed with %d %q after %T", c.name, ce.Code, ce.Reason, c.hello)
	}
	switch {
	case c.wantAny:
	case c.want == 0:
		l.fail("%s closed with %d %q, but nothing calls for it", c.name, ce.Code, ce.Reason)
	default:
		l.require(ce.Code == c.want, "%s closed with %d %q, expected %d", c.name, ce.Code, ce.Reason, c.want)
	}
}

// await waits until cond holds, checking what c receives; false means c
// ended first.
func (c *lconn) await(what string, cond func() bool) bool {
	l := c.l
	l.t.Helper()
	timer := time.NewTimer(time.Until(l.deadline))
	defer timer.Stop()
	for {
		c.pump()
		if cond() {
			return true
		}
		if c.ended {
			return false
		}
		select {
		case <-c.changed:
		case <-c.done:
		case <-timer.C:
			l.stuck("%s: waiting for %s", c.name, what)
		}
	}
}

// awaitEnd waits for c's end and for the server to be done with it.
func (c *lconn) awaitEnd(what string) {
	c.await(what, func() bool { return false })
	c.awaitServed()
}

// sync waits until the server handled every frame sent on c: its pong
// comes after them. It reports whether c is still open.
func (c *lconn) sync() bool {
	l := c.l
	ctx, cancel := context.WithDeadline(context.Background(), l.deadline)
	defer cancel()
	err := c.ws.Ping(ctx)
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		l.stuck("%s: no pong", c.name)
	}
	c.pump()
	return err == nil
}
