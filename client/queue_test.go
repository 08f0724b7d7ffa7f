package client

import (
	"bytes"
	"math/rand/v2"
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
