//go:build linux

package bench

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// scaleEnv overrides the sizes BenchmarkScale runs, as a comma-separated
// list of N (for example PROCWIRE_SCALE_N=1000,4000).
const scaleEnv = "PROCWIRE_SCALE_N"

// scaleSizes returns the N BenchmarkScale runs: 100 always (a small run
// that keeps `-bench . -benchtime 1x` cheap), 1,000 and 4,000 when -bench
// names Scale explicitly, or what PROCWIRE_SCALE_N lists.
func scaleSizes(b *testing.B) []int {
	if v := os.Getenv(scaleEnv); v != "" {
		var ns []int
		for f := range strings.SplitSeq(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			require.NoError(b, err, scaleEnv)
			ns = append(ns, n)
		}
		return ns
	}
	if fl := flag.Lookup("test.bench"); fl != nil && strings.Contains(fl.Value.String(), "Scale") {
		return []int{100, 1000, 4000}
	}
	return []int{100}
}

// BenchmarkScale runs N concurrent cat processes on one server (a child
// process, so that its figures are its own), each echoing a line every
// 100 ms for 5 s, and reports the server's RSS, heap, threads and fds with
// all N live, the time to open all N, and the echo p50/p99. Each iteration
// is a whole run; use -benchtime 1x:
//
//	go test -run '^$' -bench 'Scale' -benchtime 1x ./bench
//
// go run ./bench/cmd/scale -n 4000 runs the same by hand.
func BenchmarkScale(b *testing.B) {
	for _, n := range scaleSizes(b) {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			// The server subprocess inherits the limit set here.
			need := ScaleFDs(n)
			if limit, err := RaiseFDLimit(need); limit < need {
				b.Skipf("RLIMIT_NOFILE is %d, N=%d needs about %d (%v)", limit, n, need, err)
			}
			srv, err := StartScaleServer(n)
			require.NoError(b, err)
			defer func() { require.NoError(b, srv.Close()) }()
			var res ScaleResult
			for range b.N {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
				res, err = RunScale(ctx, ScaleConfig{N: n, Interval: 100 * time.Millisecond,
					Duration: 5 * time.Second, URL: srv.URL, StatsURL: srv.StatsURL})
				cancel()
				require.NoError(b, err)
			}
			b.Log(res)
			mib := func(v int64) float64 { return float64(v) / (1 << 20) }
			b.ReportMetric(mib(res.Loaded.RSS), "rss-MiB")
			b.ReportMetric(mib(res.Loaded.HeapInUse), "heap-MiB")
			b.ReportMetric(float64(res.Loaded.Threads), "threads")
			b.ReportMetric(float64(res.Loaded.FDs), "fds")
			b.ReportMetric(float64(res.OpenAll.Milliseconds()), "open-all-ms")
			b.ReportMetric(float64(res.EchoP50.Microseconds()), "echo-p50-µs")
			b.ReportMetric(float64(res.EchoP99.Microseconds()), "echo-p99-µs")
		})
	}
}
