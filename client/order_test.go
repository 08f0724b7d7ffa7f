package client_test

import (
	"context"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/client"
	"github.com/procwire/procwire/frames"
	"github.com/procwire/procwire/internal/testkit/fakeexec"
	"github.com/procwire/procwire/proc"
	"github.com/procwire/procwire/server"
)

// fakeExecutor is a fakeexec.Executor (in-memory cats) as a server.Executor.
type fakeExecutor struct{ *fakeexec.Executor }

func (e fakeExecutor) Start(ctx context.Context, req proc.Request, cfg proc.Config) (server.Process, error) {
	p, err := e.Executor.Start(ctx, req, cfg)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// failingSignals is an executor whose processes cannot be signalled, as
// when the operating system answers EPERM.
func failingSignals() server.Executor {
	return fakeExecutor{&fakeexec.Executor{Setup: func(_ proc.Request, p *fakeexec.Process) {
		p.SignalErr = func() error { return syscall.EPERM }
	}}}
}

// An executor whose Signal fails: the call returns the typed error (well
// within a second: no reconnection is involved, one connection serves it
// all) and the process goes on.
func TestSignalFailsOnTheServer(t *testing.T) {
	e := newEnv(t, server.Config{Executor: failingSignals()})
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
