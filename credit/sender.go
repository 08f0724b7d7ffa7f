package credit

// Sender accounts for the sending side of a stream: how far it has sent and
// how far the peer allows it to send. Create one with NewSender. Not safe for
// concurrent use: the caller locks.
type Sender struct {
	sent  int64 // offset after the last byte taken
	limit int64 // highest limit the peer has announced; sent <= limit
}

// NewSender returns a Sender that may send up to limit bytes. It panics if
// limit is negative.
func NewSender(limit int64) *Sender {
	if limit < 0 {
		panic("credit: NewSender with negative limit")
	}
	return &Sender{limit: limit}
}

// Sent returns the offset after the last byte taken.
func (s *Sender) Sent() int64 { return s.sent }

// Limit returns the offset the peer allows sending up to.
func (s *Sender) Limit() int64 { return s.limit }

// Available returns how many bytes may be taken now: Limit() - Sent().
func (s *Sender) Available() int64 { return s.limit - s.sent }

// UpdateLimit records a limit announced by the peer. Limits are absolute, so
// a duplicate or older one is harmless and ignored (grew is false, err nil).
// A negative limit is refused with a *LimitError and changes nothing.
func (s *Sender) UpdateLimit(limit int64) (grew bool, err error) {
	if limit < 0 {
		return false, &LimitError{Limit: limit}
	}
	if limit <= s.limit {
		return false, nil
	}
	s.limit = limit
	return true, nil
}

// Take takes min(n, Available()) bytes of credit and returns how many; it
// never goes past the limit. It panics if n is negative.
func (s *Sender) Take(n int64) int64 {
	if n < 0 {
		panic("credit: Take with negative n")
	}
	n = min(n, s.limit-s.sent)
	s.sent += n
	return n
}

// Reset sets both offsets, as when a client resumes: the server says how much
// it actually received (sent rewinds to that, the rest is sent again) and
// its current limit. It panics unless 0 <= sent <= limit; use Resume to
// check numbers that come from the peer.
func (s *Sender) Reset(sent, limit int64) {
	if sent < 0 || limit < sent {
		panic("credit: Reset needs 0 <= sent <= limit")
	}
	s.sent, s.limit = sent, limit
}

// Resume is Reset for numbers that come from the peer: it refuses with a
// *ResumeError, changing nothing, unless 0 <= received <= Sent() and
// received <= limit.
func (s *Sender) Resume(received, limit int64) error {
	if received < 0 || received > s.sent || limit < received {
		return &ResumeError{Received: received, Sent: s.sent, Limit: limit}
	}
	s.Reset(received, limit)
	return nil
}
