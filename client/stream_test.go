//go:build linux

package client_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/client"
	"github.com/procwire/procwire/server"
)

func TestCat64MiB(t *testing.T) {
	e := newEnv(t, server.Config{})
	c := ctx(t)
	p := open(t, e.url, req("cat"), nil)
	const n = 64 << 20
	sent, got, count := streamThrough(t, c, p, n, 1)
	require.Equal(t, int64(n), count)
	require.Equal(t, sent, got, "sha256")
	st, err := p.Wait(c)
	require.NoError(t, err)
	require.True(t, st.Success(), "%v", st)
	require.NoError(t, p.Destroy(c))
}

func TestHalfCloseWordCount(t *testing.T) {
	e := newEnv(t, server.Config{})
	c := ctx(t)
	p := open(t, e.url, req("wc", "-c"), nil)
	const n = 3<<20 + 17
	written, err := p.Stdin().WriteContext(c, bytes.Repeat([]byte("x"), n))
	require.NoError(t, err)
	require.Equal(t, n, written)
	require.NoError(t, p.Stdin().Close())
	require.NoError(t, p.Stdin().Close(), "closing again is harmless")
	_, err = p.Stdin().Write([]byte("late"))
	require.ErrorIs(t, err, client.ErrStdinClosed)
	require.Equal(t, fmt.Sprintf("%d\n", n), readAll(t, c, p.Stdout()))
	st, err := p.Wait(c)
	require.NoError(t, err)
	require.True(t, st.Success())
}

func TestStderrAndStdoutApart(t *testing.T) {
	e := newEnv(t, server.Config{})
	c := ctx(t)
	// stderr has no ordering with exit (PROTOCOL.md §5): it is read
	// before the script goes on.
	p := open(t, e.url, sh(`echo err >&2; read x; echo out; exit 3`), nil)
	require.Equal(t, "err\n", readLine(t, c, p.Stderr()))
	_, err := p.Stdin().WriteContext(c, []byte("go\n"))
	require.NoError(t, err)
	require.Equal(t, "out\n", readAll(t, c, p.Stdout()))
	st, err := p.Wait(c)
	require.NoError(t, err)
	require.Equal(t, client.ExitStatus{Code: 3}, st)
	require.Equal(t, "", readAll(t, c, p.Stderr()), "EOF once the exit is known")
	require.Zero(t, p.Stderr().Dropped())
}

func TestStderrBounded(t *testing.T) {
	e := newEnv(t, server.Config{StderrRing: 4096})
	c := ctx(t)
	opts := fastOpts()
	opts.StderrBuffer = 1024
	// 1 MiB of stderr that nobody reads while it is written.
	p := open(t, e.url, sh(`head -c 1048576 /dev/zero >&2; echo done`), opts)
	require.Equal(t, "done\n", readAll(t, c, p.Stdout()))
	_, err := p.Wait(c)
	require.NoError(t, err)
	got := readAll(t, c, p.Stderr())
	require.LessOrEqual(t, len(got), 1024)
	require.Equal(t, int64(1<<20), int64(len(got))+p.Stderr().Dropped(), "every byte is read or counted as dropped")
}
