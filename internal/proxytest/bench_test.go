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
// client directly from a "procwire serve" backend and, in the same run,
// through nginx in front of two of them (the configuration of
// docs/proxies.md): the ratio of the two MB/s figures is the proxy's cost.
func BenchmarkThroughNginx(b *testing.B) {
	a, other := startBackend(b), startBackend(b)
	ng := startNginx(b, time.Second, a, other)
	b.Run("direct", func(b *testing.B) { benchmarkStdout(b, wsURL(a.addr)) })
	b.Run("nginx", func(b *testing.B) { benchmarkStdout(b, wsURL(ng.addr)) })
}

func benchmarkStdout(b *testing.B, url string) {
	req := frames.ProcessRequest{
		Executable:       "head",
		Arguments:        []string{"-c", strconv.Itoa(benchSize), "/dev/zero"},
		WorkingDirectory: "/",
		Environment:      map[string]string{"PATH": "/usr/bin:/bin"},
	}
	buf := make([]byte, 256<<10)
	b.SetBytes(benchSize)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
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
		cancel()
	}
}

// onlyReader hides any WriterTo so io.CopyBuffer uses the given buffer.
type onlyReader struct{ io.Reader }
