package client

import (
	"bytes"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// byteQueue against a naive shadow slice, under random pushes, reads and
// discards.
func TestByteQueueShadow(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var q byteQueue
	var shadow []byte // bytes from start to end
	var start, next int64
	maxLen := 0
	for range 20000 {
		switch rng.IntN(3) {
		case 0:
			p := make([]byte, rng.IntN(300))
			for i := range p {
				p[i] = byte(next)
				next++
			}
			q.push(p)
			shadow = append(shadow, p...)
		case 1:
			off := start + rng.Int64N(int64(len(shadow))+1)
			n := rng.IntN(400)
			want := shadow[off-start:]
			want = want[:min(len(want), n)]
			require.True(t, bytes.Equal(want, q.from(off, n)))
		case 2:
			off := start + rng.Int64N(int64(len(shadow))+1)
			q.discard(off)
			shadow = shadow[off-start:]
			start = off
		}
		require.Equal(t, start, q.start)
		require.Equal(t, start+int64(len(shadow)), q.end())
		require.Equal(t, len(shadow), q.len())
		maxLen = max(maxLen, len(shadow))
		require.LessOrEqual(t, cap(q.buf), 4*maxLen+1024, "storage stays within a multiple of the most held")
	}
}

// A reservation filled and committed in place is the same as a push, and
// takes no copy; one overtaken by a push is committed by a copy.
func TestByteQueueReserveCommit(t *testing.T) {
	var q byteQueue
	q.reset(10)
	q.push([]byte("ab"))
	r := q.reserve(4)
	copy(r, "cdef")
	q.discard(11) // the reader drains meanwhile: nothing moves
	before := &q.buf[:cap(q.buf)][len(q.buf)]
	q.commit(r[:3])
	require.Equal(t, "bcde", string(q.from(11, 10)))
	require.Same(t, before, &q.buf[len(q.buf)-3], "committed in place")
	require.Equal(t, int64(15), q.end())

	r = q.reserve(2)
	copy(r, "xy")
	q.push([]byte("f")) // overtaken: the reservation is void
	q.commit([]byte("gh"))
	require.Equal(t, "bcdefgh", string(q.from(11, 10)))

	// A drained queue starts over at the front of its storage.
	q.discard(q.end())
	r = q.reserve(3)
	require.Same(t, &q.buf[:1][0], &r[0])
}

// A reader draining the queue while the producer fills a reservation
// without the lock never sees a torn byte (run with -race).
func TestByteQueueReservationRacesDiscard(t *testing.T) {
	var (
		mu  sync.Mutex
		q   byteQueue
		got []byte
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 7)
		for len(got) < 1<<16 {
			mu.Lock()
			n := copy(buf, q.from(q.start, len(buf)))
			q.discard(q.start + int64(n))
			mu.Unlock()
			got = append(got, buf[:n]...)
		}
	}()
	var next byte
	for sent := 0; sent < 1<<16; {
		n := min(1+sent%300, 1<<16-sent)
		mu.Lock()
		r := q.reserve(n)
		mu.Unlock()
		for i := range r {
			r[i] = next
			next++
		}
		mu.Lock()
		q.commit(r)
		mu.Unlock()
		sent += n
	}
	<-done
	for i, b := range got {
		require.Equal(t, byte(i), b, "byte %d", i)
	}
}
