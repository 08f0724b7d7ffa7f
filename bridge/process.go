//go:build linux

package bridge

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/procwire/procwire/bridge/internal/initproc"
	"github.com/procwire/procwire/proc"
	"github.com/procwire/procwire/replay"
)

// Process is a running child and its stdio. All methods are safe for
// concurrent use; Notify has a single consumer.
//
// Every Process must be destroyed: until Destroy, its goroutines run and an
// exited child stays an unreaped zombie, on purpose, so that its pid, which
// is the group id Signal and Destroy send to, cannot be reused by an
// unrelated process group.
//
// Its locks are inMu (stdin), mu (stdout, the exit, destroy), errMu
// (stderr) and destroyMu (Destroy); the order is destroyMu, then mu or
// inMu, one at a time, and no two of the others together (doc.go).
type Process struct {
	cfg       proc.Config // immutable after Start
	pid       int         // also the process group id: the child (or the init) is its group's leader
	pidfd     *pidfd      // the child's (or the init's), on the poller; only waitChild uses it
	contain   *Containment
	cgroup    *cgroup       // ContainCgroup: the process's own cgroup
	v1        *v1Group      // the process's cgroups in v1 hierarchies, for limits
	statusR   *os.File      // under an init: its status pipe; closed by waitChild
	status    *bufio.Reader // on statusR
	ctlW      *os.File      // under an init: our end of its control pipe; see closeCtl
	ctlClose  sync.Once
	guardian  bool   // the init is a guardian (initproc.ModeGuardian), not a namespace's pid 1
	pidns     string // under a namespace's init: the namespace, as /proc/PID/ns/pid names it
	ttyNr     string // with Config.TTY: the terminal, as /proc/PID/stat's tty_nr names it
	startedAt time.Time
	notify    chan struct{}                     // capacity 1; see Notify
	onChange  atomic.Pointer[func(proc.Change)] // see OnChange

	// firstOutput is called by the stdout pump once its first read has
	// been handed on (changed) and when it ends, and by a timer; it acts
	// once (launch.process).
	firstOutput func()

	// Our ends of the child's pipes. Destroy closes all three; the stdin pump
	// also closes stdinW (through closeStdinW) when it is done.
	stdinW      *os.File
	stdoutR     *os.File
	stderrR     *os.File
	stdinWClose sync.Once

	inMu       sync.Mutex // guards the in* fields
	inCond     *sync.Cond // on inMu; wakes the stdin pump: bytes queued, CloseStdin, Destroy
	inQ        queue      // pushed, not yet written to the pipe
	inEnd      stdinEnd   // whether stdin takes pushes: CloseStdin and Destroy end it
	inPipe     stdinPipe  // the child's pipe: taking bytes, full, or failed
	inConsumed int64      // bytes written to the pipe or discarded after it failed
	// inRaw is stdinW's, for PushStdin's direct writes; made by the first.
	inRaw   syscall.RawConn
	inNowFd func(uintptr) bool // p.writeStdinNowFd, bound with inRaw
	inNow   []byte             // writeStdinNowFd's argument
	inNowN  int                // and result

	// mu guards the stdout buffer, the exit and destroy; it is held while
	// Stdout's fn runs. One lock for all three lets a reader see the exit
	// and the stdout it follows together (StdoutExit): the stdout pump
	// records EOF before the exit is published. It also orders Signal's
	// kill(-pgid) before the reap: the leader stays an unreaped zombie
	// until Destroy, so its pid, which is the group id, cannot be reused
	// while anyone may still signal it.
	mu      sync.Mutex
	outCond *sync.Cond      // on mu; wakes the stdout pump: room appeared, Destroy
	out     *replay.Buffer  // stdout replay buffer
	exit    proc.ExitStatus // set once, when exited turns true
	exited  bool            // the exit is published: exit is set and done is closed
	reaped  bool            // the leader is reaped: its pid is no longer ours to signal
	// destroy is written with destroyMu and mu held, so it may be read
	// under either: past destroyNone, the stdout pump stops and Signal
	// delivers nothing.
	destroy destroyState

	errMu   sync.Mutex   // guards errRing; held while Stderr's fn runs
	errRing *replay.Ring // lossy stderr

	done      chan struct{} // closed when the exit is published
	destroyCh chan struct{} // closed by Destroy after the group was killed

	// Each closed by its goroutine when it returns.
	stdinDone  chan struct{}
	stdoutDone chan struct{}
	stderrDone chan struct{}
	waitDone   chan struct{}

	destroyMu sync.Mutex // serialises Destroy; held while destroy changes
}

