package server

import (
	"context"
	"net/http"
	"net/http/httptest"
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
