package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/procwire/procwire/client"
	"github.com/procwire/procwire/frames"
	"github.com/procwire/procwire/proc"
)

// Exit statuses of exec's own failures, as env(1) uses them. A remote
// status equal to one of them is told apart by --exit-status-file.
const (
	exitFailure      = 125 // procwire itself failed, or was used wrongly
	exitCannotInvoke = 126 // the command was found but could not be started
	exitNotFound     = 127 // the command was not found
	exitBrokenPipe   = 128 + int(syscall.SIGPIPE)
)

const (
	// outputDelay bounds how long exec waits for the ends of stdout and
	// stderr once the remote process has exited (a descendant may hold
	// them open), like os/exec's Cmd.WaitDelay.
	outputDelay = 2 * time.Second
	// hangupDelay bounds how long a process sent SIGTERM for a local SIGHUP
	// or SIGQUIT has to exit before it is destroyed.
	hangupDelay = 500 * time.Millisecond
	// destroyTimeout bounds the destroy every way out of exec runs.
	destroyTimeout = 5 * time.Second
)

// defaultCwd is the remote working directory when --cwd is not given: one
// that every server has.
const defaultCwd = "/"

func init() {
	register(&command{
		name:    "exec",
		args:    "[flags] URL [--] CMD [ARGS...]",
		summary: "run CMD remotely as if it were a local child",
		help: `Run CMD remotely as if it were a local child: stdin goes to it (EOF
included), its stdout and stderr come back, SIGINT and SIGTERM are forwarded,
and its exit status (or death by the same signal) is exec's. Flags may come
before or after URL; CMD starts after "--" or at the first argument after
URL that is not a flag.

SIGHUP and SIGQUIT, which the wire cannot carry, send SIGTERM and destroy the
process 0.5s later if it has not exited; a closed local stdout (EPIPE or
SIGPIPE) destroys it and exits 141; every other way out destroys it first.

Exit status: the remote one; 125 when procwire failed (usage, connection,
server refusal); 126 when CMD could not be started; 127 when CMD was not
found; 128+N when the remote process died of signal N (re-raised here,
without a core file); 129/131 after a local SIGHUP/SIGQUIT; 141 for a closed
stdout. --exit-status-file tells a remote "exit 125" apart from procwire's.

With -t, CMD runs on a remote terminal of the local terminal's size, TERM
the local one unless --env sets it: the local terminal is raw (every key,
^C included, goes as a byte) until exec ends, whichever way, and SIGWINCH
resizes the remote one. Output is the terminal's: stdout and stderr merged.
On a terminal a local SIGTERM ends the session as SIGHUP does (an
interactive shell ignores SIGTERM). With a stdin that is not a terminal, -t
warns and uses pipes; -T forces pipes.`,
		run: execute,
	})
}

// execFlags are exec's flags.
type execFlags struct {
	connFlags
	instance   string
	cwd        string
	env        envFlags
	inherit    bool
	statusFile string
	detach     bool
	handleFile string
	compress   bool
	ttyFlags
	// stdoutWindow and stdinWindow ask for the windows (client.Options);
	// 0 takes the server's.
	stdoutWindow, stdinWindow int64
}

