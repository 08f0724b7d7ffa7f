//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/procwire/procwire/client"
	"github.com/procwire/procwire/frames"
	"github.com/procwire/procwire/server"
)

// binary is the procwire command built for the tests that run it.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "procwire-test-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "procwire")
	// Built without -race whatever the test run: the tests run it hundreds
	// of times, and the race detector watches the server they run in
	// process.
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build procwire: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// testTimeout bounds hangs; it times nothing.
const testTimeout = 60 * time.Second

func testCtx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	return c
}

// testServer is a real server on loopback, in process so that its Stats
// can be watched.
type testServer struct {
	url string
	srv *server.Server
	hs  *httptest.Server
}

func newServer(t *testing.T, cfg server.Config) *testServer {
	srv, err := server.New(cfg)
	require.NoError(t, err)
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		require.NoError(t, srv.Shutdown(c))
		hs.Close()
	})
	return &testServer{url: "ws" + strings.TrimPrefix(hs.URL, "http") + "/", srv: srv, hs: hs}
}

// requireNoProcess fails unless the server holds no process within 2 s.
func (s *testServer) requireNoProcess(t *testing.T) {
	t.Helper()
	require.Eventually(t, func() bool { return len(s.srv.Stats().Processes) == 0 }, 2*time.Second, 5*time.Millisecond,
		"a remote process outlived exec: %+v", s.srv.Stats().Processes)
}

// result is how one run of the binary ended.
type result struct {
	code           int            // exit status; -1 when killed
	sig            syscall.Signal // the signal that killed it
	stdout, stderr string
}

// binCmd is the binary with args, an environment without PROCWIRE_*
// (plus env), and stdin.
func binCmd(t *testing.T, stdin string, env []string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(testCtx(t), binary, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PROCWIRE_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdin = strings.NewReader(stdin)
	return cmd
}

// runBin runs the binary to its end.
func runBin(t *testing.T, stdin string, env []string, args ...string) result {
	t.Helper()
	cmd := binCmd(t, stdin, env, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	return finish(t, cmd.Run(), cmd, &out, &errb)
}

func finish(t *testing.T, err error, cmd *exec.Cmd, out, errb *bytes.Buffer) result {
	t.Helper()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		require.NoError(t, err)
	}
	r := result{code: cmd.ProcessState.ExitCode(), stdout: out.String(), stderr: errb.String()}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		r.sig = ws.Signal()
	}
	return r
}

// execArgs is "exec URL flags... -- argv...".
func execArgs(url string, flags []string, argv ...string) []string {
	return append(append(append([]string{"exec", url}, flags...), "--"), argv...)
}

func TestVersionMatchesEvidence(t *testing.T) {
	r := runBin(t, "", nil, "version")
	require.Equal(t, 0, r.code)
	for _, alias := range []string{"--version", "-v"} {
		require.Equal(t, r.stdout, runBin(t, "", nil, alias).stdout, alias)
	}
	rev, _, _ := strings.Cut(strings.TrimPrefix(r.stdout, "procwire "), " ")
	require.Contains(t, r.stdout, "procwire.v1")

	// The provider revision that serve reports in evidence is the one
	// version prints.
	url := startServe(t)
	c := testCtx(t)
	p, err := client.Open(c, url, "version", frames.ProcessRequest{
		Executable: "true", Arguments: []string{}, WorkingDirectory: "/", Environment: map[string]string{},
	}, nil)
	require.NoError(t, err)
	require.Equal(t, rev, p.Evidence().ProviderRevision)
	require.NoError(t, p.Destroy(c))
}

