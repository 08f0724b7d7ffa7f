//go:build linux

package bridge

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/procwire/procwire/bridge/internal/initproc"
	"github.com/procwire/procwire/proc"
)

// eachContainment runs fn under every kind of containment this machine
// allows; a kind it does not allow is skipped, saying why.
func eachContainment(t *testing.T, fn func(t *testing.T, c *Containment)) {
	for _, kind := range []string{ContainCgroup, ContainPIDNamespace, ContainProcessGroup} {
		t.Run(kind, func(t *testing.T) {
			// With a warm init: every start but the first takes one
			// (warm.go), so that the tests of every containment run
			// both ways of starting.
			c, err := NewContainment(ContainOptions{Kind: kind, WarmInit: true})
			if err != nil {
				t.Skipf("this machine does not allow it: %v", err)
			}
			t.Cleanup(func() { require.NoError(t, c.Close()) })
			require.Equal(t, kind, c.Kind())
			fn(t, c)
		})
	}
}

// marked returns a request running script with a unique marker in its
// environment, which every descendant inherits, and the marker.
func marked(t testing.TB, script string) (proc.Request, string) {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	mark := "PROCWIRE_TEST_MARK=" + hex.EncodeToString(b)
	req := shReq(t, script)
	k, v, _ := strings.Cut(mark, "=")
	req.Environment[k] = v
	return req, mark
}

// markedAlive lists the live processes whose environment holds mark (a
// zombie has no environment left).
func markedAlive(mark string) []int {
	return initproc.ProcsWhere(func(pid int, _ []string) bool {
		env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
		return err == nil && slices.Contains(strings.Split(string(env), "\x00"), mark)
	})
}

// requireMarkedAlive waits until a process holding mark is seen alive: a
// script prints that it started just before an exec, during which its
// environ reads empty for a moment (seen under load).
func requireMarkedAlive(t testing.TB, mark string, msgAndArgs ...any) {
	t.Helper()
	require.Eventually(t, func() bool { return len(markedAlive(mark)) > 0 }, 10*time.Second, time.Millisecond, msgAndArgs...)
}

// escapes are process trees that try to outlive their process: each prints
// "started" once all of it is running.
var escapes = map[string]string{
	"setsid":            `setsid sh -c 'echo started; exec sleep 300' &`,
	"double fork":       `(setsid sh -c 'echo started; exec sleep 300' &)`,
	"100 sleepers exit": `i=0; while [ $i -lt 100 ]; do sleep 300 & i=$((i+1)); done; echo started`,
}

// leavesTheGroup names the escapes that leave the process group.
var leavesTheGroup = map[string]bool{"setsid": true, "double fork": true}

// startEscape starts an escape in c and waits until it printed "started".
func startEscape(t *testing.T, c *Containment, script string, cfg *proc.Config) (*Process, string) {
	req, mark := marked(t, script)
	p, err := c.Start(req, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Destroy() })
	var out bytes.Buffer
	newConsumer(t, p, &out).until("started", func() bool { return strings.Contains(out.String(), "started\n") })
	requireMarkedAlive(t, mark, "nothing of the escape is alive")
	return p, mark
}

func TestDestroyEndsTheWholeTree(t *testing.T) {
	eachContainment(t, func(t *testing.T, c *Containment) {
		for name, script := range escapes {
			t.Run(name, func(t *testing.T) {
				p, mark := startEscape(t, c, script, &proc.Config{ExitWait: 50 * time.Millisecond})
				t0 := time.Now()
				require.NoError(t, p.Destroy())
				t.Logf("destroy took %v", time.Since(t0))
				alive := markedAlive(mark)
				if c.initMode() == "" && leavesTheGroup[name] {
					// What README says the process group does not catch.
					require.NotEmpty(t, alive, "a descendant outside the group survives")
					for _, pid := range alive {
						_ = syscall.Kill(pid, syscall.SIGKILL)
					}
					return
				}
				require.Empty(t, alive, "survivors of destroy")
				require.NoError(t, p.Destroy())
			})
		}
	})
}

func TestSignalReachesTheGroup(t *testing.T) {
	eachContainment(t, func(t *testing.T, c *Containment) {
		req := shReq(t, `trap "echo got TERM; exit 3" TERM; echo ready; while :; do sleep 0.05; done`)
		p, err := c.Start(req, nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = p.Destroy() })
		var out bytes.Buffer
		cons := newConsumer(t, p, &out)
		cons.until("ready", func() bool { return strings.HasPrefix(out.String(), "ready\n") })
		delivered, err := p.Signal(syscall.SIGTERM)
		require.NoError(t, err)
		require.True(t, delivered)
		require.Equal(t, proc.ExitStatus{Code: 3}, waitExit(t, p))
		cons.toEOF()
		require.Equal(t, "ready\ngot TERM\n", out.String())
		require.NoError(t, p.Destroy())
	})
}

