//go:build linux

package server

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/frames"
	"github.com/procwire/procwire/proc"
)

// newKey returns a fresh open key.
func newKey() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// keyedOpen is openFrame with an open key.
func keyedOpen(inst, key, exe string, args ...string) *frames.Open {
	f := openFrame(inst, exe, args...)
	f.OpenKey = key
	return f
}

// count returns how many processes the executor started.
func (e *countingExecutor) count() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.procs)
}

// rawConn is a WebSocket client written by hand over TCP, so that a test
// can cut the connection at any byte of what it sends or receives.
type rawConn struct {
	t  *testing.T
	nc net.Conn
	br *bufio.Reader
}

// rawDial connects and completes the upgrade with the token and the
// subprotocol.
func (h *harness) rawDial() *rawConn {
	h.t.Helper()
	addr := strings.TrimPrefix(h.ts.URL, "http://")
	nc, err := net.Dial("tcp", addr)
	require.NoError(h.t, err)
	h.t.Cleanup(func() { nc.Close() })
	key := make([]byte, 16)
	_, _ = rand.Read(key)
	req := "GET / HTTP/1.1\r\nHost: " + addr + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: " + base64.StdEncoding.EncodeToString(key) + "\r\nSec-WebSocket-Version: 13\r\n" +
		"Sec-WebSocket-Protocol: " + frames.Subprotocol + "\r\nAuthorization: Bearer " + testToken + "\r\n\r\n"
	_, err = io.WriteString(nc, req)
	require.NoError(h.t, err)
	br := bufio.NewReader(nc)
	status, err := br.ReadString('\n')
	require.NoError(h.t, err)
	require.True(h.t, strings.HasPrefix(status, "HTTP/1.1 101 "), "upgrade answered %q", status)
	for {
		line, err := br.ReadString('\n')
		require.NoError(h.t, err)
		if line == "\r\n" {
			break
		}
	}
	return &rawConn{t: h.t, nc: nc, br: br}
}

