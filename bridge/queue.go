//go:build linux

package bridge

// queue is a FIFO of bytes in a ring whose storage grows on demand up to the
// caller's bound. Not safe for concurrent use.
type queue struct {
	buf  []byte
	head int // index of the oldest byte
	n    int // bytes held
}

func (q *queue) len() int { return q.n }

// push appends p; q.n+len(p) must not exceed limit.
func (q *queue) push(p []byte, limit int) {
	if need := q.n + len(p); need > len(q.buf) {
		q.grow(min(max(2*len(q.buf), need, 4<<10), limit), need)
	}
	tail := (q.head + q.n) % len(q.buf)
	c := copy(q.buf[tail:], p)
	copy(q.buf, p[c:])
	q.n += len(p)
}

// grow moves the bytes held to new storage of size max(size, need).
func (q *queue) grow(size, need int) {
	nb := make([]byte, max(size, need))
	q.peek(nb)
	q.buf, q.head = nb, 0
}

// peek copies up to len(p) of the oldest bytes into p without removing them.
func (q *queue) peek(p []byte) int {
	if q.n == 0 {
		return 0
	}
	end := min(q.head+q.n, len(q.buf))
	c := copy(p, q.buf[q.head:end])
	if c < len(p) && c < q.n {
		c += copy(p[c:], q.buf[:q.n-c])
	}
	return c
}

// discard removes the n oldest bytes.
func (q *queue) discard(n int) {
	q.n -= n
	if q.n == 0 {
		q.head = 0
		return
	}
	q.head = (q.head + n) % len(q.buf)
}
