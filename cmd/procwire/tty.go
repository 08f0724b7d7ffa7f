//go:build linux

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/term"

	"github.com/procwire/procwire/client"
)

// Terminal sessions (exec -t, attach of a process started with -t): the
// local terminal is put in raw mode, so that every key, ^C and ^D
// included, goes to the remote terminal as a byte, and the remote
// terminal's output is written as it comes. The local terminal is
// restored on every way out: the remote exit, a local signal, a lost
// server, and even a crash of exec (a panic anywhere, SIGKILL), which a
// small watchdog process notices (ttyguard.go).

// defaultRows and defaultCols size a remote terminal when the local side
// has no terminal to measure (exec -t --detach from a script).
const (
	defaultRows = 24
	defaultCols = 80
)

// resizeTimeout bounds one resize sent for a SIGWINCH.
const resizeTimeout = 5 * time.Second

// localTTY is exec's own terminal in raw mode.
type localTTY struct {
	fd    int
	old   *term.State
	guard *ttyGuard // nil when the watchdog could not start
	once  sync.Once
}

// stdinTerminal returns the local stdin as a terminal's fd, or -1 when it
// is not one.
func stdinTerminal(in io.Reader) int {
	f, ok := in.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return -1
	}
	return int(f.Fd())
}

// terminalSize is the size of the terminal on fd, or the default size.
func terminalSize(fd int) (rows, cols uint16) {
	if fd >= 0 {
		if c, r, err := term.GetSize(fd); err == nil && r > 0 && c > 0 && r <= 0xffff && c <= 0xffff {
			return uint16(r), uint16(c)
		}
	}
	return defaultRows, defaultCols
}

// makeRaw puts the terminal on fd in raw mode, after starting the
// watchdog that restores it should exec end without doing so itself.
func makeRaw(fd int, stderr io.Writer) (*localTTY, error) {
	old, err := term.GetState(fd)
	if err != nil {
		return nil, fmt.Errorf("read the local terminal's mode: %w", err)
	}
	t := &localTTY{fd: fd, old: old}
	g, err := startGuard(fd)
	if err != nil {
		// The session still works; only a crash would leave the terminal raw.
		fmt.Fprintf(stderr, "procwire: warning: no watchdog for the terminal's mode (%v); a crash would leave it raw (run \"stty sane\")\n", err)
	}
	t.guard = g
	if _, err := term.MakeRaw(fd); err != nil {
		t.guard.release()
		return nil, fmt.Errorf("put the local terminal in raw mode: %w", err)
	}
	return t, nil
}

// restore puts the terminal back as it was and lets the watchdog go. It
// may be called any number of times, from any goroutine.
func (t *localTTY) restore() {
	if t == nil {
		return
	}
	t.once.Do(func() {
		_ = term.Restore(t.fd, t.old)
		t.guard.release()
		rawTerminal.CompareAndSwap(t, nil)
	})
}

// rawTerminal is the terminal exec made raw, while it is.
var rawTerminal atomic.Pointer[localTTY]

// restoreOnPanic, deferred first in every goroutine of a session, restores
// the local terminal before a panic goes on to end exec (a panic outside
// exec's goroutines is the watchdog's).
func restoreOnPanic() {
	if r := recover(); r != nil {
		rawTerminal.Load().restore()
		panic(r)
	}
}

// crlfWriter writes w's lines ending in "\r\n" while the local terminal is
// raw (its output processing, which adds the "\r", is off): exec's own
// messages, not the remote terminal's output.
type crlfWriter struct{ w io.Writer }

func (c crlfWriter) Write(b []byte) (int, error) {
	out := make([]byte, 0, len(b)+8)
	for i, x := range b {
		if x == '\n' && (i == 0 || b[i-1] != '\r') {
			out = append(out, '\r')
		}
		out = append(out, x)
	}
	if _, err := c.w.Write(out); err != nil {
		return 0, err
	}
	return len(b), nil
}

// followResize sends p the local terminal's size on every SIGWINCH, and
// once at the start when sendNow (attach: the size may have changed since
// the process was started). stop ends it and waits for it.
func followResize(ctx context.Context, p *client.Process, fd int, sendNow bool) (stop func()) {
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	done := make(chan struct{})
	var wg sync.WaitGroup
	if sendNow {
		winch <- syscall.SIGWINCH
	}
	wg.Go(func() {
		defer restoreOnPanic()
		for {
			select {
			case <-winch:
			case <-done:
				return
			}
			rows, cols := terminalSize(fd)
			rctx, cancel := context.WithTimeout(ctx, resizeTimeout)
			// A resize that cannot be sent needs no word: the session's
			// end, which then follows, is reported.
			_ = p.Resize(rctx, rows, cols)
			cancel()
		}
	})
	return func() {
		signal.Stop(winch)
		close(done)
		wg.Wait()
	}
}

// ttyFlags are the flags that choose a terminal or pipes.
type ttyFlags struct {
	tty, noTTY bool
}

func (f *ttyFlags) define(fs interface {
	BoolVar(p *bool, name string, value bool, usage string)
}) {
	fs.BoolVar(&f.tty, "t", false, "run CMD on a remote terminal (as ssh -t): the local terminal is raw until exec ends, its size follows this one's; without a local terminal on stdin, warn and use pipes")
	fs.BoolVar(&f.noTTY, "T", false, "use pipes, never a terminal (the default; wins over -t)")
}

// mirrorTTY mirrors p, which runs on a remote terminal, on the local
// terminal fd: raw while it runs, restored before mirror's ending is
// reported (and by a deferred call and the watchdog on every other way
// out), its size sent on every SIGWINCH (and at once with sendSize).
func mirrorTTY(ctx context.Context, p *client.Process, sigc <-chan os.Signal, io *stdio, stderr *lockedWriter, fd int, sendSize bool) ending {
	lt, err := makeRaw(fd, stderr)
	if err != nil {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), destroyTimeout)
		defer cancel()
		_ = p.Destroy(dctx)
		return ending{err: err}
	}
	defer lt.restore()
	rawTerminal.Store(lt)
	stderr.setRaw(true)
	defer stderr.setRaw(false)
	stop := followResize(ctx, p, fd, sendSize)
	end := mirror(ctx, p, sigc, io.in, io.out, stderr, true)
	stop()
	stderr.setRaw(false)
	lt.restore()
	return end
}

// testHook is called at named points of a session; tests built with the
// procwire_testhook tag make it crash exec there (tty_testhook.go).
var testHook = func(point string) {}
