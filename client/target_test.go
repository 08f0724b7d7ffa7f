//go:build linux

package client_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/client"
	"github.com/procwire/procwire/server"
)

const secureTestToken = "target-test-token-0123456789abcdef"

// The token goes over ws:// only to loopback unless the caller says so
// (issue 23, deliverable 5).
func TestTokenRefusedOverWSToAHostNotLoopback(t *testing.T) {
	c := ctx(t)
	for _, u := range []string{"ws://192.0.2.1:7777/", "http://example.com/", "ws://[fe80::1%25lo]:1/"} {
		_, err := client.Open(c, u, "inst", req("true"), &client.Options{Token: secureTestToken})
		require.ErrorIs(t, err, client.ErrInsecureToken, u)
		_, err = client.Attach(c, u, client.Handle{InstanceID: "inst", ProcessID: strings.Repeat("a", 32), Token: strings.Repeat("b", 64)},
			&client.Options{Token: secureTestToken})
		require.ErrorIs(t, err, client.ErrInsecureToken, u)
	}
	// Told otherwise, it dials (and finds nothing there in time).
	short, cancel := context.WithTimeout(c, 200*time.Millisecond)
	defer cancel()
	_, err := client.Open(short, "ws://192.0.2.1:7777/", "inst", req("true"), &client.Options{Token: secureTestToken, AllowInsecureToken: true})
	require.Error(t, err)
	require.NotErrorIs(t, err, client.ErrInsecureToken)
	// Loopback and wss:// need no permission.
	e := newEnv(t, server.Config{Token: secureTestToken})
	p, err := client.Open(c, e.url, "inst", req("true"), &client.Options{Token: secureTestToken})
	require.NoError(t, err)
	require.NoError(t, p.Destroy(c))
}

// An upgrade answered with a redirect fails: the token is never sent to
// where it points (issue 23, finding 6: a 307 from wss:// to ws://).
func TestRedirectsAreNotFollowed(t *testing.T) {
	c := ctx(t)
	var leaked atomic.Int32
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			leaked.Add(1)
		}
		http.Error(w, "sink", http.StatusTeapot)
	}))
	defer sink.Close()
	redirector := httptest.NewServer(http.RedirectHandler(sink.URL+"/", http.StatusTemporaryRedirect))
	defer redirector.Close()
	for _, hc := range []*http.Client{nil, {Transport: http.DefaultTransport}, {Transport: roundTripper{http.DefaultTransport}}} {
		_, err := client.Open(c, "ws"+strings.TrimPrefix(redirector.URL, "http"), "inst", req("true"),
			&client.Options{Token: secureTestToken, HTTPClient: hc})
		require.Error(t, err)
		require.Contains(t, err.Error(), "307")
	}
	require.Zero(t, leaked.Load(), "the token followed a redirect")
}

// roundTripper hides an *http.Transport behind another type.
type roundTripper struct{ rt http.RoundTripper }

func (r roundTripper) RoundTrip(q *http.Request) (*http.Response, error) { return r.rt.RoundTrip(q) }

// A ws+unix URL dials a server on a Unix socket.
func TestDialUnixSocket(t *testing.T) {
	c := ctx(t)
	srv, err := server.New(server.Config{})
	require.NoError(t, err)
	sock := filepath.Join(t.TempDir(), "procwire.sock")
	ln, err := net.Listen("unix", sock)
	require.NoError(t, err)
	hs := &http.Server{Handler: srv}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	defer func() {
		require.NoError(t, srv.Shutdown(c))
		require.NoError(t, hs.Shutdown(c))
		require.ErrorIs(t, <-served, http.ErrServerClosed)
	}()
	p, err := client.Open(c, "ws+unix://"+sock, "inst", req("echo", "over the socket"), nil)
	require.NoError(t, err)
	require.Equal(t, "over the socket\n", readAll(t, c, p.Stdout()))
	_, err = p.Wait(c)
	require.NoError(t, err)
	_, err = client.Open(c, "ws+unix://", "inst", req("true"), nil)
	require.Error(t, err)
}

// Proxies named by the environment are used only when asked: the test
// binary runs itself with HTTP_PROXY set (the environment is read once
// per process), dialling a name that does not resolve.
func TestProxyFromEnvironmentOnlyWhenAsked(t *testing.T) {
	if os.Getenv("PROCWIRE_PROXY_CHILD") != "" {
		t.Skip("run by the parent test")
	}
	for _, ask := range []bool{false, true} {
		var proxied atomic.Int32
		proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			proxied.Add(1)
			http.Error(w, "proxy", http.StatusBadGateway)
		}))
		cmd := exec.Command(os.Args[0], "-test.run=^TestProxyChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), "PROCWIRE_PROXY_CHILD=1", "HTTP_PROXY="+proxy.URL, "http_proxy="+proxy.URL, "NO_PROXY=", "no_proxy=")
		if ask {
			cmd.Env = append(cmd.Env, "PROCWIRE_PROXY_ASK=1")
		}
		out, err := cmd.CombinedOutput()
		proxy.Close()
		require.NoError(t, err, "%s", out)
		if ask {
			require.Equal(t, int32(1), proxied.Load(), "asked, the proxy is used")
		} else {
			require.Zero(t, proxied.Load(), "the environment's proxy was used unasked")
		}
	}
}

// TestProxyChild is TestProxyFromEnvironmentOnlyWhenAsked's child.
func TestProxyChild(t *testing.T) {
	if os.Getenv("PROCWIRE_PROXY_CHILD") == "" {
		t.Skip("run by TestProxyFromEnvironmentOnlyWhenAsked")
	}
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := client.Open(c, "ws://procwire-proxy-test.invalid/", "inst", req("true"),
		&client.Options{ProxyFromEnvironment: os.Getenv("PROCWIRE_PROXY_ASK") != ""})
	require.Error(t, err)
	require.False(t, errors.Is(err, context.DeadlineExceeded), "%v", err)
}
