//go:build linux

package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The terminal's watchdog: before exec puts its terminal in raw mode, it
// starts a copy of itself with ttyGuardArg, which holds the terminal (fd
// 3) and the read end of a pipe (fd 4). exec writes the terminal's mode
// into the pipe, and one more byte once it has restored the terminal
// itself. If the pipe ends without that byte, exec died without restoring
// the terminal (a panic in any goroutine, SIGKILL, a runtime fatal error),
// and the watchdog restores the mode it was given. It ignores the signals
// a terminal or its session sends, so that it outlives exec.

// ttyGuardArg is the only argument of the watchdog's command line.
const ttyGuardArg = "__procwire-tty-guard"

func init() {
	if len(os.Args) == 2 && os.Args[1] == ttyGuardArg {
		os.Exit(runGuard(os.NewFile(3, "tty"), os.NewFile(4, "guard")))
	}
}

// termiosBytes is t as the bytes the watchdog reads back (the same binary
// on both sides of the pipe).
func termiosBytes(t *unix.Termios) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(t)), unsafe.Sizeof(*t))
}

// runGuard is the watchdog: it returns 0 once released, 1 after restoring
// the terminal for a dead exec, 2 when it could not.
func runGuard(tty, pipe *os.File) int {
	signal.Ignore(syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTSTP, syscall.SIGTTOU, syscall.SIGTTIN, syscall.SIGHUP, syscall.SIGTERM, syscall.SIGPIPE)
	var t unix.Termios
	if _, err := io.ReadFull(pipe, termiosBytes(&t)); err != nil {
		return 2
	}
	var b [1]byte
	if n, _ := pipe.Read(b[:]); n == 1 {
		return 0
	}
	if err := unix.IoctlSetTermios(int(tty.Fd()), unix.TCSETS, &t); err != nil {
		return 2
	}
	return 1
}

// ttyGuard is exec's side of a running watchdog.
type ttyGuard struct {
	w   *os.File
	cmd *exec.Cmd
}

// startGuard starts the watchdog of the terminal on fd with its current
// mode.
func startGuard(fd int) (*ttyGuard, error) {
	t, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	dup, err := unix.Dup(fd)
	if err != nil {
		return nil, err
	}
	tty := os.NewFile(uintptr(dup), "tty")
	defer tty.Close()
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	cmd := exec.Command(self, ttyGuardArg)
	cmd.Env = []string{}
	cmd.ExtraFiles = []*os.File{tty, r}
	if err := cmd.Start(); err != nil {
		w.Close()
		return nil, err
	}
	g := &ttyGuard{w: w, cmd: cmd}
	if _, err := w.Write(termiosBytes(t)); err != nil {
		g.release()
		return nil, fmt.Errorf("watchdog: %w", err)
	}
	return g, nil
}

// release tells the watchdog that the terminal is restored, and reaps it.
func (g *ttyGuard) release() {
	if g == nil {
		return
	}
	_, _ = g.w.Write([]byte{1})
	g.w.Close()
	_ = g.cmd.Wait() // it exits at once; its status says nothing more
}
