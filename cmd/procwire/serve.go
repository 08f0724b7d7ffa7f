//go:build linux

package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/procwire/procwire/frames"
	"github.com/procwire/procwire/server"
)

// shutdownTimeout bounds a graceful shutdown of serve.
const shutdownTimeout = 10 * time.Second

func init() {
	register(&command{
		name:    "serve",
		args:    "[flags]",
		summary: "run a server",
		help: `Run a server until SIGINT or SIGTERM, then shut it down, destroying every
process. With --drain-timeout the signal first drains the server: /healthz
answers 503, new opens are refused (server_draining: open elsewhere) and the
processes held run on until they are destroyed or the timeout passes; a
second signal ends the drain at once. It logs on stderr. Without a token it
listens on loopback only; a token shorter than 16 bytes is refused, and a
token without TLS on an address that is not loopback is warned about (the
token would travel in clear text). The Go runtime's soft memory limit is
--max-memory plus 64 MiB (unless $GOMEMLIMIT is set), and the server's RSS
stays within --max-memory plus 128 MiB.

The server makes itself non-dumpable, so that no child can read its memory
or environment. Every child starts with no_new_privs, no capability (as root
too; --child-caps keeps some), umask 0022 (--child-umask) and defined limits
(no core file, 1024 open files). Serving as root without --run-as or
--run-as-range is warned about: every child then runs as root, and can read
root's files and signal or read the memory of every other child.
--run-as-range gives each child a uid and gid of its own, so that no child
can read, signal or ptrace another.`,
		run: serve,
	})
}

// serve runs a server until ctx ends or SIGINT/SIGTERM arrives, then shuts
// it down, destroying every child. Its steps: parse the flags, build the
// server, listen, serve until told to stop, shut down.
func serve(ctx context.Context, args []string, io *stdio) int {
	f, status, ok := parseServe(args, io)
	if !ok {
		return status
	}
	fail := func(err error) int {
		fmt.Fprintf(io.err, "procwire serve: %v\n", err)
		return 1
	}
	token, err := readToken(f.tokenFile)
	if err != nil {
		return fail(err)
	}
	if err := checkAddr(f.addr, token); err != nil {
		return fail(err)
	}
	log := slog.New(slog.NewTextHandler(io.err, &slog.HandlerOptions{Level: f.level}))
	// Checked before listening: a server that says it listens must serve.
	tlsConfig, stopReload, err := loadCert(ctx, f.certFile, f.keyFile, log)
	if err != nil {
		return fail(err)
	}
	defer stopReload()
	srv, reg, err := f.newServer(token, log)
	defer f.limits.close() // after the shutdown below
	if err != nil {
		return fail(err)
	}
	defer setMemoryLimit(srv.Stats().MaxMemory, log)()
	s, err := f.listen(srv, reg, token, tlsConfig, log)
	if err != nil {
		return fail(err)
	}
	sigs, stopSigs := stopSignals()
	defer stopSigs()
	go func() { s.errc <- s.hs.Serve(s.ln) }() // ln speaks TLS itself
	log.Info("listening", "url", s.url, "auth", token != "", "provider_revision", server.Revision,
		"containment", srv.Stats().Containment, "run_as", f.iso.runAs, "run_as_range", f.iso.runAsRange)
	status = s.wait(ctx, sigs, f.drainTimeout, log)
	return s.shutdown(ctx, status, log)
}

// serveFlags are serve's flags, parsed and checked.
type serveFlags struct {
	addr, tokenFile, certFile, keyFile string
	level                              slog.Level
	cfg                                server.Config
	lf                                 *listenFlags
	iso                                *isolation
	limits                             *limitFlags
	ops                                *opsFlags
	drainTimeout                       time.Duration
}