// stdinEnd says whether stdin still takes pushes. It only moves forward:
// open, then closing or stopped; closing, then stopped.
type stdinEnd uint8

const (
	stdinOpen    stdinEnd = iota
	stdinClosing          // CloseStdin: the pump closes the pipe after the queue
	stdinStopped          // Destroy: the pump ends now, whatever is queued
)

// stdinPipe is the state of the child's stdin pipe as the pump last met it.
// It moves between taking and full until it fails, for good.
type stdinPipe uint8

const (
	pipeTaking stdinPipe = iota // the last write took everything, or none was made
	pipeFull                    // queued bytes wait for the child to read (StdinBlocked)
	pipeBroken                  // a write failed: pushed bytes are discarded and counted
)

// destroyState is how far Destroy has gone. It only moves forward.
type destroyState uint8

const (
	destroyNone    destroyState = iota
	destroyStarted              // the first Destroy stopped the pumps and killed; a later one kills again
	destroyDone                 // a Destroy found nothing left: every later one returns nil
)

// Pid returns the process id of the child's init, which is also the
// process group id the server signals; without an init, the child's.
func (p *Process) Pid() int { return p.pid }

// StartedAt returns when the child was started.
func (p *Process) StartedAt() time.Time { return p.startedAt }

// Notify returns a channel of capacity 1 that receives a value, without
// blocking the sender, whenever something observable changed: stdout
// appended or reached EOF, stderr appended, StdinConsumed advanced, the exit
// published. Several changes may fold into one value. It has one consumer:
// the attached session's writer, which re-reads the state after each value.
func (p *Process) Notify() <-chan struct{} { return p.notify }

// OnChange makes fn be called after every change that Notify would
// announce, in place of a value on Notify, from the goroutine that made the
// change, possibly with the process's locks held: fn must not block or
// call the Process. It spares the consumer a goroutine hand-off, and says
// what changed.
func (p *Process) OnChange(fn func(proc.Change)) { p.onChange.Store(&fn) }

// changed signals Notify's consumer.
func (p *Process) changed(what proc.Change) {
	if fn := p.onChange.Load(); fn != nil {
		(*fn)(what)
		return
	}
	select {
	case p.notify <- struct{}{}:
	default:
	}
}

// Stdout runs fn with the stdout buffer, under the lock that the stdout pump
// also takes. fn may slice and ack; views it takes are valid only inside fn.
// Acking wakes the pump if it was waiting for room.
func (p *Process) Stdout(fn func(b *replay.Buffer)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fn(p.out)
	if p.out.Room() > 0 {
		p.outCond.Signal()
	}
}

// StdoutExit is Stdout that also passes fn the exit, as Exit would return
// it, read under the same lock: one trip into the process for both. The two
// are consistent: the stdout pump records EOF before the exit is
// published, so an exit fn sees comes with the stream's EOF, unless the
// exit was published ExitWait after the child's death without it (a
// descendant holds stdout, or the window is full) or the process was
// destroyed. fn must not call the Process.
func (p *Process) StdoutExit(fn func(b *replay.Buffer, exit proc.ExitStatus, exited bool)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fn(p.out, p.exit, p.exited)
	if p.out.Room() > 0 {
		p.outCond.Signal()
	}
}

// Stderr runs fn with the stderr ring under its lock. Views fn takes are
// valid only inside fn.
func (p *Process) Stderr(fn func(r *replay.Ring)) {
	p.errMu.Lock()
	defer p.errMu.Unlock()
	fn(p.errRing)
}

