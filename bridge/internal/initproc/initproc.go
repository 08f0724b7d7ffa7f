//go:build linux

// Package initproc is the init that procwire starts each child under: this
// program re-executed with argv exactly [Arg0] and Env as its whole
// environment. It reads its Payload on the control pipe (CtlFd) in two
// messages: its set-up, which it applies to itself before it reports
// "ready" on the status pipe (StatusFd), and its child, which it starts in
// a process group of its own before it reports "started". It then forwards
// signals to the child, reports its exit, reaps every process of its tree,
// and kills that tree when the server closes the control pipe or dies.
//
// The init runs from this package's initialisation, not from main: the Go
// specification initialises a package as soon as its imports are, in
// import-path order, so a package that imports only a few light standard
// packages (os, os/signal, strconv, syscall and the like; see
// TestImportsStayLight) runs long before the server's heavy ones (crypto,
// net/http, the metrics registry), which a re-executed init never needs.
// That makes the re-execution of a server binary as an init cost about a
// fifth of what reaching main does (README, "Cold first byte").
//
// Its goroutines: the main one forks the child and then reaps; one reads
// the control pipe, signals the child's group as it asks, and sweeps the
// tree at its EOF; a guardian has one more, which forwards the signals it
// receives to the child's group. The main one reaps the child, and the
// others signal its group by its id, under the child's lock (leader.mu),
// the one lock: the id is nobody else's until the reap.
package initproc

import (
	"errors"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// How the server re-executes itself as an init, and what it passes: the
// request is never on the init's command line or in its environment,
// which any local user can read in /proc/PID/cmdline.
const (
	Arg0     = "procwire-init"
	Env      = "PROCWIRE_BRIDGE_INIT=1"
	StatusFd = 3 // the write end of the status pipe
	CtlFd    = 4 // the read end of the control pipe

	// Written on the control pipe, CtlInt, CtlTerm and CtlKill ask the
	// init to send SIGINT, SIGTERM or SIGKILL to the child's process group.
	// The server signals the child this way, not through the init's pid:
	// the init then needs no signal handling of its own (os/signal's
	// goroutine and threads), and the request reaches this init or none.
	CtlInt  = 'I'
	CtlTerm = 'T'
	CtlKill = 'K'
)

// ctlBytes pairs each control pipe byte with the signal it asks for; the
// server's CtlByte and the init's CtlSignal both read it.
var ctlBytes = [...]struct {
	c   byte
	sig syscall.Signal
}{{CtlInt, syscall.SIGINT}, {CtlTerm, syscall.SIGTERM}, {CtlKill, syscall.SIGKILL}}

// CtlByte is the control pipe's byte asking an init for sig; ok is false
// for a signal the pipe does not carry.
func CtlByte(sig syscall.Signal) (c byte, ok bool) {
	for _, b := range ctlBytes {
		if b.sig == sig {
			return b.c, true
		}
	}
	return 0, false
}

// CtlSignal is the signal the control pipe's byte c asks for; ok is false
// for a byte that asks for none.
func CtlSignal(c byte) (sig syscall.Signal, ok bool) {
	for _, b := range ctlBytes {
		if b.c == c {
			return b.sig, true
		}
	}
	return 0, false
}

// Modes of the init.
const (
	// ModePIDNamespace: the init is pid 1 of a PID namespace of its own;
	// when it exits, the kernel kills every process of the namespace.
	ModePIDNamespace = "pid_namespace"
	// ModeGuardian: the init is an ordinary process and a child subreaper
	// (PR_SET_CHILD_SUBREAPER), so that every descendant that loses its
	// parent becomes its child; it ends them all by walking /proc.
	ModeGuardian = "guardian"
)

// prctl(2) options.
const (
	prSetDumpable        = 4
	prCapbsetDrop        = 24
	prSetChildSubreaper  = 36
	prSetNoNewPrivs      = 38
	prCapAmbient         = 47
	prCapAmbientClearAll = 4
)

func init() {
	if Is() {
		// syscall.Exit, not os.Exit: nothing is buffered, and a binary
		// built with -race would otherwise wait a second before exiting,
		// which is a second more for every destroy of a guardian's
		// process.
		syscall.Exit(run())
	}
}

// Is reports whether this process was started as an init.
func Is() bool {
	env := os.Environ()
	if len(os.Args) != 1 || os.Args[0] != Arg0 || len(env) != len(Environ) {
		return false
	}
	for i := range env {
		if env[i] != Environ[i] {
			return false
		}
	}
	return true
}

// Environ is the init's whole environment: Env, and what makes the Go
// runtime start small. One P, since the init mostly sleeps; no
// collection before the heap reaches GOMEMLIMIT, since an init allocates
// next to nothing (a sweep of a large tree some, which the limit bounds).
var Environ = []string{Env, "GOMAXPROCS=1", "GOGC=off", "GOMEMLIMIT=32MiB"}

// run is the init: it reads its set-up, applies it and reports "ready";
// reads its child, starts it and reports "started"; then forwards
// signals, obeys the control pipe and reaps until nobody is left.
func run() int {
	status := os.NewFile(StatusFd, "status")
	syscall.CloseOnExec(StatusFd)
	syscall.CloseOnExec(CtlFd)
	ctl := os.NewFile(CtlFd, "control")
	fail := func(err error) int {
		var errno syscall.Errno
		if !errors.As(err, &errno) {
			errno = syscall.EINVAL
		}
		report(status, "error", int(errno))
		return 1
	}
	pl, err := ReadSetup(ctl)
	if err != nil {
		return fail(err)
	}
	// The server signals the child through the control pipe. A signal
	// sent to a guardian's pid by someone else is forwarded to the child's
	// group: it would otherwise end the guardian and leave its tree
	// unswept. A namespace's pid 1 ignores it once the child is forked, as
	// the kernel has any pid 1 without a handler do: Notify's goroutine
	// and its threads cost each start about a millisecond of CPU.
	var sigs chan os.Signal
	if pl.Mode == ModeGuardian {
		sigs = make(chan os.Signal, 16)
		signal.Notify(sigs, strays...)
	}
	if err := setUp(pl); err != nil {
		return fail(err)
	}
	report(status, "ready", -1)
	if err := ReadChild(ctl, pl); err != nil {
		return fail(err)
	}
	pid, err := forkChild(pl)
	if err != nil {
		return fail(err)
	}
	report(status, "started", -1)
	releaseStdio()
	child := &leader{pid: pid, byNumber: pl.Mode == ModePIDNamespace}
	if sigs != nil {
		go forwardSignals(sigs, child)
	} else {
		// After the fork: the child must not inherit SIG_IGN.
		signal.Ignore(strays...)
	}
	go obeyControl(ctl, child, pl.Mode)
	return reapAll(child, status)
}

// leader is the child, the leader of its process group, whose id is the
// child's pid. While the child is not reaped its pid, and so the group's
// id, is nobody else's, and kill(-pid) reaches exactly its group. Once it
// is reaped, and its group has emptied, the number is free for the kernel
// to give another process, which may lead a group of its own: a
// guardian's kill(-pid) could then end a process outside its tree (in a
// PID namespace only the tree's own processes can take the number). The
// reap and every signal by number therefore hold mu; a guardian signals
// what is left of the group, once the child is reaped, one process at a
// time through pidfds.
type leader struct {
	pid      int
	byNumber bool // in a PID namespace: the number stays the tree's
	mu       sync.Mutex
	reaped   bool
}

// signal sends sig to the child's process group, and with SIGKILL to the
// child itself, should it have left its group.
func (l *leader) signal(sig syscall.Signal) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.reaped || l.byNumber {
		_ = syscall.Kill(-l.pid, sig)
		if sig == syscall.SIGKILL && !l.reaped {
			_ = syscall.Kill(l.pid, sig)
		}
		return
	}
	me := os.Getpid()
	for _, id := range descendants(me) {
		if id.pgrp == l.pid {
			id.signal(sig)
		}
	}
}

