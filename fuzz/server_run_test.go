package fuzz

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/procwire/procwire/frames"
)

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
	go func() { r.e.lb.Handlers.Wait(); close(done) }()
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
