package server

import (
	"context"
	"syscall"
	"time"

	"github.com/procwire/procwire/proc"
	"github.com/procwire/procwire/replay"
)

// Process is a running child as the server uses it, pull-shaped: the server
// reads the buffers and the exit when Notify says something changed.
// *bridge.Process implements it on Linux; an embedding provider's Executor
// may return its own, keeping the contract of package proc. Implementations
// must be safe for concurrent use. Notify has one consumer, the server.
type Process interface {
	// Pid returns the child's process id (for logs and Stats).
	Pid() int
	// StartedAt returns when the child was started.
	StartedAt() time.Time
	// PushStdin copies b into the stdin queue, which holds at most the
	// proc.Config.StdinWindow given to Start. The server never pushes
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
	// StdoutExit runs fn with the stdout replay buffer and the exit (exited
	// false before it is published), read under one lock: the writer's one
	// trip into the process per step. An exit seen comes with its stdout
	// EOF, except when the process waited ExitWait or was destroyed.
	StdoutExit(fn func(b *replay.Buffer, exit proc.ExitStatus, exited bool))
	// Stderr runs fn with the lossy stderr ring under its lock.
	Stderr(fn func(*replay.Ring))
	// Notify receives a value whenever stdout or stderr grew, stdout
	// reached EOF, stdin was consumed or the exit was published.
	Notify() <-chan struct{}
	// Done is closed when the exit is published.
	Done() <-chan struct{}
	// Exit returns the published exit status; ok is false before.
	Exit() (status proc.ExitStatus, ok bool)
	// Signal sends SIGINT, SIGTERM or SIGKILL to the child's process
	// group; delivered is false when the child had already exited.
	Signal(sig syscall.Signal) (delivered bool, err error)
	// Destroy kills the whole containment, reaps it and releases its
	// resources; it is bounded and keeps the buffers readable. It returns
	// nil only when nothing of the containment survives, and once it did,
	// always; after an error (a *proc.SurvivorsError naming what survived)
	// a later call tries again.
	Destroy() error
}

// Executor starts the child of an open frame. Start is called
// concurrently, once per open.
//
// Start must keep the executor contract of package proc: the windows of
// cfg (the server announces them to the client), the order of stdout EOF
// and exit, a Destroy that ends the whole containment and reports what
// survived, and cfg.RunAs. An error that is (or wraps) a *proc.StartError
// is answered with its Reason, anything else as reason "start_failed". ctx
// ends when the connection that asked for the process is lost or the server
// begins to shut down (a failed start is then answered server_shutdown).
type Executor interface {
	Start(ctx context.Context, req proc.Request, cfg proc.Config) (Process, error)
}

// Contained is implemented by an Executor that knows how it contains its
// children's process trees; the server logs it at start and reports it in
// Stats.
type Contained interface {
	// ContainmentName names it, such as "cgroup under /sys/fs/cgroup/x",
	// "pid_namespace" or "process_group".
	ContainmentName() string
}
