package client_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/client"
	"github.com/procwire/procwire/frames"
	"github.com/procwire/procwire/internal/testkit/cutproxy"
	"github.com/procwire/procwire/server"
)

// testTimeout bounds every wait of a test; reaching it fails the test.
const testTimeout = 3 * time.Minute

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
func newEnv(t testing.TB, cfg server.Config) *env {
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
func ctx(t testing.TB) context.Context {
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
func open(t testing.TB, url string, r frames.ProcessRequest, opts *client.Options) *client.Process {
	t.Helper()
	if opts == nil {
		opts = fastOpts()
	}
	p, err := client.Open(ctx(t), url, instanceID(t), r, opts)
	require.NoError(t, err)
	t.Cleanup(func() {
		// Tests check Destroy's result themselves where it matters; a
		// process whose server is gone cannot be destroyed.
		c, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = p.Destroy(c)
	})
	return p
}

// instanceID derives a valid instance id from the test's name.
func instanceID(t testing.TB) string {
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

// readLine reads from s up to and including the first '\n'. Like readAll
// and streamThrough it reads with Read, without a deadline; c bounds it by
// detaching.
func readLine(t *testing.T, c context.Context, s *client.Stream) string {
	t.Helper()
	defer watchdog(c, s)()
	var b strings.Builder
	one := make([]byte, 1)
	for {
		n, err := s.Read(one)
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
	return readAllWith(t, c, s, make([]byte, 32<<10))
}

// readAllWith is readAll reading into buf.
func readAllWith(t *testing.T, c context.Context, s *client.Stream, buf []byte) string {
	t.Helper()
	defer watchdog(c, s)()
	var b strings.Builder
	for {
		n, err := s.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			require.ErrorIs(t, err, io.EOF)
			return b.String()
		}
	}
}

// streamThrough writes n bytes of a seeded random stream to p's stdin and
// closes it, while reading p's stdout to EOF, and returns the sha256 of
// what was written, of what was read, and how much was read.
func streamThrough(t *testing.T, c context.Context, p *client.Process, n int64, seed uint64) (sent, got [sha256.Size]byte, count int64) {
	t.Helper()
	werr := make(chan error, 1)
	hw := sha256.New()
	go func() {
		rng := rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), byte(seed >> 16), byte(seed >> 24)})
		buf := make([]byte, 1<<20)
		for left := n; left > 0; {
			b := buf[:min(left, int64(len(buf)))]
			rng.Read(b)
			hw.Write(b)
			if _, err := p.Stdin().WriteContext(c, b); err != nil {
				werr <- err
				return
			}
			left -= int64(len(b))
		}
		werr <- p.Stdin().CloseContext(c)
	}()
	hr := sha256.New()
	buf := make([]byte, 256<<10)
	defer watchdog(c, p.Stdout())()
	for {
		k, err := p.Stdout().Read(buf)
		hr.Write(buf[:k])
		count += int64(k)
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
	}
	require.NoError(t, <-werr)
	return [sha256.Size]byte(hw.Sum(nil)), [sha256.Size]byte(hr.Sum(nil)), count
}

// watchdog detaches the process of s when c ends, which ends a Read
// without a deadline with ErrDetached; it returns a function that stops it.
func watchdog(c context.Context, s *client.Stream) func() bool {
	p := client.ProcessOf(s)
	return context.AfterFunc(c, p.Detach)
}

// blockedHook installs a hook on p and returns a channel closed the first
// time a call of p is about to block.
func blockedHook(p *client.Process) <-chan struct{} {
	ch := make(chan struct{})
	var once sync.Once
	client.SetBlockedHook(p, func() { once.Do(func() { close(ch) }) })
	return ch
}

// await waits for ch within c, failing the test otherwise.
func await(t *testing.T, c context.Context, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-c.Done():
		t.Fatalf("timed out waiting for %s", what)
	}
}

// eventually polls cond until it holds, failing the test when c ends
// first. It is for conditions outside the client (the server's state, the
// kernel's process table) that offer nothing to wait on.
func eventually(t *testing.T, c context.Context, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-c.Done():
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
