package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/procwire/procwire/server"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const testTimeout = 60 * time.Second

func testCtx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	return c
}

// newServer runs an in-process server on loopback and returns its ws URL.
func newServer(t *testing.T, token string) string {
	srv, err := server.New(server.Config{Token: token})
	require.NoError(t, err)
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		require.NoError(t, srv.Shutdown(c))
		hs.Close()
	})
	return "ws" + strings.TrimPrefix(hs.URL, "http")
}

// runExec runs "procwire exec URL -- argv" with stdin and returns the
// status, stdout and stderr.
func runExec(t *testing.T, url, stdin string, flags []string, argv ...string) (int, string, string) {
	var out, errb bytes.Buffer
	args := append(append([]string{"exec", "--cwd", "/"}, flags...), append([]string{url, "--"}, argv...)...)
	code := run(testCtx(t), args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

func TestVersionAndHelp(t *testing.T) {
	var out, errb bytes.Buffer
	require.Equal(t, 0, run(testCtx(t), []string{"version"}, nil, &out, &errb))
	require.Contains(t, out.String(), "procwire.v1")
	out.Reset()
	require.Equal(t, 0, run(testCtx(t), []string{"help"}, nil, &out, &errb))
	require.Contains(t, out.String(), "procwire exec")
	require.Equal(t, 2, run(testCtx(t), nil, nil, &out, &errb))
	require.Equal(t, 2, run(testCtx(t), []string{"frobnicate"}, nil, &out, &errb))
	require.Equal(t, 0, run(testCtx(t), []string{"help", "exec"}, nil, &out, &errb))
	require.Equal(t, 2, run(testCtx(t), []string{"exec", "ws://127.0.0.1:1/"}, nil, &out, &errb), "no command")
}

func TestExecMirrors(t *testing.T) {
	url := newServer(t, "")
	// stderr is best effort and unordered with the exit (PROTOCOL.md §5):
	// it is written first.
	code, out, errOut := runExec(t, url, "hello\nworld\n", nil, "sh", "-c", "echo oops >&2; cat; exit 3")
	require.Equal(t, 3, code, errOut)
	require.Equal(t, "hello\nworld\n", out, "stdin to EOF and back")
	require.Equal(t, "oops\n", errOut)
}

func TestExecExitCodes(t *testing.T) {
	url := newServer(t, "")
	for _, c := range []int{0, 1, 255} {
		code, _, errOut := runExec(t, url, "", nil, "sh", "-c", fmt.Sprintf("exit %d", c))
		require.Equal(t, c, code, errOut)
	}
}

func TestExecEnvironment(t *testing.T) {
	url := newServer(t, "")
	t.Setenv("PROCWIRE_TEST_LOCAL", "local")
	code, out, errOut := runExec(t, url, "", []string{"--env", "A=b c"}, "env")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "A=b c\n", out, "only what was asked for")

	code, out, errOut = runExec(t, url, "", []string{"--inherit-env", "--env", "PROCWIRE_TEST_LOCAL=over"}, "env")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "PROCWIRE_TEST_LOCAL=over\n")
	require.Contains(t, out, "PATH="+os.Getenv("PATH")+"\n")

	var errb bytes.Buffer
	require.Equal(t, 2, run(testCtx(t), []string{"exec", "--env", "1A=x", url, "--", "env"}, nil, io.Discard, &errb))
}

func TestExecNotFound(t *testing.T) {
	url := newServer(t, "")
	code, _, errOut := runExec(t, url, "", nil, "/nonexistent/procwire-test")
	require.Equal(t, exitNotFound, code, errOut)
}

// A remote death by a signal is re-raised here; when that does not end
// the process, the status is 128+n.
func TestExecReraisesSignal(t *testing.T) {
	url := newServer(t, "")
	var raised []syscall.Signal
	old := reraise
	reraise = func(sig syscall.Signal) { raised = append(raised, sig) }
	t.Cleanup(func() { reraise = old })
	code, _, errOut := runExec(t, url, "", nil, "sh", "-c", "kill -TERM $$")
	require.Equal(t, 128+15, code, errOut)
	require.Equal(t, []syscall.Signal{syscall.SIGTERM}, raised)
}

// notifyWriter closes seen once what was written contains want.
type notifyWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	seen chan struct{}
}

func (w *notifyWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	had := strings.Contains(w.buf.String(), w.want)
	w.buf.Write(b)
	if !had && strings.Contains(w.buf.String(), w.want) {
		close(w.seen)
	}
	return len(b), nil
}

func (w *notifyWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// SIGTERM received locally is forwarded to the remote process.
func TestExecForwardsSignal(t *testing.T) {
	url := newServer(t, "")
	c := testCtx(t)
	out := &notifyWriter{want: "ready\n", seen: make(chan struct{})}
	var errb bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run(c, []string{"exec", "--cwd", "/", url, "--", "sh", "-c",
			`trap "echo got TERM; exit 7" TERM; echo ready; while :; do sleep 1; done`}, strings.NewReader(""), out, &errb)
	}()
	select {
	case <-out.seen:
	case <-c.Done():
		t.Fatal("no ready")
	}
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGTERM))
	select {
	case code := <-done:
		require.Equal(t, 7, code, errb.String())
	case <-c.Done():
		t.Fatal("exec did not end")
	}
	require.Equal(t, "ready\ngot TERM\n", out.String())
}

// serve listens, authenticates and shuts down when its context ends.
func TestServe(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600))
	url := startServe(t, "--token-file", tokenFile, "--grace", "5s")

	code, out, errOut := runExec(t, url, "", []string{"--token-file", tokenFile}, "echo", "hi")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "hi\n", out)

	t.Setenv(tokenEnv, "s3cret")
	code, out, errOut = runExec(t, url, "", nil, "echo", "from env")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "from env\n", out)

	t.Setenv(tokenEnv, "")
	code, _, errOut = runExec(t, url, "", nil, "echo", "hi")
	require.Equal(t, exitFailure, code)
	require.Contains(t, errOut, "401")
}

func TestServeRefusesPublicWithoutToken(t *testing.T) {
	t.Setenv("PROCWIRE_TOKEN", "")
	var errb bytes.Buffer
	require.Equal(t, 1, run(testCtx(t), []string{"serve", "--addr", "0.0.0.0:0"}, nil, io.Discard, &errb))
	require.Contains(t, errb.String(), "loopback")
}

func TestDemo(t *testing.T) {
	var out bytes.Buffer
	code := run(testCtx(t), []string{"demo", "--bytes", "4194304", "--cuts", "3"}, nil, &out, io.Discard)
	require.Equal(t, 0, code, out.String())
	require.Contains(t, out.String(), "OK: sha256 match")
	require.Contains(t, out.String(), "3 reconnect(s)")
}