func TestHelpOnStdoutInOneFormat(t *testing.T) {
	top := runBin(t, "", nil, "help")
	require.Equal(t, 0, top.code)
	require.Empty(t, top.stderr)
	for _, alias := range []string{"-h", "--help"} {
		require.Equal(t, top.stdout, runBin(t, "", nil, alias).stdout)
	}
	for _, c := range []string{"serve", "exec", "attach", "demo", "version"} {
		for _, args := range [][]string{{"help", c}, {c, "-h"}, {c, "--help"}} {
			r := runBin(t, "", nil, args...)
			require.Equal(t, 0, r.code, args)
			require.Empty(t, r.stderr, args)
			require.True(t, strings.HasPrefix(r.stdout, "Usage: procwire "+c), "%v: %q", args, r.stdout)
			require.Contains(t, top.stdout, "procwire "+c, "listed in procwire help")
		}
	}
	r := runBin(t, "", nil)
	require.Equal(t, 2, r.code)
	require.Equal(t, top.stdout, r.stderr, "no command: the help, on stderr")
	r = runBin(t, "", nil, "frobnicate")
	require.Equal(t, 2, r.code)
	require.Equal(t, "procwire: unknown command \"frobnicate\" (run \"procwire help\")\n", r.stderr)
}

func TestExecMirrors(t *testing.T) {
	s := newServer(t, server.Config{})
	r := runBin(t, "hello\nworld\n", nil, execArgs(s.url, nil, "sh", "-c", "echo oops >&2; cat; exit 3")...)
	require.Equal(t, 3, r.code, r.stderr)
	require.Equal(t, "hello\nworld\n", r.stdout, "stdin to EOF and back")
	require.Equal(t, "oops\n", r.stderr)
}

// Stderr written just before the exit is never lost: exec drains both
// streams to their ends before it destroys the process.
func TestExecStderrBeforeExit(t *testing.T) {
	s := newServer(t, server.Config{})
	runs := 500
	if testing.Short() {
		runs = 50
	}
	for i := range runs {
		r := runBin(t, "", nil, execArgs(s.url, nil, "sh", "-c", "echo out; echo err >&2")...)
		require.Equal(t, 0, r.code, "run %d: %s", i, r.stderr)
		require.Equal(t, "out\n", r.stdout, "run %d", i)
		require.Equal(t, "err\n", r.stderr, "run %d", i)
	}
}

// Stderr the server had to drop is counted, once.
func TestExecReportsDroppedStderr(t *testing.T) {
	s := newServer(t, server.Config{StderrRing: 1024})
	const total = 1 << 20
	r := runBin(t, "", nil, execArgs(s.url, nil, "sh", "-c", fmt.Sprintf("head -c %d /dev/zero >&2", total))...)
	require.Equal(t, 0, r.code)
	msg := r.stderr[max(0, strings.LastIndex(r.stderr, "procwire exec: ")):]
	var dropped int
	_, err := fmt.Sscanf(msg, "procwire exec: %d bytes of remote stderr dropped\n", &dropped)
	require.NoError(t, err, "%q", msg)
	require.Equal(t, total, len(r.stderr)-len(msg)+dropped, "what came and what was dropped add up")
	require.Equal(t, 1, strings.Count(r.stderr, "dropped"))
}

func TestExecExitCodes(t *testing.T) {
	s := newServer(t, server.Config{})
	statusFile := filepath.Join(t.TempDir(), "status")
	for _, c := range []int{0, 7, 125, 255} {
		r := runBin(t, "", nil, execArgs(s.url, []string{"--exit-status-file", statusFile}, "sh", "-c", fmt.Sprintf("exit %d", c))...)
		require.Equal(t, c, r.code, r.stderr)
		b, err := os.ReadFile(statusFile)
		require.NoError(t, err)
		require.Equal(t, fmt.Sprintf("exit %d\n", c), string(b))
	}
	// A 125 of procwire's own is told apart by the status file.
	r := runBin(t, "", nil, execArgs("ws://127.0.0.1:1/", []string{"--exit-status-file", statusFile}, "true")...)
	require.Equal(t, exitFailure, r.code)
	b, err := os.ReadFile(statusFile)
	require.NoError(t, err)
	require.Equal(t, "none\n", string(b))

	r = runBin(t, "", nil, execArgs(s.url, nil, "/nonexistent/procwire-test")...)
	require.Equal(t, exitNotFound, r.code)
	require.Equal(t, "procwire exec: /nonexistent/procwire-test: command not found on the server (executable_not_found)\n", r.stderr)
	r = runBin(t, "", nil, execArgs(s.url, nil, "/dev/null")...)
	require.Equal(t, exitCannotInvoke, r.code)
	require.Equal(t, "procwire exec: /dev/null: cannot run it on the server (permission_denied)\n", r.stderr)
}

