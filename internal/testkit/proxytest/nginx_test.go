package proxytest

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/client"
	"github.com/procwire/procwire/frames"
	"github.com/procwire/procwire/internal/testkit/cutproxy"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

func catRequest() frames.ProcessRequest {
	return frames.ProcessRequest{
		Executable:       "cat",
		WorkingDirectory: "/",
		Environment:      map[string]string{"PATH": "/usr/bin:/bin"},
	}
}

// openCat opens a remote cat on instance inst through url with the token.
// The client sends the routing headers itself.
func openCat(ctx context.Context, t *testing.T, url, inst string, log *slog.Logger) *client.Process {
	t.Helper()
	p, err := client.Open(ctx, url, inst, catRequest(), &client.Options{
		Token:  token,
		Logger: log,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Destroy(context.Background()) })
	return p
}

// source is a reproducible pseudo-random byte stream that hashes what it
// hands out.
type source struct {
	rng  *rand.ChaCha8
	sum  hash.Hash
	sent atomic.Int64
}

func newSource(seed byte) *source {
	return &source{rng: rand.NewChaCha8([32]byte{seed}), sum: sha256.New()}
}

func (s *source) Read(b []byte) (int, error) {
	n, _ := s.rng.Read(b)
	s.sum.Write(b[:n])
	s.sent.Add(int64(n))
	return n, nil
}

// feed writes n bytes of src to the process's stdin; it closes stdin after
// them when last.
func feed(p *client.Process, src *source, n int64, last bool) error {
	if _, err := io.CopyN(p.Stdin(), src, n); err != nil {
		return fmt.Errorf("stdin: %w", err)
	}
	if last {
		return p.Stdin().Close()
	}
	return nil
}

// drain reads stdout to EOF, hashing it; received counts it as it comes.
func drain(p *client.Process, received *atomic.Int64) ([]byte, error) {
	h := sha256.New()
	buf := make([]byte, 256<<10)
	for {
		n, err := p.Stdout().Read(buf)
		h.Write(buf[:n])
		received.Add(int64(n))
		if errors.Is(err, io.EOF) {
			return h.Sum(nil), nil
		}
		if err != nil {
			return h.Sum(nil), err
		}
	}
}

// owner returns the backend that opened the one process of a test and the
// other one, checking that exactly one did.
func owner(t *testing.T, a, b *backend) (own, other *backend) {
	t.Helper()
	ma, mb := a.scrape(t), b.scrape(t)
	require.Equal(t, 1.0, ma["procwire_processes_opened_total"]+mb["procwire_processes_opened_total"])
	if ma["procwire_processes_opened_total"] == 1 {
		return a, b
	}
	return b, a
}

// requireUntouched checks that a backend served no procwire connection:
// no open, no resume, no refusal, no connection.
func requireUntouched(t *testing.T, b *backend) {
	t.Helper()
	m := b.scrape(t)
	for _, name := range []string{
		"procwire_processes_opened_total", "procwire_resumes_total",
		"procwire_refusals_total", "procwire_connections_closed_total",
	} {
		require.Zero(t, sum(m, name), "%s on the other backend", name)
	}
}

func TestNginxStream256MiBByteExact(t *testing.T) {
	a, b := startBackend(t), startBackend(t)
	ng := startNginx(t, time.Second, a, b)
	ctx := testCtx(t)

	p := openCat(ctx, t, wsURL(ng.addr), "nginx-256", nil)
	const size = 256 << 20
	src := newSource(1)
	errc := make(chan error, 1)
	go func() { errc <- feed(p, src, size, true) }()
	var received atomic.Int64
	got, err := drain(p, &received)
	require.NoError(t, err)
	require.NoError(t, <-errc)
	require.Equal(t, int64(size), received.Load())
	require.Equal(t, src.sum.Sum(nil), got, "sha-256 of stdout differs from stdin's")
	exit, err := p.Wait(ctx)
	require.NoError(t, err)
	require.Equal(t, 0, exit.Code)
	require.NoError(t, p.Destroy(ctx))

	own, other := owner(t, a, b)
	requireUntouched(t, other)
	m := own.scrape(t)
	require.Equal(t, float64(size), m[`procwire_stream_bytes_total{direction="in",stream="stdin"}`])
	require.Equal(t, float64(size), m[`procwire_stream_bytes_total{direction="out",stream="stdout"}`])
}

