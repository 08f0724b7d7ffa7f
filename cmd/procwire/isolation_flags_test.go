//go:build linux

package main

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

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
	t.Cleanup(func() { stopServe(t, srv) })
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

// stopServe ends a serve started by the test as an operator would, with
// SIGTERM, and checks that it left none of its cgroups behind (a serve
// killed with SIGKILL leaves them, empty, for the next serve's sweep). A
// serve already gone is left alone.
func stopServe(t *testing.T, srv *exec.Cmd) {
	if srv.ProcessState != nil {
		return // the test waited for it
	}
	owner := cgroupOwner(srv.Process.Pid)
	if err := srv.Process.Signal(syscall.SIGTERM); err != nil {
		return
	}
	done := make(chan struct{})
	go func() { _ = srv.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(testTimeout):
		_ = srv.Process.Kill()
		<-done
		t.Errorf("serve did not end within %v of SIGTERM", testTimeout)
	}
	require.Empty(t, cgroupsNamed(owner), "left by serve after SIGTERM")
}

// cgroupOwner is the prefix of the names of the cgroups serve pid makes
// (bridge's ownerPrefix), read while it runs.
func cgroupOwner(pid int) string {
	return fmt.Sprintf("procwire-%d.%s-", pid, statField(pid, 22))
}

// sweptByTheNextServe starts a serve with args, the killed one's, and
// checks that, by the time it listens, no cgroup of the killed serve whose
// names start with owner is left: a serve killed with SIGKILL cannot
// remove its own. log is the killed serve's; under a containment without
// cgroups there is nothing to sweep. The killed serve should have a
// --cgroup-parent of the test's own (privateCgroupParent), or another
// test's serve may sweep first.
func sweptByTheNextServe(t *testing.T, owner, log string, args ...string) {
	t.Helper()
	if !strings.Contains(log, `containment="cgroup`) {
		t.Log("the killed serve made no cgroups: nothing to sweep")
		return
	}
	require.NotEmpty(t, cgroupsNamed(owner), "the killed serve left no cgroup to sweep")
	startLogged(t, exec.Command(binary, args...))
	require.Empty(t, cgroupsNamed(owner), "left by a killed serve after the next one started")
}

// cgroupsNamed lists the cgroups, in every hierarchy, whose names start
// with prefix.
func cgroupsNamed(prefix string) []string {
	var out []string
	_ = filepath.WalkDir("/sys/fs/cgroup", func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if strings.HasPrefix(d.Name(), prefix) {
			out = append(out, path)
		}
		return nil
	})
	return out
}

// statField is field n (1-based) of /proc/PID/stat, or "" if pid is gone.
func statField(pid, n int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if n-3 >= len(f) {
		return ""
	}
	return f[n-3]
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
