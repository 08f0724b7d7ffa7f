//go:build linux

package server

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/bridge"
	"github.com/procwire/procwire/frames"
)

// escapes are process trees that try to outlive their process; each prints
// "started" once all of it runs. What prints it stays as it is (no exec after
// the echo): a process in the middle of an exec shows an empty environment,
// and markedAlive would miss it.
var escapes = map[string]string{
	"setsid":            `setsid sh -c 'sleep 300 & echo started; wait' &`,
	"double fork":       `(setsid sh -c 'sleep 300 & echo started; wait' &)`,
	"100 sleepers exit": `i=0; while [ $i -lt 100 ]; do sleep 300 & i=$((i+1)); done; echo started`,
}

// markedAlive lists the live processes whose environment holds mark.
func markedAlive(t *testing.T, mark string) []int {
	ents, err := os.ReadDir("/proc")
	require.NoError(t, err)
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err == nil && slices.Contains(strings.Split(string(env), "\x00"), mark) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// openEscape opens script with a unique marker in its environment and
// waits for "started"; it returns the peer, the process id and the marker.
func openEscape(t *testing.T, h *harness, inst, script string) (*peer, string, string) {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	v := hex.EncodeToString(b)
	p, opened := h.open(&frames.Open{InstanceID: inst, Request: frames.ProcessRequest{
		Executable: "sh", Arguments: []string{"-c", script}, WorkingDirectory: "/",
		Environment: map[string]string{"PATH": "/usr/bin:/bin", "PROCWIRE_TEST_MARK": v},
	}})
	var out []byte
	for !strings.Contains(string(out), "started\n") {
		out = append(out, nextOf[*frames.Stdout](p).Data...)
	}
	mark := "PROCWIRE_TEST_MARK=" + v
	require.NotEmpty(t, markedAlive(t, mark))
	return p, opened.ProcessID, mark
}

// requireNoneSurvives checks that nothing of an escape is alive: under
// every containment, since this binary calls bridge.MaybeRunInit and the
// process group's init ends its whole tree.
func requireNoneSurvives(t *testing.T, kind, escape, mark string) {
	alive := markedAlive(t, mark)
	for _, pid := range alive {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	require.Empty(t, alive, "survivors under %s of %s", kind, escape)
}

// TestNoDescendantSurvives: destroy, grace expiry and Shutdown end every
// descendant, under every containment this machine allows.
func TestNoDescendantSurvives(t *testing.T) {
	for _, kind := range []string{bridge.ContainCgroup, bridge.ContainPIDNamespace, bridge.ContainProcessGroup} {
		t.Run(kind, func(t *testing.T) {
			c, err := bridge.NewContainment(bridge.ContainOptions{Kind: kind})
			if err != nil {
				t.Skipf("this machine does not allow it: %v", err)
			}
			cfg := Config{Executor: BridgeExecutor{Containment: c}, Grace: 100 * time.Millisecond, ExitWait: 50 * time.Millisecond}
			for name, script := range escapes {
				t.Run(name, func(t *testing.T) {
					h := newHarness(t, cfg)
					require.Equal(t, c.String(), h.srv.Stats().Containment)

					p, id, mark := openEscape(t, h, "inst-destroy", script)
					p.send(&frames.Destroy{})
					p.destroyedAnswer(id)
					requireNoneSurvives(t, kind, name, mark)

					p, id, mark = openEscape(t, h, "inst-expire", script)
					p.ws.CloseNow()
					h.waitEvent(hookExpired, id)
					requireNoneSurvives(t, kind, name, mark)

					p, id, mark = openEscape(t, h, "inst-shutdown", script)
					done := make(chan error, 1)
					go func() { done <- h.srv.Shutdown(testCtx(t)) }()
					require.Equal(t, &frames.Destroyed{ProcessID: id}, nextOf[*frames.Destroyed](p))
					p.requireClosed(websocket.StatusGoingAway, "server shutting down")
					require.NoError(t, <-done)
					requireNoneSurvives(t, kind, name, mark)
				})
			}
		})
	}
}
