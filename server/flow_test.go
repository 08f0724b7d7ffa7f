//go:build linux

package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/frames"
)

func TestStdinOverrun(t *testing.T) {
	h := newHarness(t, Config{})
	open := &frames.Open{
		InstanceID:  "inst-overrun",
		Request:     frames.ProcessRequest{Executable: "wc", Arguments: []string{"-c"}, WorkingDirectory: "/", Environment: testEnv},
		StdinWindow: 1024,
	}
	p, opened := h.open(open)
	require.Equal(t, int64(1024), opened.StdinLimit)

	// 1,000 bytes are within the limit; 1,025 more cannot be, whatever
	// credit the server granted meanwhile (at most 1,000 + 1,024).
	p.send(&frames.Stdin{Off: 0, Data: bytes.Repeat([]byte("a"), 1000)})
	p.send(&frames.Stdin{Off: 1000, Data: bytes.Repeat([]byte("b"), 1025)})
	ce := p.closed()
	require.Equal(t, websocket.StatusPolicyViolation, ce.Code)
	require.Regexp(t, `^received 2025 bytes, allowed (1024|1[0-9]{3}|20[01][0-9]|202[0-4])$`, ce.Reason)

	// The session survives its connection; the child got no byte of the
	// refused frame.
	h.waitEvent(hookDetached, opened.ProcessID)
	p = h.dial()
	p.send(&frames.Resume{ProcessID: opened.ProcessID, Token: opened.Token})
	r := nextOf[*frames.Resumed](p)
	require.Equal(t, int64(1000), r.StdinReceived)
	p.send(&frames.StdinClose{Off: 1000})
	o := p.collect(false)
	require.Equal(t, "1000\n", string(o.stdout))
	require.Equal(t, &frames.Exit{Code: 0}, o.exit)
}

func TestStdinOverrunOfTheFirstWindow(t *testing.T) {
	h := newHarness(t, Config{StdinWindow: 1024})
	p, _ := h.open(openFrame("inst-overrun-1", "cat"))
	p.send(&frames.Stdin{Off: 0, Data: make([]byte, 1025)})
	p.requireClosed(websocket.StatusPolicyViolation, "received 1025 bytes, allowed 1024")
}

// protocolCase is a session that ends with a close status.
type protocolCase struct {
	name   string
	frames []string // raw messages after opened; "" sends nothing
	code   websocket.StatusCode
	reason string // a regexp
}

