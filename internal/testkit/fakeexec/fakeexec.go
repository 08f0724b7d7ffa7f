// Package fakeexec is a platform-neutral executor for tests: its processes
// are cat(1) in memory, with hooks to hold a start, fail an operation,
// refuse signals or fail a destroy, and counters of what was asked. The
// server's, the client's and the fuzz tests use it where a real child adds
// nothing but a dependency on Linux.
//
// An Executor implements server.Executor once adapted (this package must
// not import server, whose internal tests use it): each test package has a
// three-line Start that returns the *Process as a server.Process.
//
// The executable names a program:
//
//	true     exits 0 at once, stdout empty
//	fail…    does not start: a *proc.StartError, executable_not_found
//	anything else, "cat" and "sleep" too: cat, until its stdin closes (exit
//	0) or a signal or Destroy kills it
package fakeexec

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/procwire/procwire/proc"
	"github.com/procwire/procwire/replay"
)

// Executor starts Processes. Set its hooks before its first Start; its
// methods are safe for concurrent use.
type Executor struct {
	// BeforeStart, when set, runs first in every Start: it may wait (a
	// gate held until a test releases it, or until ctx ends), rewrite the
	// request, or refuse the start with an error that Start returns.
	BeforeStart func(ctx context.Context, req *proc.Request, cfg proc.Config) error
	// Setup, when set, configures each process (its hooks, what it wrote
	// first) before Start returns it.
	Setup func(req proc.Request, p *Process)
	// Keep keeps every process started, for Proc; a fuzz harness that
	// starts millions leaves it false.
	Keep bool

	pids atomic.Int64
	live atomic.Int64 // started and not yet destroyed
	bad  atomic.Pointer[string]

	mu    sync.Mutex
	procs []*Process
}

// Start starts the program req.Executable names (see the package doc).
func (e *Executor) Start(ctx context.Context, req proc.Request, cfg proc.Config) (*Process, error) {
	if e.BeforeStart != nil {
		if err := e.BeforeStart(ctx, &req, cfg); err != nil {
			return nil, err
		}
	}
	if strings.HasPrefix(req.Executable, "fail") {
		return nil, &proc.StartError{Reason: proc.ReasonExecutableNotFound, Err: errors.New("no such file")}
	}
	p := &Process{
		e:       e,
		pid:     int(e.pids.Add(1)),
		window:  cfg.StdinWindow,
		notify:  make(chan struct{}, 1),
		done:    make(chan struct{}),
		out:     replay.New(cfg.StdoutWindow),
		errRing: replay.NewRing(cfg.StderrRing),
	}
	if e.Setup != nil {
		e.Setup(req, p)
	}
	if req.Executable == "true" {
		p.closed = true
		p.flowLocked()
	}
	e.live.Add(1)
	if e.Keep {
		e.mu.Lock()
		e.procs = append(e.procs, p)
		e.mu.Unlock()
	}
	return p, nil
}

// Proc returns the i-th process started, with Keep set.
func (e *Executor) Proc(i int) *Process {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.procs[i]
}

// Started returns how many processes started.
func (e *Executor) Started() int { return int(e.pids.Load()) }

// Live returns how many processes started and were not destroyed.
func (e *Executor) Live() int64 { return e.live.Load() }

// Fail records msg as a misuse of a process by its user, unless one was
// recorded already.
func (e *Executor) Fail(msg string) { e.bad.CompareAndSwap(nil, &msg) }

// Misuse returns the first misuse recorded (a push past the window, after
// CloseStdin or Destroy, an unsupported signal, or a Fail), or "".
func (e *Executor) Misuse() string {
	if m := e.bad.Load(); m != nil {
		return *m
	}
	return ""
}

