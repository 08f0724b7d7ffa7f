package server

import (
	"context"
	"syscall"
	"time"

	"github.com/procwire/procwire/bridge"
	"github.com/procwire/procwire/replay"
)

// Process is a running child as the server uses it. *bridge.Process
// implements it; an embedding provider's Executor may return its own.
// Implementations must be safe for concurrent use. Notify has one consumer,
// the server.
type Process interface {
	// Pid returns the child's process id (for logs and Stats).
	Pid() int
	// StartedAt returns when the child was started.
	StartedAt() time.Time
	// PushStdin copies b into the stdin queue, which holds at most the
	// bridge.Config.StdinWindow given to Start. The server never pushes
	// past the credit it granted.
	PushStdin(b []byte) error
	// CloseStdin half-closes stdin after the last pushed byte.
	CloseStdin() error
	// StdinConsumed returns how many pushed bytes left the queue (written
	// to the child, or discarded after its pipe broke).
	StdinConsumed() int64
	// Stdout runs fn with the stdout replay buffer under the process's lock;
	// an Ack inside fn lets the process read more of the child's stdout.
	Stdout(fn func(*replay.Buffer))
	// Stderr runs fn with the lossy stderr ring under its lock.
	Stderr(fn func(*replay.Ring))
	// Notify receives a value whenever stdout or stderr grew, stdout
	// reached EOF, stdin was consumed or the exit was published.
	Notify() <-chan struct{}
	// Done is closed when the exit is published.
	Done() <-chan struct{}
	// Exit returns the published exit status; ok is false before.
	Exit() (status bridge.ExitStatus, ok bool)
	// Signal sends SIGINT, SIGTERM or SIGKILL to the child's process
	// group; delivered is false when the child had already exited.
	Signal(sig syscall.Signal) (delivered bool, err error)
	// Destroy kills the group, reaps it and releases its resources; it is
	// bounded, idempotent and keeps the buffers readable.
	Destroy() error
}

var _ Process = (*bridge.Process)(nil)

// Executor starts the child of an open frame. Start is called
// concurrently, once per open.
//
// Start must honour cfg: the stdout buffer holds cfg.StdoutWindow bytes, the
// stderr ring cfg.StderrRing bytes and the stdin queue cfg.StdinWindow bytes,
// because the server announces those windows to the client. An error that is
// (or wraps) a *bridge.StartError is answered with its Reason,
// anything else as reason "start_failed". ctx ends when the connection that
// asked for the process is lost.
type Executor interface {
	Start(ctx context.Context, req bridge.Request, cfg bridge.Config) (Process, error)
}

// BridgeExecutor is the default Executor: it starts the child with
// bridge.Start on this machine.
type BridgeExecutor struct{}

// Start calls bridge.Start.
func (BridgeExecutor) Start(_ context.Context, req bridge.Request, cfg bridge.Config) (Process, error) {
	p, err := bridge.Start(req, &cfg)
	if err != nil {
		return nil, err
	}
	return p, nil
}
