//go:build linux

package main

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/procwire/procwire/server"
)

// nonNegativeDuration is a duration flag where 0 means "none".
type nonNegativeDuration struct{ d *time.Duration }

func (p nonNegativeDuration) String() string {
	if p.d == nil {
		return ""
	}
	return p.d.String()
}

func (p nonNegativeDuration) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return errors.New("not a duration such as 30s or 2m")
	}
	if d < 0 {
		return errors.New("must not be negative")
	}
	*p.d = d
	return nil
}

// addDrainFlag adds serve's --drain-timeout.
func addDrainFlag(fs *flag.FlagSet) *time.Duration {
	d := new(time.Duration)
	fs.Var(nonNegativeDuration{d}, "drain-timeout", "on SIGTERM or SIGINT, refuse new opens and let the processes held run this long before destroying the rest; a second signal ends the drain at once (default 0: no drain)")
	return d
}

// stopSignals delivers SIGINT and SIGTERM on the returned channel until
// stop is called.
func stopSignals() (sigs <-chan os.Signal, stop func()) {
	c := make(chan os.Signal, 2)
	signal.Notify(c, syscall.SIGINT, syscall.SIGTERM)
	return c, func() { signal.Stop(c) }
}

// drain lets srv drain (server.Server.Drain) for at most timeout: until
// its processes are gone, the timeout passes, another stop signal arrives
// on sigs, or ctx ends. It returns without draining when timeout is 0.
func drain(ctx context.Context, srv *server.Server, timeout time.Duration, sigs <-chan os.Signal, log *slog.Logger) {
	if timeout <= 0 {
		return
	}
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case sig := <-sigs:
			log.Info("second signal: ending the drain now", "signal", sig.String())
			cancel()
		case <-dctx.Done():
		}
	}()
	start := time.Now()
	log.Info("draining: new opens are refused, the processes held run on", "timeout", timeout)
	err := srv.Drain(dctx)
	cancel()
	<-watched
	if err != nil {
		log.Info("drain ended with processes left: destroying them", "after", time.Since(start).Round(time.Millisecond), "err", err)
		return
	}
	log.Info("drained: no process left", "after", time.Since(start).Round(time.Millisecond))
}
