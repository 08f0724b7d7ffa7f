package proxytest

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"text/template"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

//go:embed nginx.conf.tmpl
var nginxTemplate string

// testTimeout bounds every test's waits; it bounds hangs, it times nothing.
const testTimeout = 3 * time.Minute

// token is the backends' bearer token: always a token behind a proxy.
const token = "proxytest-token-0123456789abcdef"

// binDir holds the procwire binary built for the run.
var (
	binDir   string
	buildErr error
	buildMu  sync.Mutex
	built    bool
)

func TestMain(m *testing.M) {
	var code int
	func() {
		dir, err := os.MkdirTemp("", "proxytest-bin-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
			return
		}
		defer os.RemoveAll(dir)
		binDir = dir
		code = m.Run()
	}()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// procwireBin builds cmd/procwire once per run and returns its path.
func procwireBin(tb testing.TB) string {
	tb.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	bin := filepath.Join(binDir, "procwire")
	if !built {
		built = true
		out, err := exec.Command("go", "build", "-o", bin, "github.com/procwire/procwire/cmd/procwire").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build cmd/procwire: %w\n%s", err, out)
		}
	}
	require.NoError(tb, buildErr)
	return bin
}

// nginxBin returns the nginx executable, or skips (fails under CI=true)
// when there is none.
func nginxBin(tb testing.TB) string {
	tb.Helper()
	for _, p := range []string{"nginx", "/usr/sbin/nginx"} {
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	if os.Getenv("CI") == "true" {
		tb.Fatal("nginx not found: .ci/run installs nginx-light with apt-get; CI must run this test")
	}
	tb.Skip("nginx not found (apt-get install nginx-light); CI=true makes this a failure")
	return ""
}

// logBuffer collects a child's log lines and announces the ones a test
// waits for.
type logBuffer struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	lines chan string
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// backend is one "procwire serve" child.
type backend struct {
	cmd     *exec.Cmd
	addr    string // host:port of the process endpoint
	metrics string // host:port of /metrics
	logs    *logBuffer
	done    chan struct{} // closed when the child was reaped
	exitErr error
}

// startBackend starts "procwire serve" with a token, a metrics listener,
// loopback as the trusted proxy and extra flags, and waits until it
// listens. It is stopped (SIGTERM, then reaped) when the test ends.
func startBackend(tb testing.TB, extra ...string) *backend {
	tb.Helper()
	dir := tb.TempDir()
	tokenFile := filepath.Join(dir, "token")
	require.NoError(tb, os.WriteFile(tokenFile, []byte(token), 0o600))
	args := append([]string{"serve", "--addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0",
		"--token-file", tokenFile, "--trusted-proxy", "127.0.0.1/32"}, extra...)
	cmd := exec.Command(procwireBin(tb), args...)
	stderr, err := cmd.StderrPipe()
	require.NoError(tb, err)
	require.NoError(tb, cmd.Start())
	b := &backend{cmd: cmd, logs: &logBuffer{lines: make(chan string, 16)}, done: make(chan struct{})}
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			b.logs.mu.Lock()
			b.logs.buf.WriteString(line + "\n")
			b.logs.mu.Unlock()
			if strings.Contains(line, "listening") {
				b.logs.lines <- line
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	go func() {
		<-scanned
		b.exitErr = cmd.Wait()
		close(b.done)
	}()
	tb.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-b.done:
		case <-time.After(testTimeout):
			_ = cmd.Process.Kill()
			<-b.done
		}
		if tb.Failed() {
			tb.Logf("backend %s log:\n%s", b.addr, b.logs.String())
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	for b.addr == "" || b.metrics == "" {
		select {
		case line := <-b.logs.lines:
			if v, ok := logValue(line, "url"); ok {
				b.addr = strings.TrimSuffix(strings.TrimPrefix(v, "ws://"), "/")
			} else if v, ok := logValue(line, "addr"); ok && strings.Contains(line, "metrics listening") {
				b.metrics = v
			}
		case <-b.done:
			tb.Fatalf("procwire serve exited: %v\n%s", b.exitErr, b.logs.String())
		case <-ctx.Done():
			tb.Fatalf("procwire serve did not listen:\n%s", b.logs.String())
		}
	}
	return b
}

// logValue returns the value of key in a slog text line.
func logValue(line, key string) (string, bool) {
	_, after, ok := strings.Cut(line, " "+key+"=")
	if !ok {
		return "", false
	}
	v, _, _ := strings.Cut(after, " ")
	return v, true
}

// kill ends the backend with SIGKILL and waits until it is reaped.
func (b *backend) kill(tb testing.TB) {
	tb.Helper()
	require.NoError(tb, b.cmd.Process.Kill())
	<-b.done
}

// scrape returns the backend's metrics, keyed by "name{labels}".
func (b *backend) scrape(tb testing.TB) map[string]float64 {
	tb.Helper()
	resp, err := http.Get("http://" + b.metrics + "/metrics")
	require.NoError(tb, err)
	defer resp.Body.Close()
	require.Equal(tb, http.StatusOK, resp.StatusCode)
	samples := make(map[string]float64)
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "procwire_") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		require.NoError(tb, err, line)
		samples[line[:i]] = v
	}
	require.NoError(tb, sc.Err())
	return samples
}

// sum adds the samples of every series of metric name.
func sum(samples map[string]float64, name string) float64 {
	var total float64
	for k, v := range samples {
		if k == name || strings.HasPrefix(k, name+"{") {
			total += v
		}
	}
	return total
}

// nginxConfig is what nginx.conf.tmpl is rendered with.
type nginxConfig struct {
	Listen   string
	Backends []string
}

