//go:build linux

package main

import (
	"net/http"
	"testing"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/frames"
)

// TestServeAllowOrigin: --allow-origin lets a page of another origin (a
// browser client on another port) connect; any other Origin is still 403.
func TestServeAllowOrigin(t *testing.T) {
	url := startServe(t, "--allow-origin", "127.0.0.1:4*", "--allow-origin", "http://localhost:6*")
	for _, tc := range []struct {
		origin string
		ok     bool
	}{
		{"http://127.0.0.1:4321", true},
		{"http://localhost:6000", true},
		{"http://127.0.0.1:5321", false},
		{"https://localhost:6000", false},
		{"http://localhost:4321", false},
	} {
		ws, resp, err := websocket.Dial(testCtx(t), url, &websocket.DialOptions{
			HTTPHeader:   http.Header{"Origin": {tc.origin}},
			Subprotocols: []string{frames.Subprotocol},
		})
		if !tc.ok {
			require.Error(t, err, tc.origin)
			require.Equal(t, http.StatusForbidden, resp.StatusCode, tc.origin)
			continue
		}
		require.NoError(t, err, tc.origin)
		ws.CloseNow()
	}
	require.Equal(t, 2, run(testCtx(t), []string{"serve", "--allow-origin", "[", "--addr", "127.0.0.1:0"}, &stdio{out: discard{}, err: discard{}}))
}

type discard struct{}

func (discard) Write(b []byte) (int, error) { return len(b), nil }
