//go:build linux

package bridge

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/procwire/procwire/bridge/internal/initproc"
	"github.com/procwire/procwire/proc"
	"github.com/procwire/procwire/replay"
	"golang.org/x/sys/unix"
)

// Start starts req in DefaultContainment; see Containment.Start.
func Start(req proc.Request, cfg *proc.Config) (*Process, error) {
	return DefaultContainment().Start(req, cfg)
}

// Start validates req, starts the child in the containment and starts its
// pumps. A nil cfg means DefaultConfig. Validation and start failures are
// *StartError.
//
// The child runs in a new process group under an init of ours (see
// MaybeRunInit and Containment.initMode), which leads the group the server
// sees and ends the child's whole tree when the server dies; as cfg.RunAs
// when set, with only stdin, stdout and stderr open, with the limits of the
// containment and at its children's oom_score_adj. Without an init (a
// program that does not call MaybeRunInit) the child itself leads the
// group, with Pdeathsig SIGKILL (Linux ties Pdeathsig to the thread that
// forked; Go ends a thread only when a goroutine locked to it exits without
// unlocking). Signals the server ignores (SIG_IGN) stay ignored in the
// child, as with any exec; signals the Go runtime handles are reset to their
// defaults. With cfg.TTY the child runs on a pseudo-terminal instead of
// pipes, as the leader of a new session (pty_linux.go).
//
// It goes in steps, each a method of launch: check the request, open the
// child's stdio, make its cgroups, prepare its init, fork, admit it to its
// cgroups, hand the init its payload, and make the Process. With a warm
// init (ContainOptions.WarmInit, warm.go) every step before the hand-over
// was made ahead, and the init applied the payload's set-up: the hand-over
// sends only the child.
func (ct *Containment) Start(req proc.Request, cfg *proc.Config) (*Process, error) {
	l, err := ct.checkRequest(req, cfg)
	if err != nil {
		return nil, err
	}
	taken, refill := ct.takeWarm(l)
	if err := l.launch(taken); err != nil {
		refill()
		return nil, err
	}
	return l.process(refill), nil
}

// launch starts the child: under the warm init l took (warm), or under a
// new one.
func (l *launch) launch(warm bool) error {
	if warm {
		// The init runs already, admitted and set up: it only needs its child.
		l.started = time.Now()
		if err := l.handOver(true); err != nil {
			return l.fail(err)
		}
		return nil
	}
	if err := l.openStdio(); err != nil {
		l.closeAll()
		return startFailure(proc.ReasonStartFailed, err)
	}
	l.setAttr()
	err := l.makeCgroups()
	if l.cgFD >= 0 {
		defer syscall.Close(l.cgFD) // after the fork, or the failure
	}
	if err != nil {
		return l.fail(startFailure(proc.ReasonStartFailed, err))
	}
	if err := l.prepareInit(); err != nil {
		return l.fail(startFailure(proc.ReasonStartFailed, err))
	}
	if err := l.fork(); err != nil {
		return l.fail(forkFailure(err))
	}
	if err := l.admit(); err != nil {
		return l.fail(err)
	}
	if err := l.handOver(false); err != nil {
		return l.fail(err)
	}
	return nil
}

// launch is a start in progress: what Containment.Start's steps make and
// hand on, and what a failure must undo.
type launch struct {
	ct     *Containment
	c      proc.Config
	limits Limits   // the containment's, tightened by the config's
	dir    string   // the working directory
	env    []string // the child's environment, never nil
	path   string   // the child's executable
	argv   []string

	files                []*os.File // every pipe end, closed on failure
	inR, inW, outR, outW *os.File   // stdin and stdout, or the terminal
	ttyNr                string     // the terminal's tty_nr (ptyPair)
	errR, errW           *os.File
	statusR, statusW     *os.File // under an init: its status pipe
	ctlR, ctlW           *os.File // under an init: its control pipe
	sys                  *syscall.SysProcAttr
	attr                 *syscall.ProcAttr
	execPath             string // what is forked: the child, or the init
	execArgv             []string
	pidFD                int // set by the fork
	cgFD                 int // ContainCgroup: the cgroup's directory, for the fork; else -1
	cg                   *cgroup
	v1                   *v1Group
	mode                 string // the init's mode, "" without an init
	pid                  int
	started              time.Time
	pfd                  *pidfd
	status               *bufio.Reader // on statusR
}

