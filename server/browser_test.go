//go:build linux

package server

import (
	"encoding/base64"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/frames"
)

// bearerProto is the subprotocol carrying token (PROTOCOL.md §1).
func bearerProto(token string) string {
	return frames.BearerSubprotocolPrefix + base64.RawURLEncoding.EncodeToString([]byte(token))
}

// TestBearerSubprotocol: the token offered as a subprotocol authenticates
// like the header; missing, wrong, malformed and doubled ones are 401
// exactly as a wrong header; with both, both must be right; the server
// selects procwire.v1, never the bearer subprotocol; nothing is logged.
func TestBearerSubprotocol(t *testing.T) {
	var logs syncBuffer
	h := newHarness(t, Config{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	right, wrong := bearerProto(testToken), bearerProto("wrong-"+testToken)
	header := func(token string) http.Header { return http.Header{"Authorization": {"Bearer " + token}} }
	std := frames.BearerSubprotocolPrefix + base64.StdEncoding.EncodeToString([]byte(testToken+"?>"))
	for _, tc := range []struct {
		name   string
		header http.Header
		protos []string
		ok     bool
	}{
		{"subprotocol", nil, []string{frames.Subprotocol, right}, true},
		{"subprotocol first", nil, []string{right, frames.Subprotocol}, true},
		{"prefix in upper case", nil, []string{frames.Subprotocol, strings.ToUpper(frames.BearerSubprotocolPrefix) + right[len(frames.BearerSubprotocolPrefix):]}, true},
		{"missing", nil, []string{frames.Subprotocol}, false},
		{"wrong", nil, []string{frames.Subprotocol, wrong}, false},
		{"token prefix", nil, []string{frames.Subprotocol, bearerProto(testToken[:5])}, false},
		{"padded", nil, []string{frames.Subprotocol, right + "="}, false},
		{"standard alphabet", nil, []string{frames.Subprotocol, std}, false},
		{"not base64", nil, []string{frames.Subprotocol, frames.BearerSubprotocolPrefix + "*"}, false},
		{"empty", nil, []string{frames.Subprotocol, frames.BearerSubprotocolPrefix}, false},
		{"twice", nil, []string{frames.Subprotocol, right, right}, false},
		{"right and wrong", nil, []string{frames.Subprotocol, right, wrong}, false},
		{"both right", header(testToken), []string{frames.Subprotocol, right}, true},
		{"header right, subprotocol wrong", header(testToken), []string{frames.Subprotocol, wrong}, false},
		{"header wrong, subprotocol right", header("wrong"), []string{frames.Subprotocol, right}, false},
		{"header right, subprotocol malformed", header(testToken), []string{frames.Subprotocol, right + "="}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws, resp, err := h.dialWith(tc.header, tc.protos)
			if !tc.ok {
				require.Error(t, err)
				require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
				require.Equal(t, `Bearer realm="procwire"`, resp.Header.Get("WWW-Authenticate"))
				return
			}
			require.NoError(t, err)
			require.Equal(t, frames.Subprotocol, ws.Subprotocol(), "the server selects procwire.v1")
			require.Equal(t, frames.Subprotocol, resp.Header.Get("Sec-WebSocket-Protocol"), "the token is never echoed")
			p := &peer{t: t, ws: ws}
			p.send(openFrame("inst-bearer-"+strings.ReplaceAll(tc.name, " ", "-"), "true"))
			nextOf[*frames.Opened](p)
			p.send(&frames.Destroy{})
			nextOf[*frames.Destroyed](p)
		})
	}
	out := logs.String()
	require.Contains(t, out, "reason=unauthorized")
	for _, secret := range []string{testToken, right, wrong, right[len(frames.BearerSubprotocolPrefix):]} {
		require.NotContains(t, out, secret)
	}
}

func TestBearerSubprotocolWithoutToken(t *testing.T) {
	// A server without a token ignores the subprotocol (loopback only).
	s, err := New(Config{})
	require.NoError(t, err)
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set("Sec-WebSocket-Protocol", frames.Subprotocol+", "+bearerProto("anything"))
	require.True(t, s.authorized(r))

	s, err = New(Config{Token: "abc"})
	require.NoError(t, err)
	for protos, want := range map[string]bool{
		frames.Subprotocol + ", " + bearerProto("abc"):                             true,
		frames.Subprotocol + "," + bearerProto("abc"):                              true,
		frames.Subprotocol + ", " + bearerProto("abd"):                             false,
		frames.Subprotocol + ", " + bearerProto("abc") + ", " + bearerProto("abc"): false,
		frames.Subprotocol: false,
	} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("Sec-WebSocket-Protocol", protos)
		require.Equal(t, want, s.authorized(r), "%q", protos)
	}
}

// TestPings: an open or resume asking for pings is answered with pings:
// true, and every ping with its pong, even while the stdout window is full
// and unacknowledged; without pings, pings is absent and a ping is 1002.
func TestPings(t *testing.T) {
	h := newHarness(t, Config{})

	f := openFrame("inst-pings", "sh", "-c", "exec yes")
	f.StdoutWindow = frames.MinWindow
	f.Pings = true
	p, opened := h.open(f)
	require.True(t, opened.Pings)

	// Fill the window and never ack: the server has stdout it may not send.
	var got int64
	for got < opened.StdoutWindow {
		got += int64(len(nextOf[*frames.Stdout](p).Data))
	}
	for _, id := range []int64{0, 1, 7, frames.MaxPingID} {
		p.send(&frames.Ping{ID: id})
		require.Equal(t, &frames.Pong{ID: id}, nextOf[*frames.Pong](p))
	}
	require.Empty(t, p.pending, "nothing past the window")

	// A resume without pings gets none: a ping there is not allowed now.
	p.ws.CloseNow()
	h.waitEvent(hookDetached, opened.ProcessID)
	r := h.dial()
	r.send(&frames.Resume{ProcessID: opened.ProcessID, Token: opened.Token, StdoutReceived: got})
	require.False(t, nextOf[*frames.Resumed](r).Pings)
	r.send(&frames.Ping{ID: 3})
	r.requireClosed(websocket.StatusProtocolError, "ping without pings negotiated")
	h.waitEvent(hookDetached, opened.ProcessID)

	// A resume with pings gets them.
	r = h.dial()
	r.send(&frames.Resume{ProcessID: opened.ProcessID, Token: opened.Token, StdoutReceived: got, Pings: true})
	require.True(t, nextOf[*frames.Resumed](r).Pings)
	r.send(&frames.Ping{ID: 9})
	require.Equal(t, int64(9), nextOf[*frames.Pong](r).ID)
	r.send(&frames.Destroy{})
	r.destroyedAnswer(opened.ProcessID)

	// An open without pings: opened says nothing, and a ping is 1002.
	q, opened2 := h.open(openFrame("inst-nopings", "cat"))
	require.False(t, opened2.Pings)
	q.send(&frames.Ping{ID: 1})
	q.requireClosed(websocket.StatusProtocolError, "ping without pings negotiated")
}
