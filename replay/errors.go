package replay

import (
	"errors"
	"fmt"
)

// Sentinel errors, for errors.Is. The typed errors below match them.
var (
	// ErrGap means the requested offset was acknowledged and freed: the bytes
	// from there can no longer be replayed.
	ErrGap = errors.New("replay: offset no longer held")
	// ErrBeyond means the requested offset is past the end of what was
	// appended.
	ErrBeyond = errors.New("replay: offset beyond end")
	// ErrAckBackwards means an acknowledgement below an earlier one.
	ErrAckBackwards = errors.New("replay: ack moves backwards")
	// ErrAckBeyond means an acknowledgement of bytes never appended.
	ErrAckBeyond = errors.New("replay: ack beyond end")
)

// GapError reports a read from an offset older than anything still held.
type GapError struct {
	Requested int64 // the offset asked for
	Oldest    int64 // the oldest offset still held (Start)
}

// Error names the numbers.
func (e *GapError) Error() string {
	return fmt.Sprintf("replay: offset %d no longer held, oldest is %d", e.Requested, e.Oldest)
}

// Is reports whether target is ErrGap.
func (e *GapError) Is(target error) bool { return target == ErrGap }

// BeyondError reports a read from an offset past the end of the stream so far.
type BeyondError struct {
	Requested int64 // the offset asked for
	End       int64 // the offset after the last appended byte
}

// Error names the numbers.
func (e *BeyondError) Error() string {
	return fmt.Sprintf("replay: offset %d beyond end %d", e.Requested, e.End)
}

// Is reports whether target is ErrBeyond.
func (e *BeyondError) Is(target error) bool { return target == ErrBeyond }

// AckError reports an acknowledgement that was refused. Err is
// ErrAckBackwards or ErrAckBeyond, so errors.Is works.
type AckError struct {
	Offset int64 // the acknowledged offset
	Start  int64 // the acknowledged offset before this ack
	End    int64 // the offset after the last appended byte
	Err    error
}

// Error names the numbers.
func (e *AckError) Error() string {
	return fmt.Sprintf("%v: ack %d, held [%d, %d)", e.Err, e.Offset, e.Start, e.End)
}

// Unwrap returns Err.
func (e *AckError) Unwrap() error { return e.Err }
