//go:build linux

package main

import (
	"bufio"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestServeIsolatesTheChild runs serve as an operator might: the token in
// its environment, a descriptor 9 inherited without close-on-exec (a
// shell's `exec 9>>leak.txt`), and --run-as nobody. The child sees only
// fds 0, 1 and 2, runs as nobody, and cannot read the server's environment.
func TestServeIsolatesTheChild(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("--run-as needs serve to run as root")
	}
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skipf("no user nobody: %v", err)
	}
	dir := t.TempDir()
	token := "isolation-test-token-0123456789abcdef"
	tokenFile := filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte(token), 0o600))
	leak, err := os.OpenFile(filepath.Join(dir, "leak.txt"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	require.NoError(t, err)
	defer leak.Close()

	srv := binCmd(t, "", []string{"PROCWIRE_TOKEN=" + token}, "serve", "--addr", "127.0.0.1:0", "--run-as", "nobody")
	srv.ExtraFiles = []*os.File{nil, nil, nil, nil, nil, nil, leak} // fd 9
	stderr, err := srv.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, srv.Start())
	lines := bufio.NewScanner(stderr)
	var url, log string
	for url == "" && lines.Scan() {
		log += lines.Text() + "\n"
		if _, after, ok := strings.Cut(lines.Text(), "url="); ok {
			url, _, _ = strings.Cut(after, " ")
		}
	}
	require.NotEmpty(t, url, "serve logged no URL:\n%s", log)
	require.Contains(t, log, "containment=")
	go func() { // drain the rest of the log
		for lines.Scan() {
		}
	}()
	// serve holds fd 9, and its environment holds the token.
	_, err = os.Readlink("/proc/" + strconv.Itoa(srv.Process.Pid) + "/fd/9")
	require.NoError(t, err)

	r := runBin(t, "", nil, execArgs(url, []string{"--token-file", tokenFile}, "sh", "-c",
		`id -u; ls /proc/$$/fd; cat /proc/$PPID/environ >/dev/null 2>&1 && echo readable || echo unreadable; echo x >&9 2>/dev/null && echo fd9 || echo no-fd9`)...)
	require.NoError(t, srv.Process.Signal(syscall.SIGTERM))
	require.NoError(t, srv.Wait())
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, nobody.Uid+"\n0\n1\n2\nunreadable\nno-fd9\n", r.stdout)
	b, err := os.ReadFile(leak.Name())
	require.NoError(t, err)
	require.Empty(t, b, "the child wrote to the server's fd 9")
}
