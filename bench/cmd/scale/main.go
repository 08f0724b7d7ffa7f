// Command scale runs BenchmarkScale's scenario by hand: N concurrent cat
// processes on one procwire server, each echoing a line every interval,
// and prints the server's RSS, heap, threads and fds, the time to open all
// N and the echo p50/p99.
//
//	go run ./bench/cmd/scale -n 4000 -duration 10s
//
// The server runs as a child process (this binary again), so its figures
// are its own.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/procwire/procwire/bench"
)

func main() {
	bench.MaybeServeScale()
	n := flag.Int("n", 1000, "concurrent processes")
	interval := flag.Duration("interval", 100*time.Millisecond, "echo interval per process")
	duration := flag.Duration("duration", 5*time.Second, "length of the echo phase")
	flag.Parse()
	if err := run(*n, *interval, *duration); err != nil {
		fmt.Fprintln(os.Stderr, "scale:", err)
		os.Exit(1)
	}
}

func run(n int, interval, duration time.Duration) error {
	need := bench.ScaleFDs(n)
	if limit, err := bench.RaiseFDLimit(need); limit < need {
		return fmt.Errorf("RLIMIT_NOFILE is %d, %d processes need about %d: %w", limit, n, need, err)
	}
	srv, err := bench.StartScaleServer(n)
	if err != nil {
		return err
	}
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute+duration)
	defer cancel()
	res, err := bench.RunScale(ctx, bench.ScaleConfig{N: n, Interval: interval, Duration: duration,
		URL: srv.URL, StatsURL: srv.StatsURL})
	if err != nil {
		return err
	}
	fmt.Println(res)
	return nil
}
