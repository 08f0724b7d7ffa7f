//go:build linux

package client_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/client"
	"github.com/procwire/procwire/server"
)

// A child that never reads stdin: writes block once the window and the pipe
// are full, and wake on cancellation and on Destroy.
func TestWriteBlocksWithoutReader(t *testing.T) {
	e := newEnv(t, server.Config{})
	c := ctx(t)
	opts := fastOpts()
	opts.StdinWindow = 4096
	p := open(t, e.url, req("sleep", "300"), opts)
	big := make([]byte, 4<<20) // more than the window and the pipe hold

	wctx, cancel := context.WithCancel(c)
	blocked := blockedHook(p)
	done := make(chan struct{})
	var n int
	var err error
	go func() {
		defer close(done)
		n, err = p.Stdin().WriteContext(wctx, big)
	}()
	await(t, c, blocked, "the write to block")
	cancel()
	await(t, c, done, "the write to return")
	require.ErrorIs(t, err, context.Canceled)
	require.Less(t, n, len(big))

	blocked = blockedHook(p)
	done = make(chan struct{})
	go func() {
		defer close(done)
		_, err = p.Stdin().WriteContext(c, big)
	}()
	await(t, c, blocked, "the write to block")
	require.NoError(t, p.Destroy(c))
	await(t, c, done, "the write to return")
	require.ErrorIs(t, err, client.ErrDestroyed)
}

// A client that never reads stdout: the server holds one window, no more,
// and the child blocks; reading lets it go on.
func TestStdoutWindowBound(t *testing.T) {
	e := newEnv(t, server.Config{})
	c := ctx(t)
	const window = 64 << 10
	opts := fastOpts()
	opts.StdoutWindow = window
	p := open(t, e.url, req("yes"), opts)
	eventually(t, c, "a full window", func() bool { return p.Stdout().Received() == window })
	st := e.srv.Stats()
	require.Len(t, st.Processes, 1)
	require.Equal(t, window, st.Processes[0].StdoutWindow)
	require.Equal(t, window, st.Processes[0].StdoutHeld)
	require.LessOrEqual(t, p.Stdout().Received(), int64(window))

	buf := make([]byte, window)
	n, err := p.Stdout().ReadContext(c, buf)
	require.NoError(t, err)
	require.Equal(t, window, n)
	require.Equal(t, "y\ny\n", string(buf[:4]))
	eventually(t, c, "the next window", func() bool { return p.Stdout().Received() == 2*window })
	require.LessOrEqual(t, e.srv.Stats().Processes[0].StdoutHeld, window)
	require.NoError(t, p.Destroy(c))
}
