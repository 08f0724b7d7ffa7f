//go:build linux

package bridge

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
)

// The init of a PID namespace is this program re-executed with argv[0]
// initArg0 and initEnv as its whole environment; its arguments are the
// child's path, argument count, arguments and environment.
const (
	initArg0 = "procwire-init"
	initEnv  = "PROCWIRE_BRIDGE_INIT=1"
	initFd   = 3 // the write end of the status pipe
)

// MaybeRunInit must be called first in main (and in TestMain of a test
// that starts processes), before anything else runs: when the program was
// re-executed as the init of a process's PID namespace, it runs that init
// and exits, and never returns. Otherwise it returns at once, and marks the
// program as able to serve as an init, which ContainPIDNamespace requires.
//
// The init starts the child in its own process group, forwards SIGINT,
// SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 to that group, reaps every
// process of the namespace, reports the child's exit to the server, and
// exits when no other process is left, which ends the namespace.
func MaybeRunInit() {
	initHooked.Store(true)
	if os.Getpid() != 1 || len(os.Args) < 3 || os.Args[0] != initArg0 ||
		len(os.Environ()) != 1 || os.Environ()[0] != initEnv {
		return
	}
	os.Exit(runInit(os.Args[1:]))
}

// initArgs builds the init's arguments for a child.
func initArgs(path string, argv, env []string) []string {
	args := make([]string, 0, 3+len(argv)+len(env))
	args = append(args, initArg0, path, strconv.Itoa(len(argv)))
	args = append(args, argv...)
	return append(args, env...)
}

// runInit is the init: args are path, argc, argv..., env...
func runInit(args []string) int {
	status := os.NewFile(initFd, "status")
	syscall.CloseOnExec(initFd)
	report := func(format string, a ...any) { _, _ = fmt.Fprintf(status, format+"\n", a...) }
	path := args[0]
	argc, err := strconv.Atoi(args[1])
	if err != nil || argc < 0 || 2+argc > len(args) {
		report("error %d", syscall.EINVAL)
		return 1
	}
	argv, env := args[2:2+argc], args[2+argc:]

	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2)
	closeOnExecFrom3()
	pid, err := syscall.ForkExec(path, argv, &syscall.ProcAttr{
		Env:   env,
		Files: []uintptr{0, 1, 2},
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	})
	if err != nil {
		var errno syscall.Errno
		if !errors.As(err, &errno) {
			errno = syscall.EINVAL
		}
		report("error %d", int(errno))
		return 1
	}
	report("started")
	// Hold none of the child's stdio: its EOF is the child's to give.
	if null, err := syscall.Open("/dev/null", syscall.O_RDWR|syscall.O_CLOEXEC, 0); err == nil {
		for fd := range 3 {
			_ = syscall.Dup3(null, fd, 0)
		}
		syscall.Close(null)
	}
	go func() {
		for s := range sigs {
			_ = syscall.Kill(-pid, s.(syscall.Signal))
		}
	}()
	for {
		var ws syscall.WaitStatus
		wpid, err := syscall.Wait4(-1, &ws, 0, nil)
		switch {
		case err == syscall.EINTR:
			continue
		case err != nil:
			// ECHILD: the namespace holds nobody else.
			return 0
		case wpid != pid:
		case ws.Signaled():
			report("signal %d", int(ws.Signal()))
			status.Close()
		default:
			report("exit %d", ws.ExitStatus())
			status.Close()
		}
	}
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
