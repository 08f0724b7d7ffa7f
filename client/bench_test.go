//go:build linux

package client_test

import (
	"errors"
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/server"
)

// BenchmarkCat measures the round trip through a remote cat on loopback:
// each op writes 1 MiB to stdin and reads it back from stdout, both ways
// at once.
//
//	go test -run '^$' -bench Cat ./client
func BenchmarkCat(b *testing.B) {
	e := newEnv(b, server.Config{})
	c := ctx(b)
	p := open(b, e.url, req("cat"), nil)
	chunk := make([]byte, 1<<20)
	b.SetBytes(int64(len(chunk)))
	b.ReportAllocs()
	werr := make(chan error, 1)
	go func() {
		for range b.N {
			if _, err := p.Stdin().WriteContext(c, chunk); err != nil {
				werr <- err
				return
			}
		}
		werr <- p.Stdin().CloseContext(c)
	}()
	buf := make([]byte, 256<<10)
	var n int64
	for {
		k, err := p.Stdout().ReadContext(c, buf)
		n += int64(k)
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(b, err)
	}
	require.NoError(b, <-werr)
	require.Equal(b, int64(b.N)*int64(len(chunk)), n)
}
