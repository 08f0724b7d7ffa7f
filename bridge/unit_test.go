//go:build linux

package bridge

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/proc"
)

// TestQueueAgainstShadow runs random pushes, peeks and discards against a
// plain slice.
func TestQueueAgainstShadow(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const limit = 1000
	var q queue
	var shadow []byte
	next := byte(0)
	for range 20_000 {
		switch r.IntN(3) {
		case 0:
			n := r.IntN(limit - len(shadow) + 1)
			p := make([]byte, n)
			for i := range p {
				p[i] = next
				next++
			}
			q.push(p, limit)
			shadow = append(shadow, p...)
		case 1:
			p := make([]byte, r.IntN(limit))
			n := q.peek(p)
			require.Equal(t, min(len(p), len(shadow)), n)
			require.Equal(t, shadow[:n], p[:n])
		case 2:
			n := r.IntN(len(shadow) + 1)
			q.discard(n)
			shadow = shadow[n:]
		}
		require.Equal(t, len(shadow), q.len())
		// Storage in whole chunks, as many as the bytes held span; none
		// when empty.
		require.LessOrEqual(t, q.allocated(), (len(shadow)/queueChunk+2)*queueChunk)
		if len(shadow) == 0 {
			require.Zero(t, q.allocated())
		}
	}
}

func TestDestroyTimeout(t *testing.T) {
	p, err := Start(proc.Request{Executable: "sleep", Arguments: []string{"300"}, WorkingDirectory: t.TempDir()},
		&proc.Config{DestroyWait: time.Nanosecond})
	require.NoError(t, err)
	err = p.Destroy()
	if err == nil {
		t.Log("teardown beat a 1ns deadline")
	} else {
		var te *proc.DestroyTimeoutError
		var se *proc.SurvivorsError
		require.True(t, errors.As(err, &te) || errors.As(err, &se), "%v", err)
	}
	// A later Destroy tries again, and once one succeeded, all do.
	eventually(t, "a Destroy to succeed", func() bool { return p.Destroy() == nil })
	require.NoError(t, p.Destroy())
	require.Equal(t, proc.ExitStatus{Signal: "SIGKILL"}, waitExit(t, p))
}