// TestNginx20CutsResumeOnTheSameBackend cuts the TCP connection between
// the client and nginx 20 times during a stream: every resume reaches the
// backend that opened the process (hashing Procwire-Instance), the other
// backend never sees a connection, and the stream is byte-exact.
func TestNginx20CutsResumeOnTheSameBackend(t *testing.T) {
	a, b := startBackend(t), startBackend(t)
	ng := startNginx(t, time.Second, a, b)
	cut, err := cutproxy.New(ng.addr)
	require.NoError(t, err)
	defer cut.Close()
	ctx := testCtx(t)
	ev := newEvents()

	p := openCat(ctx, t, wsURL(cut.Addr()), "nginx-cuts", slog.New(ev))
	const size, cuts = 48 << 20, 20
	// Over both directions, base64 included, the stream forwards about
	// 2 × 4/3 × size bytes: 20 cuts spread over the first two thirds.
	var points []int64
	for i := range int64(cuts) {
		points = append(points, (i+1)*size/16)
	}
	cut.CutAt(points...)

	src := newSource(2)
	errc := make(chan error, 1)
	go func() { errc <- feed(p, src, size, true) }()
	var received atomic.Int64
	got, err := drain(p, &received)
	require.NoError(t, err)
	require.NoError(t, <-errc)
	require.Equal(t, src.sum.Sum(nil), got, "sha-256 of stdout differs from stdin's")
	exit, err := p.Wait(ctx)
	require.NoError(t, err)
	require.Equal(t, 0, exit.Code)
	require.Equal(t, cuts, cut.Cuts())

	resumed := 0
	for len(ev.ch) > 0 {
		if <-ev.ch == "resumed" {
			resumed++
		}
	}
	require.NoError(t, p.Destroy(ctx))
	own, other := owner(t, a, b)
	requireUntouched(t, other)
	m := own.scrape(t)
	require.GreaterOrEqual(t, resumed, 1)
	require.Equal(t, float64(resumed), m["procwire_resumes_total"], "every resume the client saw reached the owner")
	require.Zero(t, sum(m, "procwire_refusals_total"))
	require.Equal(t, 1.0, m["procwire_processes_destroyed_total"])
}

// TestNginxReloadMidStreamResumes reloads nginx while a stream runs: the
// worker holding the connection closes it once worker_shutdown_timeout
// ends, the client resumes through the new worker, and the stream is
// byte-exact.
func TestNginxReloadMidStreamResumes(t *testing.T) {
	a, b := startBackend(t), startBackend(t)
	ng := startNginx(t, time.Second, a, b)
	ctx := testCtx(t)
	ev := newEvents()
	p := openCat(ctx, t, wsURL(ng.addr), "nginx-reload", slog.New(ev))

	src := newSource(3)
	var received atomic.Int64
	type result struct {
		sum []byte
		err error
	}
	readc := make(chan result, 1)
	go func() {
		s, err := drain(p, &received)
		readc <- result{s, err}
	}()
	// 8 MiB before the reload, then more until the client has resumed
	// through the new worker, then 8 MiB after it.
	require.NoError(t, feed(p, src, 8<<20, false))
	ng.reload(t)
	resumed := make(chan error, 1)
	go func() { resumed <- ev.wait(ctx, "resumed") }()
	for waiting := true; waiting; {
		select {
		case err := <-resumed:
			require.NoError(t, err)
			waiting = false
		default:
			require.NoError(t, feed(p, src, 256<<10, false))
		}
	}
	require.NoError(t, feed(p, src, 8<<20, true))
	r := <-readc
	require.NoError(t, r.err)
	require.Equal(t, src.sent.Load(), received.Load())
	require.Equal(t, src.sum.Sum(nil), r.sum, "sha-256 of stdout differs from stdin's")
	exit, err := p.Wait(ctx)
	require.NoError(t, err)
	require.Equal(t, 0, exit.Code)
	require.NoError(t, p.Destroy(ctx))

	own, other := owner(t, a, b)
	requireUntouched(t, other)
	require.GreaterOrEqual(t, own.scrape(t)["procwire_resumes_total"], 1.0)
}

