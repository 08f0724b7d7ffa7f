package client

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/frames"
)

// firstServer accepts upgrades selecting from subs and reports, per
// connection, the first frame the upgrade offered (nil: none) and the first
// message it then read, after answering with a destroyed frame.
func firstServer(t *testing.T, subs []string) (url string, got chan [2][]byte) {
	got = make(chan [2][]byte, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		offered, _ := frames.FirstFromSubprotocols(r.Header.Values("Sec-WebSocket-Protocol"))
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: subs})
		if err != nil {
			return
		}
		defer c.CloseNow()
		if c.Subprotocol() != frames.SubprotocolFirst {
			offered = nil
			if _, msg, err := c.Read(r.Context()); err == nil {
				offered = msg // the first frame came as a message
			}
		}
		if err := c.Write(r.Context(), websocket.MessageText, []byte(`{"type":"destroyed","process_id":"8f3a0c1e5b7d49a2b6c4e0f1a2b3c4d5"}`+"\n")); err != nil {
			return
		}
		_, next, _ := c.Read(r.Context())
		got <- [2][]byte{offered, next}
		_, _, _ = c.Read(r.Context()) // until the client closes
	}))
	t.Cleanup(srv.Close)
	return "ws" + strings.TrimPrefix(srv.URL, "http"), got
}

// The first frame goes in the upgrade; a server that takes it
// (procwire.v1.first) gets no message for it, one that selects procwire.v1
// gets it as the first message. A frame too long for the upgrade is sent
// as a message, and so is every frame with Options.FirstFrameAsMessage.
func TestDialOffersTheFirstFrame(t *testing.T) {
	small := &frames.Open{InstanceID: "inst", Request: frames.ProcessRequest{Executable: "true", Arguments: []string{}, WorkingDirectory: "/", Environment: map[string]string{}}}
	big := *small
	big.Request.Environment = map[string]string{"BIG": strings.Repeat("x", frames.MaxFirstSubprotocol)}
	ack := frames.Append(nil, &frames.Ack{Stdout: 0})
	for _, c := range []struct {
		name      string
		subs      []string
		open      *frames.Open
		opts      Options
		firstSent bool
	}{
		{"taken", []string{frames.SubprotocolFirst, frames.Subprotocol}, small, Options{}, true},
		{"left", []string{frames.Subprotocol}, small, Options{}, false},
		{"too long for the upgrade", []string{frames.SubprotocolFirst, frames.Subprotocol}, &big, Options{}, false},
		// A server that would take it is not offered it.
		{"as a message by choice", []string{frames.SubprotocolFirst, frames.Subprotocol}, small, Options{FirstFrameAsMessage: true}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			url, got := firstServer(t, c.subs)
			p := newProcess(url, "inst", c.opts)
			ws, err := p.dial(t.Context(), "", c.open)
			require.NoError(t, err)
			defer ws.close()
			require.Equal(t, c.firstSent, ws.firstSent)
			f, err := ws.exchange(t.Context(), c.open)
			require.NoError(t, err)
			require.Equal(t, frames.TypeDestroyed, f.Type())
			require.NoError(t, ws.write(t.Context(), &frames.Ack{Stdout: 0}))
			g := <-got
			require.Equal(t, string(frames.Append(nil, c.open)), string(g[0]), "the open, in the upgrade or as the first message")
			require.Equal(t, string(ack), string(g[1]), "the message after the answer: the open was sent once")
		})
	}
}

// A dial whose request, carrying the first frame, was written and then
// lost is a firstOfferedError (the frame may have been served); one that
// reached nothing, or that carried no frame, is not.
func TestDialFirstOffered(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			// Read the request head, then cut the connection.
			br := bufio.NewReader(c)
			for {
				line, err := br.ReadString('\n')
				if err != nil || line == "\r\n" {
					break
				}
			}
			_ = c.Close()
		}
	}()
	open := &frames.Open{InstanceID: "inst", Request: frames.ProcessRequest{Executable: "true", Arguments: []string{}, WorkingDirectory: "/", Environment: map[string]string{}}}
	url := "ws://" + l.Addr().String() + "/"
	p := newProcess(url, "inst", Options{})
	_, err = p.dial(t.Context(), "", open)
	require.Error(t, err)
	require.True(t, errors.As(err, new(firstOfferedError)), "%v", err)
	require.ErrorIs(t, err, errHandshakeLost)
	_, err = p.dial(t.Context(), "", nil)
	require.Error(t, err)
	require.False(t, errors.As(err, new(firstOfferedError)), "%v", err)
	require.NoError(t, l.Close())
	<-done
	_, err = p.dial(t.Context(), "", open)
	require.Error(t, err)
	require.False(t, errors.As(err, new(firstOfferedError)), "nothing listens: %v", err)
}
