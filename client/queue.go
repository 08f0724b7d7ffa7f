package client

// byteQueue holds the bytes of a stream between two absolute offsets,
// start and end. It grows as needed (its owner bounds it by a window) and
// reuses its storage once drained. Not safe for concurrent use.
type byteQueue struct {
	buf   []byte // the held bytes are buf[head:]
	head  int
	start int64 // offset of buf[head]
}

func (q *byteQueue) len() int      { return len(q.buf) - q.head }
func (q *byteQueue) end() int64    { return q.start + int64(q.len()) }
func (q *byteQueue) empty() bool   { return q.len() == 0 }
func (q *byteQueue) reset(o int64) { q.buf, q.head, q.start = q.buf[:0], 0, o }

// push appends p at end().
func (q *byteQueue) push(p []byte) {
	if q.head > 0 && q.head >= q.len() && len(q.buf)+len(p) > cap(q.buf) {
		// Moving the live bytes down is cheaper than growing.
		n := copy(q.buf, q.buf[q.head:])
		q.buf, q.head = q.buf[:n], 0
	}
	q.buf = append(q.buf, p...)
}

// from returns at most max held bytes from offset off, which must lie in
// [start, end]. The slice is valid until the next push or discard.
func (q *byteQueue) from(off int64, max int) []byte {
	i := q.head + int(off-q.start)
	return q.buf[i:min(len(q.buf), i+max)]
}

// discard drops every byte before off, which must lie in [start, end].
func (q *byteQueue) discard(off int64) {
	q.head += int(off - q.start)
	q.start = off
	if q.head == len(q.buf) {
		q.buf, q.head = q.buf[:0], 0
	}
}