// Process is cat(1) in memory: stdin goes to stdout through a queue of at
// most its stdin window, moving only while the stdout buffer has room, and
// is copied to the stderr ring as it is pushed (a tee, so that stderr
// carries checkable bytes), a chunk each time its user looks at stdout.
// After CloseStdin and the queue drained, it writes its Epilogue, stdout
// ends and the exit is 0. Any signal kills it: stdout ends, queued and later
// stdin is discarded and counted. Destroy kills it too but, like a pump
// stopped by Destroy, does not end stdout. No goroutines.
type Process struct {
	// Hooks, set by Executor.Setup before the process is used.

	// SignalErr, when it returns an error, makes Signal fail with it while
	// the process runs, as a signal the OS refuses (EPERM).
	SignalErr func() error
	// IgnoreSignals makes every signal delivered and ignored, as by a child
	// that traps them: the process goes on.
	IgnoreSignals bool
	// PushErr, when it returns an error, makes PushStdin fail with it.
	PushErr func() error
	// DestroyErr, when it returns an error, makes Destroy fail with it
	// (a *proc.SurvivorsError, say) and leave the process as it was.
	DestroyErr func() error
	// Epilogue is written to stdout after the last stdin byte, once stdin
	// closed, as by `cat; printf EPILOGUE`.
	Epilogue []byte

	e       *Executor
	pid     int
	window  int
	notify  chan struct{}
	done    chan struct{}
	signals atomic.Int32

	mu        sync.Mutex
	queue     []byte
	consumed  int64
	closed    bool // CloseStdin
	destroyed bool
	life      life
	out       *replay.Buffer
	errRing   *replay.Ring
	exit      proc.ExitStatus // once life is not running
	notedExit bool            // Stdout notified the exit it caused
}

// life is where a Process is in its lifecycle.
type life uint8

const (
	running life = iota // the cat runs
	exited              // it exited 0 after its stdin closed and drained
	killed              // a signal or Destroy killed it: its stdin pipe is broken
)

// Pid returns the process's number, counted from 1 by its Executor.
func (p *Process) Pid() int { return p.pid }

// StartedAt returns a fixed time.
func (p *Process) StartedAt() time.Time { return time.Unix(1_800_000_000, 0) }

// Notify receives a value whenever something changed.
func (p *Process) Notify() <-chan struct{} { return p.notify }

// Done is closed at the exit.
func (p *Process) Done() <-chan struct{} { return p.done }

// Destroyed reports whether a Destroy succeeded: nothing of the process
// is left.
func (p *Process) Destroyed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.destroyed
}

// Signals returns how many times Signal was called.
func (p *Process) Signals() int { return int(p.signals.Load()) }

// Write appends b to stdout, as the child writing it (before its stdin,
// when called from Setup).
func (p *Process) Write(b []byte) {
	p.mu.Lock()
	p.out.Append(b)
	p.mu.Unlock()
	p.changed()
}

func (p *Process) changed() {
	select {
	case p.notify <- struct{}{}:
	default:
	}
}

// PushStdin queues b; a push past the window, after CloseStdin or after
// Destroy is a misuse, recorded and refused.
func (p *Process) PushStdin(b []byte) error {
	if p.PushErr != nil {
		if err := p.PushErr(); err != nil {
			return err
		}
	}
	p.mu.Lock()
	switch {
	case p.destroyed:
		p.mu.Unlock()
		p.e.Fail("PushStdin after Destroy")
		return proc.ErrDestroyed
	case p.closed:
		p.mu.Unlock()
		p.e.Fail("PushStdin after CloseStdin")
		return proc.ErrStdinClosed
	case len(p.queue)+len(b) > p.window:
		err := &proc.StdinOverflowError{Queued: len(p.queue), Pushed: len(b), Window: p.window}
		p.mu.Unlock()
		p.e.Fail(err.Error())
		return err
	case p.life == killed:
		p.consumed += int64(len(b))
	default:
		p.queue = append(p.queue, b...)
		_, _ = p.errRing.Write(b)
	}
	p.mu.Unlock()
	p.changed()
	return nil
}

// Chunk is the most the cat copies at a time: it consumes its stdin while
// the server runs (each chunk notifies, and the server's next look at
// stdout copies the next one), not all at once.
const Chunk = 97

