//go:build linux

package bridge

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The init of a process is this program re-executed with argv exactly
// [initArg0] and initEnv as its whole environment: nothing of the request
// is on its command line or in its environment, which any local user can
// read in /proc/PID/cmdline (and ps shows). What to run comes as an
// initPayload over the control pipe, fd ctlFd; the init reports on the
// status pipe, fd statusFd.
const (
	initArg0 = "procwire-init"
	initEnv  = "PROCWIRE_BRIDGE_INIT=1"
	statusFd = 3 // the write end of the status pipe
	ctlFd    = 4 // the read end of the control pipe

	// maxPayload bounds the payload the init reads: more than the kernel's
	// limit on argv and envp together, which the exec would refuse anyway.
	maxPayload = 64 << 20

	// ctlKill, written on the control pipe, asks a guardian init to send
	// SIGKILL to the child's process group.
	ctlKill = 'K'
)

// Modes of the init.
const (
	// initPIDNamespace: the init is pid 1 of a PID namespace of its own;
	// when it exits, the kernel kills every process of the namespace.
	initPIDNamespace = "pid_namespace"
	// initGuardian: the init is an ordinary process and a child subreaper
	// (PR_SET_CHILD_SUBREAPER), so that every descendant that loses its
	// parent becomes its child; it ends them all by walking /proc.
	initGuardian = "guardian"
)

// initPayload is what the server sends the init over the control pipe: a
// 4-byte big-endian length, then this as JSON. The server keeps its end
// open as long as the process is its own; the init reads EOF when the
// server closes it (Destroy) or dies, however it dies, and then kills
// every process of the tree and exits.
type initPayload struct {
	Mode string   `json:"mode"`
	Path string   `json:"path"`
	Argv []string `json:"argv"`
	Env  []string `json:"env"`
	// Rlimits are set in the init before the child is started, which
	// inherits them.
	Rlimits []rlimitSetting `json:"rlimits,omitempty"`
	// Harden is what the init applies to itself before it forks the
	// child, which inherits it (harden_linux.go); nil for none. With it,
	// the init stays root and the child is switched to its user.
	Harden *hardenSpec `json:"harden,omitempty"`
	// Dir is the child's working directory, entered again by the forked
	// child after it switched to its user (the init entered it as root).
	Dir string `json:"dir,omitempty"`
	// TTY: fds 0, 1 and 2 are a terminal's slave; the child becomes a
	// session leader with it as its controlling terminal (ttySysProcAttr).
	TTY bool `json:"tty,omitempty"`
}

// rlimitSetting is one setrlimit(2) call.
type rlimitSetting struct {
	Resource int    `json:"resource"`
	Cur      uint64 `json:"cur"`
	Max      uint64 `json:"max"`
}

// writePayload sends pl on w, the control pipe.
func writePayload(w io.Writer, pl *initPayload) error {
	b, err := json.Marshal(pl)
	if err != nil {
		return err
	}
	if len(b) > maxPayload {
		return fmt.Errorf("init payload of %d bytes exceeds %d", len(b), maxPayload)
	}
	msg := make([]byte, 4+len(b))
	binary.BigEndian.PutUint32(msg, uint32(len(b)))
	copy(msg[4:], b)
	_, err = w.Write(msg)
	return err
}

// readPayload reads the payload writePayload sent.
func readPayload(r io.Reader) (*initPayload, error) {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	size := binary.BigEndian.Uint32(n[:])
	if size > maxPayload {
		return nil, fmt.Errorf("init payload of %d bytes exceeds %d", size, maxPayload)
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, err
	}
	pl := new(initPayload)
	if err := json.Unmarshal(b, pl); err != nil {
		return nil, err
	}
	if pl.Mode != initPIDNamespace && pl.Mode != initGuardian {
		return nil, fmt.Errorf("init mode %q", pl.Mode)
	}
	return pl, nil
}

// MaybeRunInit must be called first in main (and in TestMain of a test
// that starts processes), before anything else runs: when the program was
// re-executed as the init of a process, it runs that init and exits, and
// never returns. Otherwise it returns at once, and marks the program as
// able to serve as an init, which ContainPIDNamespace requires, and
// without which the other containments start the child directly, with
// weaker guarantees when the server dies (README, "Containment").
//
// The init starts the child in its own process group, forwards SIGINT,
// SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 to that group, reaps every
// process of the tree, reports the child's exit to the server, and exits
// when no other process is left. When the server closes the control pipe
// or dies, it kills every process of the tree first.
func MaybeRunInit() {
	initHooked.Store(true)
	if len(os.Args) != 1 || os.Args[0] != initArg0 ||
		len(os.Environ()) != 1 || os.Environ()[0] != initEnv {
		return
	}
	// syscall.Exit, not os.Exit: nothing is buffered, and a binary built
	// with -race would otherwise wait a second before exiting, which is a
	// second more for every destroy of a guardian's process.
	syscall.Exit(runInit())
}