// A remote death by a signal is re-raised: exec dies of the same signal,
// and leaves no core file even for a signal whose default dumps one.
func TestExecReraisesSignal(t *testing.T) {
	s := newServer(t, server.Config{})
	statusFile := filepath.Join(t.TempDir(), "status")
	r := runBin(t, "", nil, execArgs(s.url, []string{"--exit-status-file", statusFile}, "sh", "-c", "kill -TERM $$")...)
	require.Equal(t, syscall.SIGTERM, r.sig, r.stderr)
	b, err := os.ReadFile(statusFile)
	require.NoError(t, err)
	require.Equal(t, "signal SIGTERM\n", string(b))

	dir := t.TempDir()
	cmd := binCmd(t, "", nil, execArgs(s.url, nil, "sh", "-c", "kill -SEGV $$")...)
	cmd.Dir = dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	r = finish(t, cmd.Run(), cmd, &out, &errb)
	require.Equal(t, syscall.SIGSEGV, r.sig, r.stderr)
	require.Empty(t, r.stderr, "no Go stack dump")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries, "no core file")
}

func TestExecEnvironment(t *testing.T) {
	s := newServer(t, server.Config{})
	r := runBin(t, "", nil, execArgs(s.url, []string{"--env", "A=b c"}, "env")...)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "A=b c\n", r.stdout, "only what was asked for")

	r = runBin(t, "", []string{"PROCWIRE_TEST_LOCAL=local"}, execArgs(s.url, []string{"--inherit-env", "--env", "TEST_LOCAL=over"}, "env")...)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "TEST_LOCAL=over\n")
	require.Contains(t, r.stdout, "PATH="+os.Getenv("PATH")+"\n")
	require.NotContains(t, r.stdout, "PROCWIRE_")

	r = runBin(t, "", nil, "exec", "--env", "1A=x", s.url, "--", "env")
	require.Equal(t, exitFailure, r.code)
	require.Contains(t, r.stderr, "procwire exec: invalid value \"1A=x\" for flag -env")
}

// --inherit-env never hands the token to the remote process.
func TestExecInheritEnvKeepsTheTokenLocal(t *testing.T) {
	const token = "inherit-env-token-0123456789"
	s := newServer(t, server.Config{Token: token})
	r := runBin(t, "", []string{"PROCWIRE_TOKEN=" + token, "PROCWIRE_OTHER=x", "KEEP=1"}, execArgs(s.url, []string{"--inherit-env"}, "env")...)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "KEEP=1\n")
	require.NotContains(t, r.stdout, token)
	require.NotContains(t, r.stdout, "PROCWIRE_")
}

// Flags after the URL and before "--" are exec's; after "--", or from
// the first argument that is not a flag, they are the command's.
func TestExecFlagsAfterURL(t *testing.T) {
	s := newServer(t, server.Config{})
	r := runBin(t, "", nil, "exec", s.url, "--env", "X=1", "--", "env")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "X=1\n", r.stdout)
	r = runBin(t, "", nil, "exec", s.url, "--env", "X=2", "sh", "-c", "echo $X; echo $0", "--env")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "2\n--env\n", r.stdout)
	r = runBin(t, "", nil, "exec", "--cwd", "/tmp", "--", s.url, "pwd")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "/tmp\n", r.stdout)
}

// The default working directory is "/", which every server has.
func TestExecDefaultCwd(t *testing.T) {
	s := newServer(t, server.Config{})
	dir := t.TempDir()
	cmd := binCmd(t, "", nil, execArgs(s.url, nil, "pwd")...)
	cmd.Dir = dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	r := finish(t, cmd.Run(), cmd, &out, &errb)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "/\n", r.stdout)

	r = runBin(t, "", nil, execArgs(s.url, []string{"--cwd", "/nonexistent/dir"}, "pwd")...)
	require.Equal(t, exitFailure, r.code)
	require.Equal(t, "procwire exec: --cwd /nonexistent/dir: not a directory the server can use (working_directory_invalid)\n", r.stderr)
}

