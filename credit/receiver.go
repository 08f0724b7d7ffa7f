package credit

import "math"

// Receiver accounts for the receiving side of a stream: what arrived, what
// was handed on to the consumer, and the limit announced to the peer. The
// peer may have at most one window of bytes received but not yet consumed.
// Create one with NewReceiver. Not safe for concurrent use.
type Receiver struct {
	window   int64 // bytes the peer may send beyond what was consumed
	received int64 // offset after the last byte that arrived
	consumed int64 // offset after the last byte handed on; consumed <= received
	limit    int64 // last limit announced to the peer; received <= limit
}

// NewReceiver returns a Receiver whose initial limit is window. It panics
// unless window > 0.
func NewReceiver(window int64) *Receiver {
	if window <= 0 {
		panic("credit: NewReceiver needs a positive window")
	}
	return &Receiver{window: window, limit: window}
}

// Received returns the offset after the last byte that arrived.
func (r *Receiver) Received() int64 { return r.received }

// Consumed returns the offset after the last byte handed on to the consumer.
func (r *Receiver) Consumed() int64 { return r.consumed }

// Limit returns the last limit announced to the peer (initially Window()).
func (r *Receiver) Limit() int64 { return r.limit }

// Window returns the window the Receiver was created with.
func (r *Receiver) Window() int64 { return r.window }

// Receive counts n bytes arriving from the peer. If they would go past the
// announced limit it returns an *OverrunError (or, if the offset would not
// even fit in an int64, an *OverflowError) and does not count them: either
// way the peer broke the protocol. It panics if n is negative.
func (r *Receiver) Receive(n int64) error {
	if n < 0 {
		panic("credit: Receive with negative n")
	}
	if n > r.limit-r.received {
		if n > math.MaxInt64-r.received {
			return &OverflowError{Offset: r.received, N: n}
		}
		return &OverrunError{Received: r.received + n, Allowed: r.limit}
	}
	r.received += n
	return nil
}

// Consume counts n received bytes handed on to the consumer. It panics if n
// is negative or more than Received() - Consumed().
func (r *Receiver) Consume(n int64) {
	if n < 0 || n > r.received-r.consumed {
		panic("credit: Consume of bytes not received")
	}
	r.consumed += n
}

// Grant decides whether to announce more credit, so that announcements are
// batched rather than sent after every read. The next limit is
// Consumed() + Window() (capped at math.MaxInt64). It is worth announcing
// when it exceeds the announced limit by at least a quarter window
// (Window()/4, at least 1), or when everything received has been consumed
// and the peer's remaining credit (Limit() - Received()) has fallen below a
// quarter window: then the peer may be waiting for exactly that remainder
// and must not stall. Short of the cap the second rule is implied by the
// first (the growth is then over three quarters of a window), so a reader
// that keeps up with a peer that sends little announces nothing until a
// quarter window has passed.
//
// When ok is true the caller must announce limit; Grant has recorded it as
// announced. When ok is false, limit is the limit already announced.
func (r *Receiver) Grant() (limit int64, ok bool) {
	next, due := r.due()
	if !due {
		return r.limit, false
	}
	r.limit = next
	return next, true
}

// Due reports whether Grant would announce more credit now, without
// recording anything.
func (r *Receiver) Due() bool {
	_, due := r.due()
	return due
}

func (r *Receiver) due() (next int64, ok bool) {
	next = r.window + min(r.consumed, math.MaxInt64-r.window)
	grow := next - r.limit
	quarter := max(r.window/4, 1)
	starving := r.consumed == r.received && r.limit-r.received < quarter
	return next, grow > 0 && (grow >= quarter || starving)
}
