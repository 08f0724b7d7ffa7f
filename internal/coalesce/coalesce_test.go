package coalesce

import (
	"io"
	"net"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// wrapped is a connection of the caller's: not a socket of ours.
type wrapped struct{ net.Conn }

// tcpPair returns both ends of a loopback TCP connection.
func tcpPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	server, ok := <-accepted
	require.True(t, ok)
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// releaseNoWait never waits on a peer that does not read: what the socket
// refuses becomes pending, messages after it queue behind it, and once the
// peer reads, flushPending delivers every byte, in order.
func TestReleaseNoWaitKeepsWhatTheSocketRefuses(t *testing.T) {
	c, peer := tcpPair(t)
	require.NoError(t, c.(*net.TCPConn).SetWriteBuffer(4<<10))
	co := &Coalescer{}
	conn := co.Wrap(c)
	require.True(t, co.CanTry())

	var want []byte
	msg := make([]byte, 64<<10)
	refused := 0
	for i := 0; refused < 3; i++ {
		require.Less(t, i, 1000, "the socket never refused a byte")
		for j := range msg {
			msg[j] = byte(i + j)
		}
		co.Hold()
		_, err := conn.Write(msg) // held: no network write
		require.NoError(t, err)
		written, err := co.ReleaseNoWait()
		require.NoError(t, err)
		want = append(want, msg...)
		if !written {
			refused++
		}
	}
	co.mu.Lock()
	require.NotEmpty(t, co.pending)
	co.mu.Unlock()

	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(peer)
		got <- b
	}()
	require.NoError(t, co.FlushPending())
	// A write outside a hold goes after what was pending.
	tail := []byte("tail")
	_, err := conn.Write(tail)
	require.NoError(t, err)
	want = append(want, tail...)
	require.NoError(t, c.(*net.TCPConn).CloseWrite())
	require.Equal(t, want, <-got)
}

// A connection that is not a socket of ours (a wrapper from the caller's
// dialer) offers no non-blocking write: the writer goroutine sends.
func TestNoTryOnForeignConn(t *testing.T) {
	c, _ := tcpPair(t)
	co := &Coalescer{}
	co.Wrap(wrapped{c})
	require.False(t, co.CanTry())
	require.False(t, (*Coalescer)(nil).CanTry())
}

// throughWrapper watches a connection and writes through it unchanged.
type throughWrapper struct{ net.Conn }

func (w throughWrapper) WritesTo() net.Conn { return w.Conn }

// A wrapper that promises its writes reach the connection beneath
// unchanged (the server's read guard) keeps the non-blocking write, on
// the socket beneath, however deep it is nested.
func TestTryBeneathWrappersThatWriteThrough(t *testing.T) {
	c, peer := tcpPair(t)
	co := &Coalescer{}
	wc := co.Wrap(throughWrapper{throughWrapper{c}})
	require.True(t, co.CanTry())
	co.Hold()
	_, err := wc.Write([]byte("through"))
	require.NoError(t, err)
	written, err := co.ReleaseNoWait()
	require.NoError(t, err)
	require.True(t, written)
	got := make([]byte, 7)
	_, err = io.ReadFull(peer, got)
	require.NoError(t, err)
	require.Equal(t, "through", string(got))

	co2 := &Coalescer{}
	co2.Wrap(throughWrapper{wrapped{c}}) // a foreign wrapper beneath
	require.False(t, co2.CanTry())
}
