package replay

import (
	"math"

	"github.com/procwire/procwire/internal/chunk"
)

// Buffer holds the bytes of a stream from the acknowledged offset (Start) to
// the end of what was appended (End), at most its capacity of them. It is
// lossless: Append takes only what fits. Not safe for concurrent use.
//
// Its storage is fixed-size chunks (chunk.Size bytes) taken from a shared
// pool as bytes arrive and given back as soon as every byte in them is
// acknowledged: the capacity is a ceiling, never an allocation. A Buffer
// holding n bytes holds at most ceil(n / chunk.Size) + 1 chunks, and none
// when it is empty.
type Buffer struct {
	capacity int
	csize    int      // chunk size: chunk.Size, smaller only in tests
	chunks   [][]byte // chunks[i] stores offsets [base+i*csize, base+(i+1)*csize)
	base     int64    // offset stored at chunks[0][0], a multiple of csize
	start    int64    // acknowledged offset: the oldest byte held
	end      int64    // offset after the last appended byte
	eof      int64    // where the stream ended, if hasEOF
	hasEOF   bool
	reserved int // bytes of storage after end handed out by Reserve
}

// New returns an empty Buffer holding at most capacity bytes. It allocates
// no storage until bytes arrive. It panics unless capacity > 0.
func New(capacity int) *Buffer { return newBuffer(capacity, chunk.Size) }

// newBuffer is New with chunks of csize bytes; chunks of any size other
// than chunk.Size are allocated, not pooled.
func newBuffer(capacity, csize int) *Buffer {
	if capacity <= 0 {
		panic("replay: New needs a positive capacity")
	}
	return &Buffer{capacity: capacity, csize: csize}
}

// Cap returns the capacity.
func (b *Buffer) Cap() int { return b.capacity }

// Start returns the oldest offset still held, which is the acknowledged
// offset.
func (b *Buffer) Start() int64 { return b.start }

// End returns the offset after the last appended byte.
func (b *Buffer) End() int64 { return b.end }

// Len returns how many bytes are held: End() - Start().
func (b *Buffer) Len() int { return int(b.end - b.start) }

// Room returns how many bytes Append would take now. While it is 0 the
// producer should stop reading its source until an Ack frees space.
func (b *Buffer) Room() int { return b.capacity - b.Len() }

// Allocated returns the bytes of storage the Buffer holds now: whole
// chunks, 0 when it is empty.
func (b *Buffer) Allocated() int { return len(b.chunks) * b.csize }

// Append copies as much of p as fits, at most Room() bytes, at End() and
// returns how many bytes it took. It voids a reservation (see Reserve). It
// panics after CloseEOF.
func (b *Buffer) Append(p []byte) int {
	p = p[:b.fit(len(p))]
	n := len(p)
	b.reserved = 0
	for len(p) > 0 {
		c := copy(b.tail(), p)
		p = p[c:]
		b.end += int64(c)
	}
	return n
}

// fit returns how many of n bytes may be appended now, after the checks
// every append makes.
func (b *Buffer) fit(n int) int {
	if b.hasEOF {
		panic("replay: Append after CloseEOF")
	}
	n = min(n, b.Room())
	if int64(n) > math.MaxInt64-b.end {
		panic("replay: stream offset overflows int64")
	}
	if n > 0 && len(b.chunks) == 0 {
		b.base = b.end - b.end%int64(b.csize)
	}
	return n
}

// tail returns the storage from End() to the end of its chunk, taking a
// chunk when End() starts a new one.
func (b *Buffer) tail() []byte {
	return b.storageAt(b.end)
}

// storageAt returns the storage from off to the end of its chunk, taking
// chunks up to it as needed.
func (b *Buffer) storageAt(off int64) []byte {
	cs := int64(b.csize)
	rel := off - b.base
	i := int(rel / cs)
	for i >= len(b.chunks) {
		b.chunks = append(b.chunks, b.alloc())
	}
	return b.chunks[i][rel%cs:]
}

// Reserve hands out storage for up to max bytes at End(), at most Room(),
// appended to iov one slice per chunk, so that a producer can fill it
// without holding the Buffer's owner's lock (a pipe read straight into the
// buffer) and then Commit what it filled. Until the Commit the Buffer keeps
// that storage, even when an Ack empties it; nothing but the producer
// writes it, and nothing reads it. One reservation at a time; Append voids
// it. It panics after CloseEOF.
func (b *Buffer) Reserve(max int, iov [][]byte) [][]byte {
	n := b.fit(max)
	b.reserved = n
	for off := b.end; off < b.end+int64(n); {
		t := b.storageAt(off)
		t = t[:min(len(t), int(b.end+int64(n)-off))]
		iov = append(iov, t)
		off += int64(len(t))
	}
	return iov
}

