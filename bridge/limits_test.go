//go:build linux

package bridge

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/proc"
)

// limitedContainments runs fn under every containment this machine allows,
// with limits l; a containment that cannot enforce them is skipped, saying
// why, except under CI=true on a machine with the v1 hierarchies this one
// has.
func limitedContainments(t *testing.T, l Limits, fn func(t *testing.T, c *Containment)) {
	for _, kind := range []string{ContainCgroup, ContainPIDNamespace, ContainProcessGroup} {
		t.Run(kind, func(t *testing.T) {
			if _, err := NewContainment(ContainOptions{Kind: kind}); err != nil {
				t.Skipf("this machine does not allow it: %v", err)
			}
			c, err := NewContainment(ContainOptions{Kind: kind, Limits: l})
			if err != nil {
				if os.Getenv("CI") == "true" && len(v1Dirs()) > 0 {
					t.Fatalf("limits %+v cannot be enforced: %v", l, err)
				}
				t.Skipf("limits %+v cannot be enforced here: %v", l, err)
			}
			t.Logf("mechanisms: %v", c.LimitMechanisms())
			fn(t, c)
		})
	}
}

// TestMemoryLimitEndsAHogWithOOM: a child that allocates without end
// under a 256 MiB limit is killed by the kernel's OOM killer within its
// own cgroup, its exit is SIGKILL with the reason "oom", and a sibling
// without the hog goes on untouched.
func TestMemoryLimitEndsAHogWithOOM(t *testing.T) {
	limitedContainments(t, Limits{Memory: 256 << 20}, func(t *testing.T, c *Containment) {
		if c.LimitMechanisms()["memory"] == MechRlimitAS {
			t.Skip("RLIMIT_AS makes allocations fail; there is no OOM kill to report")
		}
		sibling, err := c.Start(shReq(t, `while read l; do echo "$l"; done`), nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = sibling.Destroy() })

		// tail keeps the last line of /dev/zero, which never ends.
		hog, err := c.Start(proc.Request{Executable: "tail", Arguments: []string{"/dev/zero"}, WorkingDirectory: "/",
			Environment: map[string]string{}}, nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = hog.Destroy() })
		require.Equal(t, proc.ExitStatus{Signal: "SIGKILL", Reason: proc.ReasonOOM}, waitExit(t, hog))
		t0 := time.Now()
		require.NoError(t, hog.Destroy())
		require.Less(t, time.Since(t0), time.Second, "destroy within 1 s, the issue's bound")

		require.NoError(t, sibling.PushStdin([]byte("still here\n")))
		var out bytes.Buffer
		newConsumer(t, sibling, &out).until("the echo", func() bool { return out.String() == "still here\n" })
		_, exited := sibling.Exit()
		require.False(t, exited)
		require.NoError(t, sibling.Destroy())
	})
}

// TestPidsLimitHoldsAForkBomb: a fork bomb under a 200-task limit never
// holds more than 200 tasks, the containment still starts other
// processes meanwhile, and destroy ends it within 1 s, leaving nothing:
// in a process group too, whose guardian init kills the tree by sweeps
// of /proc that a bomb refilling the slots they free outran (its destroy
// missed its 5 s bound in 3 of 3 runs before the kill stopped the
// group's forks).
func TestPidsLimitHoldsAForkBomb(t *testing.T) {
	if _, err := os.Stat("/bin/bash"); err != nil {
		t.Skip("no bash for the fork bomb")
	}
	limitedContainments(t, Limits{Pids: 200}, func(t *testing.T, c *Containment) {
		req, mark := marked(t, `echo started; :(){ :|:& };:; sleep 300`)
		req.Executable = "bash"
		bomb, err := c.Start(req, nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = bomb.Destroy() })
		var out bytes.Buffer
		newConsumer(t, bomb, &out).until("started", func() bool { return strings.Contains(out.String(), "started") })
		// Let it fill its limit: wait until it holds 150 tasks.
		eventually(t, "the bomb to grow", func() bool { return len(markedAlive(mark)) >= 150 })
		for range 20 {
			o, st := output(t, shReq(t, `echo ok`), nil)
			require.Equal(t, "ok\n", o)
			require.Equal(t, proc.ExitStatus{}, st)
			require.LessOrEqual(t, len(markedAlive(mark)), 200)
		}
		if c.LimitMechanisms()["pids"] == MechCgroupV1 {
			b, err := os.ReadFile(filepath.Join(bomb.v1.dirs["pids"], "pids.max"))
			require.NoError(t, err)
			require.Equal(t, "200\n", string(b))
		}
		destroyBombWithinASecond(t, bomb, mark)
	})
}