// A signal someone else sends to an init's own pid: a guardian forwards it
// to the child's group; a PID namespace's init ignores it once the child
// is forked (the server's own signals go through the control pipe), so
// that the process goes on and the server's SIGINT still reaches it.
func TestAStraySignalToTheInit(t *testing.T) {
	eachContainment(t, func(t *testing.T, c *Containment) {
		req := shReq(t, `trap "echo got TERM; exit 3" TERM; trap "echo got INT; exit 4" INT; echo ready; while :; do sleep 0.05; done`)
		p, err := c.Start(req, nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = p.Destroy() })
		if p.ctlW == nil {
			t.Skip("started without an init (README, Containment)")
		}
		var out bytes.Buffer
		cons := newConsumer(t, p, &out)
		cons.until("ready", func() bool { return strings.HasPrefix(out.String(), "ready\n") })
		mask := "SigIgn:"
		if p.guardian {
			mask = "SigCgt:"
		}
		eventually(t, "the init's "+mask+" holds SIGTERM", func() bool {
			return sigMask(t, p.pid, mask)&(1<<(syscall.SIGTERM-1)) != 0
		})
		require.NoError(t, syscall.Kill(p.pid, syscall.SIGTERM))
		if p.guardian {
			require.Equal(t, proc.ExitStatus{Code: 3}, waitExit(t, p), "forwarded")
			cons.toEOF()
			require.Equal(t, "ready\ngot TERM\n", out.String())
			return
		}
		delivered, err := p.Signal(syscall.SIGINT)
		require.NoError(t, err)
		require.True(t, delivered)
		require.Equal(t, proc.ExitStatus{Code: 4}, waitExit(t, p), "the init lived on")
		cons.toEOF()
		require.Equal(t, "ready\ngot INT\n", out.String(), "ignored")
	})
}

// A guardian signals its child's group by the group's id, the child's pid,
// only while the child is not reaped: after, the pid is free for the
// kernel to give another process, and a process outside the tree that
// took it, leading a group of its own, would get the signal (kill(-pid))
// meant for what is left of the child's. Here the child exits and leaves a
// descendant (setsid, holding stdout, so that the exit is not yet
// published and a signal still goes to the init); a process of the test's
// takes the child's pid (/proc/sys/kernel/ns_last_pid); the server
// signals, then destroys; the process that took the pid gets nothing.
func TestAGuardianSignalsNoProcessThatTookTheChildsPid(t *testing.T) {
	c, err := NewContainment(ContainOptions{Kind: ContainProcessGroup})
	require.NoError(t, err)
	p, err := c.Start(shReq(t, `echo $$; setsid sleep 300 & exit 0`), &proc.Config{ExitWait: testTimeout})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Destroy() })
	if !p.guardian {
		t.Skip("started without an init (README, Containment)")
	}
	var out bytes.Buffer
	newConsumer(t, p, &out).until("the child's pid", func() bool { return strings.HasSuffix(out.String(), "\n") })
	child, err := strconv.Atoi(strings.TrimSpace(out.String()))
	require.NoError(t, err)
	takePid(t, child, p.pid)

	delivered, err := p.Signal(syscall.SIGTERM)
	require.NoError(t, err)
	require.True(t, delivered, "the exit waits for the descendant's stdout")
	require.NoError(t, p.Destroy()) // the init obeyed the signal before it swept
	requireSpared(t, child, syscall.SIGTERM)
}

// takePid waits until pid's process, a child of parent, is reaped, then
// starts a sleep, in a session (and process group) of its own, with that
// pid: the kernel gives the next process the pid after
// /proc/sys/kernel/ns_last_pid, unless another process forks first, so it
// tries again a few times. It skips the test where that file cannot be
// written, or where another process took the pid first (a fork bomb of
// another test goes through the pids in seconds).
func takePid(t *testing.T, pid, parent int) *os.Process {
	eventually(t, "the reap of "+strconv.Itoa(pid), func() bool {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return true
		}
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		return len(f) < 2 || f[1] != strconv.Itoa(parent) // reaped, and taken since
	})
	for range 50 {
		if err := os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(pid-1)), 0); err != nil {
			t.Skipf("cannot choose the next pid: %v", err)
		}
		p, err := os.StartProcess("/bin/sleep", []string{"sleep", "300"}, &os.ProcAttr{Sys: &syscall.SysProcAttr{Setsid: true}})
		require.NoError(t, err)
		if p.Pid == pid {
			t.Cleanup(func() {
				_ = p.Kill()
				_, _ = p.Wait()
			})
			return p
		}
		_ = p.Kill()
		_, _ = p.Wait()
	}
	t.Skipf("another process took pid %d first, 50 times", pid)
	return nil
}