// flowLocked moves the next chunk that fits from the queue to stdout, and
// ends the process once stdin is closed and drained.
func (p *Process) flowLocked() {
	if p.life != running {
		return
	}
	if n := p.out.Append(p.queue[:min(len(p.queue), Chunk)]); n > 0 {
		p.queue = p.queue[n:]
		p.consumed += int64(n)
	}
	if len(p.queue) == 0 {
		p.queue = nil
	}
	if p.closed && len(p.queue) == 0 {
		if n := p.out.Append(p.Epilogue); n > 0 {
			p.Epilogue = p.Epilogue[n:]
		}
		if len(p.Epilogue) > 0 {
			return
		}
		p.out.CloseEOF()
		p.exitLocked(exited, proc.ExitStatus{})
	}
}

func (p *Process) exitLocked(l life, st proc.ExitStatus) {
	p.life, p.exit = l, st
	close(p.done)
}

// killLocked ends the child by signal sig.
func (p *Process) killLocked(sig string, eof bool) {
	p.consumed += int64(len(p.queue))
	p.queue = nil
	if _, ok := p.out.EOF(); eof && !ok {
		p.out.CloseEOF()
	}
	p.exitLocked(killed, proc.ExitStatus{Signal: sig})
}

// CloseStdin ends stdin after the queued bytes; after Destroy it is a
// misuse.
func (p *Process) CloseStdin() error {
	p.mu.Lock()
	if p.destroyed {
		p.mu.Unlock()
		p.e.Fail("CloseStdin after Destroy")
		return proc.ErrDestroyed
	}
	p.closed = true
	p.flowLocked()
	p.mu.Unlock()
	p.changed()
	return nil
}

// StdinConsumed returns the stdin bytes copied or discarded.
func (p *Process) StdinConsumed() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.consumed
}

// Stdout runs fn with the stdout buffer, then copies the next chunk.
func (p *Process) Stdout(fn func(*replay.Buffer)) {
	p.StdoutExit(func(b *replay.Buffer, _ proc.ExitStatus, _ bool) { fn(b) })
}

// StdoutExit runs fn with the stdout buffer and the exit (exited false
// before it), read under one lock, as server.Process requires.
func (p *Process) StdoutExit(fn func(b *replay.Buffer, exit proc.ExitStatus, exited bool)) {
	p.mu.Lock()
	end := p.out.End()
	fn(p.out, p.exit, p.life != running)
	p.flowLocked()
	ended := p.life != running
	grew := p.out.End() != end || ended && !p.notedExit
	p.notedExit = ended
	p.mu.Unlock()
	if grew {
		p.changed()
	}
}

// Stderr runs fn with the stderr ring.
func (p *Process) Stderr(fn func(*replay.Ring)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fn(p.errRing)
}

// Exit returns the exit status once the process ended.
func (p *Process) Exit() (proc.ExitStatus, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exit, p.life != running
}

// Signal kills the process with SIGINT, SIGTERM or SIGKILL (any other is a
// misuse), unless SignalErr refuses it.
func (p *Process) Signal(sig syscall.Signal) (bool, error) {
	p.signals.Add(1)
	var name string
	switch sig {
	case syscall.SIGINT:
		name = "SIGINT"
	case syscall.SIGTERM:
		name = "SIGTERM"
	case syscall.SIGKILL:
		name = "SIGKILL"
	default:
		p.e.Fail(fmt.Sprintf("Signal(%d)", sig))
		return false, &proc.UnsupportedSignalError{Signal: sig}
	}
	p.mu.Lock()
	if p.life != running || p.destroyed {
		p.mu.Unlock()
		return false, nil
	}
	if p.SignalErr != nil {
		if err := p.SignalErr(); err != nil {
			p.mu.Unlock()
			return false, err
		}
	}
	if p.IgnoreSignals {
		p.mu.Unlock()
		return true, nil
	}
	p.killLocked(name, true)
	p.mu.Unlock()
	p.changed()
	return true, nil
}

// Destroy kills the process (SIGKILL) unless DestroyErr fails it; stdout
// stays readable and does not end.
func (p *Process) Destroy() error {
	if p.DestroyErr != nil {
		if err := p.DestroyErr(); err != nil {
			return err
		}
	}
	p.mu.Lock()
	first := !p.destroyed
	if first {
		p.destroyed = true
		if p.life == running {
			p.killLocked("SIGKILL", false)
		}
	}
	p.mu.Unlock()
	if first {
		p.e.live.Add(-1)
		p.changed()
	}
	return nil
}