// TestAGuardianEndsAForkBombAtALimitItDoesNotKnow: a fork bomb in a
// process group at a pids limit the server did not set, so that its
// destroy cannot stop the group's forks (v1Group.stopForks): a v1 pids
// cgroup of the test's, holding the bomb alone, or the bomb and its
// guardian init, as an outer container's --pids-limit holds everything.
// The guardian's sweeps end it within 1 s, leaving nothing, while other
// processes start beside it.
func TestAGuardianEndsAForkBombAtALimitItDoesNotKnow(t *testing.T) {
	if _, err := os.Stat("/bin/bash"); err != nil {
		t.Skip("no bash for the fork bomb")
	}
	pids, ok := v1Dirs()["pids"]
	if !ok {
		t.Skip("no writable v1 pids cgroup to stand for an outer limit")
	}
	for _, initInside := range []bool{false, true} {
		t.Run(fmt.Sprintf("init inside %v", initInside), func(t *testing.T) {
			cg := filepath.Join(pids, fmt.Sprintf("procwire-test-outer-%d-%v", os.Getpid(), initInside))
			if err := os.Mkdir(cg, 0o755); err != nil {
				t.Skipf("no v1 pids cgroup to stand for an outer limit: %v", err)
			}
			t.Cleanup(func() { endCgroupV1(t, cg) })
			require.NoError(t, os.WriteFile(filepath.Join(cg, "pids.max"), []byte("200"), 0o644))
			c, err := NewContainment(ContainOptions{Kind: ContainProcessGroup})
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, c.Close()) })
			req, mark := marked(t, `echo $$ > `+filepath.Join(cg, "cgroup.procs")+`; echo started; read go; :(){ :|:& };:; sleep 300`)
			req.Executable = "bash"
			bomb, err := c.Start(req, nil)
			require.NoError(t, err)
			t.Cleanup(func() { _ = bomb.Destroy() })
			require.True(t, bomb.guardian, "a process group's init is a guardian")
			var out bytes.Buffer
			newConsumer(t, bomb, &out).until("started", func() bool { return strings.Contains(out.String(), "started") })
			if initInside {
				require.NoError(t, os.WriteFile(filepath.Join(cg, "cgroup.procs"), []byte(strconv.Itoa(bomb.pid)), 0o644))
			}
			require.NoError(t, bomb.PushStdin([]byte("go\n")))
			// At its limit (the init and its threads take a few slots).
			eventually(t, "the bomb to fill its limit", func() bool { return len(markedAlive(mark)) >= 185 })
			for range 20 {
				o, st := output(t, shReq(t, `echo ok`), nil)
				require.Equal(t, "ok\n", o)
				require.Equal(t, proc.ExitStatus{}, st)
			}
			destroyBombWithinASecond(t, bomb, mark)
		})
	}
}

// destroyBombWithinASecond destroys bomb and checks that it took under a
// second (the bound) and left no process holding mark.
func destroyBombWithinASecond(t *testing.T, bomb *Process, mark string) {
	t.Helper()
	t0 := time.Now()
	require.NoError(t, bomb.Destroy())
	took := time.Since(t0)
	t.Logf("destroy of the bomb took %v", took)
	require.Less(t, took, time.Second, "destroy within 1 s, the issue's bound")
	require.Empty(t, markedAlive(mark))
}

// endCgroupV1 ends whatever is left in the v1 cgroup dir (no task may
// fork once pids.max is 0) and removes it.
func endCgroupV1(t testing.TB, dir string) {
	_ = os.WriteFile(filepath.Join(dir, "pids.max"), []byte("0"), 0o644)
	require.Eventually(t, func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		for f := range strings.FieldsSeq(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		return os.Remove(dir) == nil
	}, time.Minute, 10*time.Millisecond, "the test's cgroup %s emptied and removed", dir)
}

// TestLimitsWithCgroupV2Controllers: this machine's cgroup2 has no
// controllers, so the v2 mechanism is tested against a fake cgroupfs
// directory: a parent whose subtree_control enables pids, memory and cpu
// makes each process's cgroup carry pids.max, memory.max,
// memory.swap.max and cpu.max.
func TestLimitsWithCgroupV2Controllers(t *testing.T) {
	parent := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(parent, "cgroup.subtree_control"), []byte("cpu memory pids\n"), 0o644))
	lm, err := newLimiter(Limits{Pids: 200, Memory: 256 << 20, CPU: 1.5}, parent, true, nil)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"pids": MechCgroupV2, "memory": MechCgroupV2, "cpu": MechCgroupV2}, lm.mech)
	dir := filepath.Join(parent, "procwire-1.2-3")
	require.NoError(t, os.Mkdir(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "memory.swap.max"), []byte("max\n"), 0o644))
	require.NoError(t, lm.writeV2(dir, lm.limits))
	for file, want := range map[string]string{
		"pids.max": "200", "memory.max": strconv.Itoa(256 << 20), "memory.swap.max": "0", "cpu.max": "150000 100000",
	} {
		b, err := os.ReadFile(filepath.Join(dir, file))
		require.NoError(t, err)
		require.Equal(t, want, string(b), file)
	}
	// The OOM count a v2 cgroup reports.
	require.False(t, oomKilled(dir, nil))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "memory.events"), []byte("low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\n"), 0o644))
	require.True(t, oomKilled(dir, nil))
}

