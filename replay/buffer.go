package replay

import "math"

// Buffer holds the bytes of a stream from the acknowledged offset (Start) to
// the end of what was appended (End), at most its capacity of them. It is
// lossless: Append takes only what fits. Not safe for concurrent use.
type Buffer struct {
	r      ring  // capacity bytes, allocated once
	start  int64 // acknowledged offset: the oldest byte held
	end    int64 // offset after the last appended byte
	eof    int64 // where the stream ended, if hasEOF
	hasEOF bool
}

// New returns an empty Buffer holding at most capacity bytes. It panics
// unless capacity > 0.
func New(capacity int) *Buffer {
	if capacity <= 0 {
		panic("replay: New needs a positive capacity")
	}
	return &Buffer{r: make(ring, capacity)}
}

// Cap returns the capacity.
func (b *Buffer) Cap() int { return len(b.r) }

// Start returns the oldest offset still held, which is the acknowledged
// offset.
func (b *Buffer) Start() int64 { return b.start }

// End returns the offset after the last appended byte.
func (b *Buffer) End() int64 { return b.end }

// Len returns how many bytes are held: End() - Start().
func (b *Buffer) Len() int { return int(b.end - b.start) }

// Room returns how many bytes Append would take now. While it is 0 the
// producer should stop reading its source until an Ack frees space.
func (b *Buffer) Room() int { return len(b.r) - b.Len() }

// Append copies as much of p as fits, at most Room() bytes, at End() and
// returns how many bytes it took. It panics after CloseEOF.
func (b *Buffer) Append(p []byte) int {
	if b.hasEOF {
		panic("replay: Append after CloseEOF")
	}
	p = p[:min(len(p), b.Room())]
	if int64(len(p)) > math.MaxInt64-b.end {
		panic("replay: stream offset overflows int64")
	}
	b.r.put(b.end, p)
	b.end += int64(len(p))
	return len(p)
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
	return nil
}

// Slice returns the held bytes from off, at most max of them, without
// copying, as at most two segments (a then b) because the storage wraps.
// off == End() gives no bytes and no error. An off below Start() is a
// *GapError, one beyond End() a *BeyondError: never a silent skip.
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
	x, y = b.r.view(off, int(min(int64(max), b.end-off)))
	return x, y, nil
}

// CopyAt copies the held bytes from off into p, as many as fit, and returns
// how many. Errors are those of Slice.
func (b *Buffer) CopyAt(p []byte, off int64) (int, error) {
	x, y, err := b.Slice(off, len(p))
	if err != nil {
		return 0, err
	}
	n := copy(p, x)
	return n + copy(p[n:], y), nil
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
