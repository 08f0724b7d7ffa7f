//go:build linux

package main

import (
	"bufio"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestServeWarnsAsRoot: serving as root without --run-as or
// --run-as-range logs a WARN saying what every child can do; with either,
// it does not.
func TestServeWarnsAsRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the warning is about serving as root")
	}
	const warning = `level=WARN msg="serving as root without --run-as or --run-as-range`
	for _, c := range []struct {
		args []string
		warn bool
	}{{nil, true}, {[]string{"--run-as", "nobody"}, false}, {[]string{"--run-as-range", "100000-100999"}, false}} {
		srv := binCmd(t, "", nil, append([]string{"serve", "--addr", "127.0.0.1:0"}, c.args...)...)
		_, logs := startLogged(t, srv)
		require.Equal(t, c.warn, strings.Contains(logs(), warning), "%v:\n%s", c.args, logs())
		require.NoError(t, srv.Process.Signal(syscall.SIGTERM))
		require.NoError(t, srv.Wait())
	}
	r := runBin(t, "", nil, "serve", "--help")
	require.Contains(t, r.stdout, "Serving as root without --run-as or\n--run-as-range is warned about")
}

// TestServeRefusesIsolationFlags: what serve refuses of --run-as,
// --run-as-range, --child-caps and --child-umask.
func TestServeRefusesIsolationFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"--run-as", "nobody", "--run-as-range", "100000-100999"}, 1, "exclude each other"},
		{[]string{"--run-as-range", "65000-66000"}, 1, "nobody of /etc/passwd"},
		{[]string{"--run-as-range", "0-10"}, 1, "unusable uid range"},
		{[]string{"--run-as-range", "100000"}, 1, "is not FIRST-LAST"},
		{[]string{"--child-caps", "cap_fly"}, 1, `unknown capability "cap_fly"`},
		{[]string{"--child-umask", "0999"}, 2, "octal umask"},
	} {
		r := runBin(t, "", nil, append([]string{"serve", "--addr", "127.0.0.1:0"}, c.args...)...)
		require.Equal(t, c.code, r.code, "%v: %s", c.args, r.stderr)
		require.Contains(t, r.stderr, c.says, c.args)
	}
}

// startLogged starts a serve command and returns the URL it logs and its
// log so far.
func startLogged(t *testing.T, srv *exec.Cmd) (url string, logs func() string) {
	t.Helper()
	stderr, err := srv.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, srv.Start())
	t.Cleanup(func() { _ = srv.Process.Kill() })
	var buf syncBuffer
	lines := bufio.NewScanner(stderr)
	for url == "" && lines.Scan() {
		buf.WriteString(lines.Text() + "\n")
		if _, after, ok := strings.Cut(lines.Text(), "url="); ok {
			url, _, _ = strings.Cut(after, " ")
		}
	}
	require.NotEmpty(t, url, "serve logged no URL:\n%s", buf.String())
	go func() { // the rest of the log
		for lines.Scan() {
			buf.WriteString(lines.Text() + "\n")
		}
	}()
	return url, buf.String
}

// syncBuffer is a strings.Builder safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) WriteString(str string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b.WriteString(str)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
