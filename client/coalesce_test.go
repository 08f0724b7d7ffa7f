package client

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/coder/websocket"
	"github.com/procwire/procwire/frames"
	"github.com/procwire/procwire/internal/link"
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
	ws, err := p.dial(t.Context(), "", nil)
	require.NoError(t, err)
	defer ws.close()
	require.NotNil(t, ws.co)
	msg := make([]byte, 100<<10)
	for i := range msg {
		msg[i] = byte('a' + i%26)
	}
	before := writes.Load()
	var turn link.Turn // as the writer writes
	turn.Init(ws.co, true)
	turn.Lock()
	_, err = turn.Write(context.Background(), ws.ws, msg)
	turn.Unlock()
	require.NoError(t, err)
	require.Equal(t, int64(1), writes.Load()-before)
	require.Equal(t, msg, <-got)
}