// renderNginx renders nginx.conf.tmpl.
func renderNginx(c nginxConfig) (string, error) {
	t, err := template.New("nginx").Parse(nginxTemplate)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	if err := t.Execute(&b, c); err != nil {
		return "", err
	}
	return b.String(), nil
}

// proxy is an nginx master started by a test, in a prefix directory of its
// own: config, pid file, error log and temp paths; no system service.
type proxy struct {
	bin, dir, conf string
	addr           string // host:port nginx listens on
	cmd            *exec.Cmd
	done           chan struct{}
	exitErr        error
}

// startNginx starts nginx in front of the backends and waits until it
// accepts connections. shutdownTimeout is its worker_shutdown_timeout: how
// long a worker left by a reload keeps its connections.
func startNginx(tb testing.TB, shutdownTimeout time.Duration, backends ...*backend) *proxy {
	tb.Helper()
	return startNginxWith(tb, shutdownTimeout, "", backends...)
}

// startNginxWith is startNginx with extra directives in the http context,
// before the configuration of docs/proxies.md.
func startNginxWith(tb testing.TB, shutdownTimeout time.Duration, extra string, backends ...*backend) *proxy {
	tb.Helper()
	bin := nginxBin(tb)
	var addrs []string
	for _, b := range backends {
		addrs = append(addrs, b.addr)
	}
	var lastErr error
	for range 3 { // a port picked free may be taken before nginx binds it
		p, err := tryNginx(tb, bin, shutdownTimeout, extra, addrs)
		if err == nil {
			return p
		}
		lastErr = err
	}
	tb.Fatalf("nginx did not start: %v", lastErr)
	return nil
}

func tryNginx(tb testing.TB, bin string, shutdownTimeout time.Duration, extra string, backends []string) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(tb, err)
	addr := ln.Addr().String()
	require.NoError(tb, ln.Close())

	dir := tb.TempDir()
	http, err := renderNginx(nginxConfig{Listen: addr, Backends: backends})
	require.NoError(tb, err)
	user := ""
	if os.Geteuid() == 0 {
		user = "user root;\n" // workers reach the test's 0700 temp dir
	}
	conf := filepath.Join(dir, "nginx.conf")
	main := fmt.Sprintf(`daemon off;
master_process on;
worker_processes 1;
%spid %[2]s/nginx.pid;
error_log %[2]s/error.log info;
worker_shutdown_timeout %[3]dms;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path %[2]s/client_body;
    proxy_temp_path %[2]s/proxy;
    fastcgi_temp_path %[2]s/fastcgi;
    uwsgi_temp_path %[2]s/uwsgi;
    scgi_temp_path %[2]s/scgi;
%[4]s
%[5]s
}
`, user, dir, shutdownTimeout.Milliseconds(), extra, http)
	require.NoError(tb, os.WriteFile(conf, []byte(main), 0o600))

	p := &proxy{bin: bin, dir: dir, conf: conf, addr: addr, done: make(chan struct{})}
	p.cmd = exec.Command(bin, "-p", dir+"/", "-c", conf, "-e", filepath.Join(dir, "error.log"))
	var out bytes.Buffer
	p.cmd.Stdout, p.cmd.Stderr = &out, &out
	require.NoError(tb, p.cmd.Start())
	go func() {
		p.exitErr = p.cmd.Wait()
		close(p.done)
	}()

	// Wait until it accepts, or exits (a port taken meanwhile).
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			break
		}
		select {
		case <-p.done:
			return nil, fmt.Errorf("nginx exited: %v: %s%s", p.exitErr, out.String(), p.errorLog())
		case <-ctx.Done():
			p.stop()
			return nil, fmt.Errorf("nginx did not accept on %s: %s", addr, p.errorLog())
		case <-tick.C:
		}
	}
	tb.Cleanup(func() {
		p.stop()
		if tb.Failed() {
			tb.Logf("nginx error log:\n%s", p.errorLog())
		}
	})
	return p, nil
}

func (p *proxy) errorLog() string {
	b, _ := os.ReadFile(filepath.Join(p.dir, "error.log"))
	return string(b)
}

// stop ends nginx (fast shutdown) and reaps it.
func (p *proxy) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(testTimeout):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// reload runs "nginx -s reload" against this instance.
func (p *proxy) reload(tb testing.TB) {
	tb.Helper()
	out, err := exec.Command(p.bin, "-p", p.dir+"/", "-c", p.conf, "-e", filepath.Join(p.dir, "error.log"), "-s", "reload").CombinedOutput()
	require.NoError(tb, err, "nginx -s reload: %s", out)
}

// url is the WebSocket URL of nginx (or of addr, when given).
func wsURL(addr string) string { return "ws://" + addr + "/" }

// events is a slog handler that reports the client's log messages on a
// channel, so a test can wait for "resumed" instead of sleeping.
type events struct{ ch chan string }

func newEvents() *events { return &events{ch: make(chan string, 1024)} }

func (e *events) Enabled(context.Context, slog.Level) bool { return true }
func (e *events) Handle(_ context.Context, r slog.Record) error {
	select {
	case e.ch <- r.Message:
	default:
	}
	return nil
}
func (e *events) WithAttrs([]slog.Attr) slog.Handler { return e }
func (e *events) WithGroup(string) slog.Handler      { return e }

// wait waits for message msg.
func (e *events) wait(ctx context.Context, msg string) error {
	for {
		select {
		case m := <-e.ch:
			if m == msg {
				return nil
			}
		case <-ctx.Done():
			return fmt.Errorf("waiting for %q: %w", msg, ctx.Err())
		}
	}
}
