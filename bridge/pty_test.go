//go:build linux

package bridge

import (
	"bytes"
	"errors"
	"os"
	"os/user"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/procwire/procwire/bridge/internal/initproc"
	"github.com/procwire/procwire/proc"
	"github.com/procwire/procwire/replay"
)

// The lifecycle of a process on a pseudo-terminal (PROTOCOL.md §10).

var tty24x80 = &TTY{Rows: 24, Cols: 80}

// ttyCfg returns a Config with a terminal and the given exit wait.
func ttyCfg(exitWait time.Duration) *proc.Config {
	return &proc.Config{TTY: tty24x80, ExitWait: exitWait}
}

// TestPTYLeaderExit: the child is a session leader on its terminal (fds 0,
// 1 and 2 the slave, which is its controlling terminal, of the size asked);
// stderr is merged into stdout and the stderr stream stays empty; every
// byte written before the leader exits arrives, then stdout's EOF (no
// process holds the slave any more), then the exit.
func TestPTYLeaderExit(t *testing.T) {
	eachContainment(t, func(t *testing.T, c *Containment) {
		script := `tty; stty size; echo to-stderr >&2; ps -o sid= -o pgid= -p $$; echo $$; head -c 100000 /dev/zero | tr '\0' x; echo; exit 3`
		p, err := c.Start(shReq(t, script), ttyCfg(proc.DefaultExitWait))
		require.NoError(t, err)
		t.Cleanup(func() { _ = p.Destroy() })
		require.True(t, p.TTY())
		var b bytes.Buffer
		newConsumer(t, p, &b).toEOF()
		st := waitExit(t, p)
		require.Equal(t, proc.ExitStatus{Code: 3}, st)
		lines := strings.Split(b.String(), "\r\n")
		require.GreaterOrEqual(t, len(lines), 6, "%q", b.String())
		require.True(t, strings.HasPrefix(lines[0], "/dev/pts/"), "%q", lines[0])
		require.Equal(t, "24 80", lines[1])
		require.Equal(t, "to-stderr", lines[2])
		ids := strings.Fields(lines[3])
		require.Len(t, ids, 2, "%q", lines[3])
		require.Equal(t, lines[4], ids[0], "the child leads its session")
		require.Equal(t, lines[4], ids[1], "and its process group")
		require.Equal(t, strings.Repeat("x", 100000), lines[5], "every byte written before the exit arrives")
		var held int64
		p.Stderr(func(r *replay.Ring) { held = r.End() })
		require.Zero(t, held, "no stderr on a terminal")
		require.NoError(t, p.Destroy())
	})
}

// TestPTYDescendantHoldsSlave: when the leader exits, a descendant that
// ignores the hang-up and still holds the slave keeps stdout open, as a
// descendant holding a stdout pipe does: the exit is published ExitWait
// after the leader's death, the descendant's later output still arrives,
// and stdout's EOF comes when it closes the terminal.
func TestPTYDescendantHoldsSlave(t *testing.T) {
	eachContainment(t, func(t *testing.T, c *Containment) {
		// The leader waits until the descendant ignores SIGHUP, and the
		// descendant until the test saw the exit.
		script := `(trap '' HUP; : >trapped; while [ ! -e go ]; do sleep 0.01; done; echo late) &
			while [ ! -e trapped ]; do sleep 0.01; done; echo early`
		req := shReq(t, script)
		go_ := req.WorkingDirectory + "/go"
		p, err := c.Start(req, ttyCfg(50*time.Millisecond))
		require.NoError(t, err)
		t.Cleanup(func() { _ = p.Destroy() })
		var b bytes.Buffer
		cons := newConsumer(t, p, &b)
		st := waitExit(t, p)
		require.Equal(t, proc.ExitStatus{}, st)
		cons.until("early", func() bool { return strings.Contains(b.String(), "early\r\n") })
		require.False(t, cons.eof, "the descendant holds the terminal")
		require.NoError(t, os.WriteFile(go_, nil, 0o600))
		cons.toEOF()
		require.Equal(t, "early\r\nlate\r\n", b.String())
		require.NoError(t, p.Destroy())
	})
}