// reap reaps the child, which has exited, into ws.
func (l *leader) reap(ws *syscall.WaitStatus) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for {
		if _, err := syscall.Wait4(l.pid, ws, 0, nil); err != syscall.EINTR {
			break
		}
	}
	l.reaped = true
}

// report writes one line of the init's status to the server: the word,
// then n unless it is negative.
func report(status *os.File, word string, n int) {
	line := append([]byte(word), ' ')
	if n < 0 {
		line = line[:len(line)-1]
	} else {
		line = strconv.AppendInt(line, int64(n), 10)
	}
	_, _ = status.Write(append(line, '\n'))
}

// setUp applies the payload's set-up to the init, which the child it
// forks inherits: a guardian becomes its tree's subreaper, the
// containment's rlimits are set, and the init hardens itself when asked
// (Harden.Apply, which locks the calling goroutine, the main one, to its
// thread: forkChild must run on it).
func setUp(pl *Payload) error {
	if pl.Mode == ModeGuardian {
		if err := prctl(prSetChildSubreaper, 1); err != nil {
			return err
		}
	}
	for _, rl := range pl.Rlimits {
		if err := syscall.Setrlimit(rl.Resource, &syscall.Rlimit{Cur: rl.Cur, Max: rl.Max}); err != nil {
			return err
		}
	}
	if pl.Harden != nil {
		return pl.Harden.Apply()
	}
	return nil
}

// forkChild starts the child, in a process group of its own, on the
// init's stdio, as its user when hardened.
func forkChild(pl *Payload) (int, error) {
	sys := &syscall.SysProcAttr{Setpgid: true}
	if pl.Harden != nil {
		pl.Harden.SysProcAttr(sys)
	}
	if pl.TTY {
		TTYSysProcAttr(sys)
	}
	CloseOnExecFrom3()
	return syscall.ForkExec(pl.Path, pl.Argv, &syscall.ProcAttr{
		Env:   pl.Env,
		Files: []uintptr{0, 1, 2},
		Dir:   pl.Dir,
		Sys:   sys,
	})
}

