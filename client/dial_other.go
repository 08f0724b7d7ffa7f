//go:build !js

package client

import (
	"context"
	"net"
	"net/http"
	"sync"

	"github.com/coder/websocket"
	"github.com/procwire/procwire/frames"
	"github.com/procwire/procwire/internal/coalesce"
)

// coalescerKey carries a dial's *coalescer in its context down to the
// transport's DialContext.
type coalescerKey struct{}

// defaultDialClient is http.DefaultClient with coalescing dials, made once.
var defaultDialClient = sync.OnceValue(func() *http.Client { return coalescingClient(http.DefaultClient) })

// dialClient returns the client a Process with Options.HTTPClient hc dials
// with: a copy whose *http.Transport wraps each connection in the
// coalescer its dial's context carries, or nil (dial with hc as it is)
// when hc's RoundTripper is not an *http.Transport.
func dialClient(hc *http.Client) *http.Client {
	if hc == nil {
		return defaultDialClient()
	}
	return coalescingClient(hc)
}

func coalescingClient(hc *http.Client) *http.Client {
	rt := hc.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	base, ok := rt.(*http.Transport)
	if !ok {
		return nil
	}
	t := base.Clone()
	wrap := func(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
		return func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			if co, ok := ctx.Value(coalescerKey{}).(*coalesce.Coalescer); ok {
				return co.Wrap(c), nil
			}
			return c, nil
		}
	}
	if t.DialContext == nil {
		var d net.Dialer
		t.DialContext = d.DialContext
	}
	t.DialContext = wrap(t.DialContext)
	if t.DialTLSContext != nil {
		t.DialTLSContext = wrap(t.DialTLSContext)
	}
	c := *hc
	c.Transport = t
	return &c
}

// dialOptions returns the options of one dial, and the context to dial
// with and the coalescer the connection's writes will go through (nil when
// the caller's RoundTripper dials).
func (p *Process) dialOptions(ctx context.Context, h http.Header) (context.Context, *websocket.DialOptions, *coalesce.Coalescer) {
	opts := &websocket.DialOptions{
		HTTPClient:   p.opts.HTTPClient,
		HTTPHeader:   h,
		Subprotocols: []string{frames.Subprotocol},
	}
	if p.dialClient == nil {
		return ctx, opts, nil
	}
	co := &coalesce.Coalescer{}
	opts.HTTPClient = p.dialClient
	return context.WithValue(ctx, coalescerKey{}, co), opts, co
}

func checkPlatform(*Options) error { return nil }