// Each way exec can fail says what went wrong in one line, naming the flag
// or the server's reason.
func TestExecErrorMessages(t *testing.T) {
	const token = "error-message-token-0123456789"
	s := newServer(t, server.Config{Token: token})
	certFile, keyFile, _ := selfSigned(t, t.TempDir())
	tlsURL := startServe(t, "--tls-cert", certFile, "--tls-key", keyFile)
	plainHost := strings.TrimSuffix(strings.TrimPrefix(s.url, "ws://"), "/")
	tlsHost := strings.TrimSuffix(strings.TrimPrefix(tlsURL, "wss://"), "/")

	for _, tc := range []struct {
		name  string
		env   []string
		args  []string
		want  string
		wantC int
	}{
		{"missing token", nil, execArgs(s.url, nil, "true"),
			"procwire exec: the server wants a token (HTTP 401): give --token-file FILE or set $PROCWIRE_TOKEN\n", exitFailure},
		{"wrong token", []string{"PROCWIRE_TOKEN=not-the-token-0123456789"}, execArgs(s.url, nil, "true"),
			"procwire exec: the server refused the token (HTTP 401): wrong token\n", exitFailure},
		{"plain to TLS", nil, execArgs("ws://"+tlsHost+"/", nil, "true"),
			"procwire exec: " + tlsHost + " speaks TLS: use wss://" + tlsHost + "/\n", exitFailure},
		{"TLS to plain", []string{"PROCWIRE_TOKEN=" + token}, execArgs("wss://"+plainHost+"/", nil, "true"),
			"procwire exec: " + plainHost + " does not speak TLS: use ws://" + plainHost + "/\n", exitFailure},
		{"untrusted certificate", nil, execArgs(tlsURL, nil, "true"),
			"procwire exec: " + tlsHost + "'s certificate is signed by an unknown authority: trust it with --ca-file PEM\n", exitFailure},
		{"no scheme", nil, execArgs(plainHost, nil, "true"),
			"procwire exec: URL \"" + plainHost + "\": want ws://HOST:PORT/, wss://HOST:PORT/ or ws+unix:///PATH\n", exitFailure},
		{"no scheme, a name", nil, execArgs("localhost:7777", nil, "true"),
			"procwire exec: URL \"localhost:7777\": want ws://HOST:PORT/, wss://HOST:PORT/ or ws+unix:///PATH\n", exitFailure},
		{"other scheme", nil, execArgs("ftp://host/", nil, "true"),
			"procwire exec: URL \"ftp://host/\": want ws://HOST:PORT/, wss://HOST:PORT/ or ws+unix:///PATH (scheme \"ftp\")\n", exitFailure},
		{"nothing listens", nil, execArgs("ws://127.0.0.1:1/", nil, "true"),
			"procwire exec: nothing listens at 127.0.0.1:1 (connection refused)\n", exitFailure},
		{"token in clear text", []string{"PROCWIRE_TOKEN=" + token}, execArgs("ws://192.0.2.1:7777/", nil, "true"),
			"procwire exec: refusing to send the token in clear text over ws:// to 192.0.2.1, which is not loopback: use wss://, or --allow-insecure-token\n", exitFailure},
		{"no command", nil, []string{"exec", s.url},
			"procwire exec: want URL and CMD (run \"procwire help exec\")\n", exitFailure},
		{"unknown flag", nil, execArgs(s.url, []string{"--frob"}, "true"),
			"procwire exec: flag provided but not defined: -frob (run \"procwire help exec\")\n", exitFailure},
		{"empty cwd", nil, execArgs(s.url, []string{"--cwd", ""}, "true"),
			"procwire exec: --cwd must not be empty (run \"procwire help exec\")\n", exitFailure},
		{"token file", nil, execArgs(s.url, []string{"--token-file", "/nonexistent/token"}, "true"),
			"procwire exec: --token-file: open /nonexistent/token: no such file or directory\n", exitFailure},
		{"bad header", nil, execArgs(s.url, []string{"--header", "NoColon"}, "true"),
			"procwire exec: invalid value \"NoColon\" for flag -header: want 'Name: value', got \"NoColon\" (run \"procwire help exec\")\n", exitFailure},
		{"token in a header", nil, execArgs(s.url, []string{"--header", "Authorization: Bearer x"}, "true"),
			"procwire exec: invalid value \"Authorization: Bearer x\" for flag -header: the token goes in --token-file or $PROCWIRE_TOKEN, not in a header (run \"procwire help exec\")\n", exitFailure},
		{"ca file without certificates", nil, execArgs(tlsURL, []string{"--ca-file", "/dev/null"}, "true"),
			"procwire exec: --ca-file /dev/null: no PEM certificate in it\n", exitFailure},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runBin(t, "", tc.env, tc.args...)
			require.Equal(t, tc.wantC, r.code, r.stderr)
			require.Equal(t, tc.want, r.stderr)
			require.Empty(t, r.stdout)
		})
	}
}