// TTYSysProcAttr makes the forked child a session leader with its fd 0,
// the slave, as its controlling terminal, in place of a process group of
// its own (setpgid would fail in a session leader).
func TTYSysProcAttr(sys *syscall.SysProcAttr) {
	sys.Setpgid = false
	sys.Setsid = true
	sys.Setctty = true
	sys.Ctty = 0
}

// releaseStdio points the init's stdio at /dev/null: it holds none of the
// child's, whose EOF is the child's to give.
func releaseStdio() {
	if null, err := syscall.Open("/dev/null", syscall.O_RDWR|syscall.O_CLOEXEC, 0); err == nil {
		for fd := range 3 {
			_ = syscall.Dup3(null, fd, 0)
		}
		syscall.Close(null)
	}
}

// strays are the signals someone other than the server may send an init
// that a guardian forwards to its child's group and a namespace's pid 1
// ignores; the server's own go through the control pipe.
var strays = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2}

// forwardSignals passes the signals the init receives on to the child's
// process group.
func forwardSignals(sigs <-chan os.Signal, child *leader) {
	for s := range sigs {
		child.signal(s.(syscall.Signal))
	}
}

// obeyControl reads the control pipe: signals for the child's group, or
// EOF when the server is done with the process or gone, upon which it
// sweeps the tree.
func obeyControl(ctl *os.File, child *leader, mode string) {
	buf := make([]byte, 64)
	for {
		n, err := ctl.Read(buf)
		for _, c := range buf[:n] {
			if sig, ok := CtlSignal(c); ok {
				child.signal(sig)
			}
		}
		if err != nil {
			sweep(mode, child)
			return
		}
	}
}

// reapAll reaps every process that ends under the init, reports the
// child's exit on status, and returns once nobody is left to wait for. It
// learns which process ended before it reaps it (waitid's WNOWAIT), so
// that it reaps the child only under the child's lock (leader).
func reapAll(child *leader, status *os.File) int {
	for {
		wpid, err := waitable()
		switch {
		case err == syscall.EINTR:
			continue
		case err != nil:
			// ECHILD: the namespace, or for a subreaper the tree, holds
			// nobody else.
			return 0
		case wpid != child.pid:
			var ws syscall.WaitStatus
			_, _ = syscall.Wait4(wpid, &ws, 0, nil)
			continue
		}
		var ws syscall.WaitStatus
		child.reap(&ws)
		if ws.Signaled() {
			report(status, "signal", int(ws.Signal()))
		} else {
			report(status, "exit", ws.ExitStatus())
		}
		status.Close()
	}
}

// waitid(2)'s options, and where its siginfo_t holds the pid: after
// si_signo, si_errno and si_code, the union, aligned like a pointer, whose
// SIGCHLD fields are si_pid, si_uid and si_status (mips orders the header
// differently, not the union).
const (
	WExited  = 0x4
	WNoHang  = 0x1
	WNoWait  = 0x1000000
	SiPidOff = (12 + unsafe.Sizeof(uintptr(0)) - 1) &^ (unsafe.Sizeof(uintptr(0)) - 1)
)

// waitable waits until a child of the init has ended and returns its pid,
// leaving it to be reaped (waitid(P_ALL, WEXITED|WNOWAIT)).
func waitable() (int, error) {
	const pAll = 0
	var info [32]int32 // siginfo_t, 128 bytes
	if _, _, e := syscall.Syscall6(syscall.SYS_WAITID, pAll, 0, uintptr(unsafe.Pointer(&info)), WExited|WNoWait, 0, 0); e != 0 {
		return 0, e
	}
	return int(info[SiPidOff/4]), nil
}

// sweep kills every process of the init's tree; the init's wait loop then
// reaps them and exits. In a PID namespace, kill(-1) reaches every process
// of the namespace but the init. A guardian first kills the child's
// process group (leader.signal): while the child is not reaped, in one
// call, and atomically, since a fork in the group fails once the kill is
// pending, which ends a fork bomb that stays in its group however fast it
// forks. It then kills its descendants, found through /proc, until none is
// left: one that left the group and forks meanwhile dies, and its
// children, reparented to the subreaper, are found by the next walk.
func sweep(mode string, child *leader) {
	if mode == ModePIDNamespace {
		_ = syscall.Kill(-1, syscall.SIGKILL)
		return
	}
	child.signal(syscall.SIGKILL)
	me := os.Getpid()
	for backoff := time.Duration(0); ; backoff = min(max(2*backoff, time.Millisecond), 64*time.Millisecond) {
		procs := descendants(me)
		if len(procs) == 0 {
			return
		}
		for _, id := range procs {
			id.signal(syscall.SIGKILL)
		}
		// A process killed in uninterruptible sleep dies only when it
		// wakes: look again, less and less often.
		time.Sleep(backoff)
	}
}

// prctl calls prctl(2) with one argument.
func prctl(option, arg uintptr) error {
	if _, _, e := syscall.RawSyscall6(syscall.SYS_PRCTL, option, arg, 0, 0, 0, 0); e != 0 {
		return e
	}
	return nil
}
