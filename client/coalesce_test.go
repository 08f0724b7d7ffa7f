package client

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/coder/websocket"
	"github.com/procwire/procwire/frames"
	"github.com/stretchr/testify/require"
)

// countingConn counts the writes that reach the connection.
type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// A 100 KiB message, which coder/websocket masks and flushes in 4 KiB
// pieces, reaches the connection in one write, intact; so does a message
// written while nothing is held (no coalescer in the dial's context).
func TestMessageInOneWrite(t *testing.T) {
	got := make(chan []byte, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{frames.Subprotocol}})
		if err != nil {
			return
		}
		defer c.CloseNow()
		c.SetReadLimit(1 << 20)
		_, b, err := c.Read(r.Context())
		if err == nil {
			got <- b
		}
		_, _, _ = c.Read(r.Context()) // until the client closes
	}))
	defer srv.Close()
	var writes atomic.Int64
	var d net.Dialer
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return countingConn{c, &writes}, nil
	}}}
	p := newProcess("ws"+srv.URL[len("http"):], "inst", Options{HTTPClient: hc})
	require.NotNil(t, p.dialClient)
	ws, err := p.dial(t.Context(), "")
	require.NoError(t, err)
	defer ws.close()
	require.NotNil(t, ws.co)
	msg := make([]byte, 100<<10)
	for i := range msg {
		msg[i] = byte('a' + i%26)
	}
	ws.wbuf = msg
	before := writes.Load()
	require.NoError(t, ws.writeMessage())
	require.Equal(t, int64(1), writes.Load()-before)
	require.Equal(t, msg, <-got)
}

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
	co := &coalescer{}
	conn := co.wrap(c)
	require.True(t, co.canTry())

	var want []byte
	msg := make([]byte, 64<<10)
	refused := 0
	for i := 0; refused < 3; i++ {
		require.Less(t, i, 1000, "the socket never refused a byte")
		for j := range msg {
			msg[j] = byte(i + j)
		}
		co.hold()
		_, err := conn.Write(msg) // held: no network write
		require.NoError(t, err)
		written, err := co.releaseNoWait()
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
	require.NoError(t, co.flushPending())
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
	co := &coalescer{}
	co.wrap(countingConn{c, new(atomic.Int64)})
	require.False(t, co.canTry())
	require.False(t, (*coalescer)(nil).canTry())
}