// PushStdin copies b (the caller may reuse it) into the stdin queue; the stdin pump writes it to the
// child. The server checks credit first, so a push that would make the queue
// exceed Config.StdinWindow is a *StdinOverflowError and queues nothing.
// After the child's pipe failed (the child exited or closed stdin), bytes are
// discarded but counted in StdinConsumed, so a writer never waits forever on
// credit. After CloseStdin it returns ErrStdinClosed; after Destroy,
// ErrDestroyed.
func (p *Process) PushStdin(b []byte) error {
	p.inMu.Lock()
	defer p.inMu.Unlock()
	switch {
	case p.inEnd == stdinStopped:
		return proc.ErrDestroyed
	case p.inEnd == stdinClosing:
		return proc.ErrStdinClosed
	case len(b) == 0:
		return nil
	case p.inQ.len()+len(b) > p.cfg.StdinWindow:
		return &proc.StdinOverflowError{Queued: p.inQ.len(), Pushed: len(b), Window: p.cfg.StdinWindow}
	case p.inPipe == pipeBroken:
		p.inConsumed += int64(len(b))
		p.changed(proc.ChangeStdinPushed)
		return nil
	}
	if p.inQ.len() == 0 {
		// Nothing queued, so the pump is not writing: write what the pipe
		// takes now ourselves, and spare the hand-off to the pump.
		if n := p.writeStdinNowLocked(b); n > 0 {
			p.inConsumed += int64(n)
			p.changed(proc.ChangeStdinPushed)
			if b = b[n:]; len(b) == 0 {
				return nil
			}
		}
	}
	p.inQ.push(b, p.cfg.StdinWindow)
	p.inCond.Signal()
	return nil
}

// writeStdinNowLocked writes what the child's pipe takes of b without
// waiting (the pipe is non-blocking) and returns how much. Any error, even
// EPIPE, writes nothing: the bytes are queued and the pump meets the error
// and handles it as always. p.inMu must be held and the queue empty.
func (p *Process) writeStdinNowLocked(b []byte) int {
	if p.inRaw == nil {
		rc, err := p.stdinW.SyscallConn()
		if err != nil {
			return 0
		}
		p.inRaw = rc
		p.inNowFd = p.writeStdinNowFd // bound once: a closure per call would escape
	}
	p.inNow, p.inNowN = b, 0
	_ = p.inRaw.Write(p.inNowFd)
	p.inNow = nil
	return p.inNowN
}

// writeStdinNowFd is writeStdinNowLocked's RawConn.Write callback, with
// its argument and result in inNow and inNowN.
func (p *Process) writeStdinNowFd(fd uintptr) bool {
	if k, err := syscall.Write(int(fd), p.inNow); err == nil {
		p.inNowN = k
	}
	return true // never wait: what the pipe refuses is queued
}

// CloseStdin half-closes stdin: the pump closes the child's pipe after the
// last queued byte, and the child sees EOF. It is idempotent.
func (p *Process) CloseStdin() error {
	p.inMu.Lock()
	defer p.inMu.Unlock()
	if p.inEnd == stdinOpen {
		p.inEnd = stdinClosing
	}
	p.inCond.Signal()
	return nil
}

// StdinConsumed returns how many pushed bytes have left the queue: written
// to the child's pipe, or discarded after the pipe failed.
func (p *Process) StdinConsumed() int64 {
	p.inMu.Lock()
	defer p.inMu.Unlock()
	return p.inConsumed
}

// StdinBlocked reports whether stdin bytes are waiting because the child's
// pipe is full: the child is not reading its stdin. Every byte that fit is
// in the pipe; the rest waits in the queue. It turns false as soon as the
// child makes room. A change is announced on Notify.
func (p *Process) StdinBlocked() bool {
	p.inMu.Lock()
	defer p.inMu.Unlock()
	return p.inPipe == pipeFull
}

// Done returns a channel closed once, when the exit is published.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exit returns the published exit status; ok is false until it is published.
func (p *Process) Exit() (status proc.ExitStatus, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exit, p.exited
}

