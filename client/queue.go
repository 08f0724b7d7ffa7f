package client

import "unsafe"

// byteQueue holds the bytes of a stream between two absolute offsets,
// start and end. It grows as needed (its owner bounds it by a window) and
// reuses its storage once drained. Not safe for concurrent use, with one
// exception: the bytes of a reservation (see reserve) may be written by
// another goroutine while the queue's owner reads and discards.
//
// Only push and reserve move or reallocate the storage; discard only
// advances head. So a reservation made under the owner's lock stays where
// it is until the same producer pushes or reserves again.
type byteQueue struct {
	buf   []byte // the held bytes are buf[head:]
	head  int
	start int64 // offset of buf[head]
}

func (q *byteQueue) len() int      { return len(q.buf) - q.head }
func (q *byteQueue) end() int64    { return q.start + int64(q.len()) }
func (q *byteQueue) empty() bool   { return q.len() == 0 }
func (q *byteQueue) reset(o int64) { q.buf, q.head, q.start = q.buf[:0], 0, o }

// room makes room for n more bytes after the held ones: it reuses the
// storage of drained bytes when that is cheap (the held bytes are no more
// than those drained, so each byte moves at most once per byte drained),
// and otherwise grows, copying only the held bytes.
func (q *byteQueue) room(n int) {
	live := q.len()
	if live == 0 {
		q.buf, q.head = q.buf[:0], 0
	}
	if len(q.buf)+n <= cap(q.buf) {
		return
	}
	if q.head > 0 && q.head >= live && live+n <= cap(q.buf) {
		k := copy(q.buf, q.buf[q.head:])
		q.buf, q.head = q.buf[:k], 0
		return
	}
	grown := make([]byte, live, max(2*(live+n), 64))
	copy(grown, q.buf[q.head:])
	q.buf, q.head = grown, 0
}

// push appends p at end().
func (q *byteQueue) push(p []byte) {
	q.room(len(p))
	q.buf = append(q.buf, p...)
}

// reserve returns n bytes of storage just after end(), for a producer to
// fill, possibly without the owner's lock, and hand to commit. Until then
// the queue does not change where it keeps its bytes (only push and
// reserve do).
func (q *byteQueue) reserve(n int) []byte {
	q.room(n)
	return q.buf[len(q.buf) : len(q.buf)+n]
}

// commit appends p at end(): without a copy when p is the start of the last
// reservation, still in place, and by a copy otherwise.
func (q *byteQueue) commit(p []byte) {
	if len(p) > 0 && len(q.buf) < cap(q.buf) && unsafe.SliceData(p) == unsafe.SliceData(q.buf[len(q.buf):]) && len(p) <= cap(q.buf)-len(q.buf) {
		q.buf = q.buf[:len(q.buf)+len(p)]
		return
	}
	q.push(p)
}

// from returns at most max held bytes from offset off, which must lie in
// [start, end]. The slice is valid until the next push or reserve.
func (q *byteQueue) from(off int64, max int) []byte {
	i := q.head + int(off-q.start)
	return q.buf[i:min(len(q.buf), i+max)]
}

// discard drops every byte before off, which must lie in [start, end]. It
// never moves the held bytes or the storage: the next push or reserve
// reuses what was drained.
func (q *byteQueue) discard(off int64) {
	q.head += int(off - q.start)
	q.start = off
}
