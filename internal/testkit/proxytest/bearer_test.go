package proxytest

import (
	"encoding/base64"
	"net/http"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/frames"
)

// TestBearerSubprotocolThroughProxies: a browser's token, offered as the
// subprotocol procwire.bearer.<base64url> (PROTOCOL.md §1), passes nginx and
// Caddy as configured in docs/proxies.md: the right one is served (and
// procwire.v1 selected), a wrong one refused 401 by the backend.
func TestBearerSubprotocolThroughProxies(t *testing.T) {
	a, b := startBackend(t), startBackend(t)
	ng := startNginx(t, time.Second, a, b)
	cd := startCaddy(t, a, b)
	proto := func(tok string) string {
		return frames.BearerSubprotocolPrefix + base64.RawURLEncoding.EncodeToString([]byte(tok))
	}
	for name, addr := range map[string]string{"nginx": ng.addr, "caddy": cd.addr} {
		ctx := testCtx(t)
		header := http.Header{frames.HeaderInstance: {"bearer-" + name}}
		_, resp, err := websocket.Dial(ctx, wsURL(addr), &websocket.DialOptions{
			HTTPHeader: header, Subprotocols: []string{frames.Subprotocol, proto("wrong-token-0123456789abcdef")},
		})
		require.Error(t, err, name)
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, name)

		ws, _, err := websocket.Dial(ctx, wsURL(addr), &websocket.DialOptions{
			HTTPHeader: header, Subprotocols: []string{frames.Subprotocol, proto(token)},
		})
		require.NoError(t, err, name)
		require.Equal(t, frames.Subprotocol, ws.Subprotocol(), name)
		ws.SetReadLimit(frames.MaxLine)
		send := func(f frames.Frame) {
			require.NoError(t, ws.Write(ctx, websocket.MessageText, frames.Append(nil, f)), name)
		}
		next := func() frames.Frame {
			for {
				_, b, err := ws.Read(ctx)
				require.NoError(t, err, name)
				f, err := frames.Decode(b)
				require.NoError(t, err, name)
				if f.Type() != frames.TypeCredit {
					return f
				}
			}
		}
		send(&frames.Open{InstanceID: "bearer-" + name, Pings: true, Request: frames.ProcessRequest{
			Executable: "cat", Arguments: []string{}, WorkingDirectory: "/", Environment: map[string]string{}}})
		opened, ok := next().(*frames.Opened)
		require.True(t, ok, name)
		require.True(t, opened.Pings, name)
		send(&frames.Ping{ID: 42})
		require.Equal(t, &frames.Pong{ID: 42}, next(), "%s: a pong through the proxy", name)
		send(&frames.Destroy{})
		for {
			if _, done := next().(*frames.Destroyed); done {
				break
			}
		}
		ws.CloseNow()
	}
	for _, be := range []*backend{a, b} {
		require.NotContains(t, be.logs.String(), base64.RawURLEncoding.EncodeToString([]byte(token)))
	}
}