// TestLimitThatCannotBeEnforcedRefuses: without a controller or a v1
// hierarchy, a CPU limit refuses, naming it; a memory limit falls back to
// RLIMIT_AS only under an init.
func TestLimitThatCannotBeEnforcedRefuses(t *testing.T) {
	parent := t.TempDir()
	_, err := newLimiter(Limits{CPU: 2}, parent, true, nil)
	require.ErrorIs(t, err, ErrLimitUnavailable)
	require.ErrorContains(t, err, "--limit-cpu 2")
	_, err = newLimiter(Limits{Pids: 10}, parent, true, nil)
	require.ErrorIs(t, err, ErrLimitUnavailable)
	require.ErrorContains(t, err, "--limit-pids 10")
	lm, err := newLimiter(Limits{Memory: 1 << 30}, parent, true, nil)
	require.NoError(t, err)
	require.Equal(t, MechRlimitAS, lm.mech["memory"])
	_, err = newLimiter(Limits{Memory: 1 << 30}, parent, false, nil)
	require.ErrorIs(t, err, ErrLimitUnavailable)
}

// TestDelegatedCgroupEnablesItsControllers: in a cgroup delegated to the
// server (a fake cgroupfs directory here) offering pids, memory and cpu,
// the server moves into the leaf "serve" and enables the controllers its
// limits need for the processes' cgroups.
func TestDelegatedCgroupEnablesItsControllers(t *testing.T) {
	parent := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(parent, "cgroup.controllers"), []byte("cpuset cpu io memory pids\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(parent, "cgroup.subtree_control"), nil, 0o644))
	require.NoError(t, delegate(parent, true, Limits{Pids: 100, Memory: 1 << 30}))
	b, err := os.ReadFile(filepath.Join(parent, "cgroup.subtree_control"))
	require.NoError(t, err)
	require.Equal(t, "+pids +memory", string(b))
	b, err = os.ReadFile(filepath.Join(parent, "serve", "cgroup.procs"))
	require.NoError(t, err)
	require.Equal(t, "0", string(b), "the server moved into its leaf")

	// Nothing to do without limits, or with controllers already enabled.
	other := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(other, "cgroup.controllers"), []byte("memory pids\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(other, "cgroup.subtree_control"), []byte("memory pids\n"), 0o644))
	require.NoError(t, delegate(other, true, Limits{Pids: 100}))
	_, err = os.Stat(filepath.Join(other, "serve"))
	require.ErrorIs(t, err, os.ErrNotExist)
}

// TestV1CgroupsOfADeadServerAreRemoved: the cgroups a server that died
// left in the v1 hierarchies that enforce its limits (a SIGKILLed serve
// with --limit-pids leaves them, empty) are removed by the next
// containment with limits; those of a server that runs, this one, stay.
func TestV1CgroupsOfADeadServerAreRemoved(t *testing.T) {
	dirs := v1Dirs()
	pids, ok := dirs["pids"]
	if !ok {
		t.Skip("no v1 pids hierarchy on this machine")
	}
	prefix := deadServerPrefix(t)

	stale := filepath.Join(pids, prefix+"-1")
	live := filepath.Join(pids, ownerPrefix(os.Getpid())+"-999999")
	for _, dir := range []string{stale, live} {
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Skipf("the v1 pids hierarchy is not writable here: %v", err)
		}
		t.Cleanup(func() { _ = os.Remove(dir) })
	}
	c, err := NewContainment(ContainOptions{Kind: ContainProcessGroup, Limits: Limits{Pids: 100}})
	require.NoError(t, err)
	require.Equal(t, MechCgroupV1, c.LimitMechanisms()["pids"])
	require.GreaterOrEqual(t, c.Swept(), 1)
	_, err = os.Stat(stale)
	require.ErrorIs(t, err, os.ErrNotExist, "the dead server's cgroup is left")
	require.DirExists(t, live, "a running server's cgroup was removed")
}