// execute runs a command remotely and mirrors it.
func execute(ctx context.Context, args []string, io *stdio) int {
	c := lookup("exec")
	fs := newFlags(c)
	var f execFlags
	f.connFlags.define(fs)
	fs.StringVar(&f.instance, "instance", "", "instance `id` (default: a random one)")
	fs.StringVar(&f.cwd, "cwd", defaultCwd, "remote working `directory`")
	fs.Var(&f.env, "env", "set `KEY=VALUE` in the remote environment (repeatable)")
	fs.BoolVar(&f.inherit, "inherit-env", false, "start from the local environment instead of an empty one (never its PROCWIRE_* variables)")
	fs.StringVar(&f.statusFile, "exit-status-file", "", "write how the remote process ended to `file`: \"exit N\", \"signal NAME\", \"signal NAME REASON\" (such as \"signal SIGKILL oom\" for the out-of-memory killer), or \"none\" when exec's status is its own")
	fs.BoolVar(&f.detach, "detach", false, "start CMD, print its handle (a secret) and exit 0, leaving CMD to \"procwire attach\" within the server's grace")
	fs.StringVar(&f.handleFile, "handle-file", "", "with --detach, write the handle to `file` (mode 0600) instead of stdout")
	f.ttyFlags.define(fs)
	fs.BoolVar(&f.compress, "compress", false, "ask for s2-compressed stdout and stderr and compress stdin (pays on slow links; a server without compression refuses the open)")
	fs.Var(sizeRange[int64]{&f.stdoutWindow, 1 << 10, 1 << 30}, "stdout-window", "ask for a stdout window of this `size` (bytes, or with KiB, MiB, GiB; at most what the server allows; default the server's): the most output in flight unacknowledged")
	fs.Var(sizeRange[int64]{&f.stdinWindow, 1 << 10, 1 << 30}, "stdin-window", "ask for a stdin window of this `size` (as --stdout-window; default the server's): the most input sent ahead of the remote process's reading")
	pos, argv, status, ok := parse(c, fs, args, 1, io, exitFailure)
	if !ok {
		return status
	}
	if len(pos) == 0 || len(argv) == 0 {
		status, _ := usageFailure(c, io, exitFailure, "want URL and CMD")
		return status
	}
	if f.handleFile != "" && !f.detach {
		status, _ := usageFailure(c, io, exitFailure, "--handle-file goes with --detach")
		return status
	}
	if f.cwd == "" {
		status, _ := usageFailure(c, io, exitFailure, "--cwd must not be empty")
		return status
	}
	stderr := &lockedWriter{w: io.err} // the copy of remote stderr and our messages share it
	out := &exitReport{cmd: "exec", file: f.statusFile, stderr: stderr}
	fail := func(err error) int { return out.failed(err, exitFailure) }

	d, err := f.newDialer(pos[0], stderr)
	if err != nil {
		return fail(err)
	}
	defer d.close()
	req := frames.ProcessRequest{Executable: argv[0], Arguments: argv[1:], WorkingDirectory: f.cwd, Environment: map[string]string{}}
	if f.inherit {
		for _, kv := range os.Environ() {
			if k, v, ok := strings.Cut(kv, "="); ok && frames.ValidEnvKey(k) && !strings.HasPrefix(k, "PROCWIRE_") {
				req.Environment[k] = v
			}
		}
	}
	for _, kv := range f.env {
		k, v, _ := strings.Cut(kv, "=")
		req.Environment[k] = v
	}
	if f.instance == "" {
		f.instance = "exec-" + randomHex(8)
	}

	ttyFD := -1 // the local terminal exec -t makes raw
	if f.tty && !f.noTTY {
		ttyFD = stdinTerminal(io.in)
		if ttyFD < 0 && !f.detach {
			fmt.Fprintln(stderr, "procwire exec: warning: stdin is not a terminal: no remote terminal, pipes instead (-t)")
		} else {
			rows, cols := terminalSize(ttyFD)
			d.opts.TTY = &client.TTY{Rows: rows, Cols: cols, Term: os.Getenv("TERM")}
		}
	}

	// Listen before the process exists, so that no signal is missed.
	sigc := make(chan os.Signal, 8)
	signal.Notify(sigc, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGPIPE)
	defer signal.Stop(sigc)

	var p *client.Process
	sig, err := interruptible(ctx, func(ctx context.Context) (err error) {
		d.opts.Compress = f.compress
		d.opts.StdoutWindow, d.opts.StdinWindow = f.stdoutWindow, f.stdinWindow
		p, err = client.Open(ctx, d.dialURL(), f.instance, req, d.opts)
		return err
	})
	if sig != 0 && err != nil {
		// The client destroys what the open may have started.
		return out.failed(fmt.Errorf("%v before the process started", sig), 128+int(sig))
	}
	if err != nil {
		return out.failed(openError(d, err, &f, argv[0]))
	}
	if f.detach {
		return detach(p, d, f.handleFile, io.out, out)
	}
	if d.opts.TTY != nil {
		return out.mirrored(p, d.lost(mirrorTTY(ctx, p, sigc, io, stderr, ttyFD, false)))
	}
	return out.mirrored(p, d.lost(mirror(ctx, p, sigc, io.in, io.out, stderr, false)))
}

