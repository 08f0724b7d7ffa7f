package server

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/frames"
	"github.com/procwire/procwire/internal/testkit/fakeexec"
	"github.com/procwire/procwire/proc"
)

// A destroy that fails (something of the containment survived) is
// answered processes_survived; the process and its instance stay, and a
// later destroy frees them.
func TestDestroyThatFailsKeepsTheInstance(t *testing.T) {
	// The first process's first Destroy fails as a containment that
	// outlived SIGKILL would.
	var destroys atomic.Int32
	_, exec := newFake(func(_ proc.Request, p *fakeexec.Process) {
		first := p.Pid() == 1
		p.DestroyErr = func() error {
			if first && destroys.Add(1) == 1 {
				return &proc.SurvivorsError{Containment: "cgroup /test", Wait: time.Second, Count: 1,
					Survivors: []proc.Survivor{{Pid: 4242, Command: "sleep"}}}
			}
			return nil
		}
	})
	h := newHarness(t, Config{Executor: exec})
	p, opened := h.open(openFrame("inst-fail", "sleep", "300"))
	p.send(&frames.Destroy{})
	f := p.next()
	e, ok := f.(*frames.Error)
	require.True(t, ok, "got %s", f.Type())
	require.Equal(t, frames.OperationFailed, e.Code)
	require.Equal(t, "destroy_process", e.Operation)
	require.Equal(t, "processes_survived", e.Reason)
	require.Contains(t, e.Message, "4242 (sleep)")

	// Still live, the instance still reserved.
	h.process(opened.ProcessID)
	other := h.dial()
	other.send(openFrame("inst-fail", "true"))
	other.requireError(alreadyOpen())

	// The connection stays up; a second destroy succeeds and frees it.
	p.send(&frames.Destroy{})
	p.destroyedAnswer(opened.ProcessID)
	again, _ := h.open(openFrame("inst-fail", "true"))
	again.collect(true)
}