func TestProtocolErrors(t *testing.T) {
	h := newHarness(t, Config{MaxFrameData: 4})
	line := func(f frames.Frame) string { return string(frames.Append(nil, f)) }
	for i, tc := range []protocolCase{
		{"stdin at a wrong offset", []string{line(&frames.Stdin{Off: 5, Data: []byte("x")})},
			websocket.StatusProtocolError, `^stdin\.off 5, expected 0$`},
		{"stdin overlapping", []string{line(&frames.Stdin{Off: 0, Data: []byte("ab")}), line(&frames.Stdin{Off: 1, Data: []byte("b")})},
			websocket.StatusProtocolError, `^stdin\.off 1, expected 2$`},
		{"stdin after stdin_close", []string{line(&frames.StdinClose{Off: 0}), line(&frames.Stdin{Off: 0, Data: []byte("x")})},
			websocket.StatusProtocolError, `^stdin after stdin_close$`},
		{"stdin_close at a wrong offset", []string{line(&frames.StdinClose{Off: 3})},
			websocket.StatusProtocolError, `^stdin_close\.off 3, expected 0$`},
		{"stdin over max_data", []string{line(&frames.Stdin{Off: 0, Data: []byte("12345")})},
			websocket.StatusProtocolError, `^stdin\.data: 5 bytes, max_data is 4$`},
		{"ack beyond what was sent", []string{line(&frames.Ack{Stdout: 1})},
			websocket.StatusProtocolError, `^ack\.stdout 1 beyond 0 sent$`},
		{"bad base64", []string{`{"type":"stdin","off":0,"data":"!!!!"}` + "\n"},
			websocket.StatusInvalidFramePayloadData, `^stdin\.data: bad_base64`},
		{"negative offset", []string{`{"type":"ack","stdout":-1}` + "\n"},
			websocket.StatusInvalidFramePayloadData, `^ack\.stdout: bad_integer`},
		{"unknown field", []string{`{"type":"ack","stdout":1,"extra":true}` + "\n"},
			websocket.StatusInvalidFramePayloadData, `^ack\.extra: unknown_field`},
		{"unknown type", []string{`{"type":"launch"}` + "\n"},
			websocket.StatusInvalidFramePayloadData, `unknown_type`},
		{"not json", []string{"hello\n"},
			websocket.StatusInvalidFramePayloadData, `^syntax`},
		{"open inside a session", []string{line(openFrame("inst-x", "true"))},
			websocket.StatusProtocolError, `^open inside a session$`},
		{"resume inside a session", []string{line(&frames.Resume{ProcessID: strings.Repeat("0", 32), Token: strings.Repeat("0", 64)})},
			websocket.StatusProtocolError, `^resume inside a session$`},
		{"a server frame", []string{line(&frames.Credit{StdinReceived: 0, StdinLimit: 5})},
			websocket.StatusProtocolError, `^credit is not a client frame$`},
		{"destroy naming another process", []string{line(&frames.Destroy{ProcessID: strings.Repeat("0", 32), Token: strings.Repeat("0", 64)})},
			websocket.StatusProtocolError, `^destroy inside a session names another process$`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := h.open(openFrame("inst-proto-"+strconv.Itoa(i), "cat"))
			for _, m := range tc.frames {
				p.sendLine(m)
			}
			ce := p.closed()
			require.Equal(t, tc.code, ce.Code, "reason %q", ce.Reason)
			require.Regexp(t, regexp.MustCompile(tc.reason), ce.Reason)
			require.LessOrEqual(t, len(ce.Reason), frames.MaxCloseReason)
		})
	}
}

func TestFirstFrameTimeout(t *testing.T) {
	h := newHarness(t, Config{FirstFrameTimeout: 50 * time.Millisecond})
	silent := h.dial()
	ctx := testCtx(t)
	_, err := silent.read(ctx)
	require.Error(t, err, "a peer that sends no first frame is disconnected")
	require.NoError(t, ctx.Err(), "by the server's timeout, not the test's")

	// A peer that speaks in time is served as usual.
	h.open(openFrame("inst-ff", "true"))
}

func TestFirstFrame(t *testing.T) {
	h := newHarness(t, Config{})
	for _, tc := range []struct {
		line   string
		code   websocket.StatusCode
		reason string
	}{
		{string(frames.Append(nil, &frames.Stdin{Off: 0, Data: []byte("x")})), websocket.StatusProtocolError, "first frame must be open, resume or destroy, not stdin"},
		{string(frames.Append(nil, &frames.Destroy{})), websocket.StatusProtocolError, "destroy as a first frame needs process_id and token, or instance_id and open_key"},
		{`{"type":"open","instance_id":"-bad","request":{}}` + "\n", websocket.StatusInvalidFramePayloadData, ""},
	} {
		p := h.dial()
		p.sendLine(tc.line)
		ce := p.closed()
		require.Equal(t, tc.code, ce.Code, ce.Reason)
		if tc.reason != "" {
			require.Equal(t, tc.reason, ce.Reason)
		}
	}

	// A binary message is not a frame.
	p := h.dial()
	require.NoError(t, p.ws.Write(testCtx(t), websocket.MessageBinary, frames.Append(nil, openFrame("i", "true"))))
	p.requireClosed(websocket.StatusProtocolError, "frames are text messages, got a binary one")
}