// interruptible runs connect, bounded by connectTimeout, and cancels it on
// SIGINT, SIGTERM, SIGHUP or SIGQUIT; it returns the signal that did.
// The signal is also left to the caller's own channel, if it has one.
func interruptible(ctx context.Context, connect func(context.Context) error) (syscall.Signal, error) {
	cctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	sigc := make(chan os.Signal, 1)
	signal.Notify(sigc, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(sigc)
	got := make(chan syscall.Signal, 1)
	go func() {
		select {
		case s := <-sigc:
			got <- s.(syscall.Signal)
			cancel()
		case <-cctx.Done():
			got <- 0
		}
	}()
	err := connect(cctx)
	cancel()
	return <-got, err
}

// openError explains a failed open in one line, with exec's status.
func openError(d *dialer, err error, f *execFlags, executable string) (error, int) {
	var re *client.RemoteError
	if !errors.As(err, &re) {
		var pe *client.ProtocolError
		if errors.As(err, &pe) {
			return err, exitFailure
		}
		return d.explain(err), exitFailure
	}
	switch re.Frame.Reason {
	case proc.ReasonExecutableNotFound:
		return fmt.Errorf("%s: command not found on the server (%s)", executable, re.Frame.Reason), exitNotFound
	case proc.ReasonPermissionDenied:
		return fmt.Errorf("%s: cannot run it on the server (%s)", executable, re.Frame.Reason), exitCannotInvoke
	case proc.ReasonWorkingDirectoryInvalid:
		return fmt.Errorf("--cwd %s: not a directory the server can use (%s)", f.cwd, re.Frame.Reason), exitFailure
	}
	if re.Frame.Actual == "process_already_open" {
		return fmt.Errorf("--instance %s already has a process on the server (process_already_open)", f.instance), exitFailure
	}
	return fmt.Errorf("the server refused: %s", strings.TrimPrefix(re.Error(), "procwire: ")), exitFailure
}

// ending is how mirror ended.
type ending struct {
	st    client.ExitStatus
	exit  bool           // st is the remote process's exit
	local syscall.Signal // a local SIGHUP or SIGQUIT ended it
	pipe  bool           // local stdout was closed
	err   error          // what went wrong otherwise
}

// mirror copies the streams of p until it has exited, then destroys it;
// it destroys it too on every other way out. On a terminal (tty), SIGTERM
// ends the session as SIGHUP does: an interactive shell ignores it.
func mirror(ctx context.Context, p *client.Process, sigc <-chan os.Signal, stdin io.Reader, stdout, stderr io.Writer, tty bool) (end ending) {
	var wg sync.WaitGroup
	defer wg.Wait()
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), destroyTimeout)
		defer cancel()
		if err := p.Destroy(dctx); err != nil && end.err == nil && !end.exit {
			end.err = fmt.Errorf("destroy: %w", err)
		}
	}()
	// The stdin copy is not waited for: it may sit in a read of a local
	// stdin that never ends. Its next write fails once p is destroyed.
	go func() {
		defer restoreOnPanic()
		if _, err := io.Copy(p.Stdin(), stdin); err == nil {
			p.Stdin().Close()
		}
	}()
	outDone := make(chan error, 1) // the local write error that ended stdout, or nil
	wg.Go(func() {
		defer restoreOnPanic()
		outDone <- copyOut(stdout, p.Stdout())
	})
	errDone := make(chan struct{})
	wg.Go(func() {
		defer restoreOnPanic()
		defer close(errDone)
		copyOut(stderr, p.Stderr())
	})

	type result struct {
		st  client.ExitStatus
		err error
	}
	waited := make(chan result, 1)
	wctx, stopWait := context.WithCancel(ctx)
	defer stopWait()
	wg.Go(func() {
		defer restoreOnPanic()
		st, err := p.Wait(wctx)
		waited <- result{st, err}
	})
	var hangup <-chan time.Time
	for {
		select {
		case sig := <-sigc:
			hangupLike := tty && sig == syscall.SIGTERM
			switch {
			case (sig == syscall.SIGINT || sig == syscall.SIGTERM) && !hangupLike:
				name := frames.SIGTERM
				if sig == syscall.SIGINT {
					name = frames.SIGINT
				}
				forward(ctx, &wg, p, name)
			case sig == syscall.SIGPIPE:
				// The write that raised it reports EPIPE to copyOut.
			default: // SIGHUP, SIGQUIT, and SIGTERM on a terminal
				if end.local == 0 {
					end.local = sig.(syscall.Signal)
					forward(ctx, &wg, p, frames.SIGTERM)
					t := time.NewTimer(hangupDelay)
					defer t.Stop()
					hangup = t.C
				}
			}
		case <-hangup:
			return end
		case err := <-outDone:
			if err != nil {
				end.pipe = errors.Is(err, syscall.EPIPE)
				if !end.pipe {
					end.err = fmt.Errorf("write stdout: %w", err)
				}
				return end
			}
			outDone = nil // stdout ended; the exit follows
		case r := <-waited:
			if r.err != nil {
				if end.local == 0 {
					end.err = r.err
				}
				return end
			}
			end.st, end.exit = r.st, end.local == 0
			// Let the output finish, within a bound.
			t := time.NewTimer(outputDelay)
			defer t.Stop()
			if outDone != nil {
				select {
				case err := <-outDone:
					if err != nil && errors.Is(err, syscall.EPIPE) {
						end.pipe, end.exit = true, false
						return end
					}
				case <-t.C:
				}
			}
			select {
			case <-errDone:
			case <-t.C:
			}
			return end
		}
	}
}

