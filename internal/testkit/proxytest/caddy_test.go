package proxytest

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"text/template"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/internal/testkit/cutproxy"
)

//go:embed Caddyfile.tmpl
var caddyTemplate string

// renderCaddy renders Caddyfile.tmpl.
func renderCaddy(c nginxConfig) (string, error) {
	t, err := template.New("caddy").Funcs(template.FuncMap{"join": strings.Join}).Parse(caddyTemplate)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	if err := t.Execute(&b, c); err != nil {
		return "", err
	}
	return b.String(), nil
}

// caddyBin returns the caddy executable, or skips (fails under CI=true).
func caddyBin(tb testing.TB) string {
	tb.Helper()
	if path, err := exec.LookPath("caddy"); err == nil {
		return path
	}
	if os.Getenv("CI") == "true" {
		tb.Fatal("caddy not found: .ci/run installs Debian's caddy; CI must run this test")
	}
	tb.Skip("caddy not found (apt-get install caddy); CI=true makes this a failure")
	return ""
}

// syncBuffer collects a child's output.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// caddy is a "caddy run" child with its own config, data and admin
// address; no system service.
type caddy struct {
	bin, dir, conf, admin, addr string
	cmd                         *exec.Cmd
	out                         *syncBuffer
	done                        chan struct{}
}

func freeAddr(tb testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(tb, err)
	defer ln.Close()
	return ln.Addr().String()
}

// startCaddy starts Caddy in front of the backends with Caddyfile.tmpl
// and waits until it accepts connections.
func startCaddy(tb testing.TB, backends ...*backend) *caddy {
	tb.Helper()
	return startCaddyWith(tb, "", backends...)
}

// startCaddyWith is startCaddy with extra global options.
func startCaddyWith(tb testing.TB, extra string, backends ...*backend) *caddy {
	tb.Helper()
	bin := caddyBin(tb)
	var addrs []string
	for _, b := range backends {
		addrs = append(addrs, b.addr)
	}
	dir := tb.TempDir()
	c := &caddy{bin: bin, dir: dir, conf: filepath.Join(dir, "Caddyfile"), admin: freeAddr(tb), addr: freeAddr(tb),
		out: &syncBuffer{}, done: make(chan struct{})}
	site, err := renderCaddy(nginxConfig{Listen: c.addr, Backends: addrs})
	require.NoError(tb, err)
	global := fmt.Sprintf("{\n\tadmin %s\n\tauto_https off\n%s}\n\n", c.admin, extra)
	require.NoError(tb, os.WriteFile(c.conf, []byte(global+site), 0o600))
	c.cmd = exec.Command(bin, "run", "--config", c.conf, "--adapter", "caddyfile")
	c.cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_DATA_HOME="+dir, "XDG_CONFIG_HOME="+dir)
	c.cmd.Stdout, c.cmd.Stderr = c.out, c.out
	require.NoError(tb, c.cmd.Start())
	var exitErr error
	go func() {
		exitErr = c.cmd.Wait()
		close(c.done)
	}()
	tb.Cleanup(func() {
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-c.done:
		case <-time.After(testTimeout):
			_ = c.cmd.Process.Kill()
			<-c.done
		}
		if tb.Failed() {
			tb.Logf("caddy output:\n%s", c.out.String())
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		conn, err := net.Dial("tcp", c.addr)
		if err == nil {
			conn.Close()
			return c
		}
		select {
		case <-c.done:
			tb.Fatalf("caddy exited: %v\n%s", exitErr, c.out.String())
		case <-ctx.Done():
			tb.Fatalf("caddy did not accept on %s:\n%s", c.addr, c.out.String())
		case <-tick.C:
		}
	}
}

// reload runs "caddy reload" with the same configuration, forced.
func (c *caddy) reload(tb testing.TB) {
	tb.Helper()
	cmd := exec.Command(c.bin, "reload", "--config", c.conf, "--adapter", "caddyfile", "--address", c.admin, "--force")
	cmd.Env = append(os.Environ(), "HOME="+c.dir, "XDG_DATA_HOME="+c.dir, "XDG_CONFIG_HOME="+c.dir)
	out, err := cmd.CombinedOutput()
	require.NoError(tb, err, "caddy reload: %s", out)
}

// TestCaddyCutsReloadAndAuth runs the Caddyfile of docs/proxies.md in front
// of two servers: a wrong token is refused; a stream survives a "caddy
// reload" in its middle and then 10 cuts between the client and Caddy,
// every resume on the backend that opened it, byte-exact.
func TestCaddyCutsReloadAndAuth(t *testing.T) {
	a, b := startBackend(t), startBackend(t)
	cd := startCaddy(t, a, b)
	cut, err := cutproxy.New(cd.addr)
	require.NoError(t, err)
	defer cut.Close()
	ctx := testCtx(t)

	rec := &lastStatus{rt: httpTransport()}
	_, err = openWith(ctx, wsURL(cd.addr), "caddy", "wrong-token-0123456789abcdef", rec)
	require.Error(t, err)
	require.Equal(t, int64(401), rec.status.Load())

	ev := newEvents()
	p := openCat(ctx, t, wsURL(cut.Addr()), "caddy", slog.New(ev))
	const size, cuts = 24 << 20, 10
	src := newSource(5)
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

	// A reload closes the proxied WebSockets (Caddy 2.6 at once; later
	// ones after stream_close_delay): the client resumes through the new
	// configuration.
	require.NoError(t, feed(p, src, 4<<20, false))
	cd.reload(t)
	resumedc := make(chan error, 1)
	go func() { resumedc <- ev.wait(ctx, "resumed") }()
	for waiting := true; waiting; {
		select {
		case err := <-resumedc:
			require.NoError(t, err)
			waiting = false
		default:
			require.NoError(t, feed(p, src, 256<<10, false))
		}
	}

	// Then 10 cuts between the client and Caddy.
	var points []int64
	for i := range int64(cuts) {
		points = append(points, (i+1)*size/8)
	}
	cut.CutAt(points...)
	require.NoError(t, feed(p, src, size, true))
	r := <-readc
	require.NoError(t, r.err)
	require.Equal(t, src.sum.Sum(nil), r.sum, "sha-256 of stdout differs from stdin's")
	exit, err := p.Wait(ctx)
	require.NoError(t, err)
	require.Equal(t, 0, exit.Code)
	require.Equal(t, cuts, cut.Cuts())
	require.NoError(t, p.Destroy(ctx))

	resumed := 1 // the reload's
	for len(ev.ch) > 0 {
		if <-ev.ch == "resumed" {
			resumed++
		}
	}
	own, other := owner(t, a, b)
	requireUntouched(t, other)
	m := own.scrape(t)
	require.Equal(t, float64(resumed), m["procwire_resumes_total"])
	require.Equal(t, 1.0, m[`procwire_refusals_total{code="401",reason="unauthorized"}`])
}
