//go:build linux

package client_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/client"
	"github.com/procwire/procwire/server"
)

// roundRobin is a load balancer over backends, each request to the next.
func roundRobin(t *testing.T, backends ...*env) string {
	var next atomic.Uint64
	rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		b := backends[(next.Add(1)-1)%uint64(len(backends))]
		u, err := url.Parse(b.hs.URL)
		if err != nil {
			panic(err)
		}
		r.SetURL(u)
	}}
	hs := newLocalServer(t, rp)
	return "ws" + strings.TrimPrefix(hs, "http")
}

// newLocalServer serves h on loopback until the test ends.
func newLocalServer(t *testing.T, h http.Handler) string {
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	return hs.URL
}

// TestOpenElsewhereWhileDraining: an open refused by a draining server
// is repeated and lands on the other server behind the balancer; with
// every server draining, Open returns ErrServerDraining.
func TestOpenElsewhereWhileDraining(t *testing.T) {
	draining, other := newEnv(t, server.Config{}), newEnv(t, server.Config{})
	require.NoError(t, draining.srv.Drain(ctx(t))) // holds nothing: returns at once, draining on
	lb := roundRobin(t, draining, other)

	for range 2 { // whichever backend the first attempt reaches
		p := open(t, lb, req("echo", "hi"), fastOpts())
		st, err := p.Wait(ctx(t))
		require.NoError(t, err)
		require.Equal(t, client.ExitStatus{}, st)
		require.NoError(t, p.Destroy(ctx(t)))
	}
	require.Empty(t, draining.srv.Stats().Processes)

	_, err := client.Open(ctx(t), draining.url, instanceID(t), req("true"), fastOpts())
	require.ErrorIs(t, err, client.ErrServerDraining)
	var re *client.RemoteError
	require.True(t, errors.As(err, &re))
	require.Equal(t, "open_process", re.Frame.Operation)
	require.Equal(t, "server_draining", re.Frame.Reason)
}
