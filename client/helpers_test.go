package client_test

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/client"
	"github.com/procwire/procwire/client/cutproxy"
	"github.com/procwire/procwire/frames"
	"github.com/procwire/procwire/server"
)

// testTimeout bounds every wait of a test; reaching it fails the test.
const testTimeout = 60 * time.Second

// env is a procwire server on loopback, optionally behind a cutting proxy.
type env struct {
	srv   *server.Server
	hs    *httptest.Server
	url   string // straight to the server
	proxy *cutproxy.Proxy
	purl  string // through the proxy
}

// newEnv starts a server with cfg (a short grace unless set) and a proxy in
// front of it; both stop when the test ends.
func newEnv(t *testing.T, cfg server.Config) *env {
	t.Helper()
	if cfg.Grace == 0 {
		cfg.Grace = 10 * time.Second
	}
	if cfg.Logger == nil && testing.Verbose() {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	srv, err := server.New(cfg)
	require.NoError(t, err)
	hs := httptest.NewServer(srv)
	px, err := cutproxy.New(strings.TrimPrefix(hs.URL, "http://"))
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		require.NoError(t, srv.Shutdown(ctx))
		hs.Close()
		require.NoError(t, px.Close())
	})
	return &env{
		srv:   srv,
		hs:    hs,
		url:   "ws" + strings.TrimPrefix(hs.URL, "http"),
		proxy: px,
		purl:  "ws://" + px.Addr(),
	}
}

// ctx returns a context that ends with the test or after testTimeout.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	return c
}

// req returns a request for exe with args in /, with only PATH set.
func req(exe string, args ...string) frames.ProcessRequest {
	return frames.ProcessRequest{
		Executable:       exe,
		Arguments:        args,
		WorkingDirectory: "/",
		Environment:      map[string]string{"PATH": "/usr/local/bin:/usr/bin:/bin"},
	}
}

// sh returns a request running script with sh -c.
func sh(script string) frames.ProcessRequest { return req("sh", "-c", script) }

// fastOpts reconnect quickly.
func fastOpts() *client.Options {
	return &client.Options{ReconnectMin: 2 * time.Millisecond, ReconnectMax: 50 * time.Millisecond}
}

// open opens r on a fresh instance through url and destroys it when the
// test ends.
func open(t *testing.T, url string, r frames.ProcessRequest, opts *client.Options) *client.Process {
	t.Helper()
	if opts == nil {
		opts = fastOpts()
	}
	p, err := client.Open(ctx(t), url, instanceID(t), r, opts)
	require.NoError(t, err)
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = p.Destroy(c) // tests check Destroy's result themselves where it matters
	})
	return p
}

// instanceID derives a valid instance id from the test's name.
func instanceID(t *testing.T) string {
	id := []byte(t.Name())
	for i, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_') {
			id[i] = '-'
		}
	}
	if len(id) > 100 {
		id = id[len(id)-100:]
		id[0] = 'x'
	}
	return string(id)
}

// readLine reads from s up to and including the first '\n'.
func readLine(t *testing.T, c context.Context, s *client.Stream) string {
	t.Helper()
	var b strings.Builder
	one := make([]byte, 1)
	for {
		n, err := s.ReadContext(c, one)
		require.NoError(t, err)
		if n == 1 {
			b.WriteByte(one[0])
			if one[0] == '\n' {
				return b.String()
			}
		}
	}
}

// readAll reads s to EOF within the test's deadline.
func readAll(t *testing.T, c context.Context, s *client.Stream) string {
	t.Helper()
	var b strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := s.ReadContext(c, buf)
		b.Write(buf[:n])
		if err != nil {
			require.ErrorIs(t, err, io.EOF)
			return b.String()
		}
	}
}
