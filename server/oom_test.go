//go:build linux

package server

import (
	"os"
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