// --ca-file trusts a self-signed server; --server-name checks the name
// the certificate is for when the URL names an address.
func TestExecCAFile(t *testing.T) {
	certFile, keyFile, _ := selfSigned(t, t.TempDir())
	tokenFile := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte("ca-file-token-0123456789\n"), 0o600))
	url := startServe(t, "--tls-cert", certFile, "--tls-key", keyFile, "--token-file", tokenFile)
	require.True(t, strings.HasPrefix(url, "wss://"), url)

	r := runBin(t, "", nil, execArgs(url, []string{"--ca-file", certFile, "--token-file", tokenFile}, "echo", "over tls")...)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "over tls\n", r.stdout)

	r = runBin(t, "", nil, execArgs(url, []string{"--ca-file", certFile, "--token-file", tokenFile, "--server-name", selfSignedName}, "echo", "by name")...)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "by name\n", r.stdout)

	r = runBin(t, "", nil, execArgs(url, []string{"--ca-file", certFile, "--token-file", tokenFile, "--server-name", "other.test"}, "true")...)
	require.Equal(t, exitFailure, r.code)
	host := strings.TrimSuffix(strings.TrimPrefix(url, "wss://"), "/")
	require.Equal(t, "procwire exec: "+host+"'s certificate is not valid for other.test: name the one it is for with --server-name\n", r.stderr)
}

// --header reaches the server's handshake.
func TestExecHeader(t *testing.T) {
	s := newServer(t, server.Config{})
	seen := make(chan string, 1)
	hs := httptest.NewServer(headerSpy{next: s.srv, name: "X-Route", seen: seen})
	t.Cleanup(hs.Close)
	url := "ws" + strings.TrimPrefix(hs.URL, "http") + "/"
	r := runBin(t, "", nil, execArgs(url, []string{"--header", "X-Route: blue"}, "true")...)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "blue", <-seen)
}

func TestExecForwardsSignal(t *testing.T) {
	s := newServer(t, server.Config{})
	cmd, ready := startBin(t, "", execArgs(s.url, nil, "sh", "-c",
		`trap "echo got TERM; exit 7" TERM; echo ready; while :; do sleep 1; done`)...)
	<-ready
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	r := cmd.wait(t)
	require.Equal(t, 7, r.code, r.stderr)
	require.Equal(t, "ready\ngot TERM\n", r.stdout)
}