// TestPTYDestroy: Destroy ends every holder of the terminal, a background
// job that ignores SIGHUP included, and nothing of the containment
// survives; the terminal's stream has no EOF.
func TestPTYDestroy(t *testing.T) {
	eachContainment(t, func(t *testing.T, c *Containment) {
		req, mark := marked(t, `(trap '' HUP; sleep 300) & echo up; sleep 300`)
		p, err := c.Start(req, ttyCfg(proc.DefaultExitWait))
		require.NoError(t, err)
		t.Cleanup(func() { _ = p.Destroy() })
		var b bytes.Buffer
		cons := newConsumer(t, p, &b)
		cons.until("up", func() bool { return strings.Contains(b.String(), "up\r\n") })
		eventually(t, "both sleeps", func() bool { return len(markedAlive(mark)) >= 3 })
		require.NoError(t, p.Destroy())
		require.Empty(t, markedAlive(mark))
		require.False(t, cons.eof)
		st, ok := p.Exit()
		require.True(t, ok)
		// A guardian kills the tree after Destroy closed the master, whose
		// hang-up may reach the leader first.
		require.Contains(t, []string{"SIGKILL", "SIGHUP"}, st.Signal)
		require.ErrorIs(t, p.Resize(30, 100, 0, 0), proc.ErrDestroyed)
	})
}

// ttyForeground returns the terminal's foreground process group, as a pid
// of the server's namespace, or 0 when it has none or on pipes: what the
// tests compare. The number alone names no group safely, which is why
// Signal does not use it (signalForeground).
func (p *Process) ttyForeground() int {
	pgrp := 0
	p.onMaster(func(master int) {
		if g, err := unix.IoctlGetInt(master, unix.TIOCGPGRP); err == nil {
			pgrp = g
		}
	})
	return pgrp
}

// interactiveShell is sh -i with "$ " as its prompt.
func interactiveShell(t *testing.T) proc.Request {
	return proc.Request{Executable: "sh", Arguments: []string{"-i"}, WorkingDirectory: t.TempDir(),
		Environment: map[string]string{"PATH": "/usr/bin:/bin", "PS1": "$ "}}
}

// onTerminal starts req under c on a 24×80 terminal, and a consumer of
// its output into the buffer returned.
func onTerminal(t *testing.T, c *Containment, req proc.Request) (*Process, *consumer, *bytes.Buffer) {
	t.Helper()
	p, err := c.Start(req, ttyCfg(proc.DefaultExitWait))
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Destroy() })
	var b bytes.Buffer
	return p, newConsumer(t, p, &b), &b
}

// TestPTYSignalForeground: a signal goes to the terminal's foreground job,
// as the key would: SIGINT ends the sleep an interactive shell runs in the
// foreground, in a process group of its own, and the shell goes on.
// Sent to the shell's group instead, it would leave the sleep running and
// the shell would not answer.
func TestPTYSignalForeground(t *testing.T) {
	p := start(t, interactiveShell(t), ttyCfg(proc.DefaultExitWait))
	var b bytes.Buffer
	cons := newConsumer(t, p, &b)
	cons.until("the prompt", func() bool { return strings.Contains(b.String(), "$ ") })
	shell := p.ttyForeground()
	require.NotZero(t, shell)
	require.NoError(t, p.PushStdin([]byte("sleep 300\n")))
	eventually(t, "sleep in the foreground", func() bool {
		fg := p.ttyForeground()
		return fg != 0 && fg != shell
	})
	delivered, err := p.Signal(syscall.SIGINT)
	require.NoError(t, err)
	require.True(t, delivered)
	require.NoError(t, p.PushStdin([]byte("echo alive-$((40+2))\n")))
	cons.until("the shell's answer", func() bool { return strings.Contains(b.String(), "alive-42") })
	_, exited := p.Exit()
	require.False(t, exited)
	require.NoError(t, p.Destroy())
}

// A pipeline's process group outlives its leader: dash reaps "sleep 0.1"
// while "sleep 300", of the same group, runs on. The signal still reaches
// the group (through the member a walk of /proc finds), and the shell goes
// on; sent to the shell's group instead, it would leave the sleep running.
func TestPTYSignalReachesAForegroundGroupWhoseLeaderIsGone(t *testing.T) {
	eachContainment(t, func(t *testing.T, c *Containment) {
		p, cons, b := onTerminal(t, c, interactiveShell(t))
		cons.until("the prompt", func() bool { return strings.Contains(b.String(), "$ ") })
		shell := p.ttyForeground()
		require.NoError(t, p.PushStdin([]byte("sleep 0.1 | sleep 300\n")))
		var fg int
		eventually(t, "the pipeline in the foreground", func() bool {
			fg = p.ttyForeground()
			return fg != 0 && fg != shell
		})
		eventually(t, "the reap of the group's leader", func() bool {
			// Gone, or its pid another's: not of the shell's session.
			stat, err := os.ReadFile("/proc/" + strconv.Itoa(fg) + "/stat")
			f := initproc.StatFields(stat)
			return err != nil || len(f) < 4 || f[3] != strconv.Itoa(shell)
		})
		delivered, err := p.Signal(syscall.SIGINT)
		require.NoError(t, err)
		require.True(t, delivered)
		require.NoError(t, p.PushStdin([]byte("echo alive-$((40+2))\n")))
		cons.until("the shell's answer", func() bool { return strings.Contains(b.String(), "alive-42") })
	})
}

