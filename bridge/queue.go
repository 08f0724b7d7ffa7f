//go:build linux

package bridge

import (
	"github.com/procwire/procwire/internal/chunk"
	"github.com/procwire/procwire/replay"
)

// queueChunk is the granularity of a queue's storage.
const queueChunk = chunk.Size

// queue is a FIFO of bytes. Its storage is a replay.Buffer's pooled chunks,
// taken as bytes are pushed and given back as they are discarded, so an
// empty queue holds none whatever its bound. Not safe for concurrent use.
type queue struct {
	b *replay.Buffer // created by the first push, with that push's limit
}

func (q *queue) len() int {
	if q.b == nil {
		return 0
	}
	return q.b.Len()
}

// push appends p; q.len()+len(p) must not exceed limit, which must be the
// same on every call.
func (q *queue) push(p []byte, limit int) {
	if q.b == nil {
		q.b = replay.New(limit)
	}
	if n := q.b.Append(p); n != len(p) {
		panic("bridge: stdin queue pushed past its limit")
	}
}

// peek copies up to len(p) of the oldest bytes into p without removing them.
func (q *queue) peek(p []byte) int {
	if q.b == nil {
		return 0
	}
	n, _ := q.b.CopyAt(p, q.b.Start()) // Start is always held
	return n
}

// discard removes the n oldest bytes.
func (q *queue) discard(n int) {
	if n == 0 {
		return
	}
	if err := q.b.Ack(q.b.Start() + int64(n)); err != nil {
		panic("bridge: stdin queue discards more than it holds")
	}
}

// allocated returns the bytes of storage the queue holds.
func (q *queue) allocated() int {
	if q.b == nil {
		return 0
	}
	return q.b.Allocated()
}
