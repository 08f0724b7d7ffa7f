package credit

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// This file checks the real types against a naive shadow model: a stdin-like
// stream between a Sender and a Receiver, driven by an
// op sequence decoded from bytes. Random bytes make the property test, the
// fuzzer's bytes make FuzzCredit.

// ops decodes bytes into operations and their arguments; once the bytes run
// out every read is 0.
type ops []byte

func (o *ops) byte() byte {
	if len(*o) == 0 {
		return 0
	}
	c := (*o)[0]
	*o = (*o)[1:]
	return c
}

// num returns a non-negative number: usually small, sometimes up to 14 bits,
// sometimes anything up to math.MaxInt64, or just below it.
func (o *ops) num() int64 {
	c := o.byte()
	switch {
	case c < 128:
		return int64(c)
	case c < 192:
		return int64(c&63)<<8 | int64(o.byte())
	case c < 224:
		return math.MaxInt64 - int64(c&31)
	}
	var v uint64
	for range 8 {
		v = v<<8 | uint64(o.byte())
	}
	return int64(v >> 1)
}

// addSat adds non-negative a and b, saturating at math.MaxInt64.
func addSat(a, b int64) int64 {
	if s := uint64(a) + uint64(b); s <= math.MaxInt64 {
		return int64(s)
	}
	return math.MaxInt64
}

// eq fails t if got != want; the cheap comparison keeps the fuzzer fast and
// require only formats the failure.
func eq[T comparable](t testing.TB, what string, got, want T) {
	t.Helper()
	if got != want {
		require.Equal(t, want, got, what)
	}
}

// creditModel is the shadow: plain counters, updated by the protocol's rules
// as stated in the issue rather than by the code under test.
type creditModel struct {
	window                        int64
	sent, senderLimit             int64   // what the sending side believes
	received, consumed, announced int64   // what the receiving side knows
	grants                        []int64 // limits announced, not yet delivered
}

func runCredit(t testing.TB, o ops) {
	m := creditModel{window: max(1, o.num())}
	m.senderLimit, m.announced = m.window, m.window
	s, r := NewSender(m.window), NewReceiver(m.window)

	for len(o) > 0 {
		switch op := o.byte() % 9; op {
		case 0: // the writer takes credit
			n := o.num()
			want := min(n, m.senderLimit-m.sent)
			eq(t, "Take", s.Take(n), want)
			m.sent += want
		case 1: // sent bytes arrive
			n := min(o.num(), m.sent-m.received)
			require.NoError(t, r.Receive(n))
			m.received += n
		case 2: // the reader consumes
			n := min(o.num(), m.received-m.consumed)
			r.Consume(n)
			m.consumed += n
		case 3: // the receiver considers a grant
			next, quarter := addSat(m.consumed, m.window), max(m.window/4, 1)
			wantOK := next > m.announced && (next-m.announced >= quarter ||
				m.consumed == m.received && m.announced-m.received < quarter)
			eq(t, "Due", r.Due(), wantOK)
			limit, ok := r.Grant()
			eq(t, "Grant ok", ok, wantOK)
			eq(t, "Due after Grant", r.Due(), false)
			if wantOK {
				m.announced = next
				m.grants = append(m.grants, next)
			}
			eq(t, "Grant limit", limit, m.announced)
			if m.consumed == m.received && m.announced-m.received < quarter {
				eq(t, "a starving peer has everything", m.announced, next)
			}
		case 4: // a grant reaches the sender, in any order, maybe again later
			if len(m.grants) == 0 {
				continue
			}
			c := o.byte()
			i := int(c) % len(m.grants)
			g := m.grants[i]
			if c&128 != 0 {
				m.grants = append(m.grants[:i], m.grants[i+1:]...)
			}
			wantGrew := g > m.senderLimit
			grew, err := s.UpdateLimit(g)
			require.NoError(t, err)
			eq(t, "UpdateLimit grew", grew, wantGrew)
			m.senderLimit = max(m.senderLimit, g)
		case 5: // a hostile peer sends past the limit
			n := addSat(m.announced-m.received, addSat(o.num(), 1))
			if n <= m.announced-m.received { // limit == math.MaxInt64: no overrun fits
				continue
			}
			err := r.Receive(n)
			if uint64(m.received)+uint64(n) > math.MaxInt64 {
				var e *OverflowError
				require.ErrorAs(t, err, &e)
				eq(t, "overflow", *e, OverflowError{Offset: m.received, N: n})
				require.ErrorIs(t, err, ErrOverflow)
			} else {
				var e *OverrunError
				require.ErrorAs(t, err, &e)
				eq(t, "overrun", *e, OverrunError{Received: m.received + n, Allowed: m.announced})
				require.ErrorIs(t, err, ErrOverrun)
			}
		case 6: // a hostile peer announces a negative limit
			l := -1 - o.num()
			grew, err := s.UpdateLimit(l)
			require.False(t, grew)
			var e *LimitError
			require.ErrorAs(t, err, &e)
			eq(t, "LimitError", *e, LimitError{Limit: l})
		case 7: // reconnect: bytes and grants in flight are lost
			require.NoError(t, s.Resume(m.received, m.announced))
			m.sent, m.senderLimit, m.grants = m.received, m.announced, m.grants[:0]
		case 8: // a hostile peer claims to have received more than was sent
			claim := addSat(m.sent, addSat(o.num(), 1))
			if claim == m.sent { // sent == math.MaxInt64: nothing is more
				continue
			}
			var e *ResumeError
			require.ErrorAs(t, s.Resume(claim, math.MaxInt64), &e)
			eq(t, "ResumeError", *e, ResumeError{Received: claim, Sent: m.sent, Limit: math.MaxInt64})
		}

		eq(t, "Sent", s.Sent(), m.sent)
		eq(t, "Limit", s.Limit(), m.senderLimit)
		eq(t, "Available", s.Available(), m.senderLimit-m.sent)
		eq(t, "Received", r.Received(), m.received)
		eq(t, "Consumed", r.Consumed(), m.consumed)
		eq(t, "Receiver.Limit", r.Limit(), m.announced)
		eq(t, "Window()", r.Window(), m.window)
		// The protocol's promises: an honest sender never overruns, and the
		// receiver never lets more than one window be outstanding.
		require.True(t, m.sent <= m.senderLimit && m.senderLimit <= m.announced)
		require.True(t, m.consumed <= m.received && m.received <= m.announced)
		require.LessOrEqual(t, m.announced, addSat(m.consumed, m.window))
	}
}

