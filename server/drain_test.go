//go:build linux

package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/frames"
)

// TestDrain: a draining server answers /healthz 503 at once and refuses
// new opens with server_draining, while its processes go on (stdin,
// stdout, resume, a repeated open by key, destroy); Drain returns once the
// last is destroyed.
func TestDrain(t *testing.T) {
	exec := &countingExecutor{}
	h := newHarness(t, Config{Executor: exec})
	health := httptest.NewServer(h.srv.HealthHandler())
	defer health.Close()
	healthz := func() int {
		resp, err := http.Get(health.URL)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, http.StatusOK, healthz())

	first := keyedOpen("inst-a", newKey(), "sh", "-c", `trap 'echo sig' INT; while read -r l; do echo "$l"; done`)
	a, openedA := h.open(first)
	b, openedB := h.open(openFrame("inst-b", "cat"))

	drained := make(chan error, 1)
	go func() { drained <- h.srv.Drain(testCtx(t)) }()
	h.waitEvent(hookDraining, "")
	require.Equal(t, http.StatusServiceUnavailable, healthz(), "503 as soon as Drain begins")
	require.True(t, h.srv.Stats().Draining)

	p := h.dial()
	p.send(openFrame("inst-new", "cat"))
	p.requireError(drainingError())
	require.Equal(t, 2, exec.count(), "nothing started")

	// The processes held go on: a repeated open by key (its answer lost),
	a1 := h.dial()
	a1.send(first)
	require.Equal(t, openedA.ProcessID, nextOf[*frames.Opened](a1).ProcessID)
	a.requireClosed(statusResumedElsewhere, "resumed elsewhere")
	a = a1
	// stdin and stdout,
	a.send(&frames.Stdin{Off: 0, Data: []byte("a\n")})
	require.Equal(t, &frames.Stdout{Off: 0, Data: []byte("a\n")}, nextOf[*frames.Stdout](a))
	// a resume on another connection,
	a2 := h.dial()
	a2.send(&frames.Resume{ProcessID: openedA.ProcessID, Token: openedA.Token, StdoutReceived: 2})
	nextOf[*frames.Resumed](a2)
	a.requireClosed(statusResumedElsewhere, "resumed elsewhere")
	a2.send(&frames.Stdin{Off: 2, Data: []byte("b\n")})
	require.Equal(t, &frames.Stdout{Off: 2, Data: []byte("b\n")}, nextOf[*frames.Stdout](a2))
	// a signal,
	a2.send(&frames.Signal{ID: 1, Signal: "SIGINT"})
	nextOf[*frames.Signaled](a2)
	require.Equal(t, &frames.Stdout{Off: 4, Data: []byte("sig\n")}, nextOf[*frames.Stdout](a2))
	// and a destroy.
	a2.send(&frames.Destroy{})
	a2.destroyedAnswer(openedA.ProcessID)

	select {
	case err := <-drained:
		t.Fatalf("Drain returned with a process left: %v", err)
	default:
	}
	b.send(&frames.Destroy{})
	b.destroyedAnswer(openedB.ProcessID)
	require.NoError(t, <-drained)
	require.Equal(t, 2, exec.count())
	require.NoError(t, h.srv.Drain(testCtx(t)), "drained again: nothing left")
}

// TestDrainTimeout: what a drain's deadline leaves is destroyed by the
// Shutdown that follows, as ever: exit, destroyed, 1001.
func TestDrainTimeout(t *testing.T) {
	h := newHarness(t, Config{})
	p, opened := h.sh("inst-left", "sleep 300")
	pid := h.process(opened.ProcessID).Pid

	ctx, cancel := context.WithTimeout(testCtx(t), 50*time.Millisecond)
	defer cancel()
	err := h.srv.Drain(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	h.process(opened.ProcessID) // still running

	done := make(chan error, 1)
	go func() { done <- h.srv.Shutdown(testCtx(t)) }()
	require.Equal(t, &frames.Exit{Signal: "SIGKILL"}, nextOf[*frames.Exit](p))
	require.Equal(t, &frames.Destroyed{ProcessID: opened.ProcessID}, nextOf[*frames.Destroyed](p))
	p.requireClosed(websocket.StatusGoingAway, reasonShutdown)
	require.NoError(t, <-done)
	require.True(t, groupGone(pid))
}

// TestDrainEndsWithShutdown: a Drain waiting returns when Shutdown begins.
func TestDrainEndsWithShutdown(t *testing.T) {
	h := newHarness(t, Config{})
	h.sh("inst-s", "sleep 300")
	drained := make(chan error, 1)
	go func() { drained <- h.srv.Drain(testCtx(t)) }()
	h.waitEvent(hookDraining, "")
	require.NoError(t, h.srv.Close())
	require.NoError(t, <-drained)
}

// TestDrainRefusesOpensFromAProxyBeforeTheUpgrade: through a trusted
// proxy, an upgrade that can only open a new process is answered 503, so
// that the proxy tries another server; one for an instance held, or naming
// a process, is served.
func TestDrainRefusesOpensFromAProxyBeforeTheUpgrade(t *testing.T) {
	h := newHarness(t, Config{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})
	p, opened := h.open(openFrame("inst-held", "cat"))
	drained := make(chan error, 1)
	go func() { drained <- h.srv.Drain(testCtx(t)) }()
	h.waitEvent(hookDraining, "")

	dial := func(hdr ...string) (*websocket.Conn, int) {
		header := http.Header{"Authorization": {"Bearer " + testToken}}
		for i := 0; i < len(hdr); i += 2 {
			header.Set(hdr[i], hdr[i+1])
		}
		ws, resp, err := h.dialWith(header, []string{frames.Subprotocol})
		if err != nil {
			require.NotNil(t, resp, "%v", err)
			return nil, resp.StatusCode
		}
		return ws, http.StatusSwitchingProtocols
	}
	_, code := dial(frames.HeaderInstance, "inst-new")
	require.Equal(t, http.StatusServiceUnavailable, code)

	ws, code := dial(frames.HeaderInstance, "inst-held")
	require.Equal(t, http.StatusSwitchingProtocols, code)
	ws.CloseNow()
	ws, code = dial(frames.HeaderProcess, opened.ProcessID)
	require.Equal(t, http.StatusSwitchingProtocols, code)
	ws.CloseNow()
	// Without the headers the open is refused in frames, as from a client.
	q := h.dial()
	q.send(openFrame("inst-new", "cat"))
	q.requireError(drainingError())

	p.send(&frames.Destroy{})
	p.destroyedAnswer(opened.ProcessID)
	require.NoError(t, <-drained)
}