// TestNginxBackendKilledFailsClosed kills the backend holding a process in
// the middle of a stream: nginx sends the client's resume to the other
// backend, which never knew the process, and the handle ends with the
// typed process_not_found (naming misrouting) instead of hanging or losing
// bytes silently.
func TestNginxBackendKilledFailsClosed(t *testing.T) {
	a, b := startBackend(t), startBackend(t)
	ng := startNginx(t, time.Second, a, b)
	ctx := testCtx(t)
	p := openCat(ctx, t, wsURL(ng.addr), "nginx-kill", nil)

	src := newSource(4)
	var received atomic.Int64
	readc := make(chan error, 1)
	go func() {
		_, err := drain(p, &received)
		readc <- err
	}()
	require.NoError(t, feed(p, src, 4<<20, false))
	own, other := owner(t, a, b)
	own.kill(t)
	writec := make(chan error, 1)
	go func() {
		for {
			if err := feed(p, src, 64<<10, false); err != nil {
				writec <- err
				return
			}
		}
	}()

	err := <-readc
	var re *client.RemoteError
	require.ErrorAs(t, err, &re, "stdout ends with the server's typed refusal: %v", err)
	require.Equal(t, frames.LifecycleConflict, re.Frame.Code)
	require.Equal(t, "process_not_found", re.Frame.Actual)
	require.Contains(t, re.Frame.Message, "routed to another server")
	require.ErrorAs(t, <-writec, &re, "stdin ends with it too")
	_, err = p.Wait(ctx)
	require.ErrorAs(t, err, &re, "so does Wait")

	m := other.scrape(t)
	require.Equal(t, 0.0, m["procwire_processes_opened_total"], "nothing was started on the other backend")
	require.GreaterOrEqual(t, m[`procwire_refusals_total{code="1000",reason="process_not_found"}`], 1.0)
}

// TestNginxTokenAuth: the token travels through nginx; a wrong one is
// refused by the backend with 401, which the client reports.
func TestNginxTokenAuth(t *testing.T) {
	a, b := startBackend(t), startBackend(t)
	ng := startNginx(t, time.Second, a, b)
	ctx := testCtx(t)

	for _, tok := range []string{"", "wrong-token-0123456789abcdef"} {
		rec := &lastStatus{rt: httpTransport()}
		_, err := openWith(ctx, wsURL(ng.addr), "nginx-auth", tok, rec)
		require.Error(t, err, "token %q", tok)
		require.Equal(t, int64(http.StatusUnauthorized), rec.status.Load(), "token %q", tok)
	}
	p := openCat(ctx, t, wsURL(ng.addr), "nginx-auth", nil)
	require.NoError(t, p.Stdin().Close())
	out, err := io.ReadAll(p.Stdout())
	require.NoError(t, err)
	require.Empty(t, out)
	require.NoError(t, p.Destroy(ctx))

	// The backend saw the client through nginx: refusals logged with the
	// reason, the client's address from X-Forwarded-For, no token.
	own, _ := owner(t, a, b)
	m := own.scrape(t)
	require.Equal(t, 2.0, m[`procwire_refusals_total{code="401",reason="unauthorized"}`])
	logs := own.logs.String()
	require.Contains(t, logs, "reason=unauthorized")
	require.Contains(t, logs, "peer=127.0.0.1:")
	require.NotContains(t, logs, token)
	require.NotContains(t, logs, "wrong-token-0123456789abcdef")
}

// httpTransport is a transport of the test's own, its idle connections
// closed with the test.
func httpTransport() *http.Transport {
	return http.DefaultTransport.(*http.Transport).Clone()
}

// openWith opens a remote cat with token tok, dialling through rt.
func openWith(ctx context.Context, url, inst, tok string, rt http.RoundTripper) (*client.Process, error) {
	return client.Open(ctx, url, inst, catRequest(), &client.Options{Token: tok, HTTPClient: &http.Client{Transport: rt}})
}

// lastStatus is a RoundTripper that remembers the status of the last
// response, so a refused upgrade is checked by its status, not its text.
type lastStatus struct {
	rt     http.RoundTripper
	status atomic.Int64
}

func (l *lastStatus) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := l.rt.RoundTrip(r)
	if resp != nil {
		l.status.Store(int64(resp.StatusCode))
	}
	return resp, err
}
