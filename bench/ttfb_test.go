//go:build linux

package bench

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A cold run on every peer dials, starts echo and times its first byte;
// the interleaved and the back-to-back runs account each peer's runs, wall
// and CPU to it, with the processes it started.
func TestColdInterleaved(t *testing.T) {
	peers, err := NewPeers()
	require.NoError(t, err)
	defer func() {
		for _, p := range peers {
			require.NoError(t, p.Close())
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	res, err := ColdInterleaved(ctx, peers, 5)
	require.NoError(t, err)
	require.Len(t, res, len(peers))
	for i, r := range res {
		require.Len(t, r.Samples, 5, peers[i].Name())
		for _, d := range r.Samples {
			require.Positive(t, d, peers[i].Name())
		}
		require.Positive(t, r.CPU, peers[i].Name())
		require.GreaterOrEqual(t, r.CPUAll, r.CPU, peers[i].Name())
		require.GreaterOrEqual(t, r.Elapsed, sum(r.Samples), peers[i].Name())
	}

	// Back to back, a peer's children (all but perhaps its last) are
	// reaped in its own runs: their CPU is counted.
	res, err = ColdBackToBack(ctx, peers, 3, 1)
	require.NoError(t, err)
	for i, r := range res {
		require.Len(t, r.Samples, 3, peers[i].Name())
		require.Greater(t, r.CPUAll, r.CPU, peers[i].Name())
		require.GreaterOrEqual(t, r.Elapsed, sum(r.Samples), peers[i].Name())
	}
}

func sum(ds []time.Duration) (t time.Duration) {
	for _, d := range ds {
		t += d
	}
	return t
}

// BenchmarkColdFirstByte times a cold run through each peer: a new
// connection, echo started, the first byte of its stdout (ColdFirstByte);
// it reports the p50 and p99 of the runs next to the mean, which includes
// the untimed rest of each run (the rest of the output and the close).
func BenchmarkColdFirstByte(b *testing.B) {
	eachPeer(b, func(b *testing.B, ctx context.Context, p Peer) {
		b.ReportAllocs()
		samples := make([]time.Duration, 0, b.N)
		for b.Loop() {
			d, err := ColdFirstByte(ctx, p)
			require.NoError(b, err)
			samples = append(samples, d)
		}
		reportPercentiles(b, samples)
	})
}
