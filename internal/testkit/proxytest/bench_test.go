package proxytest

import (
	"context"
	"io"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/client"
	"github.com/procwire/procwire/frames"
)

// benchSize is the stdout one iteration moves.
const benchSize = 256 << 20

var benchSeq atomic.Int64

// BenchmarkThroughNginx streams head -c 256 MiB of a child's stdout to the
// client directly from a "procwire serve" backend and through nginx in
// front of two of them (the configuration of docs/proxies.md), alternating
// the two in every iteration so that both see the same machine load. It
// reports the MB/s of each and their ratio: the proxy's cost.
func BenchmarkThroughNginx(b *testing.B) {
	a, other := startBackend(b), startBackend(b)
	ng := startNginx(b, time.Second, a, other)
	buf := make([]byte, 256<<10)
	var direct, proxied time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		direct += streamStdout(b, wsURL(a.addr), buf)
		proxied += streamStdout(b, wsURL(ng.addr), buf)
	}
	mbps := func(d time.Duration) float64 { return float64(b.N) * benchSize / 1e6 / d.Seconds() }
	b.ReportMetric(mbps(direct), "direct-MB/s")
	b.ReportMetric(mbps(proxied), "nginx-MB/s")
	b.ReportMetric(direct.Seconds()/proxied.Seconds(), "nginx/direct")
}

// streamStdout opens head -c benchSize /dev/zero through url, reads its
// stdout to the end and returns how long that took, open to destroy.
func streamStdout(b *testing.B, url string, buf []byte) time.Duration {
	req := frames.ProcessRequest{
		Executable:       "head",
		Arguments:        []string{"-c", strconv.Itoa(benchSize), "/dev/zero"},
		WorkingDirectory: "/",
		Environment:      map[string]string{"PATH": "/usr/bin:/bin"},
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	start := time.Now()
	inst := "bench-" + strconv.FormatInt(benchSeq.Add(1), 10)
	p, err := client.Open(ctx, url, inst, req, &client.Options{Token: token})
	require.NoError(b, err)
	n, err := io.CopyBuffer(io.Discard, onlyReader{p.Stdout()}, buf)
	require.NoError(b, err)
	require.Equal(b, int64(benchSize), n)
	exit, err := p.Wait(ctx)
	require.NoError(b, err)
	require.Equal(b, 0, exit.Code)
	require.NoError(b, p.Destroy(ctx))
	return time.Since(start)
}

// onlyReader hides any WriterTo so io.CopyBuffer uses the given buffer.
type onlyReader struct{ io.Reader }