// requireSpared checks that the process with pid (takePid's) is alive and
// that no sig is pending for it: a kill already made is pending until the
// process dies.
func requireSpared(t *testing.T, pid int, sig syscall.Signal) {
	t.Helper()
	require.NotContains(t, []string{"Z", "X"}, procStatus(t, pid)["State"][:1], "the process that took the pid died")
	for _, pending := range []string{"SigPnd:", "ShdPnd:"} {
		require.Zero(t, sigMask(t, pid, pending)&(1<<(sig-1)), "a %v is pending for the process that took the pid (%s)", sig, pending)
	}
}

// procStatus returns the fields of /proc/PID/status.
func procStatus(t testing.TB, pid int) map[string]string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	require.NoError(t, err)
	st := map[string]string{}
	for line := range strings.Lines(string(b)) {
		k, v, _ := strings.Cut(line, ":")
		st[k] = strings.TrimSpace(v)
	}
	return st
}

// sigMask returns the mask of pid's /proc status line named field
// ("SigIgn:", "SigCgt:"), bit n-1 for signal n.
func sigMask(t testing.TB, pid int, field string) uint64 {
	v, ok := procStatus(t, pid)[strings.TrimSuffix(field, ":")]
	require.True(t, ok, "no %s line in /proc/%d/status", field, pid)
	m, err := strconv.ParseUint(v, 16, 64)
	require.NoError(t, err)
	return m
}

func TestExitStatusInEachContainment(t *testing.T) {
	eachContainment(t, func(t *testing.T, c *Containment) {
		for script, want := range map[string]proc.ExitStatus{
			`exit 7`:        {Code: 7},
			`kill -TERM $$`: {Signal: "SIGTERM"},
			`kill -KILL $$`: {Signal: "SIGKILL"},
		} {
			p, err := c.Start(shReq(t, script), nil)
			require.NoError(t, err)
			require.Equal(t, want, waitExit(t, p), script)
			require.NoError(t, p.Destroy())
		}
		_, err := c.Start(proc.Request{Executable: "/no/such/program", WorkingDirectory: "/"}, nil)
		var se *proc.StartError
		require.ErrorAs(t, err, &se)
		require.Equal(t, proc.ReasonExecutableNotFound, se.Reason)
	})
}

func TestDestroyNamesSurvivors(t *testing.T) {
	// A stopped process cannot be killed faster than the kernel allows,
	// but SIGKILL ends it too; what survives a destroy here is a process
	// the containment cannot reach: the test keeps its cgroup populated by
	// asking with a 1ns bound, so the first Destroy may report survivors,
	// and a later one succeeds.
	eachContainment(t, func(t *testing.T, c *Containment) {
		p, mark := startEscape(t, c, escapes["100 sleepers exit"], &proc.Config{DestroyWait: time.Nanosecond, ExitWait: 50 * time.Millisecond})
		err := p.Destroy()
		var se *proc.SurvivorsError
		var te *proc.DestroyTimeoutError
		switch {
		case err == nil:
			t.Log("teardown beat a 1ns deadline")
		case errors.As(err, &se):
			t.Logf("first destroy: %v", se)
			require.Positive(t, se.Count)
		default:
			require.ErrorAs(t, err, &te)
		}
		eventually(t, "a Destroy to succeed", func() bool { return p.Destroy() == nil })
		require.Empty(t, markedAlive(mark))
	})
}

