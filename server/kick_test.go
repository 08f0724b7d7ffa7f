package server

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/frames"
)

// A served connection lets an output pump write its process's output
// itself (conn.kick), sparing the writer goroutine's wakeup per exchange:
// the connection beneath the WebSocket, wrapped in the read guard, still
// takes non-blocking writes. (The guard once hid the socket, and every
// interactive reply then went through the writer, unnoticed.)
func TestServedConnectionLetsThePumpWrite(t *testing.T) {
	_, exec := newFake(nil)
	h := newHarness(t, Config{Executor: exec})
	p, _ := h.open(openFrame("inst-kick", "cat"))
	defer p.send(&frames.Destroy{})
	h.srv.mu.Lock()
	defer h.srv.mu.Unlock()
	require.Len(t, h.srv.conns, 1)
	for c := range h.srv.conns {
		require.True(t, c.lw.CallersWrite(), "the pump may not write its output on this connection")
	}
}
