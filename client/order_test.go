package client_test

import (
	"context"
	"os"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/client"
	"github.com/procwire/procwire/frames"
	"github.com/procwire/procwire/proc"
	"github.com/procwire/procwire/server"
)

// Write then Signal: the signal reaches the child after the line, every
// time. The child (this test binary, see signalOrderChild) checks, when the
// signal comes, that the line is already in its stdin pipe.
func TestSignalAfterStdin(t *testing.T) {
	t.Parallel()
	e := newEnv(t, server.Config{})
	c := ctx(t)
	self, err := os.Executable()
	require.NoError(t, err)
	r := req(self)
	r.Environment[childEnv] = "signal-order"
	p := open(t, e.url, r, nil)
	require.Equal(t, "ready\n", readLine(t, c, p.Stdout()))
	for i := range 1000 {
		_, err := p.Stdin().Write([]byte("quit\n"))
		require.NoError(t, err)
		ok, err := p.Signal(c, frames.SIGINT)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, "first quit\n", readLine(t, c, p.Stdout()), "run %d", i)
	}
	require.NoError(t, p.Destroy(c))
}

// failingSignals is an executor whose processes cannot be signalled, as
// when the operating system answers EPERM.
type failingSignals struct{ server.Executor }

func (f failingSignals) Start(ctx context.Context, req proc.Request, cfg proc.Config) (server.Process, error) {
	p, err := f.Executor.Start(ctx, req, cfg)
	if err != nil {
		return nil, err
	}
	return signalFails{p}, nil
}

type signalFails struct{ server.Process }

func (signalFails) Signal(syscall.Signal) (bool, error) { return false, syscall.EPERM }

// An executor whose Signal fails: the call returns the typed error (well
// within a second: no reconnection is involved, one connection serves it
// all) and the process goes on.
func TestSignalFailsOnTheServer(t *testing.T) {
	e := newEnv(t, server.Config{Executor: failingSignals{server.BridgeExecutor{}}})
	c := ctx(t)
	p := open(t, e.purl, req("cat"), nil)
	for range 3 {
		_, err := p.Signal(c, frames.SIGTERM)
		var re *client.RemoteError
		require.ErrorAs(t, err, &re)
		require.Equal(t, "signal_failed", re.Frame.Reason)
	}
	_, err := p.Stdin().Write([]byte("still here\n"))
	require.NoError(t, err)
	require.Equal(t, "still here\n", readLine(t, c, p.Stdout()))
	require.Equal(t, 1, e.proxy.Accepted(), "one connection")
	require.NoError(t, p.Destroy(c))
}
