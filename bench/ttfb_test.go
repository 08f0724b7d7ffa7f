//go:build linux

package bench

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A cold run on every peer dials, starts echo and times its first byte;
// the interleaved runs account each peer's runs and CPU to it.
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

	samples, cpu, err := ColdInterleaved(ctx, peers, 5)
	require.NoError(t, err)
	require.Len(t, samples, len(peers))
	for i := range peers {
		require.Len(t, samples[i], 5, peers[i].Name())
		for _, d := range samples[i] {
			require.Positive(t, d, peers[i].Name())
		}
		require.Positive(t, cpu[i], peers[i].Name())
	}
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