func TestMessageTooBig(t *testing.T) {
	h := newHarness(t, Config{})
	p, _ := h.open(openFrame("inst-big", "cat"))
	big := `{"type":"stdin","off":0,"data":"` + strings.Repeat("A", frames.MaxLine) + `"}` + "\n"
	// The peer may see its write fail once the server has closed.
	_ = p.ws.Write(testCtx(t), websocket.MessageText, []byte(big))
	require.Equal(t, websocket.StatusMessageTooBig, p.closed().Code)
}

// A message far over the limit, still being written when the server
// closes: the server reads and discards its rest in the close handshake
// rather than closing the socket with it unread, which resets the
// connection and drops a close frame still queued behind a full receive
// window. (Loopback rarely shows that drop; this checks the 1009 arrives
// and the drain ends.)
func TestMessageTooBigWhileStillSending(t *testing.T) {
	h := newHarness(t, Config{})
	for i := range 2 {
		p, _ := h.open(openFrame(fmt.Sprintf("inst-big-tail-%d", i), "cat"))
		big := []byte(`{"type":"stdin","off":0,"data":"` + strings.Repeat("A", frames.MaxLine+2<<20) + `"}` + "\n")
		wrote := make(chan struct{})
		go func() {
			defer close(wrote)
			_ = p.ws.Write(testCtx(t), websocket.MessageText, big) // fails once the server closed
		}()
		require.Equal(t, websocket.StatusMessageTooBig, p.closed().Code, "run %d", i)
		<-wrote
	}
}

// A limit counts the line's '\n', and a message without one counts as if it
// had it (PROTOCOL.md §2): a message of exactly MaxLine bytes is at the
// limit with its '\n' and over it without, and a message over its line
// limit is closed with 1009 (§7), whichever layer notices. Found by
// FuzzServerSession.
func TestLineAtTheLimit(t *testing.T) {
	h := newHarness(t, Config{})
	// An ack of 0, padded with the whitespace an object may hold.
	line := func(size int, newline bool) string {
		head := `{"type":"ack","stdout":0`
		pad := size - len(head) - 1
		if newline {
			pad--
		}
		s := head + strings.Repeat(" ", pad) + "}"
		if newline {
			s += "\n"
		}
		require.Len(t, s, size)
		return s
	}

	p, _ := h.open(openFrame("inst-limit", "cat"))
	p.sendLine(line(frames.MaxLine, true))
	p.send(&frames.Stdin{Off: 0, Data: []byte("still here\n")})
	p.send(&frames.StdinClose{Off: 11})
	require.Equal(t, "still here\n", string(p.collect(false).stdout))

	p, _ = h.open(openFrame("inst-limit-2", "cat"))
	p.sendLine(line(frames.MaxLine, false))
	ce := p.closed()
	require.Equal(t, websocket.StatusMessageTooBig, ce.Code, "reason %q", ce.Reason)
}

func TestAckBackwards(t *testing.T) {
	h := newHarness(t, Config{})
	p, _ := h.sh("inst-ack", "printf abcdefghij; sleep 300")
	var got []byte
	for len(got) < 10 {
		got = append(got, nextOf[*frames.Stdout](p).Data...)
	}
	p.send(&frames.Ack{Stdout: 10})
	p.send(&frames.Ack{Stdout: 10}) // a repeat is harmless
	p.send(&frames.Ack{Stdout: 5})
	p.requireClosed(websocket.StatusProtocolError, "ack.stdout 5 below the previous ack 10")
}

func TestStdoutFramesAcrossTheRingWrap(t *testing.T) {
	h := newHarness(t, Config{MaxFrameData: 1000})
	data := make([]byte, 100_000)
	rand.Read(data)
	p, opened := h.open(&frames.Open{
		InstanceID:   "inst-wrap",
		Request:      frames.ProcessRequest{Executable: "cat", WorkingDirectory: "/", Environment: testEnv},
		StdoutWindow: 4099, // no multiple of anything useful
		StdinWindow:  4096,
	})
	require.Equal(t, int64(1000), opened.MaxData)
	s := &streamer{p: p, data: data, maxData: 1000, limit: opened.StdinLimit, ackEvery: 1}
	s.run(len(data) + 1)
	require.Equal(t, data, s.got)
	require.Equal(t, &frames.Exit{Code: 0}, s.exit)
}