// A program that gave the terminal to a child's group and never took it
// back leaves the terminal naming that group after the child's end, and
// the number free for the kernel to give any process. Here a process of
// the test's takes it, leading a group of its own (takePid); a signal must
// not reach it: the terminal has no foreground group any more, so the
// signal goes to the process's group, as on pipes.
func TestPTYSignalSparesTheProcessThatTookAnEndedForegroundGroupsNumber(t *testing.T) {
	// perl-base is essential on Debian: POSIX's setpgid and tcsetpgrp.
	const script = `use POSIX; $SIG{TTOU} = "IGNORE";
pipe(R, W) or die "pipe: $!";
my $c = fork() // die "fork: $!";
if ($c == 0) { close W; setpgid(0, 0); <R>; POSIX::_exit(0) }
setpgid($c, $c); tcsetpgrp(0, $c) or die "tcsetpgrp: $!";
close R; close W; waitpid($c, 0);
print "gone\n"; sleep 300;`
	eachContainment(t, func(t *testing.T, c *Containment) {
		p, cons, b := onTerminal(t, c, proc.Request{Executable: "perl", Arguments: []string{"-e", script},
			WorkingDirectory: t.TempDir(), Environment: map[string]string{"PATH": "/usr/bin:/bin"}})
		cons.until("the end of the foreground group", func() bool { return strings.Contains(b.String(), "gone") })
		fg := p.ttyForeground()
		require.NotZero(t, fg, "the terminal still names the ended group: %q", b.String())
		takePid(t, fg, p.Pid())

		delivered, err := p.Signal(syscall.SIGTERM)
		require.NoError(t, err)
		require.True(t, delivered)
		requireSpared(t, fg, syscall.SIGTERM)
		cons.until("the exit", func() bool { _, ok := p.Exit(); return ok })
		st, _ := p.Exit()
		require.Equal(t, "SIGTERM", st.Signal, "the signal went to the process's group; output %q", b.String())
	})
}

// TestPTYResize: Resize sets the window size and the foreground job gets
// SIGWINCH; on pipes it is ErrNoTTY.
func TestPTYResize(t *testing.T) {
	script := `trap 'stty size; exit 0' WINCH; echo ready; while :; do sleep 0.01; done`
	p := start(t, shReq(t, script), ttyCfg(proc.DefaultExitWait))
	var b bytes.Buffer
	cons := newConsumer(t, p, &b)
	cons.until("ready", func() bool { return strings.Contains(b.String(), "ready\r\n") })
	require.NoError(t, p.Resize(50, 132, 640, 480))
	cons.toEOF()
	require.Equal(t, "ready\r\n50 132\r\n", b.String())
	require.Equal(t, proc.ExitStatus{}, waitExit(t, p))

	pipes := start(t, shReq(t, `exit 0`), nil)
	require.False(t, pipes.TTY())
	require.True(t, errors.Is(pipes.Resize(1, 1, 0, 0), ErrNoTTY))
}

// TestPTYRunAsOwnsSlave: with RunAs, the slave belongs to that user with
// mode 0620, and the child runs as it.
func TestPTYRunAsOwnsSlave(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("running a child as another user needs root")
	}
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skipf("no user nobody: %v", err)
	}
	uid, _ := strconv.Atoi(nobody.Uid)
	gid, _ := strconv.Atoi(nobody.Gid)
	cfg := ttyCfg(proc.DefaultExitWait)
	cfg.RunAs = &proc.User{UID: uint32(uid), GID: uint32(gid)}
	req := shReq(t, `id -u; stat -c %u:%g:%a "$(tty)"; echo typed-ok >"$(tty)"`)
	req.WorkingDirectory = "/" // the test's own directory is not nobody's
	out, st := output(t, req, cfg)
	require.Equal(t, proc.ExitStatus{}, st)
	require.Equal(t, nobody.Uid+"\r\n"+nobody.Uid+":"+nobody.Gid+":620\r\ntyped-ok\r\n", out)
}
