package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/procwire/procwire/client"
	"github.com/procwire/procwire/frames"
)

// Exit statuses of exec's own failures, as env(1) uses them.
const (
	exitFailure      = 125 // procwire itself failed
	exitCannotInvoke = 126 // the command was found but could not be started
	exitNotFound     = 127 // the command was not found
)

// outputDelay bounds how long exec waits for the end of stdout once the
// remote process has exited (a descendant may hold it open), like
// os/exec's Cmd.WaitDelay.
const outputDelay = 2 * time.Second

// envFlags collects repeated --env K=V flags.
type envFlags []string

// String implements flag.Value.
func (e *envFlags) String() string { return strings.Join(*e, " ") }

// Set implements flag.Value: it takes one KEY=VALUE.
func (e *envFlags) Set(v string) error {
	k, _, ok := strings.Cut(v, "=")
	if !ok || !frames.ValidEnvKey(k) {
		return fmt.Errorf("want KEY=VALUE with KEY matching [A-Za-z_][A-Za-z0-9_]*, got %q", v)
	}
	*e = append(*e, v)
	return nil
}

// execute runs a command remotely and mirrors it: stdin to it (EOF
// included), its stdout and stderr back, SIGINT and SIGTERM forwarded, its
// exit status (or death by a signal) as ours.
func execute(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("exec", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: procwire exec [flags] URL -- CMD [ARGS...]")
		fs.PrintDefaults()
	}
	tokenFile := fs.String("token-file", "", "`file` holding the bearer token (default $"+tokenEnv+")")
	instance := fs.String("instance", "", "instance `id` (default: a random one)")
	cwd := fs.String("cwd", "", "remote working `directory` (default: the local one)")
	var env envFlags
	fs.Var(&env, "env", "set `KEY=VALUE` in the remote environment (repeatable)")
	inherit := fs.Bool("inherit-env", false, "start from the local environment instead of an empty one")
	if err := fs.Parse(args); err != nil {
		return usageError(err)
	}
	rest := fs.Args()
	if len(rest) > 1 && rest[1] == "--" {
		rest = append(rest[:1], rest[2:]...)
	}
	if len(rest) < 2 {
		fs.Usage()
		return 2
	}
	url, argv := rest[0], rest[1:]
	stderr = &lockedWriter{w: stderr} // the copy of remote stderr and our messages share it
	fail := func(err error) int {
		report(stderr, err)
		return exitFailure
	}

	token, err := readToken(*tokenFile)
	if err != nil {
		return fail(err)
	}
	req := frames.ProcessRequest{Executable: argv[0], Arguments: argv[1:], WorkingDirectory: *cwd, Environment: map[string]string{}}
	if req.WorkingDirectory == "" {
		if req.WorkingDirectory, err = os.Getwd(); err != nil {
			return fail(err)
		}
	}
	if *inherit {
		for _, kv := range os.Environ() {
			if k, v, ok := strings.Cut(kv, "="); ok && frames.ValidEnvKey(k) {
				req.Environment[k] = v
			}
		}
	}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		req.Environment[k] = v
	}
	if *instance == "" {
		*instance = "exec-" + randomHex(8)
	}

	// Listen before the process exists, so that no signal is missed.
	sigc := make(chan os.Signal, 4)
	signal.Notify(sigc, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigc)

	p, err := client.Open(ctx, url, *instance, req, &client.Options{
		Token:  token,
		Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		report(stderr, err)
		var re *client.RemoteError
		if errors.As(err, &re) {
			switch re.Frame.Reason {
			case "executable_not_found":
				return exitNotFound
			case "permission_denied":
				return exitCannotInvoke
			}
		}
		return exitFailure
	}
	st, err := mirror(ctx, p, sigc, stdin, stdout, stderr)
	if err != nil {
		return fail(err)
	}
	if st.Exited() {
		return st.Code
	}
	n, ok := signalNumber(st.Signal)
	if !ok {
		return fail(fmt.Errorf("remote process killed by unknown signal %s", st.Signal))
	}
	reraise(n)
	return 128 + int(n)
}

// mirror copies the streams of p until it has exited, then destroys it.
func mirror(ctx context.Context, p *client.Process, sigc <-chan os.Signal, stdin io.Reader, stdout, stderr io.Writer) (client.ExitStatus, error) {
	var wg sync.WaitGroup
	defer wg.Wait()
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := p.Destroy(dctx); err != nil {
			fmt.Fprintf(stderr, "procwire exec: destroy: %v\n", err)
		}
	}()

	// The stdin copy is not waited for: it may sit in a read of a local
	// stdin that never ends. Its next write fails once p is destroyed.
	go func() {
		if _, err := io.Copy(p.Stdin(), stdin); err == nil {
			p.Stdin().Close()
		}
	}()
	outDone := make(chan struct{})
	wg.Go(func() {
		defer close(outDone)
		io.Copy(stdout, p.Stdout())
	})
	wg.Go(func() { io.Copy(stderr, p.Stderr()) })

	type result struct {
		st  client.ExitStatus
		err error
	}
	waited := make(chan result, 1)
	wg.Go(func() {
		st, err := p.Wait(ctx)
		waited <- result{st, err}
	})
	for {
		select {
		case sig := <-sigc:
			name := frames.SIGTERM
			if sig == syscall.SIGINT {
				name = frames.SIGINT
			}
			wg.Go(func() {
				if _, err := p.Signal(ctx, name); err != nil && !errors.Is(err, client.ErrDestroyed) {
					fmt.Fprintf(stderr, "procwire exec: forward %s: %v\n", name, err)
				}
			})
		case r := <-waited:
			if r.err == nil {
				// Let the output finish, within a bound.
				t := time.NewTimer(outputDelay)
				select {
				case <-outDone:
				case <-t.C:
				}
				t.Stop()
			}
			return r.st, r.err
		}
	}
}

// report prints err as exec's failure.
func report(w io.Writer, err error) {
	fmt.Fprintf(w, "procwire exec: %s\n", strings.TrimPrefix(err.Error(), "procwire: "))
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// lockedWriter serializes writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

// Write writes b to the underlying writer, one Write at a time.
func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}