// SIGHUP and SIGQUIT, which the wire cannot carry, end the remote process:
// SIGTERM, then a destroy after a bound. exec then dies of the signal it
// received, without a goroutine dump or a core file.
func TestExecHangupAndQuitEndTheRemoteProcess(t *testing.T) {
	s := newServer(t, server.Config{})
	for _, tc := range []struct {
		sig    syscall.Signal
		script string
	}{
		{syscall.SIGHUP, `echo ready; exec sleep 1000`},
		{syscall.SIGQUIT, `echo ready; exec sleep 1000`},
		{syscall.SIGHUP, `trap "" TERM; echo ready; while :; do sleep 1; done`}, // destroyed after the bound
	} {
		t.Run(tc.sig.String(), func(t *testing.T) {
			dir := t.TempDir()
			cmd, ready := startBin(t, dir, execArgs(s.url, nil, "sh", "-c", tc.script)...)
			<-ready
			require.Len(t, s.srv.Stats().Processes, 1)
			require.NoError(t, cmd.Process.Signal(tc.sig))
			s.requireNoProcess(t)
			r := cmd.wait(t)
			require.Equal(t, tc.sig, r.sig, r.stderr)
			require.NotContains(t, r.stderr, "goroutine")
			entries, err := os.ReadDir(dir)
			require.NoError(t, err)
			require.Empty(t, entries, "no core file")
		})
	}
}

// A closed local stdout (procwire exec ... | head -1) destroys the remote
// process and exits 141, as a local pipeline would.
func TestExecBrokenPipe(t *testing.T) {
	s := newServer(t, server.Config{})
	status := filepath.Join(t.TempDir(), "status")
	sh := exec.CommandContext(testCtx(t), "sh", "-c", `{ "$0" exec "$1" -- yes; echo $? >"$2"; } | head -1`, binary, s.url, status)
	out, err := sh.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Equal(t, "y\n", string(out))
	b, err := os.ReadFile(status)
	require.NoError(t, err)
	require.Equal(t, "141\n", string(b))
	s.requireNoProcess(t)
}

// serve checks its certificate before it says it listens, refuses a short
// token, and refuses flags whose zero means nothing.
func TestServeRefusals(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte("short\n"), 0o600))
	for _, tc := range []struct {
		name string
		args []string
		want string
		code int
	}{
		{"missing certificate", []string{"--tls-cert", "/nonexistent/cert.pem", "--tls-key", "/nonexistent/key.pem"},
			"procwire serve: --tls-cert/--tls-key: open /nonexistent/cert.pem: no such file or directory\n", 1},
		{"short token", []string{"--token-file", tokenFile},
			"procwire serve: --token-file " + tokenFile + ": not a token: 5 bytes, fewer than 16: make one with head -c 32 /dev/urandom | base64\n", 1},
		{"public without token", []string{"--addr", "0.0.0.0:0"},
			"procwire serve: --addr 0.0.0.0:0: without a token the server listens on loopback only (give --token-file)\n", 1},
		{"grace 0", []string{"--grace", "0"},
			"procwire serve: invalid value \"0\" for flag -grace: must be above 0 (run \"procwire help serve\")\n", 2},
		{"heartbeat 0", []string{"--heartbeat", "0s"},
			"procwire serve: invalid value \"0s\" for flag -heartbeat: 0 means nothing here: give a positive duration, or a negative one for no heartbeat (run \"procwire help serve\")\n", 2},
		{"max-processes 0", []string{"--max-processes", "0"},
			"procwire serve: invalid value \"0\" for flag -max-processes: must be within 1..1073741824 (run \"procwire help serve\")\n", 2},
		{"stdout-window", []string{"--stdout-window", "100"},
			"procwire serve: invalid value \"100\" for flag -stdout-window: must be within 1KiB..1GiB (run \"procwire help serve\")\n", 2},
		{"decimal unit", []string{"--max-memory", "512MB"},
			"procwire serve: invalid value \"512MB\" for flag -max-memory: \"512MB\": ambiguous unit: write a binary unit (KiB, MiB, GiB: powers of 1024) or plain bytes (run \"procwire help serve\")\n", 2},
		{"fraction of a byte", []string{"--stderr-ring", "1.1KiB"},
			"procwire serve: invalid value \"1.1KiB\" for flag -stderr-ring: \"1.1KiB\": size out of range: not a whole number of bytes (run \"procwire help serve\")\n", 2},
		{"argument", []string{"extra"},
			"procwire serve: unexpected argument \"extra\" (run \"procwire help serve\")\n", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runBin(t, "", nil, append([]string{"serve", "--addr", "127.0.0.1:0"}, tc.args...)...)
			require.Equal(t, tc.code, r.code, r.stderr)
			require.Equal(t, tc.want, r.stderr)
		})
	}
}

