//go:build js

package client

import (
	"context"
	"errors"
	"net/http"

	"github.com/coder/websocket"
	"github.com/procwire/procwire/frames"
	"github.com/procwire/procwire/internal/coalesce"
)

// dialOptions on js/wasm: the browser's WebSocket sends no headers of the
// caller's (withDefaults refuses a Token there), so proxies cannot route on
// Procwire-Instance and Options.HTTPClient and HTTPHeader are not used.
func (p *Process) dialOptions(ctx context.Context, _ http.Header) (context.Context, *websocket.DialOptions, *coalesce.Coalescer) {
	return ctx, &websocket.DialOptions{Subprotocols: []string{frames.Subprotocol}}, nil
}

// dialClient: the browser dials; nothing to coalesce.
func dialClient(*Options) *http.Client { return nil }

// checkPlatform refuses what a browser's WebSocket cannot do: send headers.
func checkPlatform(o *Options) error {
	if o.Token != "" || len(o.HTTPHeader) > 0 || o.HTTPClient != nil {
		return errors.New("procwire: Options.Token, HTTPHeader and HTTPClient need HTTP headers, which js/wasm cannot send")
	}
	return nil
}
