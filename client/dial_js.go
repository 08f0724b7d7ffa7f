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
// caller's, so proxies cannot route on Procwire-Instance and
// Options.HTTPClient and HTTPHeader are not used; the Token travels as the
// bearer subprotocol (PROTOCOL.md §1), never in the URL.
func (p *Process) dialOptions(ctx context.Context, _ http.Header, sub []string) (context.Context, *websocket.DialOptions, *coalesce.Coalescer) {
	if p.opts.Token != "" {
		sub = append(sub, bearerSubprotocol(p.opts.Token))
	}
	return ctx, &websocket.DialOptions{Subprotocols: sub}, nil
}

// dialClient: the browser dials; nothing to coalesce.
func dialClient(*Options) *http.Client { return nil }

// checkPlatform refuses what a browser's WebSocket cannot do: send headers
// (the Token goes as a subprotocol instead).
func checkPlatform(o *Options) error {
	if len(o.HTTPHeader) > 0 || o.HTTPClient != nil {
		return errors.New("procwire: Options.HTTPHeader and HTTPClient need HTTP headers, which js/wasm cannot send")
	}
	return nil
}

// dialSaysWhy: a browser's failed dial says neither whether its request
// was written nor how it was answered.
const dialSaysWhy = false

// offersFirst reports whether f goes in the upgrade (PROTOCOL.md §1): in a
// browser an open goes as a message, since a failed dial does not say
// whether its request was written, and a wrong address must fail at once
// rather than be repeated as an open that may have started something (as
// the TypeScript client does with a WHATWG WebSocket); a resume goes in it.
func offersFirst(f frames.Frame) bool { return f.Type() != frames.TypeOpen }
