//go:build linux

package server

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/bridge"
	"github.com/procwire/procwire/frames"
)

// TestExitReasonOnlyWhenListed: a process the OOM killer ends (under a
// 256 MiB memory limit) exits as SIGKILL; exit says reason "oom" to a
// client whose open listed it in exit_reasons, and only to it: an earlier
// client would refuse the field.
func TestExitReasonOnlyWhenListed(t *testing.T) {
	c, err := bridge.NewContainment(bridge.ContainOptions{Limits: bridge.Limits{Memory: 256 << 20}})
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("a memory limit cannot be enforced: %v", err)
		}
		t.Skipf("a memory limit cannot be enforced here: %v", err)
	}
	if c.LimitMechanisms()["memory"] == bridge.MechRlimitAS {
		t.Skip("RLIMIT_AS makes allocations fail; there is no OOM kill")
	}
	h := newHarness(t, Config{Executor: BridgeExecutor{Containment: c}})
	for _, listed := range []bool{true, false} {
		f := openFrame("oom-"+map[bool]string{true: "listed", false: "not-listed"}[listed], "tail", "/dev/zero")
		if listed {
			f.ExitReasons = frames.ExitReasonOOM
		}
		p, opened := h.open(f)
		want := &frames.Exit{Signal: "SIGKILL"}
		if listed {
			want.Reason = frames.ExitReasonOOM
		}
		require.Equal(t, want, nextOf[*frames.Exit](p), "listed: %v", listed)
		p.send(&frames.Destroy{ProcessID: opened.ProcessID, Token: opened.Token})
		require.Equal(t, opened.ProcessID, nextOf[*frames.Destroyed](p).ProcessID)
	}
}

// TestOpenLimitsTightenNeverLoosen: an open may ask for limits tighter
// than the server's, and its evidence then says the limits in force; one
// asking for more than the server's, or for a limit the server does not
// enforce, is refused with SandboxCapabilityUnavailable{requirement:
// "resources"}. An open without limits gets evidence without them.
func TestOpenLimitsTightenNeverLoosen(t *testing.T) {
	c, err := bridge.NewContainment(bridge.ContainOptions{Limits: bridge.Limits{Pids: 200, Memory: 256 << 20}})
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("limits cannot be enforced: %v", err)
		}
		t.Skipf("limits cannot be enforced here: %v", err)
	}
	h := newHarness(t, Config{Executor: BridgeExecutor{Containment: c}})

	f := openFrame("tighter", "sh", "-c", `cat /sys/fs/cgroup/pids$(grep :pids: /proc/self/cgroup | cut -d: -f3)/pids.max`)
	f.Limits = &frames.Limits{Pids: 50}
	p, opened := h.open(f)
	require.Equal(t, &frames.Limits{Pids: 50, Memory: 256 << 20}, opened.Evidence.Limits)
	if c.LimitMechanisms()["pids"] == bridge.MechCgroupV1 {
		out := p.collect(true)
		require.Equal(t, "50\n", string(out.stdout), "the process's own pids.max")
	}

	for name, asked := range map[string]*frames.Limits{
		"looser":        {Pids: 500},
		"not enforced":  {CPUMillicores: 500},
		"memory looser": {Pids: 10, Memory: 1 << 30},
	} {
		f := openFrame("refused-"+strings.ReplaceAll(name, " ", "-"), "true")
		f.Limits = asked
		q := h.dial()
		q.send(f)
		e := nextOf[*frames.Error](q)
		require.Equal(t, frames.CapabilityUnavailable, e.Code, name)
		require.Equal(t, "resources", e.Requirement, name)
	}

	_, opened = h.open(openFrame("unasked", "true"))
	require.Nil(t, opened.Evidence.Limits, "evidence says limits only to a client that asked")
	f = openFrame("empty", "true")
	f.Limits = &frames.Limits{}
	_, opened = h.open(f)
	require.Equal(t, &frames.Limits{Pids: 200, Memory: 256 << 20}, opened.Evidence.Limits)
}
