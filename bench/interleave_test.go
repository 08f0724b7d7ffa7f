//go:build linux

package bench

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The interleaved workloads of cmd/report run every peer in turns and
// account each peer's round trips and CPU to it.
func TestInterleaved(t *testing.T) {
	peers, err := NewPeers()
	require.NoError(t, err)
	defer func() {
		for _, p := range peers {
			require.NoError(t, p.Close())
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	samples, cpu, err := Interleaved(ctx, peers, 25, 10, []byte("a line\n"))
	require.NoError(t, err)
	require.Len(t, samples, len(peers))
	for i := range peers {
		require.Len(t, samples[i], 25, peers[i].Name())
		require.Positive(t, cpu[i], peers[i].Name())
	}

	res, err := SessionsInterleaved(ctx, peers, 4, 7, 3)
	require.NoError(t, err)
	for i, r := range res {
		require.Equal(t, 4*7, r.RoundTrips, peers[i].Name())
		require.Positive(t, r.Elapsed, peers[i].Name())
		require.Positive(t, r.P99, peers[i].Name())
	}
}
