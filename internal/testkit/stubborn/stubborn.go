// Package stubborn wraps a server.Executor so that each process's first
// Destroy fails as it does when a member of the containment outlives
// SIGKILL's bound, for the tests of clients that must retry a destroy.
package stubborn

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/procwire/procwire/proc"
	"github.com/procwire/procwire/server"
)

// Executor starts its processes with the Executor it wraps.
type Executor struct{ server.Executor }

// Start starts the process; its first Destroy will fail.
func (e Executor) Start(ctx context.Context, req proc.Request, cfg proc.Config) (server.Process, error) {
	p, err := e.Executor.Start(ctx, req, cfg)
	if err != nil {
		return nil, err
	}
	return &process{Process: p}, nil
}

// process answers its first Destroy with a *proc.SurvivorsError without
// killing anything; later ones destroy the process.
type process struct {
	server.Process
	tries atomic.Int32
}

func (s *process) Destroy() error {
	if s.tries.Add(1) == 1 {
		return &proc.SurvivorsError{Containment: "process group of pid " + fmt.Sprint(s.Pid()), Wait: time.Second, Count: 1,
			Survivors: []proc.Survivor{{Pid: s.Pid(), Command: "stubborn"}}}
	}
	return s.Process.Destroy()
}