func TestCreditProperty(t *testing.T) {
	for seed := range uint64(500) {
		rng := rand.New(rand.NewPCG(seed, 1))
		data := make([]byte, 1+rng.IntN(2000))
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		// A third of the runs use a small window, where batching and
		// stalls are most likely to show.
		if seed%3 == 0 {
			data[0] = byte(1 + rng.IntN(16))
		}
		runCredit(t, data)
		if t.Failed() {
			t.Fatalf("seed %d", seed)
		}
	}
}

// TestCreditNoStall: a writer with data always eventually gets credit
// when the reader consumes everything. Each seed runs a random schedule
// (partial writes, arrivals, reads, grant decisions and deliveries in any
// interleaving, windows from 1 byte to 64 KiB); every so often the
// schedule lets the system settle: bytes in flight arrive, the reader
// consumes them and the receiver, as the real ones do after a read,
// considers a grant, which is delivered. A settle that moves no byte while
// the writer still has data is a stall; the writer must finish.
func TestCreditNoStall(t *testing.T) {
	for seed := range uint64(2000) {
		rng := rand.New(rand.NewPCG(seed, 2))
		window := int64(1 + rng.IntN(64))
		if seed%2 == 0 {
			window = int64(1 + rng.IntN(64<<10))
		}
		total := int64(rng.IntN(int(40 * window)))
		s, r := NewSender(window), NewReceiver(window)
		var grants []int64
		settle := func() {
			require.NoError(t, r.Receive(s.Sent()-r.Received()))
			r.Consume(r.Received() - r.Consumed())
			if l, ok := r.Grant(); ok {
				grants = append(grants, l)
			}
			for _, g := range grants {
				_, err := s.UpdateLimit(g)
				require.NoError(t, err)
			}
			grants = grants[:0]
		}
		for step := 0; s.Sent() < total; step++ {
			switch rng.IntN(6) {
			case 0, 1: // the writer sends what credit allows of a random chunk
				s.Take(min(total-s.Sent(), int64(1+rng.IntN(int(window)*2))))
			case 2: // some bytes in flight arrive
				require.NoError(t, r.Receive(rng.Int64N(s.Sent()-r.Received()+1)))
			case 3: // the reader consumes some, and the receiver considers a grant
				r.Consume(rng.Int64N(r.Received() - r.Consumed() + 1))
				if l, ok := r.Grant(); ok {
					grants = append(grants, l)
				}
			case 4: // one grant in flight arrives
				if len(grants) > 0 {
					i := rng.IntN(len(grants))
					_, err := s.UpdateLimit(grants[i])
					require.NoError(t, err)
					grants = append(grants[:i], grants[i+1:]...)
				}
			case 5: // the system settles; the writer must then be able to send
				settle()
				if s.Available() == 0 {
					t.Fatalf("seed %d, window %d: stalled at %d of %d sent, limit %d, announced %d",
						seed, window, s.Sent(), total, s.Limit(), r.Limit())
				}
			}
			if step > 1000*int(total+1) {
				t.Fatalf("seed %d: no progress", seed)
			}
		}
		settle()
		require.Equal(t, total, r.Consumed())
	}
}

func FuzzCredit(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{4, 0, 100, 1, 100, 2, 100, 3, 4, 0, 0, 100})
	f.Add([]byte{10, 0, 10, 1, 5, 7, 0, 10, 1, 10, 2, 10, 3, 4, 128, 0, 10})
	f.Add([]byte{200, 0, 250, 1, 250, 2, 250, 3, 5, 0, 8, 0})
	f.Add([]byte{1, 5, 200, 6, 7, 8, 3, 0, 1, 1, 1, 2, 1, 3, 4, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		runCredit(t, data)
	})
}