// Signal sends sig to the child's whole process group. Only SIGINT, SIGTERM
// and SIGKILL are accepted (*UnsupportedSignalError otherwise). delivered is
// false when the exit was already published or the process destroyed: the
// contract's already_exited. Between the child's death and the published
// exit (a descendant holding stdout, up to Config.ExitWait) the group is
// still signalled, which is how a SIGTERM reaches that descendant. On a
// terminal (Config.TTY) it goes to the terminal's foreground process group
// instead, as the key would, while the terminal has one.
func (p *Process) Signal(sig syscall.Signal) (delivered bool, err error) {
	switch sig {
	case syscall.SIGINT, syscall.SIGTERM, syscall.SIGKILL:
	default:
		return false, &proc.UnsupportedSignalError{Signal: sig}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exited || p.destroy != destroyNone {
		return false, nil
	}
	if p.signalForeground(sig) {
		// On a terminal, to its foreground job, as the key would.
		return true, nil
	}
	if c, ok := initproc.CtlByte(sig); ok && p.ctlW != nil && (sig != syscall.SIGKILL || p.guardian) {
		// The init sends it to the child's group: it handles no signal
		// sent to its own pid (initproc.CtlInt). SIGKILL to a namespace's
		// init ends the namespace at once; to a guardian it would end the
		// guardian, not the child.
		if _, err := p.ctlW.Write([]byte{c}); err != nil {
			return false, nil // the init is gone
		}
		return true, nil
	}
	// The leader is not reaped before destroy moves on, so the group id
	// is still ours.
	if err := syscall.Kill(-p.pid, sig); err != nil {
		if err == syscall.ESRCH {
			return false, nil
		}
		return false, fmt.Errorf("signal process group %d: %w", p.pid, err)
	}
	return true, nil
}

// Destroy tears the process down: SIGKILL to the whole containment (the
// cgroup, the PID namespace or the process group), close our ends of the
// pipes (which unblocks the pumps even if a descendant holds the other
// ends), wait for every goroutine and the reap of the child, and wait until
// nothing of the containment is alive; all within Config.DestroyWait.
//
// It returns nil only when nothing survives, and from then on always nil.
// Otherwise it returns a *SurvivorsError naming the processes still alive,
// or a *DestroyTimeoutError naming the step still pending, and a later call
// kills again and waits again. It is safe concurrently. After it, Exit
// reports the real status (SIGKILL if it was killed). Destroy keeps the
// buffers, so Stdout and Stderr can still be replayed.
func (p *Process) Destroy() error {
	p.destroyMu.Lock()
	defer p.destroyMu.Unlock()
	if p.destroy == destroyDone {
		return nil
	}
	deadline := time.Now().Add(p.cfg.DestroyWait)
	timer := time.NewTimer(p.cfg.DestroyWait)
	defer timer.Stop()
	if p.destroy == destroyNone {
		p.startDestroy()
	} else {
		p.mu.Lock()
		p.kill() // again: something survived the last time
		p.mu.Unlock()
	}
	if err := p.waitGoroutines(timer.C); err != nil {
		return err
	}
	if err := p.waitContainmentGone(deadline); err != nil {
		return err
	}
	p.mu.Lock()
	p.destroy = destroyDone
	p.mu.Unlock()
	return nil
}

// startDestroy is the first Destroy's teardown: stop the pumps, kill the
// containment, let the leader be reaped and close our ends of the pipes.
// p.destroyMu must be held.
func (p *Process) startDestroy() {
	// The stdout pump stops before the kill: the kill closes the child's
	// pipe ends, and the pump must not take the end that causes for the
	// stream's EOF (a destroyed stream has none). Signal delivers nothing
	// from then on.
	p.mu.Lock()
	p.destroy = destroyStarted
	p.outCond.Signal()
	p.kill()
	p.mu.Unlock()

	// The stdin pump stops after it: ending, it closes the child's stdin,
	// and a child that read that EOF before the kill could exit on its own
	// (cat: exit 0), so that a destroyed process's exit would not say
	// SIGKILL (TestDrainSecondSignalMeansNow, under load).
	p.inMu.Lock()
	p.inEnd = stdinStopped
	p.inCond.Signal()
	p.inMu.Unlock()
	close(p.destroyCh) // only now may the leader be reaped

	p.closeStdinW()
	p.stdoutR.Close()
	p.stderrR.Close()
}

// waitGoroutines waits for the pumps and the reap of the child, until stop.
func (p *Process) waitGoroutines(stop <-chan time.Time) error {
	for _, w := range []struct {
		name string
		ch   <-chan struct{}
	}{
		{"stdin pump", p.stdinDone},
		{"stdout pump", p.stdoutDone},
		{"stderr pump", p.stderrDone},
		{"reap of the child", p.waitDone},
	} {
		select {
		case <-w.ch:
			continue
		default:
		}
		select {
		case <-w.ch:
		case <-stop:
			if w.ch == p.waitDone && (p.contain.kind == ContainPIDNamespace || p.contain.kind == ContainProcessGroup) {
				// The init outlives the bound only while its namespace
				// does; a process group's leader is reaped once its
				// group is gone.
				return p.survivors()
			}
			return &proc.DestroyTimeoutError{Wait: p.cfg.DestroyWait, Pending: w.name}
		}
	}
	return nil
}

// kill sends SIGKILL to the whole containment, and to the leader in case it
// moved itself to another group; by the leader's pid only while the
// leader is not reaped. p.mu must be held.
func (p *Process) kill() {
	p.v1.stopForks()
	if p.cgroup != nil {
		_ = p.cgroup.kill()
	} else if p.guardian {
		// Its tree is the guardian's to end, since a descendant may have
		// left the group; it exits once nothing of it is left.
		p.closeCtl()
		return
	}
	if p.reaped {
		return // a process group's leader is reaped once its group is gone
	}
	_ = syscall.Kill(-p.pid, syscall.SIGKILL)
	_ = syscall.Kill(p.pid, syscall.SIGKILL)
}

// waitContainmentGone waits, after the reap of the child, until no process
// of the containment is alive, and removes what is left of it.
func (p *Process) waitContainmentGone(deadline time.Time) error {
	switch p.contain.kind {
	case ContainCgroup:
		empty, err := p.cgroup.waitEmpty(deadline)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("destroy process: cgroup %s: %w", p.cgroup.dir, err)
		}
		if !empty {
			return p.survivors()
		}
		if err := p.cgroup.remove(); err != nil {
			return fmt.Errorf("destroy process: remove cgroup: %w", err)
		}
		_ = p.v1.remove()
	case ContainPIDNamespace:
		// The kernel ends every process of the namespace before its init's
		// exit completes, and the init is reaped: nothing is left.
		_ = p.v1.remove()
	default:
		// The group was gone before the leader's reap (waitChild).
		_ = p.v1.remove()
	}
	return nil
}

