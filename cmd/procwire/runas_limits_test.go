//go:build linux

package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/bridge"
	"github.com/procwire/procwire/server"
)

// TestRunAsRangeTakesServesLimits: --run-as-range combines with
// --limit-pids: the child runs as a leased uid of the range and its
// cgroup's pids.max is serve's limit (before, serve refused to start).
func TestRunAsRangeTakesServesLimits(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("--run-as-range needs root")
	}
	url := limitedServe(t, bridge.Limits{Pids: 123}, "--run-as-range", "100000-100999", "--limit-pids", "123")
	ctx := testCtx(t)
	// The pids limit as the child sees it, in the v2 or v1 pids hierarchy.
	p, _ := openMarked(t, ctx, url, "sh", "-c", `id -u
v2=$(sed -n 's/^0:://p' /proc/self/cgroup); v1=$(sed -n 's/^[0-9]*:pids://p' /proc/self/cgroup)
for f in /sys/fs/cgroup/unified$v2/pids.max /sys/fs/cgroup$v2/pids.max /sys/fs/cgroup/pids$v1/pids.max; do
  if [ -r "$f" ] && [ "$(cat "$f")" != max ]; then cat "$f"; break; fi
done`)
	out, err := io.ReadAll(readerCtx{ctx, p.Stdout()})
	require.NoError(t, err)
	st, err := p.Wait(ctx)
	require.NoError(t, err)
	require.Zero(t, st.Code, "%s", out)
	lines := strings.Fields(string(out))
	require.Len(t, lines, 2, "uid and pids.max: %q", out)
	require.GreaterOrEqual(t, lines[0], "100000", "a leased uid")
	require.LessOrEqual(t, lines[0], "100999", "a leased uid")
	require.Len(t, lines[0], 6)
	require.Equal(t, "123", lines[1], "serve's --limit-pids")
}

// TestExecReportsOOM: a remote process the OOM killer ended makes exec
// say so on stderr and write "signal SIGKILL oom" to --exit-status-file,
// and exec dies of SIGKILL like the process.
func TestExecReportsOOM(t *testing.T) {
	url := limitedServe(t, bridge.Limits{Memory: 64 << 20}, "--limit-memory", "64MiB")
	statusFile := filepath.Join(t.TempDir(), "status")
	r := runBin(t, "", nil, execArgs(url, []string{"--exit-status-file", statusFile}, "tail", "/dev/zero")...)
	require.Equal(t, syscall.SIGKILL, r.sig, r.stderr)
	require.Contains(t, r.stderr, "procwire exec: remote process killed by SIGKILL (oom: ")
	b, err := os.ReadFile(statusFile)
	require.NoError(t, err)
	require.Equal(t, "signal SIGKILL oom\n", string(b))
}

// TestExecAsksForWindows: exec's --stdout-window and --stdin-window reach
// the open: the server grants the stdout window asked, and the stdin
// window asked shows in the memory it promises (the same stdout window,
// stdin windows 8 KiB apart, cost 8 KiB apart); a size with an ambiguous
// unit is refused by name.
func TestExecAsksForWindows(t *testing.T) {
	s := newServer(t, server.Config{})
	memory := func(stdin string) int64 {
		r, ready := startBin(t, "", execArgs(s.url, []string{"--stdout-window", "96KiB", "--stdin-window", stdin}, "sh", "-c", "echo ready; exec sleep 60")...)
		<-ready
		var st server.Stats
		require.Eventually(t, func() bool { st = s.srv.Stats(); return len(st.Processes) == 1 }, 10*time.Second, 5*time.Millisecond)
		require.Equal(t, 96<<10, st.Processes[0].StdoutWindow, "--stdout-window 96KiB")
		require.NoError(t, r.Process.Signal(syscall.SIGTERM))
		r.wait(t)
		s.requireNoProcess(t)
		return st.Memory
	}
	require.Equal(t, int64(8<<10), memory("16KiB")-memory("8KiB"), "--stdin-window")

	r := runBin(t, "", nil, execArgs(s.url, []string{"--stdout-window", "1MB"}, "true")...)
	require.Equal(t, exitFailure, r.code)
	require.Contains(t, r.stderr, "flag -stdout-window")
	require.Contains(t, r.stderr, "ambiguous unit")
}
