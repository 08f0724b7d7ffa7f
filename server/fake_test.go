package server

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/internal/testkit/fakeexec"
	"github.com/procwire/procwire/proc"
)

// fakeExecutor is a fakeexec.Executor (in-memory cats with hooks) as an
// Executor.
type fakeExecutor struct{ *fakeexec.Executor }

func (e fakeExecutor) Start(ctx context.Context, req proc.Request, cfg proc.Config) (Process, error) {
	p, err := e.Executor.Start(ctx, req, cfg)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// newFake returns an executor of in-memory cats that keeps its processes,
// each configured by setup (when not nil), and the Executor to put in a
// Config.
func newFake(setup func(req proc.Request, p *fakeexec.Process)) (*fakeexec.Executor, Executor) {
	e := &fakeexec.Executor{Setup: setup, Keep: true}
	return e, fakeExecutor{e}
}

// startFake starts one in-memory cat outside any server, configured by
// setup, for tests of a session alone.
func startFake(t *testing.T, setup func(p *fakeexec.Process)) *fakeexec.Process {
	e := &fakeexec.Executor{Setup: func(_ proc.Request, p *fakeexec.Process) { setup(p) }}
	p, err := e.Start(t.Context(), proc.Request{Executable: "cat"}, proc.Config{StdoutWindow: 1024, StdinWindow: 1024, StderrRing: 64})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Destroy() })
	return p
}