// checkRequest validates the config and the request and resolves the
// executable as the child's user would.
func (ct *Containment) checkRequest(req proc.Request, cfg *proc.Config) (*launch, error) {
	c, err := cfg.Resolve()
	if err != nil {
		return nil, fmt.Errorf("start process: %w", err)
	}
	if err := checkDir(req.WorkingDirectory, c.RunAs); err != nil {
		return nil, err
	}
	env, err := buildEnv(req.Environment)
	if err != nil {
		return nil, err
	}
	path, err := resolveExecutable(&req, c.RunAs)
	if err != nil {
		return nil, err
	}
	argv := append([]string{req.Executable}, req.Arguments...)
	return &launch{ct: ct, c: c, limits: ct.Limits().Tighten(c.Limits), dir: req.WorkingDirectory,
		env: env, path: path, argv: argv, pidFD: -1, cgFD: -1}, nil
}

// pipe opens a pipe whose ends closeAll closes.
func (l *launch) pipe() (r, w *os.File, err error) {
	r, w, err = os.Pipe()
	if err == nil {
		l.files = append(l.files, r, w)
	}
	return r, w, err
}

// closeAll closes every pipe end opened.
func (l *launch) closeAll() {
	for _, f := range l.files {
		f.Close()
	}
}

// openStdio opens the child's stdin, stdout and stderr: pipes, or a
// terminal for stdin and stdout.
func (l *launch) openStdio() (err error) {
	if l.c.TTY != nil {
		// The slave is the child's stdin and stdout (and stderr, below).
		pt, err := openPTY(l.c.TTY, l.c.RunAs)
		if err != nil {
			return err
		}
		l.files = append(l.files, pt.master, pt.masterW, pt.slave)
		l.ttyNr = pt.ttyNr
		l.inR, l.inW, l.outR, l.outW = pt.slave, pt.masterW, pt.master, pt.slave
	} else {
		if l.inR, l.inW, err = l.pipe(); err != nil {
			return err
		}
		if l.outR, l.outW, err = l.pipe(); err != nil {
			return err
		}
		growPipe(l.outR, stdoutPipeSize)
	}
	l.errR, l.errW, err = l.pipe()
	return err
}

// stdoutPipeSize is the capacity asked for the child's stdout pipe, in
// place of the kernel's 64 KiB: a child writing fast then runs up to a
// MiB ahead of the pump, which reads it in fewer, fuller reads with fewer
// wake-ups of both (bulk stdout about a tenth faster here). The pipe's
// pages are the kernel's, charged to the writer, the child, and only
// while they hold unread bytes; a child whose window is full blocks once
// the pipe is full too, as before.
const stdoutPipeSize = 1 << 20

// growPipe asks for a pipe of size bytes. A refusal (a user past
// /proc/sys/fs/pipe-user-pages-soft without CAP_SYS_RESOURCE, a size past
// pipe-max-size) keeps the pipe as it is.
func growPipe(f *os.File, size int) {
	if rc, err := f.SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) { _, _ = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, size) })
	}
}

// setAttr sets what the fork of the child needs: its group, user, stdio,
// directory and environment.
func (l *launch) setAttr() {
	l.sys = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, PidFD: &l.pidFD}
	if u := l.c.RunAs; u != nil {
		l.sys.Credential = &syscall.Credential{Uid: u.UID, Gid: u.GID, Groups: append([]uint32{}, u.Groups...)}
	}
	// Fd puts the child's ends in blocking mode, as a child expects; ours
	// stay non-blocking, on the poller, so Close unblocks a pending Read.
	l.attr = &syscall.ProcAttr{
		Dir:   l.dir,
		Env:   l.env, // never nil, so nothing is inherited
		Files: []uintptr{l.inR.Fd(), l.outW.Fd(), l.errW.Fd()},
		Sys:   l.sys,
	}
	if l.c.TTY != nil {
		// A terminal merges stderr into stdout: the stderr pipe only
		// gives its EOF, at once.
		l.attr.Files[2] = l.outW.Fd()
		initproc.TTYSysProcAttr(l.sys)
	}
	l.execPath, l.execArgv = l.path, l.argv
}