func TestDemo(t *testing.T) {
	for _, args := range [][]string{{"--bytes", "4194304", "--cuts", "3"}, {"--bytes", "100000", "--cuts", "5"}} {
		r := runBin(t, "", nil, append([]string{"demo"}, args...)...)
		require.Equal(t, 0, r.code, r.stdout)
		require.Contains(t, r.stdout, "OK: sha256 match")
		require.Contains(t, r.stdout, args[3]+" reconnect(s)")
	}
}

// running is the binary started in the background.
type running struct {
	*exec.Cmd
	out, errb bytes.Buffer
	copied    chan struct{}
}

// startBin starts the binary in dir ("": the test's) and returns it with
// a channel closed once its stdout has said "ready\n" (or ended).
func startBin(t *testing.T, dir string, args ...string) (*running, <-chan struct{}) {
	r := &running{Cmd: binCmd(t, "", nil, args...), copied: make(chan struct{})}
	r.Dir = dir
	pr, err := r.StdoutPipe()
	require.NoError(t, err)
	r.Stderr = &r.errb
	require.NoError(t, r.Start())
	ready := make(chan struct{})
	go func() {
		defer close(r.copied)
		buf := make([]byte, 4096)
		said := false
		for {
			n, err := pr.Read(buf)
			r.out.Write(buf[:n])
			if !said && (err != nil || strings.Contains(r.out.String(), "ready\n")) {
				said = true
				close(ready)
			}
			if err != nil {
				return
			}
		}
	}()
	return r, ready
}

// wait waits for the binary and returns how it ended.
func (r *running) wait(t *testing.T) result {
	<-r.copied
	return finish(t, r.Cmd.Wait(), r.Cmd, &r.out, &r.errb)
}

// headerSpy reports one request header of the first request it sees.
type headerSpy struct {
	next interface {
		ServeHTTP(w http.ResponseWriter, r *http.Request)
	}
	name string
	seen chan string
}

func (h headerSpy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	select {
	case h.seen <- r.Header.Get(h.name):
	default:
	}
	h.next.ServeHTTP(w, r)
}

// seq is what seq(1) prints from a to b.
func seq(a, b int) string {
	var s strings.Builder
	for i := a; i <= b; i++ {
		fmt.Fprintf(&s, "%d\n", i)
	}
	return s.String()
}

// exec --detach leaves the process running; attach, from another process,
// gets every stdout byte, the ones written while nobody was attached
// included, continues its stdin and mirrors its exit.
func TestExecDetachAttach(t *testing.T) {
	s := newServer(t, server.Config{})
	dir := t.TempDir()
	fifo := filepath.Join(dir, "go")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	handle := filepath.Join(dir, "handle")
	script := `seq 1 1000; read x <"$0"; seq 1001 3000; read y; echo "stdin $y"; seq 3001 4000; exit 3`
	r := runBin(t, "", nil, execArgs(s.url, []string{"--detach", "--handle-file", handle}, "sh", "-c", script, fifo)...)
	require.Equal(t, 0, r.code, r.stderr)
	require.Empty(t, r.stdout, "the handle went to the file")
	require.Contains(t, r.stderr, "procwire exec: detached process ")
	require.Contains(t, r.stderr, "its handle is a secret")
	fi, err := os.Stat(handle)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	b, err := os.ReadFile(handle)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(b), `{"secret":"procwire process handle: a secret`), "%s", b)

	// The process writes on while nobody is attached.
	w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = w.WriteString("go\n")
	require.NoError(t, err)
	require.NoError(t, w.Close())
	held := len(seq(1, 3000))
	require.Eventually(t, func() bool {
		st := s.srv.Stats()
		return len(st.Processes) == 1 && !st.Processes[0].Attached && st.Processes[0].StdoutHeld == held
	}, testTimeout, 5*time.Millisecond)

	r = runBin(t, "hello\n", nil, "attach", "--handle-file", handle)
	require.Equal(t, 3, r.code, r.stderr)
	require.Empty(t, r.stderr)
	require.Equal(t, seq(1, 3000)+"stdin hello\n"+seq(3001, 4000), r.stdout)
	s.requireNoProcess(t)
}

