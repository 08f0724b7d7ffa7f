package cutproxy

import (
	"context"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// echo serves a TCP echo on loopback until the test ends.
func echo(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				io.Copy(c, c)
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	return ln.Addr().String()
}

func newProxy(t *testing.T) *Proxy {
	p, err := New(echo(t))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	return p
}

func dial(t *testing.T, p *Proxy) net.Conn {
	c, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	require.NoError(t, c.SetDeadline(time.Now().Add(30*time.Second)))
	return c
}

func TestForwards(t *testing.T) {
	p := newProxy(t)
	c := dial(t, p)
	_, err := c.Write([]byte("hello"))
	require.NoError(t, err)
	buf := make([]byte, 5)
	_, err = io.ReadFull(c, buf)
	require.NoError(t, err)
	require.Equal(t, "hello", string(buf))
	require.Equal(t, 1, p.Accepted())
	require.Zero(t, p.Cuts())
}

// CutAt forwards exactly up to the count, both directions counted.
func TestCutAt(t *testing.T) {
	p := newProxy(t)
	c := dial(t, p)
	p.CutAt(8) // 5 bytes out, 3 of them back
	_, err := c.Write([]byte("hello"))
	require.NoError(t, err)
	got, err := io.ReadAll(c)
	require.Error(t, err, "a reset, not an orderly close")
	require.Equal(t, "hel", string(got))
	require.NoError(t, p.WaitCuts(context.Background(), 1))
	require.Equal(t, 1, p.Cuts())

	c2 := dial(t, p)
	_, err = c2.Write([]byte("again"))
	require.NoError(t, err)
	buf := make([]byte, 5)
	_, err = io.ReadFull(c2, buf)
	require.NoError(t, err, "new connections are forwarded")
}

func TestCutAllDropRefuse(t *testing.T) {
	p := newProxy(t)
	c := dial(t, p)
	_, err := c.Write([]byte("x"))
	require.NoError(t, err)
	_, err = io.ReadFull(c, make([]byte, 1))
	require.NoError(t, err)
	require.Equal(t, 1, p.CutAll())
	_, err = io.ReadAll(c)
	require.Error(t, err)

	p.DropReplies(true)
	c = dial(t, p)
	_, err = c.Write([]byte("lost"))
	require.NoError(t, err)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(50*time.Millisecond)))
	n, err := c.Read(make([]byte, 4))
	require.Zero(t, n)
	require.ErrorIs(t, err, os.ErrDeadlineExceeded, "the echo was dropped")
	p.DropReplies(false)

	p.Refuse(true)
	c = dial(t, p)
	_, err = io.ReadAll(c)
	require.NoError(t, err, "closed at once")
	require.Equal(t, 2, p.Accepted(), "refused connections are not counted")
}