// makeCgroups makes the process's own cgroup, which the fork puts the
// child in, and its v1 cgroups for limits. The caller closes cgFD; fail
// removes both.
func (l *launch) makeCgroups() error {
	ct := l.ct
	name := fmt.Sprintf("%s-%d", ct.owner, cgroupSeq.Add(1))
	if ct.kind == ContainCgroup {
		cg, fd, err := ct.newCgroup(name, l.limits)
		if err != nil {
			return err
		}
		l.cg, l.cgFD = cg, fd
		l.sys.UseCgroupFD, l.sys.CgroupFD = true, fd
	}
	if ct.lim.active() && len(ct.lim.v1) > 0 {
		v1, err := ct.lim.newV1(name, l.limits)
		if err != nil {
			return err
		}
		l.v1 = v1
	}
	return nil
}

// prepareInit, when the containment runs the child under an init, makes
// the fork start the init instead, with its status and control pipes.
func (l *launch) prepareInit() (err error) {
	l.mode = l.ct.initMode()
	if l.mode == "" {
		return nil
	}
	// The init gets nothing of the request on its command line or in its
	// environment: both are world-readable in /proc. They follow on the
	// control pipe.
	if l.statusR, l.statusW, err = l.pipe(); err == nil {
		l.ctlR, l.ctlW, err = l.pipe()
	}
	if err != nil {
		return err
	}
	sys := l.sys
	if l.mode == initproc.ModePIDNamespace {
		sys.Cloneflags |= syscall.CLONE_NEWPID
	} else {
		// A guardian must outlive the server long enough to end its
		// tree; it learns of the server's death by EOF on the control
		// pipe.
		sys.Pdeathsig = 0
	}
	l.attr.Files = append(l.attr.Files, l.statusW.Fd(), l.ctlR.Fd())
	l.attr.Env = initproc.Environ
	l.execPath, l.execArgv = "/proc/self/exe", []string{initproc.Arg0}
	if l.c.TTY != nil {
		// The init is no session leader: its child is.
		sys.Setsid, sys.Setctty, sys.Setpgid = false, false, true
	}
	if hardenFor(&l.c) != nil {
		// The init stays root, to drop the child's capabilities; the
		// child is switched to its user (payload.Harden.Cred).
		sys.Credential = nil
	}
	return nil
}

// fork starts the child (or its init) and closes the ends it was given.
func (l *launch) fork() (err error) {
	initproc.CloseOnExecFrom3()
	l.pid, err = syscall.ForkExec(l.execPath, l.execArgv, l.attr)
	l.started = time.Now()
	l.inR.Close()
	l.outW.Close()
	l.errW.Close()
	if l.statusW != nil {
		l.statusW.Close()
		l.ctlR.Close()
	}
	return err
}

// fail undoes a start that opened its stdio: it closes every pipe end and
// removes the cgroups made.
func (l *launch) fail(err error) error {
	l.closeAll()
	if l.cg != nil {
		_ = l.cg.remove()
	}
	_ = l.v1.remove()
	return err
}

// admit admits the forked child (or init) to its v1 cgroups and
// oom_score_adj and opens its pidfd. A child started without an init may
// have forked before, or be gone already, which is why its admission
// error is ignored: it and its descendants are bounded from then on. An
// init waits for its payload, so it is admitted before it starts
// anything, or killed and reaped on an error.
func (l *launch) admit() error {
	admitErr := l.ct.admit(l.pid, l.v1)
	pfd, err := newPidfd(l.pidFD)
	if err != nil {
		// Without a pidfd the child cannot be waited for: end it.
		_ = syscall.Kill(-l.pid, syscall.SIGKILL)
		_ = syscall.Kill(l.pid, syscall.SIGKILL)
		_, _ = syscall.Wait4(l.pid, nil, 0, nil)
		if l.cg != nil {
			_ = l.cg.kill()
			_, _ = l.cg.waitEmpty(time.Now().Add(l.c.DestroyWait))
		}
		return startFailure(proc.ReasonStartFailed, err)
	}
	l.pfd = pfd
	if l.statusR == nil {
		return nil
	}
	l.status = bufio.NewReaderSize(l.statusR, 64) // lines of a few bytes: "started", "exit 3"
	if admitErr != nil {
		l.abandon()
		return startFailure(proc.ReasonStartFailed, fmt.Errorf("admit the init: %w", admitErr))
	}
	return nil
}

