//go:build linux

package bench

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/procwire/procwire/bridge"
)

// The workloads need a server that starts processes, which procwire's
// does on Linux: the tests and benchmarks of this package are Linux's.

// TestMain fails the run if a test leaves a goroutine behind. Run with
// PROCWIRE_SCALE_SERVER set, the test binary is BenchmarkScale's server;
// re-executed as a process's init, it is that init (bridge.MaybeRunInit,
// as procwire serve): procwire's children start as a deployed server
// starts them.
func TestMain(m *testing.M) {
	bridge.MaybeRunInit()
	MaybeServeScale()
	goleak.VerifyTestMain(m)
}

// benchTimeout bounds one benchmark iteration; a stuck stream fails the run
// instead of hanging it.
const benchTimeout = 5 * time.Minute

// streamSize is how much stdout or stdin one iteration moves: the issue
// asks for at least 256 MiB.
const streamSize = 256 << 20

// sessions is how many sessions BenchmarkSessions runs at once.
const sessions = 200

// eachPeer runs f as a sub-benchmark per peer, procwire first: the ratios
// of their figures, from one run, are procwire's cost.
func eachPeer(b *testing.B, f func(b *testing.B, ctx context.Context, p Peer)) {
	for _, ps := range peerStarters {
		b.Run(ps.name, func(b *testing.B) {
			p, err := ps.start()
			require.NoError(b, err)
			defer func() { require.NoError(b, p.Close()) }()
			ctx, cancel := context.WithTimeout(context.Background(), benchTimeout)
			defer cancel()
			f(b, ctx, p)
		})
	}
}

// BenchmarkStdout streams head -c 256 MiB of a child's stdout to the
// client through procwire, a plain coder/websocket binary connection and
// SSH.
func BenchmarkStdout(b *testing.B) {
	eachPeer(b, func(b *testing.B, ctx context.Context, p Peer) {
		b.SetBytes(streamSize)
		b.ReportAllocs()
		for b.Loop() {
			_, err := StdoutBulk(ctx, p, streamSize)
			require.NoError(b, err)
		}
	})
}

// BenchmarkStdin writes 256 MiB into wc -c in 64 KiB writes and
// half-closes, through each peer.
func BenchmarkStdin(b *testing.B) {
	eachPeer(b, func(b *testing.B, ctx context.Context, p Peer) {
		b.SetBytes(streamSize)
		b.ReportAllocs()
		for b.Loop() {
			_, err := StdinBulk(ctx, p, streamSize)
			require.NoError(b, err)
		}
	})
}

// BenchmarkEchoRoundTrip writes one byte to a remote cat and reads it back
// through each peer; it reports the p50 and p99 of the round trips next to
// the mean.
func BenchmarkEchoRoundTrip(b *testing.B) {
	eachPeer(b, func(b *testing.B, ctx context.Context, p Peer) {
		b.ReportAllocs()
		samples, err := Echo(ctx, p, b.N)
		require.NoError(b, err)
		reportPercentiles(b, samples)
	})
}

// BenchmarkRequestResponse writes a 2 KiB line to a remote cat and reads it
// back before the next, the shape of an ACP session, through each peer.
func BenchmarkRequestResponse(b *testing.B) {
	eachPeer(b, func(b *testing.B, ctx context.Context, p Peer) {
		b.SetBytes(LineSize)
		b.ReportAllocs()
		elapsed, err := RequestResponse(ctx, p, b.N)
		require.NoError(b, err)
		b.ReportMetric(float64(b.N)/elapsed.Seconds(), "lines/s")
	})
}

// BenchmarkSessions runs 200 cat sessions at once, each making b.N round
// trips of 64 bytes, through each peer; it reports round trips per second,
// their p99 and the CPU time (client and server, this process) per round
// trip.
func BenchmarkSessions(b *testing.B) {
	eachPeer(b, func(b *testing.B, ctx context.Context, p Peer) {
		b.ReportAllocs()
		res, err := Sessions(ctx, p, sessions, b.N)
		require.NoError(b, err)
		b.ReportMetric(res.RTPerSecond(), "RT/s")
		b.ReportMetric(float64(res.P99.Nanoseconds())/1e3, "p99-µs")
		b.ReportMetric(float64(res.CPUPerRT().Nanoseconds())/1e3, "cpu-µs/RT")
	})
}

// reportPercentiles reports the p50 and p99 of samples in microseconds.
func reportPercentiles(b *testing.B, samples []time.Duration) {
	slices.Sort(samples)
	b.ReportMetric(float64(Percentile(samples, 0.5).Nanoseconds())/1e3, "p50-µs")
	b.ReportMetric(float64(Percentile(samples, 0.99).Nanoseconds())/1e3, "p99-µs")
}