// runInit is the init: it reads its payload, sets itself up, starts the
// child, then forwards signals, obeys the control pipe and reaps until
// nobody is left.
func runInit() int {
	status := os.NewFile(statusFd, "status")
	syscall.CloseOnExec(statusFd)
	syscall.CloseOnExec(ctlFd)
	ctl := os.NewFile(ctlFd, "control")
	fail := func(err error) int {
		var errno syscall.Errno
		if !errors.As(err, &errno) {
			errno = syscall.EINVAL
		}
		reportInit(status, "error %d", int(errno))
		return 1
	}
	pl, err := readPayload(ctl)
	if err != nil {
		return fail(err)
	}
	if err := setUpInit(pl); err != nil {
		return fail(err)
	}
	sigs := make(chan os.Signal, 16)
	pid, err := forkChild(pl, sigs)
	if err != nil {
		return fail(err)
	}
	reportInit(status, "started")
	releaseStdio()
	go forwardSignals(sigs, pid)
	go obeyControl(ctl, pid, pl.Mode)
	return reapAll(pid, status)
}

// reportInit writes one line of the init's status to the server.
func reportInit(status *os.File, format string, a ...any) {
	_, _ = fmt.Fprintf(status, format+"\n", a...)
}

// setUpInit makes a guardian its tree's subreaper and sets the
// containment's rlimits, which the child inherits.
func setUpInit(pl *initPayload) error {
	if pl.Mode == initGuardian {
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			return err
		}
	}
	for _, rl := range pl.Rlimits {
		if err := unix.Setrlimit(rl.Resource, &unix.Rlimit{Cur: rl.Cur, Max: rl.Max}); err != nil {
			return err
		}
	}
	return nil
}

// forkChild hardens the init when asked and starts the child, in a process
// group of its own, on the init's stdio. The signals to forward arrive on
// sigs from just before the fork; until then they end the init.
func forkChild(pl *initPayload, sigs chan<- os.Signal) (int, error) {
	sys := &syscall.SysProcAttr{Setpgid: true}
	if pl.Harden != nil {
		// Locks this goroutine to its thread: the fork below must run on it.
		if err := harden(*pl.Harden); err != nil {
			return 0, err
		}
		pl.Harden.sysProcAttr(sys)
	}
	if pl.TTY {
		ttySysProcAttr(sys)
	}
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2)
	closeOnExecFrom3()
	return syscall.ForkExec(pl.Path, pl.Argv, &syscall.ProcAttr{
		Env:   pl.Env,
		Files: []uintptr{0, 1, 2},
		Dir:   pl.Dir,
		Sys:   sys,
	})
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

// forwardSignals passes the signals the init receives on to the child's
// process group.
func forwardSignals(sigs <-chan os.Signal, pid int) {
	for s := range sigs {
		_ = syscall.Kill(-pid, s.(syscall.Signal))
	}
}

// obeyControl reads the control pipe: a kill request, or EOF when the
// server is done with the process or gone, upon which it sweeps the tree.
func obeyControl(ctl *os.File, pid int, mode string) {
	buf := make([]byte, 64)
	for {
		n, err := ctl.Read(buf)
		for _, c := range buf[:n] {
			if c == ctlKill {
				_ = syscall.Kill(-pid, syscall.SIGKILL)
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		if err != nil {
			sweep(mode)
			return
		}
	}
}

// reapAll reaps every process that ends under the init, reports the
// child's exit on status, and returns once nobody is left to wait for.
func reapAll(pid int, status *os.File) int {
	for {
		var ws syscall.WaitStatus
		wpid, err := syscall.Wait4(-1, &ws, 0, nil)
		switch {
		case err == syscall.EINTR:
			continue
		case err != nil:
			// ECHILD: the namespace, or for a subreaper the tree, holds
			// nobody else.
			return 0
		case wpid != pid:
		case ws.Signaled():
			reportInit(status, "signal %d", int(ws.Signal()))
			status.Close()
		default:
			reportInit(status, "exit %d", ws.ExitStatus())
			status.Close()
		}
	}
}

// sweep kills every process of the init's tree; the init's wait loop then
// reaps them and exits. In a PID namespace, kill(-1) reaches every process
// of the namespace but the init. A guardian kills its descendants, found
// through /proc, until none is left: one that forks meanwhile dies, and its
// children, reparented to the subreaper, are found by the next walk.
func sweep(mode string) {
	if mode == initPIDNamespace {
		_ = syscall.Kill(-1, syscall.SIGKILL)
		return
	}
	me := os.Getpid()
	for backoff := time.Duration(0); ; backoff = min(max(2*backoff, time.Millisecond), 64*time.Millisecond) {
		pids := descendants(me)
		if len(pids) == 0 {
			return
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		// A process killed in uninterruptible sleep dies only when it
		// wakes: look again, less and less often.
		time.Sleep(backoff)
	}
}

// descendants lists the live descendants of root, from /proc.
func descendants(root int) []int {
	parent := map[int]int{}
	procsWhere(func(pid int, stat []string) bool {
		parent[pid], _ = strconv.Atoi(stat[1])
		return false
	})
	var out []int
	for pid := range parent {
		for p, n := parent[pid], 0; p != 0 && n < 1<<16; p, n = parent[p], n+1 {
			if p == root {
				out = append(out, pid)
				break
			}
		}
	}
	return out
}

// initStatus reads one line the init reported: "started", "error N",
// "exit N" or "signal N".
func initStatus(r *bufio.Reader) (word string, n int, err error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", 0, err
	}
	word, num, _ := strings.Cut(strings.TrimSuffix(line, "\n"), " ")
	if num != "" {
		if n, err = strconv.Atoi(num); err != nil {
			return "", 0, fmt.Errorf("init reported %q", line)
		}
	}
	return word, n, nil
}