// payload is what the init of l's process is sent: its set-up, and the
// child to start.
func (l *launch) payload() *initproc.Payload {
	return &initproc.Payload{Mode: l.ct.initMode(), Path: l.path, Argv: l.argv, Env: l.env, Harden: hardenFor(&l.c), Dir: l.dir,
		Rlimits: l.ct.lim.rlimits(l.limits), TTY: l.c.TTY != nil}
}

// sendSetup, under an init, sends it the payload's set-up, which it
// applies to itself while it waits for its child: a warm init's. Its
// "ready" is read by handOver.
func (l *launch) sendSetup() error {
	if l.statusR == nil {
		return nil
	}
	return initproc.WriteSetup(l.ctlW, l.payload())
}

// handOver, under an init, sends it the child to start (the whole payload
// when setUp is false: its set-up was not sent ahead) and waits for it to
// say it is set up, then that it started the child. On an error the init
// is killed and reaped.
func (l *launch) handOver(setUp bool) error {
	if l.statusR == nil {
		return nil
	}
	pl := l.payload()
	var err error
	if setUp {
		err = initproc.WriteChild(l.ctlW, pl)
	} else {
		err = initproc.WritePayload(l.ctlW, pl)
	}
	if err != nil {
		// A warm init that failed its set-up reported why, then exited,
		// which is why the write failed: its report is the start's error.
		if serr := l.expect("ready"); serr != nil {
			return serr
		}
		l.abandon()
		return startFailure(proc.ReasonStartFailed, fmt.Errorf("hand the init its child: %w", err))
	}
	if err := l.expect("ready"); err != nil {
		return err
	}
	return l.expect("started")
}

// expect reads the init's next status line, which must be want: anything
// else ends the init (abandon) and is the start's error.
func (l *launch) expect(want string) error {
	word, n, err := readStatus(l.status)
	if err == nil && word == want {
		return nil
	}
	l.abandon()
	if err == nil && word == "error" {
		return forkFailure(syscall.Errno(n))
	}
	return startFailure(proc.ReasonStartFailed, fmt.Errorf("init of the PID namespace: %q, %w", word, err))
}

// firstOutputWait is how long a warm init's making (takeWarm) waits for
// the first output of the process started before it: about what an init
// takes to start here. A child that prints at once, as most commands do,
// gets its first byte out without an init starting beside it.
var firstOutputWait = 20 * time.Millisecond

// abandon kills and reaps an init that was admitted but started nothing
// the server keeps.
func (l *launch) abandon() {
	_ = syscall.Kill(l.pid, syscall.SIGKILL)
	if _, werr := l.pfd.waitExited(); werr == nil {
		_ = l.pfd.reap()
	}
	_ = l.pfd.close()
}

// process makes the Process of a confirmed start and starts its
// goroutines. firstOutput is called once the child's first output (or
// the end of its stdout) has been read and handed on, or after
// firstOutputWait, whichever comes first: the next warm init is made then
// (takeWarm).
func (l *launch) process(firstOutput func()) *Process {
	p := &Process{
		cfg:        l.c,
		pid:        l.pid,
		pidfd:      l.pfd,
		ttyNr:      l.ttyNr,
		contain:    l.ct,
		cgroup:     l.cg,
		statusR:    l.statusR,
		status:     l.status,
		ctlW:       l.ctlW,
		v1:         l.v1,
		guardian:   l.mode == initproc.ModeGuardian,
		startedAt:  l.started,
		notify:     make(chan struct{}, 1),
		stdinW:     l.inW,
		stdoutR:    l.outR,
		stderrR:    l.errR,
		out:        replay.New(l.c.StdoutWindow),
		errRing:    replay.NewRing(l.c.StderrRing),
		done:       make(chan struct{}),
		destroyCh:  make(chan struct{}),
		stdinDone:  make(chan struct{}),
		stdoutDone: make(chan struct{}),
		stderrDone: make(chan struct{}),
		waitDone:   make(chan struct{}),
	}
	if l.mode == initproc.ModePIDNamespace {
		p.pidns, _ = os.Readlink("/proc/" + strconv.Itoa(l.pid) + "/ns/pid")
	}
	p.firstOutput = sync.OnceFunc(firstOutput)
	time.AfterFunc(firstOutputWait, p.firstOutput)
	p.inCond = sync.NewCond(&p.inMu)
	p.outCond = sync.NewCond(&p.mu)
	go p.pumpStdin()
	go p.pumpStdout()
	go p.pumpStderr()
	go p.waitChild()
	return p
}
