package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/bench"
)

// A short cold workload fills its three metrics for every peer, and the
// chart draws them.
func TestColdWorkload(t *testing.T) {
	peers, err := bench.NewPeers()
	require.NoError(t, err)
	defer func() {
		for _, p := range peers {
			require.NoError(t, p.Close())
		}
	}()
	w := coldWorkload(4)
	for _, m := range w.metrics {
		m.addRound(len(peers))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, w.all(ctx, peers, 0))
	for _, m := range w.metrics {
		for p := range peers {
			require.Positive(t, m.values[0][p], "%s %s", m.name, peers[p].Name())
		}
	}
	require.LessOrEqual(t, w.metrics[0].values[0][peerP], w.metrics[1].values[0][peerP])
	svg := chart("title", w.metrics)
	require.Contains(t, svg, "cold first byte (dial, echo), p99")
}
