package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os/signal"
	"syscall"
	"time"

	"github.com/procwire/procwire/server"
)

// shutdownTimeout bounds a graceful shutdown of serve.
const shutdownTimeout = 10 * time.Second

// serve runs a server until ctx ends or SIGINT/SIGTERM arrives, then shuts
// it down, destroying every child.
func serve(ctx context.Context, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:7777", "listen `address`")
	tokenFile := fs.String("token-file", "", "`file` holding the bearer token (default $"+tokenEnv+")")
	certFile := fs.String("tls-cert", "", "TLS certificate `file` (with --tls-key)")
	keyFile := fs.String("tls-key", "", "TLS key `file`")
	grace := fs.Duration("grace", server.DefaultGrace, "how long a detached process waits for a resume")
	stdoutWindow := fs.Int("stdout-window", server.DefaultStdoutWindow, "default stdout window in `bytes`")
	stdinWindow := fs.Int("stdin-window", server.DefaultStdinWindow, "default stdin window in `bytes`")
	stderrRing := fs.Int("stderr-ring", server.DefaultStderrRing, "stderr ring per process in `bytes`")
	heartbeat := fs.Duration("heartbeat", server.DefaultHeartbeat, "ping interval and pong deadline (negative: none)")
	maxProcesses := fs.Int("max-processes", server.DefaultMaxProcesses, "most processes held at once, live or detached")
	if err := fs.Parse(args); err != nil {
		return usageError(err)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "procwire serve: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if (*certFile == "") != (*keyFile == "") {
		fmt.Fprintln(stderr, "procwire serve: --tls-cert and --tls-key go together")
		return 2
	}
	token, err := readToken(*tokenFile)
	if err != nil {
		fmt.Fprintf(stderr, "procwire serve: %v\n", err)
		return 1
	}
	if err := server.CheckListenAddr(*addr, token); err != nil {
		fmt.Fprintf(stderr, "procwire serve: %v\n", err)
		return 1
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	srv, err := server.New(server.Config{
		Token:        token,
		Grace:        *grace,
		StdoutWindow: *stdoutWindow,
		StdinWindow:  *stdinWindow,
		StderrRing:   *stderrRing,
		Heartbeat:    *heartbeat,
		MaxProcesses: *maxProcesses,
		Logger:       log,
	})
	if err != nil {
		fmt.Fprintf(stderr, "procwire serve: %v\n", err)
		return 1
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintf(stderr, "procwire serve: %v\n", err)
		return 1
	}
	hs := &http.Server{
		Handler:           srv,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() {
		if *certFile != "" {
			errc <- hs.ServeTLS(ln, *certFile, *keyFile)
		} else {
			errc <- hs.Serve(ln)
		}
	}()
	scheme := "ws"
	if *certFile != "" {
		scheme = "wss"
	}
	log.Info("listening", "url", scheme+"://"+ln.Addr().String()+"/", "auth", token != "")

	status := 0
	select {
	case <-ctx.Done():
		log.Info("shutting down")
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
	if status == 0 {
		if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
			log.Error("serve", "err", err)
			status = 1
		}
	}
	return status
}

// usageError is the exit status for a flag error (2), or 0 for -h.
func usageError(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	return 2
}