// lost explains a connection lost for good in end.
func (d *dialer) lost(end ending) ending {
	if errors.Is(end.err, client.ErrConnectionLost) {
		end.err = fmt.Errorf("lost the server and could not resume: %w", d.explain(end.err))
	}
	return end
}

// forward sends sig to p without blocking the caller. A signal that
// cannot be sent needs no word: the handle's end, which then follows,
// is reported.
func forward(ctx context.Context, wg *sync.WaitGroup, p *client.Process, sig frames.SignalName) {
	wg.Go(func() {
		defer restoreOnPanic()
		sctx, cancel := context.WithTimeout(ctx, destroyTimeout)
		defer cancel()
		_, _ = p.Signal(sctx, sig)
	})
}

// copyOut copies r to w until r ends (or fails: the handle ended), and
// returns the error of a failed write.
func copyOut(w io.Writer, r io.Reader) error {
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return werr
			}
			testHook("output")
		}
		if err != nil {
			return nil
		}
	}
}

// exitReport turns how exec (or attach) ended into its status, its one
// line on stderr and the --exit-status-file.
type exitReport struct {
	cmd    string // "exec" or "attach"
	file   string
	stderr io.Writer
}

// failed reports err and returns status; nothing remote is mirrored.
func (r *exitReport) failed(err error, status int) int {
	// Escaped: the error may carry a server's words (an HTTP body, a
	// close reason, an error frame's message).
	fmt.Fprintf(r.stderr, "procwire %s: %s\n", r.cmd, escapeControl(strings.TrimPrefix(err.Error(), "procwire: ")))
	r.write("none")
	return status
}

// mirrored returns the status for how mirror ended with p; a remote death
// by a signal, or a local SIGHUP or SIGQUIT, is re-raised first.
func (r *exitReport) mirrored(p *client.Process, end ending) int {
	if n := p.Stderr().Dropped(); n > 0 {
		fmt.Fprintf(r.stderr, "procwire %s: %d bytes of remote stderr dropped\n", r.cmd, n)
	}
	switch {
	case end.pipe:
		r.write("none")
		return exitBrokenPipe
	case end.local != 0:
		r.write("none")
		reraise(end.local)
		return 128 + int(end.local)
	case end.err != nil:
		return r.failed(end.err, exitFailure)
	case end.st.Exited():
		r.write(fmt.Sprintf("exit %d", end.st.Code))
		return end.st.Code
	}
	n, ok := signalNumber(end.st.Signal)
	if !ok {
		return r.failed(fmt.Errorf("remote process killed by unknown signal %s", end.st.Signal), exitFailure)
	}
	if end.st.Reason != "" {
		// Said once, on stderr and in the file: the signal alone does not
		// tell the OOM killer from a kill -9.
		fmt.Fprintf(r.stderr, "procwire %s: remote process killed by %s (%s)\n", r.cmd, end.st.Signal, reasonText(end.st.Reason))
		r.write("signal " + end.st.Signal + " " + escapeControl(end.st.Reason))
	} else {
		r.write("signal " + end.st.Signal)
	}
	reraise(n)
	return 128 + int(n)
}

// reasonText explains an exit's reason for the stderr line; a reason
// this version does not know is shown escaped, as the server sent it.
func reasonText(reason string) string {
	if reason == "oom" {
		return "oom: the out-of-memory killer ended it, at its memory limit"
	}
	return escapeControl(reason)
}

func (r *exitReport) write(line string) {
	if r.file == "" {
		return
	}
	if err := writeFileReplacing(r.file, []byte(line+"\n"), 0o644); err != nil {
		fmt.Fprintf(r.stderr, "procwire %s: --exit-status-file: %v\n", r.cmd, err)
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// lockedWriter serializes writes to w.
type lockedWriter struct {
	mu  sync.Mutex
	w   io.Writer
	raw bool // the local terminal is raw: end lines with "\r\n"
}

// Write writes b to the underlying writer, one Write at a time.
func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.raw {
		return crlfWriter{l.w}.Write(b)
	}
	return l.w.Write(b)
}

// setRaw says whether the local terminal is raw.
func (l *lockedWriter) setRaw(raw bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.raw = raw
}