// Commit appends the first n bytes of the storage the last Reserve handed
// out, which the producer filled, and ends the reservation. It panics when
// n is more than was reserved.
func (b *Buffer) Commit(n int) {
	if n < 0 || n > b.reserved {
		panic("replay: Commit of more than was reserved")
	}
	b.end += int64(n)
	b.reserved = 0
	// Give back the storage reserved and left unfilled.
	cs := int64(b.csize)
	need := int((b.end - b.base + cs - 1) / cs)
	for _, c := range b.chunks[need:] {
		b.free(c)
	}
	clear(b.chunks[need:])
	b.chunks = b.chunks[:need]
	b.release()
}

// alloc takes a chunk of storage.
func (b *Buffer) alloc() []byte {
	if b.csize == chunk.Size {
		return chunk.Get()[:]
	}
	return make([]byte, b.csize)
}

// free gives back a chunk of storage.
func (b *Buffer) free(c []byte) {
	if b.csize == chunk.Size {
		chunk.Put((*[chunk.Size]byte)(c))
	}
}

// release gives back every chunk whose bytes are all acknowledged: all of
// them when the Buffer is empty and holds no reservation.
func (b *Buffer) release() {
	k := len(b.chunks)
	if b.start < b.end || b.reserved > 0 {
		k = int((b.start - b.base) / int64(b.csize))
	}
	if k == 0 {
		return
	}
	for _, c := range b.chunks[:k] {
		b.free(c)
	}
	n := copy(b.chunks, b.chunks[k:])
	clear(b.chunks[n:])
	b.chunks = b.chunks[:n]
	b.base += int64(k) * int64(b.csize)
}

// Ack frees every byte before off. Acknowledging Start() again is harmless.
// An off below Start() or beyond End() is refused with an *AckError matching
// ErrAckBackwards or ErrAckBeyond, and changes nothing.
func (b *Buffer) Ack(off int64) error {
	switch {
	case off < b.start:
		return &AckError{Offset: off, Start: b.start, End: b.end, Err: ErrAckBackwards}
	case off > b.end:
		return &AckError{Offset: off, Start: b.start, End: b.end, Err: ErrAckBeyond}
	}
	b.start = off
	b.release()
	return nil
}

// Slice returns the held bytes from off, at most max of them, without
// copying, as at most two segments (a then b), one per chunk of storage:
// min(max, End()-off) bytes, or fewer when they span more than two chunks,
// but never fewer than min(max, End()-off, chunk.Size). A reader sends what
// it got and asks again. off == End() gives no bytes and no error. An off
// below Start() is a *GapError, one beyond End() a *BeyondError: never a
// silent skip.
//
// The views are valid only until the next Append or Ack: after that the
// storage may hold other bytes. It panics if max is negative.
func (b *Buffer) Slice(off int64, max int) (x, y []byte, err error) {
	if max < 0 {
		panic("replay: Slice with negative max")
	}
	if err := b.check(off); err != nil {
		return nil, nil, err
	}
	n := int(min(int64(max), b.end-off))
	if n == 0 {
		return nil, nil, nil
	}
	cs := int64(b.csize)
	rel := off - b.base
	i, j := int(rel/cs), int(rel%cs)
	k := min(j+n, b.csize)
	x = b.chunks[i][j:k:k]
	if n -= k - j; n > 0 {
		n = min(n, b.csize)
		y = b.chunks[i+1][:n:n]
	}
	return x, y, nil
}

// CopyAt copies the held bytes from off into p, as many as fit, and returns
// how many. Errors are those of Slice.
func (b *Buffer) CopyAt(p []byte, off int64) (int, error) {
	if err := b.check(off); err != nil {
		return 0, err
	}
	n := 0
	for n < len(p) {
		x, y, _ := b.Slice(off+int64(n), len(p)-n)
		if len(x) == 0 {
			break
		}
		n += copy(p[n:], x)
		n += copy(p[n:], y)
	}
	return n, nil
}

// check refuses offsets outside [Start(), End()].
func (b *Buffer) check(off int64) error {
	switch {
	case off < b.start:
		return &GapError{Requested: off, Oldest: b.start}
	case off > b.end:
		return &BeyondError{Requested: off, End: b.end}
	}
	return nil
}

// CloseEOF records that the stream ended at End(). Appending afterwards
// panics; calling it again is harmless.
func (b *Buffer) CloseEOF() {
	b.eof, b.hasEOF = b.end, true
}

// EOF returns where the stream ended, if CloseEOF was called.
func (b *Buffer) EOF() (off int64, ok bool) { return b.eof, b.hasEOF }

// AtEOF reports whether the stream ended exactly at off, so that a reader
// that has sent everything up to off should now send the end of stream.
func (b *Buffer) AtEOF(off int64) bool { return b.hasEOF && off == b.eof }
