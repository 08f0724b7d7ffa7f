//go:build linux

// Command stubbornserve runs a procwire server on loopback whose processes
// fail their first destroy, as when a member of the containment outlived
// SIGKILL's bound (PROTOCOL.md §4.5: SandboxOperationFailed, reason
// processes_survived; nothing is freed and a later destroy tries again).
// It is for tests written in other languages (the TypeScript client's) and
// no part of the production server.
//
//	stubbornserve [-addr 127.0.0.1:0] [-grace 60s]
//
// It logs "listening url=ws://HOST:PORT/" on stderr once it listens, and
// shuts down on SIGINT or SIGTERM, destroying every process.
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
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/procwire/procwire/internal/testkit/stubborn"
	"github.com/procwire/procwire/server"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stderr, nil)
	stop()
	os.Exit(code)
}

// run serves until ctx ends. ready, when not nil, receives the listening
// address.
func run(ctx context.Context, args []string, errw io.Writer, ready chan<- string) int {
	fs := flag.NewFlagSet("stubbornserve", flag.ContinueOnError)
	fs.SetOutput(errw)
	addr := fs.String("addr", "127.0.0.1:0", "listen `address` (loopback)")
	grace := fs.Duration("grace", server.DefaultGrace, "how long a detached process waits for a resume")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintln(errw, "usage: stubbornserve [-addr 127.0.0.1:0] [-grace 60s]")
		return 2
	}
	log := slog.New(slog.NewTextHandler(errw, nil))
	srv, err := server.New(server.Config{
		Grace:    *grace,
		Logger:   log,
		Executor: stubborn.Executor{Executor: server.BridgeExecutor{}},
	})
	if err != nil {
		fmt.Fprintf(errw, "stubbornserve: %v\n", err)
		return 1
	}
	if err := server.CheckListenAddr(*addr, ""); err != nil {
		fmt.Fprintf(errw, "stubbornserve: -addr: %v\n", err)
		return 1
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintf(errw, "stubbornserve: %v\n", err)
		return 1
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	log.Info("listening", "url", "ws://"+ln.Addr().String()+"/")
	if ready != nil {
		ready <- ln.Addr().String()
	}

	code := 0
	select {
	case <-ctx.Done():
	case err := <-errc:
		log.Error("serve", "err", err)
		return 1
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Error("shutdown", "err", err)
		code = 1
	}
	if err := hs.Shutdown(sctx); err != nil {
		log.Error("shutdown", "err", err)
		code = 1
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		log.Error("serve", "err", err)
		code = 1
	}
	return code
}