// wsMessage returns f as one masked WebSocket text message, as a client
// sends it.
func wsMessage(f frames.Frame) []byte {
	payload := frames.Append(nil, f)
	b := []byte{0x81}
	switch n := len(payload); {
	case n < 126:
		b = append(b, 0x80|byte(n))
	case n <= 0xffff:
		b = append(b, 0x80|126)
		b = binary.BigEndian.AppendUint16(b, uint16(n))
	default:
		b = append(b, 0x80|127)
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	mask := [4]byte{0x5a, 0x13, 0xc7, 0x81}
	b = append(b, mask[:]...)
	for i, c := range payload {
		b = append(b, c^mask[i%4])
	}
	return b
}

// readMessage reads one unmasked server message and returns its length on
// the wire and its payload.
func (r *rawConn) readMessage() (wire int, payload []byte) {
	r.t.Helper()
	var hdr [2]byte
	_, err := io.ReadFull(r.br, hdr[:])
	require.NoError(r.t, err)
	require.Equal(r.t, byte(0x81), hdr[0], "a single-frame text message")
	wire = 2
	n := int(hdr[1] & 0x7f)
	switch n {
	case 126:
		var ext [2]byte
		_, err = io.ReadFull(r.br, ext[:])
		n, wire = int(binary.BigEndian.Uint16(ext[:])), wire+2
	case 127:
		var ext [8]byte
		_, err = io.ReadFull(r.br, ext[:])
		n, wire = int(binary.BigEndian.Uint64(ext[:])), wire+8
	}
	require.NoError(r.t, err)
	payload = make([]byte, n)
	_, err = io.ReadFull(r.br, payload)
	require.NoError(r.t, err)
	return wire + n, payload
}

// cut drops the connection and waits until the server has served it to
// its end (detached its process, if it started one).
func (h *harness) cut(r *rawConn) {
	h.t.Helper()
	local := r.nc.LocalAddr().String()
	require.NoError(h.t, r.nc.Close())
	h.waitEvent(hookConnClosed, local)
}

// readAll reads stdout from offset 0 to its end and the exit, acking as it
// goes, then destroys the process inside the session.
func (p *peer) readAllAndDestroy(processID string) output {
	p.t.Helper()
	out := p.collect(false)
	p.send(&frames.Destroy{})
	d := nextOf[*frames.Destroyed](p)
	require.Equal(p.t, processID, d.ProcessID)
	p.requireClosed(websocket.StatusNormalClosure, "")
	return out
}

// TestOpenCutAtEveryByte cuts the connection at every byte offset of the
// open/opened exchange: of the open message the client sends, then of the
// opened message it receives. After each cut a repeated open with the same
// key gets the process; exactly one process is started per open key, and
// its output arrives byte-exact from offset 0. A second round destroys by
// the key after the same cuts instead: whatever was started is destroyed,
// and an open with the key that arrives later starts nothing.
func TestOpenCutAtEveryByte(t *testing.T) {
	exec := &countingExecutor{}
	h := newHarness(t, Config{Executor: exec})
	script := `i=0; while [ $i -lt 40 ]; do echo "line $i of the output"; i=$((i+1)); done`
	var want strings.Builder
	for i := range 40 {
		fmt.Fprintf(&want, "line %d of the output\n", i)
	}
	open := func(inst, key string) *frames.Open { return keyedOpen(inst, key, "sh", "-c", script) }

	// The length of the opened message on the wire, from a run without cut.
	r := h.rawDial()
	_, err := r.nc.Write(wsMessage(open("measure", newKey())))
	require.NoError(t, err)
	openedLen, payload := r.readMessage()
	first, err := frames.Decode(payload)
	require.NoError(t, err)
	require.IsType(t, &frames.Opened{}, first)
	h.cut(r)
	p := h.dial()
	p.send(&frames.Destroy{ProcessID: first.(*frames.Opened).ProcessID, Token: first.(*frames.Opened).Token})
	nextOf[*frames.Destroyed](p)

	type cutPoint struct {
		sent, received int // bytes of the open sent, of the opened received
	}
	var points []cutPoint
	openLen := len(wsMessage(open("inst-00000", newKey())))
	for n := range openLen + 1 {
		points = append(points, cutPoint{sent: n})
	}
	for n := 1; n <= openedLen; n++ {
		points = append(points, cutPoint{sent: openLen, received: n})
	}

	for _, destroyByKey := range []bool{false, true} {
		for i, pt := range points {
			inst, key := fmt.Sprintf("inst-%05d", i), newKey()
			before := exec.count()

			r := h.rawDial()
			msg := wsMessage(open(inst, key))
			require.Len(t, msg, openLen)
			_, err := r.nc.Write(msg[:pt.sent])
			require.NoError(t, err)
			if pt.received > 0 {
				_, err = io.ReadFull(r.br, make([]byte, pt.received))
				require.NoError(t, err)
			}
			h.cut(r)
			started := exec.count() - before
			require.LessOrEqual(t, started, 1, "cut %+v", pt)
			if pt.received > 0 {
				require.Equal(t, 1, started, "cut %+v: opened was sent", pt)
			}

			if !destroyByKey {
				p, opened := h.open(open(inst, key))
				out := p.readAllAndDestroy(opened.ProcessID)
				require.Equal(t, want.String(), string(out.stdout), "cut %+v", pt)
				require.Equal(t, &frames.Exit{Code: 0}, out.exit)
				require.Equal(t, before+1, exec.count(), "cut %+v: one process per open key", pt)
				continue
			}

			p := h.dial()
			p.send(&frames.Destroy{InstanceID: inst, OpenKey: key})
			if started == 1 {
				pid := exec.proc(before).Pid()
				d := nextOf[*frames.Destroyed](p)
				require.Len(t, d.ProcessID, 32)
				p.requireClosed(websocket.StatusNormalClosure, "")
				require.True(t, groupGone(pid), "cut %+v: process group %d left", pt, pid)
			} else {
				p.requireError(notFoundError(opDestroy))
			}
			late := h.dial()
			late.send(open(inst, key))
			late.requireError(&frames.Error{Code: frames.LifecycleConflict, Operation: opOpen,
				Expected: "running", Actual: "process_destroyed"})
			require.Equal(t, before+started, exec.count(), "cut %+v: a late open started a process", pt)
		}
	}
	require.Empty(t, h.srv.Stats().Processes)
}

// gateExecutor is a countingExecutor whose Start waits for release, so a
// test can act while an open is starting.
type gateExecutor struct {
	countingExecutor
	entered chan struct{} // receives once per Start that began
	release chan struct{} // closed to let every Start go on
}

func newGateExecutor() *gateExecutor {
	return &gateExecutor{entered: make(chan struct{}, 16), release: make(chan struct{})}
}

func (e *gateExecutor) Start(ctx context.Context, req proc.Request, cfg proc.Config) (Process, error) {
	e.entered <- struct{}{}
	<-e.release
	return e.countingExecutor.Start(ctx, req, cfg)
}

func TestRepeatedOpenTakesTheProcessOver(t *testing.T) {
	exec := &countingExecutor{}
	h := newHarness(t, Config{Executor: exec})
	key := newKey()
	open := keyedOpen("inst-again", key, "sh", "-c", "echo first; cat")
	a, opened := h.open(open)
	require.Equal(t, &frames.Stdout{Off: 0, Data: []byte("first\n")}, nextOf[*frames.Stdout](a))

	// The same open again, while the process lives and a is attached: the
	// same opened, a replay from 0, and a is closed as for a resume.
	b := h.dial()
	b.send(open)
	require.Equal(t, opened, nextOf[*frames.Opened](b))
	require.Equal(t, &frames.Stdout{Off: 0, Data: []byte("first\n")}, nextOf[*frames.Stdout](b))
	a.requireClosed(statusResumedElsewhere, "resumed elsewhere")
	require.Equal(t, 1, exec.count())

	b.send(&frames.Stdin{Off: 0, Data: []byte("second\n")})
	b.send(&frames.StdinClose{Off: 7})
	o := b.collectFrom(6, false)
	require.Equal(t, "second\n", string(o.stdout))
	require.Equal(t, &frames.Exit{Code: 0}, o.exit)

	// b acknowledged stdout: its client received opened and resumes with
	// the token. A repeated open is refused, and starts nothing.
	b.ws.CloseNow()
	h.waitEvent(hookDetached, opened.ProcessID)
	c := h.dial()
	c.send(open)
	c.requireError(&frames.Error{Code: frames.LifecycleConflict, Operation: opOpen, Actual: "process_already_open",
		Message: "this open was answered already; resume the process with its token"})
	require.Equal(t, 1, exec.count())
	c = h.dial()
	c.send(&frames.Resume{ProcessID: opened.ProcessID, Token: opened.Token, StdoutReceived: 13})
	nextOf[*frames.Resumed](c)
}

func TestRepeatedOpenAfterStdinIsRefused(t *testing.T) {
	h := newHarness(t, Config{})
	open := keyedOpen("inst-stdin", newKey(), "cat")
	a, opened := h.open(open)
	a.send(&frames.Stdin{Off: 0, Data: []byte("x")})
	nextOf[*frames.Stdout](a)
	a.ws.CloseNow()
	h.waitEvent(hookDetached, opened.ProcessID)
	b := h.dial()
	b.send(open)
	b.requireError(&frames.Error{Code: frames.LifecycleConflict, Operation: opOpen, Actual: "process_already_open",
		Message: "this open was answered already; resume the process with its token"})
}

func TestRepeatedOpenOfAnExitedProcessReplaysAll(t *testing.T) {
	exec := &countingExecutor{}
	h := newHarness(t, Config{Executor: exec})
	open := keyedOpen("inst-exited", newKey(), "sh", "-c", "echo out; echo err >&2; exit 3")
	a, opened := h.open(open)
	// Read to the exit without acknowledging anything, as a client that
	// never saw opened would.
	nextOf[*frames.StdoutEOF](a)
	nextOf[*frames.Exit](a)
	a.ws.CloseNow()
	h.waitEvent(hookDetached, opened.ProcessID)

	b := h.dial()
	b.send(open)
	require.Equal(t, opened, nextOf[*frames.Opened](b))
	o := b.collect(false)
	require.Equal(t, "out\n", string(o.stdout))
	require.Equal(t, &frames.Exit{Code: 3}, o.exit)
	b.stderrUntil(&o, 4)
	require.Equal(t, "err\n", string(o.stderr))
	require.Equal(t, 1, exec.count())
}

func TestOpenKeyOtherKeyIsAnotherOpen(t *testing.T) {
	exec := &countingExecutor{}
	h := newHarness(t, Config{Executor: exec})
	key := newKey()
	h.open(keyedOpen("inst-other", key, "cat"))
	for _, other := range []string{newKey(), "", key[:63] + "0"} {
		if other == key {
			continue
		}
		p := h.dial()
		p.send(keyedOpen("inst-other", other, "cat"))
		p.requireError(alreadyOpen())
	}
	// The key belongs to its instance: on another instance it is a new open.
	h.open(keyedOpen("inst-other-2", key, "cat"))
	require.Equal(t, 2, exec.count())
}

func TestOpenKeyOfADestroyedOrExpiredProcess(t *testing.T) {
	exec := &countingExecutor{}
	h := newHarness(t, Config{Executor: exec, Grace: 100 * time.Millisecond})
	destroyedOpen := keyedOpen("inst-d", newKey(), "cat")
	p, opened := h.open(destroyedOpen)
	p.send(&frames.Destroy{})
	p.destroyedAnswer(opened.ProcessID)

	expiredOpen := keyedOpen("inst-e", newKey(), "cat")
	p, opened = h.open(expiredOpen)
	p.ws.CloseNow()
	h.waitEvent(hookExpired, opened.ProcessID)

	for f, actual := range map[*frames.Open]string{destroyedOpen: "process_destroyed", expiredOpen: "process_expired"} {
		p := h.dial()
		p.send(f)
		p.requireError(&frames.Error{Code: frames.LifecycleConflict, Operation: opOpen, Expected: "running", Actual: actual})
	}
	require.Equal(t, 2, exec.count())
	// The instance itself is free: another key opens it.
	h.open(keyedOpen("inst-d", newKey(), "cat"))
	require.Equal(t, 3, exec.count())
}

func TestDestroyByKey(t *testing.T) {
	h := newHarness(t, Config{})
	key := newKey()
	a, opened := h.open(keyedOpen("inst-dk", key, "sleep", "300"))
	pid := h.process(opened.ProcessID).Pid

	// A wrong key or another instance names nothing: the process lives on.
	for _, d := range []*frames.Destroy{
		{InstanceID: "inst-dk", OpenKey: newKey()},
		{InstanceID: "inst-dk2", OpenKey: key},
	} {
		p := h.dial()
		p.send(d)
		p.requireError(notFoundError(opDestroy))
	}
	h.process(opened.ProcessID)

	// The right pair destroys it; the attached connection is told too.
	p := h.dial()
	p.send(&frames.Destroy{InstanceID: "inst-dk", OpenKey: key})
	require.Equal(t, &frames.Exit{Signal: "SIGKILL"}, p.destroyedAnswer(opened.ProcessID))
	a.destroyedAnswer(opened.ProcessID)
	require.True(t, groupGone(pid))

	// Again: it settles the same way.
	p = h.dial()
	p.send(&frames.Destroy{InstanceID: "inst-dk", OpenKey: key})
	require.Equal(t, &frames.Exit{Signal: "SIGKILL"}, p.destroyedAnswer(opened.ProcessID))
}

func TestDestroyByKeyInsideASession(t *testing.T) {
	h := newHarness(t, Config{})
	key := newKey()
	p, opened := h.open(keyedOpen("inst-ds", key, "cat"))
	p.send(&frames.Destroy{InstanceID: "inst-ds", OpenKey: newKey()})
	p.requireClosed(websocket.StatusProtocolError, "destroy inside a session names another process")

	p = h.dial()
	p.send(&frames.Resume{ProcessID: opened.ProcessID, Token: opened.Token})
	nextOf[*frames.Resumed](p)
	p.send(&frames.Destroy{InstanceID: "inst-ds", OpenKey: key})
	p.destroyedAnswer(opened.ProcessID)
}

func TestDestroyByKeyBeforeTheOpen(t *testing.T) {
	exec := &countingExecutor{}
	h := newHarness(t, Config{Executor: exec})
	key := newKey()
	for range 2 { // a repeat answers the same
		p := h.dial()
		p.send(&frames.Destroy{InstanceID: "inst-late", OpenKey: key})
		p.requireError(notFoundError(opDestroy))
	}
	// The open that was in flight arrives late: refused, nothing started.
	p := h.dial()
	p.send(keyedOpen("inst-late", key, "cat"))
	p.requireError(&frames.Error{Code: frames.LifecycleConflict, Operation: opOpen, Expected: "running", Actual: "process_destroyed"})
	require.Zero(t, exec.count())
	// The instance is not held by it.
	h.open(keyedOpen("inst-late", newKey(), "true"))
}

func TestDestroyByKeyWhileTheOpenStarts(t *testing.T) {
	exec := newGateExecutor()
	h := newHarness(t, Config{Executor: exec})
	key := newKey()
	a := h.dial()
	a.send(keyedOpen("inst-race", key, "sleep", "300"))
	<-exec.entered

	d := h.dial()
	d.send(&frames.Destroy{InstanceID: "inst-race", OpenKey: key})
	// The destroy waits for the start, which then destroys what it started.
	h.waitEvent(hookKeyWait, "inst-race")
	close(exec.release)
	a.requireError(&frames.Error{Code: frames.LifecycleConflict, Operation: opOpen, Expected: "running", Actual: "process_destroyed"})
	require.Equal(t, 1, exec.count())
	pid := exec.proc(0).Pid()
	var id string
	for {
		f := d.next()
		if dd, ok := f.(*frames.Destroyed); ok {
			id = dd.ProcessID
			break
		}
		require.IsType(t, &frames.Exit{}, f)
	}
	d.requireClosed(websocket.StatusNormalClosure, "")
	require.Len(t, id, 32)
	require.True(t, groupGone(pid))
	require.Empty(t, h.srv.Stats().Processes)
}

func TestRepeatedOpenWhileTheFirstStarts(t *testing.T) {
	exec := newGateExecutor()
	h := newHarness(t, Config{Executor: exec})
	open := keyedOpen("inst-twice", newKey(), "sh", "-c", "echo once")
	a := h.dial()
	a.send(open)
	<-exec.entered
	b := h.dial()
	b.send(open)
	h.waitEvent(hookKeyWait, "inst-twice")
	close(exec.release)
	ob := nextOf[*frames.Opened](b)
	o := b.collect(false)
	require.Equal(t, "once\n", string(o.stdout))
	require.Equal(t, 1, exec.count())
	select {
	case <-exec.entered:
		t.Fatal("a second start")
	default:
	}
	// a, whose open started the process, is answered opened; b, which
	// waited for it, then takes the process over, and a ends with 4001.
	for {
		f, err := a.read(testCtx(t))
		if err != nil {
			require.Equal(t, statusResumedElsewhere, websocket.CloseStatus(err), "%v", err)
			break
		}
		if op, ok := f.(*frames.Opened); ok {
			require.Equal(t, ob, op)
		}
	}
}

// TestShutdownRacingOpen: an open whose child is starting when the server
// shuts down is answered server_shutdown before the close, and what it
// started does not survive.
func TestShutdownRacingOpen(t *testing.T) {
	exec := newGateExecutor()
	h := newHarness(t, Config{Executor: exec})
	a := h.dial()
	a.send(keyedOpen("inst-shutdown", newKey(), "sleep", "300"))
	<-exec.entered

	done := make(chan error, 1)
	go func() { done <- h.srv.Shutdown(testCtx(t)) }()
	h.waitEvent(hookShutdown, "")
	close(exec.release)
	require.Equal(t, shutdownError(opOpen), a.next())
	a.requireClosed(websocket.StatusGoingAway, reasonShutdown)
	require.NoError(t, <-done)
	require.Equal(t, 1, exec.count())
	require.True(t, groupGone(exec.proc(0).Pid()))
	require.Empty(t, h.srv.Stats().Processes)
}

// TestShutdownDuringAdmit: an Admit that blocks until its context ends
// does not hold Shutdown. Its context ends as shutdown begins, the open is
// answered server_shutdown before the close, and Shutdown returns well
// before the close timeout that would otherwise end the connection.
func TestShutdownDuringAdmit(t *testing.T) {
	entered := make(chan struct{})
	admitErr := make(chan error, 1)
	h := newHarness(t, Config{Admit: func(ctx context.Context, instanceID string) *frames.Error {
		close(entered)
		<-ctx.Done()
		admitErr <- ctx.Err()
		return nil
	}})
	a := h.dial()
	a.send(keyedOpen("inst-admit", newKey(), "sleep", "300"))
	<-entered

	// The peer reads while Shutdown runs, so that the close handshake
	// completes.
	start := time.Now()
	done := make(chan time.Duration, 1)
	go func() {
		assert.NoError(t, h.srv.Shutdown(testCtx(t)))
		done <- time.Since(start)
	}()
	require.ErrorIs(t, <-admitErr, context.Canceled)
	require.Equal(t, shutdownError(opOpen), a.next())
	a.requireClosed(websocket.StatusGoingAway, reasonShutdown)
	took := <-done
	t.Logf("Shutdown with an open blocked in Admit: %v", took)
	require.Less(t, took, closeTimeout/2, "Shutdown waited for Admit")
	require.Empty(t, h.srv.Stats().Processes)
}

// A stale first frame, an open or a resume read from a connection the
// server accepted before the one the process is attached to (a client's
// attempt on a connection it has since given up, its frame still buffered
// here while the attempt after it got through), takes nothing over: it is
// closed with 4001, and the newer connection goes on driving the process.
// Found by the client's TestOpenCutAtEveryOffset under load.
func TestStaleConnectionTakesNothingOver(t *testing.T) {
	h := newHarness(t, Config{})
	for _, op := range []string{"open", "resume"} {
		t.Run(op, func(t *testing.T) {
			inst, key := "stale-"+op, newKey()
			older := h.dial()
			var newer *peer
			if op == "open" {
				newer = h.dial()
				newer.send(keyedOpen(inst, key, "cat"))
				nextOf[*frames.Opened](newer)
				older.send(keyedOpen(inst, key, "cat"))
			} else {
				first, opened := h.open(keyedOpen(inst, key, "cat"))
				resume := &frames.Resume{ProcessID: opened.ProcessID, Token: opened.Token}
				newer = h.dial()
				newer.send(resume)
				nextOf[*frames.Resumed](newer)
				first.requireClosed(statusResumedElsewhere, "resumed elsewhere")
				older.send(resume)
			}
			older.requireClosed(statusResumedElsewhere, "attached to a newer connection")
			newer.send(&frames.Stdin{Off: 0, Data: []byte("still here\n")})
			newer.send(&frames.StdinClose{Off: int64(len("still here\n"))})
			out := newer.collect(false)
			require.Equal(t, "still here\n", string(out.stdout))
			require.Equal(t, &frames.Exit{}, out.exit)
		})
	}
}
