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

// defaultDialClient is http.DefaultClient without a proxy and with
// coalescing dials, made once.
var defaultDialClient = sync.OnceValue(func() *http.Client { return coalescingClient(http.DefaultClient, "", false) })

// dialClient returns the client a Process with options o dials with: a
// copy of o.HTTPClient (nil: http.DefaultClient, without a proxy unless
// o.ProxyFromEnvironment) that follows no redirect and whose
// *http.Transport wraps each connection in the coalescer its dial's
// context carries and, for a ws+unix URL, dials the socket; or nil (dial
// with o.HTTPClient as it is, but for redirects) when its RoundTripper is
// not an *http.Transport.
func dialClient(o *Options) *http.Client {
	if o.HTTPClient == nil && o.unixSocket == "" && !o.ProxyFromEnvironment {
		return defaultDialClient()
	}
	hc := o.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	return coalescingClient(hc, o.unixSocket, o.HTTPClient == nil && o.ProxyFromEnvironment)
}

// coalescingClient returns hc for dialling, as dialClient says. The
// Proxy of http.DefaultTransport (the environment's) is dropped unless
// envProxy: only a caller's own transport or envProxy chooses a proxy.
func coalescingClient(hc *http.Client, unixSocket string, envProxy bool) *http.Client {
	rt := hc.Transport
	defaultRT := rt == nil || rt == http.DefaultTransport
	if rt == nil {
		rt = http.DefaultTransport
	}
	base, ok := rt.(*http.Transport)
	if !ok {
		return nil
	}
	t := base.Clone()
	// A connection upgraded is the transport's no more; one answered
	// otherwise (a refusal) is closed rather than kept idle: a pool of
	// them would outlive the Process that dialled.
	t.DisableKeepAlives = true
	if defaultRT {
		t.Proxy = nil
		if envProxy {
			t.Proxy = http.ProxyFromEnvironment
		}
	}
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
	if unixSocket != "" {
		dial := t.DialContext
		t.Proxy = nil
		t.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dial(ctx, "unix", unixSocket)
		}
	}
	t.DialContext = wrap(t.DialContext)
	if t.DialTLSContext != nil {
		t.DialTLSContext = wrap(t.DialTLSContext)
	}
	c := *hc
	c.Transport = t
	c.CheckRedirect = refuseRedirect
	return &c
}

// dialOptions returns the options of one dial, and the context to dial
// with and the coalescer the connection's writes will go through (nil when
// the caller's RoundTripper dials).
func (p *Process) dialOptions(ctx context.Context, h http.Header, sub []string) (context.Context, *websocket.DialOptions, *coalesce.Coalescer) {
	opts := &websocket.DialOptions{
		HTTPClient:   p.opts.HTTPClient,
		HTTPHeader:   h,
		Subprotocols: sub,
	}
	if p.dialClient == nil {
		hc := *p.opts.HTTPClient
		hc.CheckRedirect = refuseRedirect
		opts.HTTPClient = &hc
		return ctx, opts, nil
	}
	co := &coalesce.Coalescer{}
	opts.HTTPClient = p.dialClient
	return context.WithValue(ctx, coalescerKey{}, co), opts, co
}

func checkPlatform(*Options) error { return nil }

// dialSaysWhy: a failed dial says whether its request was written and
// what answered it (a refusal of the first frame's size, refusesFirst).
const dialSaysWhy = true

// offersFirst reports whether f goes in the upgrade (PROTOCOL.md §1): here
// every first frame does, since a failed dial says whether its request was
// written (firstOfferedError).
func offersFirst(frames.Frame) bool { return true }
