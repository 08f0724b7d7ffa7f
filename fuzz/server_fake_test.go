package fuzz

import (
	"context"
	"fmt"

	"github.com/procwire/procwire/internal/testkit/fakeexec"
	"github.com/procwire/procwire/proc"
	"github.com/procwire/procwire/server"
)

// The in-memory child.

// fakeExecutor is a fakeexec.Executor (in-memory cats) as a server.Executor.
type fakeExecutor struct{ *fakeexec.Executor }

func (e fakeExecutor) Start(ctx context.Context, req proc.Request, cfg proc.Config) (server.Process, error) {
	p, err := e.Executor.Start(ctx, req, cfg)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// newCatExecutor returns an executor of in-memory cats that records, as a
// misuse, a start with windows beyond the fuzzed server's configuration.
func newCatExecutor() *fakeexec.Executor {
	e := &fakeexec.Executor{}
	e.BeforeStart = func(_ context.Context, _ *proc.Request, cfg proc.Config) error {
		checkWindows(e, cfg)
		return nil
	}
	return e
}

// checkWindows records, as a misuse of e, windows beyond the fuzzed
// server's configuration.
func checkWindows(e *fakeexec.Executor, cfg proc.Config) {
	if cfg.StdoutWindow > fuzzMaxWindow || cfg.StdinWindow > fuzzMaxWindow || cfg.StderrRing != fuzzStderrRing {
		e.Fail(fmt.Sprintf("Start with windows beyond the config: %+v", cfg))
	}
}
