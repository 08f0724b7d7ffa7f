package replay

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestResumeLossless plays the stdout protocol around a Buffer with random
// interleavings and disconnections: a producer fills the window from a
// pipe, the server sends from its cursor, the network delivers or loses
// what is in flight, the client acknowledges what it read, and on every
// reconnect the server replays from what the client says it received. The
// client must end with exactly the source stream, then the end of stream,
// and a replay must never hit a gap.
func TestResumeLossless(t *testing.T) {
	source := make([]byte, 50_000)
	for seed := range uint64(50) {
		rng := rand.New(rand.NewPCG(seed, 3))
		for i := range source {
			source[i] = byte(rng.Uint32())
		}
		b := New(1 + rng.IntN(4096))
		var (
			produced int    // bytes of source read from the pipe
			cursor   int64  // next offset the server sends
			inFlight []byte // sent, not yet delivered
			eofSent  bool   // the end of stream is in flight
			got      []byte // what the client read
			eofSeen  bool
			acked    int64 // last ack the server processed
		)
		for steps := 0; !eofSeen; steps++ {
			require.Less(t, steps, 1_000_000, "seed %d: no progress", seed)
			switch rng.IntN(5) {
			case 0: // the producer reads the pipe while there is room
				if _, ok := b.EOF(); ok || b.Room() == 0 {
					continue
				}
				n := b.Append(source[produced:min(len(source), produced+1+rng.IntN(3000))])
				produced += n
				if produced == len(source) {
					b.CloseEOF()
				}
			case 1: // the server sends from its cursor
				x, y, err := b.Slice(cursor, 1+rng.IntN(2000))
				require.NoError(t, err)
				inFlight = append(append(inFlight, x...), y...)
				cursor += int64(len(x) + len(y))
				if b.AtEOF(cursor) {
					eofSent = true
				}
			case 2: // the network delivers everything in flight
				got = append(got, inFlight...)
				inFlight = inFlight[:0]
				eofSeen = eofSent
			case 3: // the client's ack arrives
				ack := acked + rng.Int64N(int64(len(got))-acked+1)
				require.NoError(t, b.Ack(ack))
				acked = ack
			case 4: // disconnect and resume from what the client received
				inFlight, eofSent = inFlight[:0], false
				cursor = int64(len(got))
				_, _, err := b.Slice(cursor, 0)
				require.NoError(t, err, "seed %d: resume must never hit a gap", seed)
			}
		}
		require.Equal(t, source, got, "seed %d", seed)
	}
}
