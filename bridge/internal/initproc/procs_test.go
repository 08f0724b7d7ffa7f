//go:build linux

package initproc

import (
	"bufio"
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// A guardian's sweep kills a descendant by the pid and start time its
// walk of /proc saw: a process with that pid and another start time (the
// pid's process ended and another took it) is left alone, and the one the
// walk saw is killed.
func TestSweepKillsOnlyTheProcessItsWalkSaw(t *testing.T) {
	cmd := exec.Command("sh", "-c", "read x; echo alive; exec sleep 100")
	in, err := cmd.StdinPipe()
	require.NoError(t, err)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	pid := cmd.Process.Pid
	procs := descendants(os.Getpid())
	i := slices.IndexFunc(procs, func(id procID) bool { return id.pid == pid })
	require.GreaterOrEqual(t, i, 0, "sh is a descendant")
	id := procs[i]
	require.NotEmpty(t, id.start)
	require.Equal(t, id.start, StartOf(pid))

	procID{pid: pid, start: id.start + "1"}.signal(syscall.SIGKILL) // the pid, another process's start
	// A SIGKILL sent would end sh before it answers.
	_, err = in.Write([]byte("\n"))
	require.NoError(t, err)
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err, "sh was killed")
	require.Equal(t, "alive\n", line)

	id.signal(syscall.SIGKILL) // sleep now, with sh's pid and start time
	require.ErrorContains(t, cmd.Wait(), "signal: killed")
}