// parseServe parses serve's arguments; !ok means serve ends with status.
func parseServe(args []string, io *stdio) (f *serveFlags, status int, ok bool) {
	c := lookup("serve")
	fs := newFlags(c)
	f = &serveFlags{cfg: server.Config{
		Grace:        server.DefaultGrace,
		StdoutWindow: server.DefaultStdoutWindow,
		StdinWindow:  server.DefaultStdinWindow,
		StderrRing:   server.DefaultStderrRing,
		Heartbeat:    server.DefaultHeartbeat,
		MaxProcesses: server.DefaultMaxProcesses,
	}}
	cfg := &f.cfg
	fs.StringVar(&f.addr, "addr", "127.0.0.1:7777", "listen `address`: host:port, or unix:PATH for a Unix socket (mode 0600)")
	f.lf = addListenFlags(fs)
	fs.StringVar(&f.tokenFile, "token-file", "", "`file` holding the bearer token, at least 16 bytes (default $"+tokenEnv+")")
	fs.StringVar(&f.certFile, "tls-cert", "", "TLS certificate `file` (with --tls-key)")
	fs.StringVar(&f.keyFile, "tls-key", "", "TLS key `file`")
	fs.Var(durationFlag{d: &cfg.Grace}, "grace", "how long a detached process waits for a resume or an attach")
	fs.Var(sizeRange[int]{&cfg.StdoutWindow, frames.MinWindow, frames.MaxWindow}, "stdout-window", "default stdout window, a `size` (bytes, or with KiB, MiB, GiB)")
	fs.Var(sizeRange[int]{&cfg.StdinWindow, frames.MinWindow, frames.MaxWindow}, "stdin-window", "default stdin window, a `size`")
	fs.Var(sizeRange[int]{&cfg.StderrRing, 1, frames.MaxWindow}, "stderr-ring", "stderr ring per process, a `size`")
	fs.Var(durationFlag{d: &cfg.Heartbeat, negative: "no heartbeat"}, "heartbeat", "ping interval and pong deadline (negative: none)")
	fs.Var(intRange{&cfg.MaxProcesses, 1, 1 << 30}, "max-processes", "most processes held at once, live or detached")
	fs.Var(sizeRange[int64]{&cfg.MaxMemory, 1, 1 << 62}, "max-memory", "the `size` the windows of the processes held and the first frames being read may promise, and the Go runtime's soft memory limit (default a quarter of the machine's memory)")
	fs.Var(sizeRange[int]{&cfg.MaxStdoutWindow, frames.MinWindow, frames.MaxWindow}, "max-stdout-window", "largest stdout window an open may ask for, a `size` (default 64MiB, or --stdout-window if larger)")
	fs.Var(sizeRange[int]{&cfg.MaxStdinWindow, frames.MinWindow, frames.MaxWindow}, "max-stdin-window", "largest stdin window an open may ask for, a `size` (default 16MiB, or --stdin-window if larger)")
	fs.Var(intRange{&cfg.MaxConnections, 1, 1 << 30}, "max-connections", "most connections served at once (default 2 × max-processes + 64)")
	fs.Var((*originList)(&cfg.OriginPatterns), "allow-origin", "accept a browser page whose Origin host matches `pattern` (path.Match, \"host:port\" or \"scheme://host:port\"), besides the server's own host (repeatable)")
	fs.BoolVar(&cfg.NoCompression, "no-compression", false, "never compress stdout and stderr nor accept compressed stdin, whatever an open asks for")
	fs.BoolVar(&cfg.NoTTY, "no-tty", false, "refuse opens with a terminal (open.tty): SandboxCapabilityUnavailable, requirement tty")
	logLevel := fs.String("log-level", "info", "log at `level` debug, info, warn or error")
	f.iso = addIsolationFlags(fs)
	f.limits = addLimitFlags(fs)
	f.ops = addOpsFlags(fs)
	drainTimeout := addDrainFlag(fs)
	pos, _, status, ok := parse(c, fs, args, -1, io, 2)
	if !ok {
		return nil, status, false
	}
	f.drainTimeout = *drainTimeout
	if len(pos) > 0 {
		status, _ := usageFailure(c, io, 2, "unexpected argument %q", pos[0])
		return nil, status, false
	}
	if (f.certFile == "") != (f.keyFile == "") {
		status, _ := usageFailure(c, io, 2, "--tls-cert and --tls-key go together")
		return nil, status, false
	}
	if err := f.level.UnmarshalText([]byte(*logLevel)); err != nil {
		status, _ := usageFailure(c, io, 2, "--log-level %q: want debug, info, warn or error", *logLevel)
		return nil, status, false
	}
	return f, 0, true
}

