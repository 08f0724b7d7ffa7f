//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

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
// it down, destroying every child.
func serve(ctx context.Context, args []string, io *stdio) int {
	c := lookup("serve")
	fs := newFlags(c)
	addr := fs.String("addr", "127.0.0.1:7777", "listen `address`: host:port, or unix:PATH for a Unix socket (mode 0600)")
	lf := addListenFlags(fs)
	tokenFile := fs.String("token-file", "", "`file` holding the bearer token, at least 16 bytes (default $"+tokenEnv+")")
	certFile := fs.String("tls-cert", "", "TLS certificate `file` (with --tls-key)")
	keyFile := fs.String("tls-key", "", "TLS key `file`")
	cfg := server.Config{
		Grace:        server.DefaultGrace,
		StdoutWindow: server.DefaultStdoutWindow,
		StdinWindow:  server.DefaultStdinWindow,
		StderrRing:   server.DefaultStderrRing,
		Heartbeat:    server.DefaultHeartbeat,
		MaxProcesses: server.DefaultMaxProcesses,
	}
	fs.Var(durationFlag{d: &cfg.Grace}, "grace", "how long a detached process waits for a resume or an attach")
	fs.Var(sizeRange[int]{&cfg.StdoutWindow, 1 << 10, 1 << 30}, "stdout-window", "default stdout window, a `size` (bytes, or with KiB, MiB, GiB)")
	fs.Var(sizeRange[int]{&cfg.StdinWindow, 1 << 10, 1 << 30}, "stdin-window", "default stdin window, a `size`")
	fs.Var(sizeRange[int]{&cfg.StderrRing, 1, 1 << 30}, "stderr-ring", "stderr ring per process, a `size`")
	fs.Var(durationFlag{d: &cfg.Heartbeat, negative: "no heartbeat"}, "heartbeat", "ping interval and pong deadline (negative: none)")
	fs.Var(intRange{&cfg.MaxProcesses, 1, 1 << 30}, "max-processes", "most processes held at once, live or detached")
	fs.Var(sizeRange[int64]{&cfg.MaxMemory, 1, 1 << 62}, "max-memory", "the `size` the windows of the processes held and the first frames being read may promise, and the Go runtime's soft memory limit (default a quarter of the machine's memory)")
	fs.Var(sizeRange[int]{&cfg.MaxStdoutWindow, 1 << 10, 1 << 30}, "max-stdout-window", "largest stdout window an open may ask for, a `size` (default 64MiB, or --stdout-window if larger)")
	fs.Var(sizeRange[int]{&cfg.MaxStdinWindow, 1 << 10, 1 << 30}, "max-stdin-window", "largest stdin window an open may ask for, a `size` (default 16MiB, or --stdin-window if larger)")
	fs.Var(intRange{&cfg.MaxConnections, 1, 1 << 30}, "max-connections", "most connections served at once (default 2 × max-processes + 64)")
	fs.Var((*originList)(&cfg.OriginPatterns), "allow-origin", "accept a browser page whose Origin host matches `pattern` (path.Match, \"host:port\" or \"scheme://host:port\"), besides the server's own host (repeatable)")
	fs.BoolVar(&cfg.NoCompression, "no-compression", false, "never compress stdout and stderr nor accept compressed stdin, whatever an open asks for")
	fs.BoolVar(&cfg.NoTTY, "no-tty", false, "refuse opens with a terminal (open.tty): SandboxCapabilityUnavailable, requirement tty")
	logLevel := fs.String("log-level", "info", "log at `level` debug, info, warn or error")
	iso := addIsolationFlags(fs)
	limits := addLimitFlags(fs)
	ops := addOpsFlags(fs)
	drainTimeout := addDrainFlag(fs)
	pos, _, status, ok := parse(c, fs, args, -1, io, 2)
	if !ok {
		return status
	}
	if len(pos) > 0 {
		status, _ := usageFailure(c, io, 2, "unexpected argument %q", pos[0])
		return status
	}
	if (*certFile == "") != (*keyFile == "") {
		status, _ := usageFailure(c, io, 2, "--tls-cert and --tls-key go together")
		return status
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		status, _ := usageFailure(c, io, 2, "--log-level %q: want debug, info, warn or error", *logLevel)
		return status
	}
	fail := func(err error) int {
		fmt.Fprintf(io.err, "procwire serve: %v\n", err)
		return 1
	}
	token, err := readToken(*tokenFile)
	if err != nil {
		return fail(err)
	}
	if err := checkAddr(*addr, token); err != nil {
		return fail(err)
	}
	log := slog.New(slog.NewTextHandler(io.err, &slog.HandlerOptions{Level: level}))
	// Checked before listening: a server that says it listens must serve.
	tlsConfig, stopReload, err := loadCert(ctx, *certFile, *keyFile, log)
	if err != nil {
		return fail(err)
	}
	defer stopReload()
	if err := iso.configure(&cfg); err != nil {
		return fail(err)
	}
	iso.warn(log)
	cfg.Token, cfg.Logger = token, log
	reg := ops.configure(&cfg)
	if err := limits.configure(&cfg, log, reg); err != nil {
		return fail(err)
	}
	srv, err := server.New(cfg)
	if err != nil {
		return fail(err)
	}
	defer setMemoryLimit(srv.Stats().MaxMemory, log)()
	lim := lf.limiter()
	ln, url, err := lf.listen(*addr, token, tlsConfig, lim, log)
	if err != nil {
		return fail(err)
	}
	if clearTextToken(token, tlsConfig != nil, ln.Addr()) {
		log.Warn("the token travels in clear text: listening beyond loopback without --tls-cert", "addr", ln.Addr().String())
	}
	opsSrv, err := ops.start(reg, srv, lf, lim, log)
	if err != nil {
		ln.Close()
		return fail(err)
	}
	hs := lf.httpServer(srv, lim, log)
	sigs, stopSigs := stopSignals()
	defer stopSigs()
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }() // ln speaks TLS itself
	log.Info("listening", "url", url, "auth", token != "", "provider_revision", server.Revision,
		"containment", srv.Stats().Containment, "run_as", iso.runAs, "run_as_range", iso.runAsRange)

	status = 0
	select {
	case <-ctx.Done():
		log.Info("shutting down")
	case sig := <-sigs:
		log.Info("shutting down", "signal", sig.String())
		drain(ctx, srv, *drainTimeout, sigs, log)
	case err := <-errc:
		log.Error("serve", "err", err)
		status = 1
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Error("shutdown", "err", err)
		status = 1
	}
	if err := hs.Shutdown(sctx); err != nil {
		log.Error("shutdown", "err", err)
		status = 1
	}
	if err := opsSrv.shutdown(sctx); err != nil { // last: /healthz said 503 meanwhile
		log.Error("shutdown", "err", err)
		status = 1
	}
	if status == 0 {
		if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
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
