//go:build linux

package server

import (
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/frames"
)

// TestDestroyByKeyFloodKeepsTombstones floods the server with destroys
// naming random open keys (issue 23, finding 7: 4,100 of them flushed
// every tombstone), on the victim's instance and on others, then checks
// that the victim's destroyed open key still starts nothing, as PROTOCOL.md
// §4.5 and §4.8 promise for TombstoneTTL.
func TestDestroyByKeyFloodKeepsTombstones(t *testing.T) {
	exec := &countingExecutor{}
	// Refusals are logged at Info: 4,100 of them would flood the test's output.
	h := newHarness(t, Config{Executor: exec, Logger: slog.New(slog.DiscardHandler)})
	victim := keyedOpen("inst-victim", newKey(), "cat")
	p, opened := h.open(victim)
	p.send(&frames.Destroy{})
	p.destroyedAnswer(opened.ProcessID)

	// A destroy by key that found nothing, before the victim's second open.
	late := keyedOpen("inst-victim", newKey(), "cat")
	d := h.dial()
	d.send(&frames.Destroy{InstanceID: late.InstanceID, OpenKey: late.OpenKey})
	d.requireError(notFoundError(opDestroy))

	const flood = DefaultMaxTombstones + 4 // more than any bound
	var wg sync.WaitGroup
	// Each connection's end is a hook event: they are dropped meanwhile.
	flooding := make(chan struct{})
	var drained sync.WaitGroup
	drained.Go(func() {
		for {
			select {
			case <-h.events:
			case <-flooding:
				return
			}
		}
	})
	work := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range work {
				inst := "inst-victim"
				if i%2 == 1 {
					inst = fmt.Sprintf("inst-flood-%d", i)
				}
				p := h.dial()
				p.send(&frames.Destroy{InstanceID: inst, OpenKey: newKey()})
				p.requireError(notFoundError(opDestroy))
			}
		})
	}
	for i := range flood {
		work <- i
	}
	close(work)
	wg.Wait()
	close(flooding)
	drained.Wait()

	p = h.dial()
	p.send(victim)
	p.requireError(&frames.Error{Code: frames.LifecycleConflict, Operation: opOpen, Expected: "running", Actual: "process_destroyed"})
	p = h.dial()
	p.send(&frames.Resume{ProcessID: opened.ProcessID, Token: opened.Token})
	p.requireError(&frames.Error{Code: frames.LifecycleConflict, Operation: opResume, Expected: "running", Actual: "process_destroyed"})
	h.srv.mu.Lock()
	keyOnly, victimKeys := len(h.srv.keyq), len(h.srv.keyTombs["inst-victim"])
	h.srv.mu.Unlock()
	require.LessOrEqual(t, keyOnly, DefaultMaxTombstones)
	require.LessOrEqual(t, victimKeys, maxKeyTombsPerInstance+1, "key-only tombstones are bounded per instance")

	require.Equal(t, 1, exec.count(), "the flood started nothing, nor did the destroyed key")
}

// TestKeyOnlyTombstonesEvictedFirst checks the bounds on tombstones of
// keys that started nothing: per instance, the instance's oldest goes
// first; overall, they go before any tombstone of a process.
func TestKeyOnlyTombstonesEvictedFirst(t *testing.T) {
	s, err := New(Config{MaxTombstones: 100, TombstoneTTL: time.Minute})
	require.NoError(t, err)
	now := time.Unix(1000, 0)
	s.now = func() time.Time { return now }
	add := func(ts *tombstone) {
		s.mu.Lock()
		defer s.mu.Unlock()
		ts.at = now
		s.addTombLocked(ts)
		now = now.Add(time.Millisecond)
	}
	has := func(inst, key string) bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.keyTombLocked(inst, key) != nil
	}
	add(&tombstone{id: "p1", token: "t", instanceID: "a", openKey: "kp1"})
	add(&tombstone{instanceID: "a", openKey: "k0"})
	add(&tombstone{instanceID: "b", openKey: "kb"})
	for i := range maxKeyTombsPerInstance {
		add(&tombstone{instanceID: "a", openKey: fmt.Sprint("k", i+1)})
	}
	require.False(t, has("a", "k0"), "the instance's oldest key-only tombstone is forgotten first")
	require.True(t, has("a", "k1") && has("a", fmt.Sprint("k", maxKeyTombsPerInstance)))
	require.True(t, has("b", "kb"), "another instance's key is kept")
	require.True(t, has("a", "kp1"), "a process's tombstone is kept")

	for i := range 3 * 100 {
		add(&tombstone{instanceID: fmt.Sprint("flood", i), openKey: "k"})
	}
	require.True(t, has("a", "kp1"), "a process's tombstone outlives any number of key-only ones")
	_, ts, _ := s.lookup("p1", "t")
	require.NotNil(t, ts)
	require.False(t, has("b", "kb"), "key-only tombstones are bounded overall, oldest first")
	s.mu.Lock()
	require.Len(t, s.keyq, 100)
	s.mu.Unlock()
}