// survivors names the processes of the containment still alive, or, when
// none is left by the time it looks, says what was still pending.
func (p *Process) survivors() error {
	e := &proc.SurvivorsError{Wait: p.cfg.DestroyWait}
	var pids []int
	switch p.contain.kind {
	case ContainCgroup:
		e.Containment = "cgroup " + p.cgroup.dir
		pids = p.cgroup.members()
	case ContainPIDNamespace:
		e.Containment = "PID namespace " + p.pidns + " of init " + strconv.Itoa(p.pid)
		pids = initproc.ProcsWhere(func(pid int, _ []string) bool {
			ns, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/pid")
			return err == nil && ns == p.pidns
		})
	default:
		e.Containment = "process group " + strconv.Itoa(p.pid)
		pids = initproc.ProcsWhere(func(_ int, stat []string) bool { return stat[2] == strconv.Itoa(p.pid) })
		if p.guardian {
			e.Containment = "tree of guardian " + strconv.Itoa(p.pid)
			pids = append(pids, initproc.Descendants(p.pid)...)
		}
	}
	if len(pids) == 0 {
		return &proc.DestroyTimeoutError{Wait: p.cfg.DestroyWait, Pending: "death of the " + e.Containment}
	}
	e.Count = len(pids)
	for _, pid := range pids[:min(len(pids), 16)] {
		comm, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
		e.Survivors = append(e.Survivors, proc.Survivor{Pid: pid, Command: strings.TrimSpace(string(comm))})
	}
	return e
}

// admit puts a new child (or its init), pid, in its v1 cgroups and gives
// it the children's oom_score_adj.
func (ct *Containment) admit(pid int, v1 *v1Group) error {
	if err := writeKernFile("/proc/"+strconv.Itoa(pid)+"/oom_score_adj", strconv.AppendInt(nil, int64(ct.childOOM), 10)); err != nil {
		return fmt.Errorf("oom_score_adj: %w", err)
	}
	if v1 != nil {
		return v1.join(pid)
	}
	return nil
}

// closeCtl closes our end of the init's control pipe once: the init
// kills its whole tree and exits.
func (p *Process) closeCtl() {
	if p.ctlW != nil {
		p.ctlClose.Do(func() { p.ctlW.Close() })
	}
}

// closeStdinW closes our end of the child's stdin once.
func (p *Process) closeStdinW() {
	p.stdinWClose.Do(func() { p.stdinW.Close() })
}