func TestOnlyStdioReachesTheChild(t *testing.T) {
	// fd 9 of the server, inherited without close-on-exec, as from a
	// shell's `exec 9>>leak.txt`.
	f, err := os.Create(t.TempDir() + "/leak.txt")
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, syscall.Dup2(int(f.Fd()), 9))
	defer syscall.Close(9)
	flags, err := fcntl(9, syscall.F_GETFD)
	require.NoError(t, err)
	require.Zero(t, flags&syscall.FD_CLOEXEC)

	eachContainment(t, func(t *testing.T, c *Containment) {
		p, mark := startEscape(t, c, `sleep 300 & echo started; wait`, nil)
		// The shell itself may hold a descriptor for the script; sleep,
		// exec'd by it, shows what the child got. "started" can come
		// before the background job's fork has exec'd sleep (its comm is
		// still sh's), so look until it has.
		var sleeper int
		eventually(t, "the background job to be sleep", func() bool {
			for _, pid := range markedAlive(mark) {
				if comm, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm"); string(comm) == "sleep\n" {
					sleeper = pid
				}
			}
			return sleeper != 0
		})
		// While sleep is still being loaded, ld.so holds a library open
		// (fd 3, libc.so.6) for a moment: what the child got is what stays.
		var fds []string
		eventually(t, "sleep's descriptors settle", func() bool {
			ents, err := os.ReadDir("/proc/" + strconv.Itoa(sleeper) + "/fd")
			require.NoError(t, err)
			fds = fds[:0]
			for _, e := range ents {
				fds = append(fds, e.Name())
			}
			sort.Strings(fds)
			return slices.Equal(fds, []string{"0", "1", "2"})
		})
		require.NoError(t, p.Destroy())
	})
}

func fcntl(fd, cmd int) (int, error) {
	r, _, e := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), uintptr(cmd), 0)
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}

func TestRunAs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("running a child as another user needs root")
	}
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skipf("no user nobody: %v", err)
	}
	uid, _ := strconv.Atoi(nobody.Uid)
	gid, _ := strconv.Atoi(nobody.Gid)
	t.Setenv("PROCWIRE_TOKEN", "secret-of-the-server")
	eachContainment(t, func(t *testing.T, c *Containment) {
		req := proc.Request{
			Executable: "sh",
			// $PPID is the server, or the namespace's init, whose
			// environment holds nothing; /proc/1 then names the host's.
			Arguments: []string{"-c", `id -u; id -g; id -G; cat /proc/$PPID/environ /proc/1/environ >/dev/null 2>&1 && echo readable || echo unreadable; kill -0 ` +
				strconv.Itoa(os.Getpid()) + ` 2>/dev/null && echo can-signal || echo cannot-signal`},
			WorkingDirectory: "/",
			Environment:      map[string]string{"PATH": "/usr/bin:/bin"},
		}
		p, err := c.Start(req, &proc.Config{RunAs: &proc.User{UID: uint32(uid), GID: uint32(gid)}})
		require.NoError(t, err)
		t.Cleanup(func() { _ = p.Destroy() })
		var b bytes.Buffer
		newConsumer(t, p, &b).toEOF()
		out, st := b.String(), waitExit(t, p)
		require.Equal(t, proc.ExitStatus{}, st)
		require.Equal(t, nobody.Uid+"\n"+nobody.Gid+"\n"+nobody.Gid+"\nunreadable\ncannot-signal\n", out)
	})
}

// TestStdoutEOFIsTheChilds: nothing but the child's tree holds its pipes
// (not the PID namespace's init), so a child that closes stdout gives EOF
// while it lives.
func TestStdoutEOFIsTheChilds(t *testing.T) {
	eachContainment(t, func(t *testing.T, c *Containment) {
		p, err := c.Start(shReq(t, `echo bye; exec >&- 2>&-; sleep 300`), nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = p.Destroy() })
		var out bytes.Buffer
		newConsumer(t, p, &out).toEOF()
		require.Equal(t, "bye\n", out.String())
		_, exited := p.Exit()
		require.False(t, exited)
		require.NoError(t, p.Destroy())
	})
}

// TestCgroupsOfADeadServerAreEnded: a server that died (SIGKILL, a crash)
// leaves its children's descendants in their cgroups; the next containment
// created under the same parent ends them.
func TestCgroupsOfADeadServerAreEnded(t *testing.T) {
	c, err := NewContainment(ContainOptions{Kind: ContainCgroup})
	if err != nil {
		t.Skipf("this machine does not allow cgroups: %v", err)
	}
	prefix := deadServerPrefix(t)

	// Its cgroup, holding a descendant that outlived it.
	req, mark := marked(t, `sleep 300 & echo started; wait`)
	p, err := c.Start(req, nil)
	require.NoError(t, err)
	var out bytes.Buffer
	newConsumer(t, p, &out).until("started", func() bool { return out.Len() > 0 })
	stale := filepath.Join(filepath.Dir(p.cgroup.dir), prefix+"-1")
	require.NoError(t, os.Mkdir(stale, 0o755))
	for _, pid := range p.cgroup.members() {
		require.NoError(t, os.WriteFile(stale+"/cgroup.procs", []byte(strconv.Itoa(pid)), 0))
	}
	t.Cleanup(func() {
		g := &cgroup{dir: stale}
		_ = g.kill()
		_, _ = g.waitEmpty(time.Now().Add(testTimeout))
		_ = g.remove()
	})
	requireMarkedAlive(t, mark)

	// Another server's live cgroups, and this one's, are left alone.
	c2, err := NewContainment(ContainOptions{Kind: ContainCgroup})
	require.NoError(t, err)
	require.GreaterOrEqual(t, c2.Swept(), 1)
	require.Empty(t, markedAlive(mark), "the dead server's descendants live on")
	_, err = os.Stat(stale)
	require.ErrorIs(t, err, os.ErrNotExist)
	require.NoError(t, p.Destroy())
}

