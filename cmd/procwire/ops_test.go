//go:build linux

package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/client"
	"github.com/procwire/procwire/frames"
)

// startServeOps runs "procwire serve --metrics-addr 127.0.0.1:0 args..."
// until the test ends and returns the process URL, the metrics address and
// every log line, read after the server stopped.
func startServeOps(t *testing.T, args ...string) (url, metricsAddr string, logs func() string) {
	sctx, stop := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- run(sctx, append([]string{"serve", "--addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0"}, args...), &stdio{out: io.Discard, err: pw})
		pw.Close()
	}()
	var all strings.Builder
	lines := bufio.NewScanner(pr)
	for (url == "" || metricsAddr == "") && lines.Scan() {
		all.WriteString(lines.Text() + "\n")
		if strings.Contains(lines.Text(), "metrics listening") {
			_, after, _ := strings.Cut(lines.Text(), "addr=")
			metricsAddr, _, _ = strings.Cut(after, " ")
		} else if _, after, ok := strings.Cut(lines.Text(), " url="); ok {
			url, _, _ = strings.Cut(after, " ")
		}
	}
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		for lines.Scan() {
			all.WriteString(lines.Text() + "\n")
		}
		io.Copy(io.Discard, pr)
	}()
	stopped := false
	finish := func() {
		if !stopped {
			stopped = true
			stop()
			require.Equal(t, 0, <-done)
			<-drained
		}
	}
	t.Cleanup(finish)
	require.NotEmpty(t, url, "serve logged no URL")
	require.NotEmpty(t, metricsAddr, "serve logged no metrics address")
	return url, metricsAddr, func() string { finish(); return all.String() }
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

const opsToken = "ops-token-0123456789abcdef"

func TestServeMetricsAndHealth(t *testing.T) {
	t.Setenv(tokenEnv, opsToken)
	url, maddr, logs := startServeOps(t, "--trusted-proxy", "127.0.0.1/32")

	code, body := get(t, "http://"+maddr+"/healthz")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "ok\n", body)

	c := testCtx(t)
	p, err := client.Open(c, url, "ops", frames.ProcessRequest{
		Executable: "echo", Arguments: []string{"hi"}, WorkingDirectory: "/",
		Environment: map[string]string{},
	}, &client.Options{Token: opsToken, HTTPHeader: map[string][]string{"X-Forwarded-For": {"192.0.2.7"}}})
	require.NoError(t, err)
	out, err := io.ReadAll(p.Stdout())
	require.NoError(t, err)
	require.Equal(t, "hi\n", string(out))
	require.NoError(t, p.Destroy(c))

	code, body = get(t, "http://"+maddr+"/metrics")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "\nprocwire_processes_opened_total 1\n")
	require.Contains(t, body, "\nprocwire_processes_destroyed_total 1\n")
	require.Contains(t, body, "\ngo_goroutines ")
	// The process endpoint does not serve the metrics.
	code, _ = get(t, strings.Replace(url, "ws://", "http://", 1)+"metrics")
	require.Equal(t, http.StatusUnauthorized, code)

	// The client's address came from the trusted proxy's header; the
	// token never reached the log.
	all := logs()
	require.Contains(t, all, "remote=192.0.2.7 peer=127.0.0.1:")
	require.NotContains(t, all, opsToken)
}

func TestPrefixListFlag(t *testing.T) {
	var l prefixList
	require.NoError(t, l.Set("10.0.0.0/8"))
	require.NoError(t, l.Set("192.0.2.1, ::1"))
	require.Equal(t, prefixList{
		netip.MustParsePrefix("10.0.0.0/8"),
		netip.MustParsePrefix("192.0.2.1/32"),
		netip.MustParsePrefix("::1/128"),
	}, l)
	require.Equal(t, "10.0.0.0/8,192.0.2.1/32,::1/128", l.String())
	require.Error(t, l.Set("not-an-address"))
}
