//go:build linux

package bench

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// ttyPeerStarters are the peers that can run a command on a terminal, in
// the order the report prints them: procwire first, SSH with pty-req.
var ttyPeerStarters = []struct {
	name  string
	start func() (Peer, error)
}{{NameProcwire, NewProcwire}, {NameSSH, NewSSH}}

// eachTTYPeer runs f as a sub-benchmark or subtest per terminal peer.
func eachTTYPeer(tb testing.TB, run func(name string, f func(tb testing.TB)) bool, f func(tb testing.TB, ctx context.Context, p TTYPeer)) {
	for _, ps := range ttyPeerStarters {
		run(ps.name, func(tb testing.TB) {
			p, err := ps.start()
			require.NoError(tb, err)
			defer func() { require.NoError(tb, p.Close()) }()
			ctx, cancel := context.WithTimeout(context.Background(), benchTimeout)
			defer cancel()
			f(tb, ctx, p.(TTYPeer))
		})
	}
}

// TestKeystrokeEcho: the keystroke workload echoes through both terminal
// peers.
func TestKeystrokeEcho(t *testing.T) {
	eachTTYPeer(t, func(name string, f func(testing.TB)) bool {
		return t.Run(name, func(t *testing.T) { f(t) })
	}, func(tb testing.TB, ctx context.Context, p TTYPeer) {
		samples, err := KeystrokeEcho(ctx, p, 20)
		require.NoError(tb, err)
		require.Len(tb, samples, 20)
	})
}

// BenchmarkKeystrokeEcho types one byte into cat on a raw remote terminal
// and reads its echo, through procwire's tty session and through SSH with
// a pty-req, in the same run; it reports the p50 and p99 of the round
// trips. The goal is a p50 at most SSH's.
func BenchmarkKeystrokeEcho(b *testing.B) {
	eachTTYPeer(b, func(name string, f func(testing.TB)) bool {
		return b.Run(name, func(b *testing.B) { f(b) })
	}, func(tb testing.TB, ctx context.Context, p TTYPeer) {
		b := tb.(*testing.B)
		b.ReportAllocs()
		samples, err := KeystrokeEcho(ctx, p, b.N)
		require.NoError(b, err)
		reportPercentiles(b, samples)
	})
}
