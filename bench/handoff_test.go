//go:build linux

package bench

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// handOff is a Session read by a goroutine of its own, which hands what it
// read to Read by closing a channel, as procwire's client hands a frame
// from its read loop to a blocked Read.
type handOff struct {
	Session
	mu      sync.Mutex
	held    []byte
	err     error
	changed chan struct{} // closed when held or err changes; nil when no Read waits
	done    chan struct{} // closed when the reading goroutine returned
}

func newHandOff(s Session) *handOff {
	h := &handOff{Session: s, done: make(chan struct{})}
	go h.readLoop()
	return h
}

func (h *handOff) readLoop() {
	defer close(h.done)
	b := make([]byte, 4096)
	for {
		n, err := h.Session.Read(b)
		h.mu.Lock()
		h.held, h.err = append(h.held, b[:n]...), err
		if h.changed != nil {
			close(h.changed)
			h.changed = nil
		}
		h.mu.Unlock()
		if err != nil {
			return
		}
	}
}

func (h *handOff) Read(b []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for len(h.held) == 0 && h.err == nil {
		ch := make(chan struct{})
		h.changed = ch
		h.mu.Unlock()
		<-ch
		h.mu.Lock()
	}
	if len(h.held) > 0 {
		n := copy(b, h.held)
		h.held = h.held[n:]
		return n, nil
	}
	return 0, h.err
}

func (h *handOff) Close() error {
	err := h.Session.Close()
	<-h.done
	return err
}

// BenchmarkEchoHandOff prices the one goroutine hand-off procwire's client
// makes per message (its read loop to the blocked Read): a 1-byte echo
// through a raw WebSocket read by the caller itself, and through the same
// WebSocket read by a goroutine that hands each message to the caller. On
// the development VM in its slow mode the hand-off alone costs about 50 µs
// of p50 (it wakes an idle virtual CPU), which is most of procwire's gap to
// the raw WebSocket on this workload.
func BenchmarkEchoHandOff(b *testing.B) {
	raw, err := NewRaw()
	require.NoError(b, err)
	defer func() { require.NoError(b, raw.Close()) }()
	for _, c := range []struct {
		name string
		wrap func(Session) Session
	}{
		{"caller-reads", func(s Session) Session { return s }},
		{"hand-off", func(s Session) Session { return newHandOff(s) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			ctx, cancel := context.WithTimeout(context.Background(), benchTimeout)
			defer cancel()
			s, err := raw.Open(ctx, []string{"cat"})
			require.NoError(b, err)
			s = c.wrap(s)
			defer func() { require.NoError(b, s.Close()) }()
			samples, err := echoes(c.name, s, b.N)
			require.NoError(b, err)
			reportPercentiles(b, samples)
		})
	}
}
