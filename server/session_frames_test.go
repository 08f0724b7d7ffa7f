package server

import (
	"log/slog"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/credit"
	"github.com/procwire/procwire/frames"
)

// gatedStdin is a process whose first PushStdin waits for release: a push
// caught in the middle.
type gatedStdin struct {
	Process          // nil: only the stdin methods below are called
	entered, release chan struct{}
	mu               sync.Mutex
	pushed           []string
	consumed         int64
}

func (p *gatedStdin) PushStdin(b []byte) error {
	p.mu.Lock()
	first := len(p.pushed) == 0
	p.mu.Unlock()
	if first {
		close(p.entered)
		<-p.release
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pushed = append(p.pushed, string(b))
	p.consumed += int64(len(b))
	return nil
}

func (p *gatedStdin) StdinConsumed() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.consumed
}

// A push holds no session lock: while it is in the middle, a resume takes
// the session over (and sees the bytes as received); the new connection's
// stdin waits for the push before it, and the grant the old push made due
// wakes the new connection's writer.
func TestStdinPushHoldsNoSessionLock(t *testing.T) {
	p := &gatedStdin{entered: make(chan struct{}), release: make(chan struct{})}
	old, next := &conn{}, &conn{}
	old.lw.Init(nil, false)
	next.lw.Init(nil, false)
	s := &session{srv: &Server{cfg: Config{MaxFrameData: 1 << 10}}, p: p, recv: credit.NewReceiver(4),
		log: slog.New(slog.DiscardHandler)}
	s.setAttachedLocked(old)

	oldDone := make(chan result, 1)
	go func() {
		r, v := s.stdin(old, &frames.Stdin{Off: 0, Data: []byte("ab")})
		assert.Nil(t, v)
		oldDone <- r
	}()
	<-p.entered

	s.mu.Lock() // free while the push is in the middle
	s.setAttachedLocked(next)
	require.EqualValues(t, 2, s.recv.Received())
	s.mu.Unlock()

	nextDone := make(chan struct{})
	go func() {
		defer close(nextDone)
		r, v := s.stdin(next, &frames.Stdin{Off: 2, Data: []byte("cd")})
		assert.Nil(t, v)
		assert.Nil(t, r.end)
	}()
	close(p.release)
	r := <-oldDone
	<-nextDone
	require.Nil(t, r.end)
	require.Same(t, next, r.wake, "the grant goes to the connection attached now")
	require.Equal(t, []string{"ab", "cd"}, p.pushed)

	// The old connection's next frame ends it.
	r, v := s.stdin(old, &frames.Stdin{Off: 4, Data: []byte("e")})
	require.Nil(t, v)
	require.Equal(t, &ending{}, r.end)
	require.Equal(t, closeStatus{code: statusResumedElsewhere, reason: "resumed elsewhere"}, r.end.status())
}
