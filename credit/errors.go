package credit

import (
	"errors"
	"fmt"
)

// Sentinel errors, for errors.Is. The typed errors below match them.
var (
	// ErrOverrun means the peer sent bytes beyond the limit it was granted.
	ErrOverrun = errors.New("credit: peer overran its limit")
	// ErrOverflow means an offset would not fit in an int64. A negative limit
	// from the peer is what an overflowed offset looks like on the wire, so
	// *LimitError matches it too.
	ErrOverflow = errors.New("credit: offset overflows int64")
	// ErrInvalidLimit means the peer announced a limit that cannot be valid.
	ErrInvalidLimit = errors.New("credit: invalid limit")
	// ErrBadResume means the peer's account of a resumed stream is
	// inconsistent with what was sent.
	ErrBadResume = errors.New("credit: inconsistent resume")
)

// OverrunError reports that the peer sent more than its limit allows. The
// bytes were not counted.
type OverrunError struct {
	Received int64 // offset the peer's bytes would have reached
	Allowed  int64 // limit announced to the peer
}

// Error reads like "received 101 bytes, allowed 100".
func (e *OverrunError) Error() string {
	return fmt.Sprintf("received %d bytes, allowed %d", e.Received, e.Allowed)
}

// Is reports whether target is ErrOverrun.
func (e *OverrunError) Is(target error) bool { return target == ErrOverrun }

// OverflowError reports that adding N bytes to Offset would overflow int64.
// Only a peer that misbehaves (or a stream of 8 EiB) gets here.
type OverflowError struct {
	Offset int64
	N      int64
}

// Error names the numbers that overflowed.
func (e *OverflowError) Error() string {
	return fmt.Sprintf("credit: offset %d + %d bytes overflows int64", e.Offset, e.N)
}

// Is reports whether target is ErrOverflow.
func (e *OverflowError) Is(target error) bool { return target == ErrOverflow }

// LimitError reports a limit from the peer that was refused: a negative
// limit, which can only come from an overflow or garbage.
type LimitError struct {
	Limit int64 // the refused limit
}

// Error names the refused limit.
func (e *LimitError) Error() string {
	return fmt.Sprintf("credit: invalid limit %d", e.Limit)
}

// Is reports whether target is ErrInvalidLimit or ErrOverflow.
func (e *LimitError) Is(target error) bool {
	return target == ErrInvalidLimit || target == ErrOverflow
}

// ResumeError reports a resume whose numbers cannot be right: the peer claims
// to have received more than was sent, a negative offset, or a limit below
// what it received.
type ResumeError struct {
	Received int64 // what the peer says it received
	Sent     int64 // what this side had sent
	Limit    int64 // the limit the peer announced
}

// Error names the inconsistent numbers.
func (e *ResumeError) Error() string {
	return fmt.Sprintf("credit: resume: peer received %d bytes of %d sent, limit %d",
		e.Received, e.Sent, e.Limit)
}

// Is reports whether target is ErrBadResume.
func (e *ResumeError) Is(target error) bool { return target == ErrBadResume }
