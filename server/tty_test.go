//go:build linux

package server

import (
	"crypto/rand"
	"encoding/hex"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/frames"
)

// Terminals (PROTOCOL.md §10) through the server.

// ttyOpen opens sh -c script on a 24x80 terminal with term, and env added
// to the test environment.
func (h *harness) ttyOpen(inst, script, term string, env map[string]string) (*peer, *frames.Opened) {
	h.t.Helper()
	f := openFrame(inst, "sh", "-c", script)
	f.Request.Environment = maps.Clone(testEnv)
	maps.Copy(f.Request.Environment, env)
	f.TTY = &frames.TTY{Rows: 24, Cols: 80, Term: term}
	return h.open(f)
}

// stdoutUntil reads and acks stdout until it holds want, and returns it.
func (p *peer) stdoutUntil(have []byte, want string) []byte {
	p.t.Helper()
	for !strings.Contains(string(have), want) {
		f := nextOf[*frames.Stdout](p)
		require.Equal(p.t, int64(len(have)), f.Off)
		have = append(have, f.Data...)
		p.send(&frames.Ack{Stdout: int64(len(have))})
	}
	return have
}

// TestTTYOpen: the process runs on a terminal of the size asked, TERM is
// tty.term unless the request sets it, stderr is merged into stdout (no
// stderr frame), and stdout_eof comes before the exit.
func TestTTYOpen(t *testing.T) {
	h := newHarness(t, Config{})
	script := `tty >/dev/null && echo tty-ok; stty size; echo "$TERM"; echo to-stderr >&2; exit 5`
	p, opened := h.ttyOpen("inst-tty", script, "xterm-256color", nil)
	require.True(t, opened.TTY)
	out := p.collect(false)
	require.Equal(t, "tty-ok\r\n24 80\r\nxterm-256color\r\nto-stderr\r\n", string(out.stdout))
	require.Empty(t, out.stderr)
	require.Equal(t, &frames.Exit{Code: 5}, out.exit)
	require.Equal(t, []frames.Type{frames.TypeStdoutEOF, frames.TypeExit}, out.order)

	p, _ = h.ttyOpen("inst-tty-env", `echo "$TERM"`, "xterm-256color", map[string]string{"TERM": "vt100"})
	out = p.collect(false)
	require.Equal(t, "vt100\r\n", string(out.stdout), "the request's TERM wins")

	p, opened = h.sh("inst-pipes", `tty || true`)
	require.False(t, opened.TTY)
	require.Equal(t, "not a tty\n", string(p.collect(false).stdout))
}

// TestTTYResize: resize sets the window size, and the foreground job gets
// SIGWINCH; a resize on a session without a terminal is closed 1002.
func TestTTYResize(t *testing.T) {
	h := newHarness(t, Config{})
	p, _ := h.ttyOpen("inst-resize", `trap 'stty size; exit 0' WINCH; echo ready; while :; do sleep 0.01; done`, "", nil)
	have := p.stdoutUntil(nil, "ready\r\n")
	p.send(&frames.Resize{Rows: 50, Cols: 132, XPixel: 640, YPixel: 480})
	out := p.collectFrom(int64(len(have)), false)
	require.Equal(t, "50 132\r\n", string(out.stdout))
	require.Equal(t, &frames.Exit{}, out.exit)

	p, _ = h.sh("inst-resize-pipes", `sleep 300`)
	p.send(&frames.Resize{Rows: 50, Cols: 132})
	p.requireClosed(websocket.StatusProtocolError, "resize on a session without a terminal")
}

// TestTTYRefused: a server with NoTTY, or whose Executor gives no
// terminals, refuses an open with tty before starting anything, with
// SandboxCapabilityUnavailable and the requirement "tty".
func TestTTYRefused(t *testing.T) {
	for name, cfg := range map[string]Config{
		"NoTTY":            {NoTTY: true},
		"executor without": {Executor: &countingExecutor{}},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, cfg)
			p := h.dial()
			f := openFrame("inst-no-tty", "sh", "-c", "echo started >&2")
			f.TTY = &frames.TTY{Rows: 24, Cols: 80}
			p.send(f)
			e := nextOf[*frames.Error](p)
			require.Equal(t, frames.CapabilityUnavailable, e.Code)
			require.Equal(t, RequirementTTY, e.Requirement)
			p.requireClosed(websocket.StatusNormalClosure, "")
			require.Empty(t, h.srv.Stats().Processes)
			if ce, ok := cfg.Executor.(*countingExecutor); ok {
				require.Empty(t, ce.procs, "nothing started")
			}
			// Without tty the same open is served.
			_, opened := h.open(openFrame("inst-no-tty", "true"))
			require.False(t, opened.TTY)
		})
	}
}

// TestTTYResumeReplays: the terminal's output is stdout: after a cut, a
// resume replays it byte-exact from where the client was, resumed says
// the process has a terminal, and keystrokes flow again.
func TestTTYResumeReplays(t *testing.T) {
	h := newHarness(t, Config{Grace: 30 * time.Second})
	p, opened := h.ttyOpen("inst-tty-resume", `stty -echo; i=0; while [ $i -lt 300 ]; do echo line-$i; i=$((i+1)); done; read x; echo got-$x`, "", nil)
	// Acked up to 100 only: the rest is held for a replay.
	var have []byte
	for !strings.Contains(string(have), "line-299\r\n") {
		f := nextOf[*frames.Stdout](p)
		require.Equal(t, int64(len(have)), f.Off)
		have = append(have, f.Data...)
	}
	p.send(&frames.Ack{Stdout: 100})
	p.ws.CloseNow()

	p = h.dial()
	p.send(&frames.Resume{ProcessID: opened.ProcessID, Token: opened.Token, StdoutReceived: 100})
	r := nextOf[*frames.Resumed](p)
	require.True(t, r.TTY)
	p.send(&frames.Stdin{Off: r.StdinReceived, Data: []byte("zz\r")})
	out := p.collectFrom(100, false)
	require.Equal(t, string(have[100:])+"got-zz\r\n", string(out.stdout))
	require.Equal(t, &frames.Exit{}, out.exit)
}

// TestTTYGraceExpiry: a detached terminal session whose grace expires is
// destroyed with every holder of the terminal, a background job that
// ignores the hang-up included.
func TestTTYGraceExpiry(t *testing.T) {
	h := newHarness(t, Config{Grace: 200 * time.Millisecond})
	mark := newMark()
	p, opened := h.ttyOpen("inst-tty-grace", `(trap '' HUP; exec sleep 300) & echo up; sleep 300`, "",
		map[string]string{"PROCWIRE_TEST_MARK": mark})
	p.stdoutUntil(nil, "up\r\n")
	waitFor(t, "both sleeps", func() bool { return len(markedAlive(t, "PROCWIRE_TEST_MARK="+mark)) >= 2 })
	p.ws.CloseNow()
	h.waitEvent(hookExpired, opened.ProcessID)
	require.Empty(t, markedAlive(t, "PROCWIRE_TEST_MARK="+mark))
	require.Empty(t, h.srv.Stats().Processes)
}

// newMark returns a unique value for PROCWIRE_TEST_MARK, which every
// descendant inherits.
func newMark() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