func TestStdoutWindowBoundsMemory(t *testing.T) {
	h := newHarness(t, Config{})
	p, opened := h.open(&frames.Open{
		InstanceID:   "inst-yes",
		Request:      frames.ProcessRequest{Executable: "yes", WorkingDirectory: "/", Environment: testEnv},
		StdoutWindow: 1024,
	})
	require.Equal(t, int64(1024), opened.StdoutWindow)
	// The peer reads but never acks: it receives exactly one window.
	var got int
	for got < 1024 {
		f := nextOf[*frames.Stdout](p)
		require.Equal(t, int64(got), f.Off)
		got += len(f.Data)
		require.LessOrEqual(t, h.process(opened.ProcessID).StdoutHeld, 1024)
	}
	require.Equal(t, 1024, got)

	// The child blocks on its full pipe; the server holds one window.
	ps := h.process(opened.ProcessID)
	waitFor(t, "yes blocked in pipe_write", func() bool { return strings.Contains(wchan(ps.Pid), "pipe_write") })
	ps = h.process(opened.ProcessID)
	require.Equal(t, 1024, ps.StdoutHeld)
	require.Equal(t, 1024, ps.StdoutWindow)

	// An ack lets exactly one more window through.
	p.send(&frames.Ack{Stdout: 1024})
	for got < 2048 {
		f := nextOf[*frames.Stdout](p)
		require.Equal(t, int64(got), f.Off)
		got += len(f.Data)
	}
	waitFor(t, "yes blocked again", func() bool {
		return h.process(opened.ProcessID).StdoutHeld == 1024 && strings.Contains(wchan(ps.Pid), "pipe_write")
	})
	require.Equal(t, 2048, got)
}

// waitFor polls cond until it holds, for states the kernel signals no
// event for. It fails the test after testTimeout.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	ctx := testCtx(t)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-tick.C:
		}
	}
}

func TestOneBadSessionDoesNotDisturbAnother(t *testing.T) {
	h := newHarness(t, Config{})
	data := make([]byte, 512<<10)
	rand.Read(data)
	good, opened := h.open(&frames.Open{
		InstanceID:   "inst-good",
		Request:      frames.ProcessRequest{Executable: "cat", WorkingDirectory: "/", Environment: testEnv},
		StdoutWindow: 16 << 10,
		StdinWindow:  16 << 10,
	})
	s := &streamer{p: good, data: data, maxData: int(opened.MaxData), limit: opened.StdinLimit, ackEvery: 4 << 10}
	s.run(100 << 10)

	var wg sync.WaitGroup
	wg.Go(func() {
		bad, _ := h.open(&frames.Open{InstanceID: "inst-bad", Request: frames.ProcessRequest{Executable: "cat", WorkingDirectory: "/", Environment: testEnv}, StdinWindow: 1024})
		bad.send(&frames.Stdin{Off: 0, Data: make([]byte, 2000)})
		bad.requireClosed(websocket.StatusPolicyViolation, "received 2000 bytes, allowed 1024")
	})
	s.run(len(data) + 1)
	wg.Wait()
	require.Equal(t, data, s.got)
	require.Equal(t, &frames.Exit{Code: 0}, s.exit)
}

