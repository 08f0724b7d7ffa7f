package client

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/frames"
	"github.com/procwire/procwire/server"
)

// TestBearerSubprotocolAccepted: the subprotocol the js/wasm client offers
// in place of the Authorization header authenticates against the server.
func TestBearerSubprotocolAccepted(t *testing.T) {
	const tok = "bearer-internal-token-0123456789"
	srv, err := server.New(server.Config{Token: tok, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	hs := httptest.NewServer(srv)
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, srv.Shutdown(ctx))
		hs.Close()
	}()
	url := "ws" + strings.TrimPrefix(hs.URL, "http")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, c := range []struct {
		token string
		ok    bool
	}{{tok, true}, {tok + "x", false}} {
		ws, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{Subprotocols: []string{frames.Subprotocol, bearerSubprotocol(c.token)}})
		if !c.ok {
			require.Error(t, err)
			require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
			continue
		}
		require.NoError(t, err)
		require.Equal(t, frames.Subprotocol, ws.Subprotocol())
		ws.CloseNow()
	}
}