// Without --handle-file the handle is exec's stdout, and attach takes it
// as an argument.
func TestExecDetachToStdout(t *testing.T) {
	s := newServer(t, server.Config{})
	r := runBin(t, "", nil, execArgs(s.url, []string{"--detach"}, "sh", "-c", "echo hi; cat")...)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, 1, strings.Count(r.stdout, "\n"), "one line: %q", r.stdout)
	r = runBin(t, "there\n", nil, "attach", strings.TrimSpace(r.stdout))
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "hi\nthere\n", r.stdout)
	s.requireNoProcess(t)

	r = runBin(t, "", nil, "attach", `{"url":"ws://127.0.0.1:1/"}`)
	require.Equal(t, exitFailure, r.code)
	require.Equal(t, "procwire attach: not a handle printed by procwire exec --detach: url, instance_id, process_id or token missing\n", r.stderr)
	r = runBin(t, "", nil, "exec", "--handle-file", "h", s.url, "true")
	require.Equal(t, exitFailure, r.code)
	require.Equal(t, "procwire exec: --handle-file goes with --detach (run \"procwire help exec\")\n", r.stderr)
}

// A server that is gone for good ends exec within its grace and the
// bounded destroy, with one line.
func TestExecGivesUpWhenTheServerIsGone(t *testing.T) {
	args := []string{"serve", "--addr", "127.0.0.1:0", "--grace", "1s"}
	if parent, err := privateCgroupParent(t); err == nil {
		args = append(args, "--cgroup-parent", parent)
	}
	srv := exec.CommandContext(testCtx(t), binary, args...)
	logs, err := srv.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, srv.Start())
	served := make(chan struct{})
	t.Cleanup(func() { <-served })
	lines := bufio.NewScanner(logs)
	var url, head string
	for url == "" && lines.Scan() {
		head += lines.Text() + "\n"
		if _, after, ok := strings.Cut(lines.Text(), "url="); ok {
			url, _, _ = strings.Cut(after, " ")
		}
	}
	go func() {
		defer close(served)
		io.Copy(io.Discard, logs)
		srv.Wait()
	}()
	require.NotEmpty(t, url, "serve logged no URL")

	cmd, ready := startBin(t, "", execArgs(url, nil, "sh", "-c", "echo ready; exec sleep 1000")...)
	<-ready
	owner := cgroupOwner(srv.Process.Pid)
	require.NoError(t, srv.Process.Kill())
	r := cmd.wait(t)
	require.Equal(t, exitFailure, r.code, r.stderr)
	host := strings.TrimSuffix(strings.TrimPrefix(url, "ws://"), "/")
	require.Equal(t, "procwire exec: lost the server and could not resume: nothing listens at "+host+" (connection refused)\n", r.stderr)
	sweptByTheNextServe(t, owner, head, args...)
}

// A signal while the server does not answer the handshake ends exec at
// once, with 128+N.
func TestExecInterruptedWhileConnecting(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
		close(accepted)
	}()
	t.Cleanup(func() {
		ln.Close()
		if c, ok := <-accepted; ok {
			c.Close()
		}
	})
	cmd, _ := startBin(t, "", execArgs("ws://"+ln.Addr().String()+"/", nil, "true")...)
	c := <-accepted // the handshake is under way, and never answered
	defer c.Close()
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	r := cmd.wait(t)
	require.Equal(t, 130, r.code, r.stderr)
	require.Equal(t, "procwire exec: interrupt before the process started\n", r.stderr)
}
