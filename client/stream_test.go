//go:build linux

package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

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

// A read with a deadline returns at its deadline, and the connection goes
// on: the bytes after it arrive, byte-exact.
func TestReadWithADeadline(t *testing.T) {
	e := newEnv(t, server.Config{})
	c := ctx(t)
	p := open(t, e.url, req("cat"), nil)
	_, err := p.Stdin().Write([]byte("a\n"))
	require.NoError(t, err)
	require.Equal(t, "a\n", readLine(t, c, p.Stdout()))
	received := p.Stdout().Received()
	for range 3 {
		dc, cancel := context.WithTimeout(c, 20*time.Millisecond)
		_, err := p.Stdout().ReadContext(dc, make([]byte, 1))
		cancel()
		require.ErrorIs(t, err, context.DeadlineExceeded)
	}
	_, err = p.Stdin().Write([]byte("b\n"))
	require.NoError(t, err)
	require.Equal(t, "b\n", readLine(t, c, p.Stdout()))
	require.Equal(t, received+2, p.Stdout().Received())
}

// The pattern of procwire exec: stdout and stderr read by two goroutines
// and Wait by a third, all without deadlines, on a process writing both
// streams in turn; every byte arrives in order and the exit settles.
func TestConcurrentReadersAndWait(t *testing.T) {
	e := newEnv(t, server.Config{})
	c := ctx(t)
	const n = 300
	p := open(t, e.url, sh(fmt.Sprintf(`i=0; while [ $i -lt %d ]; do echo out$i; echo err$i >&2; read x; i=$((i+1)); done`, n)), nil)
	var out, errb bytes.Buffer
	var wg sync.WaitGroup
	wg.Go(func() { out.WriteString(readAll(t, c, p.Stdout())) })
	wg.Go(func() { errb.WriteString(readAll(t, c, p.Stderr())) })
	var st client.ExitStatus
	var werr error
	wg.Go(func() { st, werr = p.Wait(c) })
	for range n {
		_, err := p.Stdin().Write([]byte("\n"))
		require.NoError(t, err)
	}
	wg.Wait()
	require.NoError(t, werr)
	require.True(t, st.Success(), "%v", st)
	var wantOut, wantErr strings.Builder
	for i := range n {
		fmt.Fprintf(&wantOut, "out%d\n", i)
		fmt.Fprintf(&wantErr, "err%d\n", i)
	}
	require.Equal(t, wantOut.String(), out.String())
	require.Equal(t, wantErr.String(), errb.String())
}

// A Read without a deadline, blocked when the handle is destroyed or
// detached, returns the handle's end.
func TestReadWithoutADeadlineUnblocks(t *testing.T) {
	e := newEnv(t, server.Config{})
	c := ctx(t)
	for _, end := range []string{"destroy", "detach"} {
		t.Run(end, func(t *testing.T) {
			p := open(t, e.url, req("sleep", "300"), nil)
			blocked := blockedHook(p)
			errc := make(chan error, 1)
			go func() {
				_, err := p.Stdout().Read(make([]byte, 1))
				errc <- err
			}()
			await(t, c, blocked, "the read to block")
			if end == "destroy" {
				require.NoError(t, p.Destroy(c))
			} else {
				p.Detach()
			}
			select {
			case err := <-errc:
				want := client.ErrDestroyed
				if end == "detach" {
					want = client.ErrDetached
				}
				require.True(t, errors.Is(err, want), "%v", err)
			case <-c.Done():
				t.Fatal("the read did not return")
			}
		})
	}
}
