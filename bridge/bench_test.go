//go:build linux

package bridge

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// BenchmarkStdoutHeadC streams 64 MiB from head -c through the stdout pump
// and the replay buffer to a consumer that acks as it goes, child start and
// teardown included: go test -run '^$' -bench StdoutHeadC ./bridge
func BenchmarkStdoutHeadC(b *testing.B) {
	const size = 64 << 20
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		p, err := Start(Request{
			Executable:       "head",
			Arguments:        []string{"-c", "64M", "/dev/zero"},
			WorkingDirectory: "/",
		}, nil)
		require.NoError(b, err)
		c := newConsumer(b, p, nil)
		c.toEOF()
		require.Equal(b, int64(size), c.n)
		require.NoError(b, p.Destroy())
	}
}