// newServer configures isolation, the ops registry and the limits, and
// builds the server.
func (f *serveFlags) newServer(token string, log *slog.Logger) (*server.Server, *prometheus.Registry, error) {
	cfg := f.cfg
	if err := f.iso.configure(&cfg); err != nil {
		return nil, nil, err
	}
	f.iso.warn(log)
	cfg.Token, cfg.Logger = token, log
	reg := f.ops.configure(&cfg)
	if err := f.limits.configure(&cfg, log, reg); err != nil {
		return nil, nil, err
	}
	srv, err := server.New(cfg)
	return srv, reg, err
}

// serving is what serve runs: the server, its HTTP server on ln, and the
// ops listener. errc receives hs.Serve's result.
type serving struct {
	srv  *server.Server
	ln   net.Listener
	url  string
	hs   *http.Server
	ops  *opsServer
	errc chan error
}

// listen opens the listener and the ops listener and builds the HTTP
// server; the caller starts serving.
func (f *serveFlags) listen(srv *server.Server, reg *prometheus.Registry, token string, tlsConfig *tls.Config, log *slog.Logger) (*serving, error) {
	lim := f.lf.limiter()
	ln, url, err := f.lf.listen(f.addr, token, tlsConfig, lim, log)
	if err != nil {
		return nil, err
	}
	if clearTextToken(token, tlsConfig != nil, ln.Addr()) {
		log.Warn("the token travels in clear text: listening beyond loopback without --tls-cert", "addr", ln.Addr().String())
	}
	opsSrv, err := f.ops.start(reg, srv, f.lf, lim, log)
	if err != nil {
		ln.Close()
		return nil, err
	}
	return &serving{srv: srv, ln: ln, url: url, hs: f.lf.httpServer(srv, lim, log), ops: opsSrv, errc: make(chan error, 1)}, nil
}

// wait serves until ctx ends, a signal arrives (then drains first, for up
// to drainTimeout) or serving fails; it returns 1 for a failure, else 0.
func (s *serving) wait(ctx context.Context, sigs <-chan os.Signal, drainTimeout time.Duration, log *slog.Logger) int {
	select {
	case <-ctx.Done():
		log.Info("shutting down")
	case sig := <-sigs:
		log.Info("shutting down", "signal", sig.String())
		drain(ctx, s.srv, drainTimeout, sigs, log)
	case err := <-s.errc:
		log.Error("serve", "err", err)
		return 1
	}
	return 0
}

// shutdown stops the server, the HTTP server, then the ops listener, within
// shutdownTimeout; it returns 1 when one of them (or serving, if status is 0
// so far) failed, else status.
func (s *serving) shutdown(ctx context.Context, status int, log *slog.Logger) int {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	if err := s.srv.Shutdown(sctx); err != nil {
		log.Error("shutdown", "err", err)
		status = 1
	}
	if err := s.hs.Shutdown(sctx); err != nil {
		log.Error("shutdown", "err", err)
		status = 1
	}
	if err := s.ops.shutdown(sctx); err != nil { // last: /healthz said 503 meanwhile
		log.Error("shutdown", "err", err)
		status = 1
	}
	if status == 0 {
		if err := <-s.errc; !errors.Is(err, http.ErrServerClosed) {
			log.Error("serve", "err", err)
			status = 1
		}
	}
	return status
}

// clearTextToken reports whether a server with token, listening on addr
// with TLS or not, lets the token travel in clear text beyond this machine.
func clearTextToken(token string, tls bool, addr net.Addr) bool {
	if _, unix := addr.(*net.UnixAddr); unix {
		return false
	}
	a, ok := addr.(*net.TCPAddr)
	return token != "" && !tls && !(ok && a.IP.IsLoopback())
}