func TestShutdown(t *testing.T) {
	h := newHarness(t, Config{})
	var peers []*peer
	var pids []int
	var opened []*frames.Opened
	for i := range 3 {
		p, o := h.sh("inst-shut-"+strconv.Itoa(i), "sleep 300 & wait")
		peers = append(peers, p)
		pids = append(pids, h.process(o.ProcessID).Pid)
		opened = append(opened, o)
	}
	detached := opened[2].ProcessID
	// A detached process is destroyed too.
	peers[2].ws.CloseNow()
	h.waitEvent(hookDetached, detached)
	peers = peers[:2]

	done := make(chan error, 1)
	go func() { done <- h.srv.Shutdown(testCtx(t)) }()
	// Each attached client is told in frames, before the close, that its
	// process was destroyed: a 1001 alone is only a lost connection.
	for i, p := range peers {
		require.Equal(t, &frames.Exit{Signal: "SIGKILL"}, nextOf[*frames.Exit](p))
		require.Equal(t, &frames.Destroyed{ProcessID: opened[i].ProcessID}, nextOf[*frames.Destroyed](p))
		p.requireClosed(websocket.StatusGoingAway, "server shutting down")
	}
	require.NoError(t, <-done)
	for _, pid := range pids {
		require.True(t, groupGone(pid), "process group %d survived Shutdown", pid)
	}
	st := h.srv.Stats()
	require.Empty(t, st.Processes)
	require.Zero(t, st.Connections)

	// New connections are refused.
	_, resp, err := h.dialWith(http.Header{"Authorization": {"Bearer " + testToken}}, []string{frames.Subprotocol})
	require.Error(t, err)
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
}

func TestShutdownDeadline(t *testing.T) {
	h := newHarness(t, Config{})
	p, opened := h.open(openFrame("inst-deadline", "sleep", "300"))
	pid := h.process(opened.ProcessID).Pid
	_ = p // never reads: no close handshake answers
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	require.ErrorIs(t, h.srv.Shutdown(ctx), context.Canceled)
	require.True(t, groupGone(pid))
	require.Zero(t, h.srv.Stats().Connections)
}

func TestPeerThatNeverReads(t *testing.T) {
	h := newHarness(t, Config{Heartbeat: -1})
	p := h.dial()
	p.send(&frames.Open{
		InstanceID:   "inst-deaf",
		Request:      frames.ProcessRequest{Executable: "yes", WorkingDirectory: "/", Environment: testEnv},
		StdoutWindow: 4096,
	})
	// Not one frame is read, not even opened: the server holds one window.
	var ps ProcessStats
	waitFor(t, "the process", func() bool {
		st := h.srv.Stats()
		if len(st.Processes) == 1 {
			ps = st.Processes[0]
		}
		return ps.Pid != 0
	})
	waitFor(t, "yes blocked in pipe_write", func() bool {
		held := h.process(ps.ProcessID).StdoutHeld
		require.LessOrEqual(t, held, 4096)
		return held == 4096 && strings.Contains(wchan(ps.Pid), "pipe_write")
	})
}

// A peer that stops reading while its child floods stdout: the window
// fills and a destroy the peer sends then ends the process at once. (That
// the output pump never waits on a full socket is shown by
// internal/coalesce's TestReleaseNoWaitKeepsWhatTheSocketRefuses: here the
// stall falls on the writer goroutine, as a flood goes to it, and loopback
// buffers take the window, so this case passes with a blocking pump too.)
func TestDestroyWhilePeerStopsReading(t *testing.T) {
	h := newHarness(t, Config{Heartbeat: -1})
	p := h.dial()
	p.send(&frames.Open{
		InstanceID:   "inst-stops-reading",
		Request:      frames.ProcessRequest{Executable: "yes", WorkingDirectory: "/", Environment: testEnv},
		StdoutWindow: 256 << 10,
	})
	opened := nextOf[*frames.Opened](p)
	// Not one frame more is read: the socket fills, then the window.
	waitFor(t, "the window full and yes blocked in pipe_write", func() bool {
		ps := h.process(opened.ProcessID)
		return ps.StdoutHeld == 256<<10 && strings.Contains(wchan(ps.Pid), "pipe_write")
	})
	p.send(&frames.Destroy{})
	waitFor(t, "the process destroyed", func() bool { return len(h.srv.Stats().Processes) == 0 })
}