// With no inotify instance left (fs.inotify.max_user_instances reached, as
// when a thousand destroys run at once), a cgroup's destroy still waits
// for it to empty, by re-reading cgroup.events, and succeeds.
func TestCgroupDestroyWithoutInotify(t *testing.T) {
	c, err := NewContainment(ContainOptions{Kind: ContainCgroup})
	if err != nil {
		t.Skipf("this machine does not allow a cgroup: %v", err)
	}
	inotifyInit = func(int) (int, error) { return -1, syscall.EMFILE }
	t.Cleanup(func() { inotifyInit = unix.InotifyInit1 })
	p, mark := startEscape(t, c, escapes["setsid"], &proc.Config{ExitWait: 50 * time.Millisecond})
	require.NoError(t, p.Destroy())
	require.Empty(t, markedAlive(mark), "survivors of destroy")
}

// A process may make cgroups in its own (a root child, a container
// runtime): its destroy ends the processes it moved there and removes
// them, deepest first, and then its own, which a plain rmdir of its own
// cannot (one that made none: the next test).
func TestCgroupDestroyRemovesTheCgroupsItsProcessMade(t *testing.T) {
	c, err := NewContainment(ContainOptions{Kind: ContainCgroup})
	if err != nil {
		t.Skipf("this machine does not allow cgroups: %v", err)
	}
	req, mark := marked(t, `sleep 300 & echo started; wait`)
	p, err := c.Start(req, nil)
	require.NoError(t, err)
	var out bytes.Buffer
	newConsumer(t, p, &out).until("started", func() bool { return out.Len() > 0 })
	dir := p.cgroup.dir
	deeper := filepath.Join(dir, "made", "deeper")
	require.NoError(t, os.MkdirAll(deeper, 0o755))
	for _, pid := range p.cgroup.members() {
		require.NoError(t, os.WriteFile(deeper+"/cgroup.procs", []byte(strconv.Itoa(pid)), 0))
	}
	requireMarkedAlive(t, mark)

	require.NoError(t, p.Destroy())
	require.Empty(t, markedAlive(mark), "survivors of destroy")
	_, err = os.Stat(dir)
	require.ErrorIs(t, err, os.ErrNotExist, "the process's cgroup and those it made are removed")
}

// A process destroyed once its cgroup emptied (it exited, and its init
// after it) is destroyed with one read of cgroup.events: no inotify watch
// is set up for a change that already happened, and its cgroup is
// removed by one rmdir.
func TestCgroupDestroyAfterTheCgroupEmptiedSetsNoWatch(t *testing.T) {
	c, err := NewContainment(ContainOptions{Kind: ContainCgroup})
	if err != nil {
		t.Skipf("this machine does not allow cgroups: %v", err)
	}
	var watches atomic.Int32
	inotifyInit = func(flags int) (int, error) {
		watches.Add(1)
		return unix.InotifyInit1(flags)
	}
	t.Cleanup(func() { inotifyInit = unix.InotifyInit1 })
	p, err := c.Start(proc.Request{Executable: "true", WorkingDirectory: "/"}, nil)
	require.NoError(t, err)
	newConsumer(t, p, nil).toEOF()
	waitExit(t, p)
	eventually(t, "the cgroup empties", func() bool {
		pop, err := p.cgroup.populated()
		return err == nil && !pop
	})
	require.NoError(t, p.Destroy())
	require.Zero(t, watches.Load())
	_, err = os.Stat(p.cgroup.dir)
	require.ErrorIs(t, err, os.ErrNotExist)
}

// deadServerPrefix is the ownerPrefix of a process that ran and is gone:
// the names of a dead server's cgroups start with it.
func deadServerPrefix(t *testing.T) string {
	dead, err := os.StartProcess("/bin/true", []string{"true"}, &os.ProcAttr{})
	require.NoError(t, err)
	prefix := ownerPrefix(dead.Pid)
	_, err = dead.Wait()
	require.NoError(t, err)
	require.NotEqual(t, prefix, ownerPrefix(dead.Pid), "the pid was reused at once")
	return prefix
}
