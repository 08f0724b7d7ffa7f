package replay

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/internal/chunk"
)

// This file checks Buffer and Ring against naive shadow models (a plain
// growing []byte of everything written, plain offsets), driven by op
// sequences decoded from bytes, as quic-go's FuzzFrameSorter does. Random
// bytes make the property tests, the fuzzer's bytes the fuzz targets.

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

// num returns a number below 1<<14, usually below 128.
func (o *ops) num() int {
	if c := o.byte(); c < 128 {
		return int(c)
	} else {
		return int(c&63)<<8 | int(o.byte())
	}
}

// fill returns n bytes from scratch, patterned by seed and position so that
// a misplaced byte shows.
func fill(scratch []byte, n int, seed byte) []byte {
	p := scratch[:n]
	for i := range p {
		p[i] = seed ^ byte(i*131) ^ byte(i>>8)
	}
	return p
}

// pick returns an offset relative to the held range [start, end]: inside it
// mostly, sometimes just before or after it.
func (o *ops) pick(start, end int64) int64 {
	switch c := o.byte(); c % 4 {
	case 0:
		return start - 1 - int64(c>>2)
	case 1:
		return end + 1 + int64(c>>2)
	default:
		return start + int64(o.num())%(end-start+1)
	}
}

// views checks that a, b are what Slice promises: capped, a before b, and
// together exactly want.
func views(t testing.TB, a, b, want []byte) {
	t.Helper()
	if cap(a) != len(a) || cap(b) != len(b) || (len(a) == 0 && len(b) > 0) ||
		len(a)+len(b) != len(want) || !bytes.Equal(a, want[:len(a)]) || !bytes.Equal(b, want[len(a):]) {
		require.Equal(t, want, append(a[:len(a):len(a)], b...), "views (len %d cap %d, len %d cap %d)",
			len(a), cap(a), len(b), cap(b))
		require.Fail(t, "views not capped or misordered")
	}
}

func eq[T comparable](t testing.TB, what string, got, want T) {
	t.Helper()
	if got != want {
		require.Equal(t, want, got, what)
	}
}

func runBuffer(t testing.TB, o ops) {
	capacity := 1 + o.num()%4096
	// The chunk size: mostly small, so that views cross chunks often;
	// sometimes the real one, with a capacity of up to three chunks.
	csize := 1 + int(o.byte()%64)
	if csize%8 == 0 {
		csize = chunk.Size
		capacity += o.num() * 6 // up to 3 chunks and a bit
	}
	b := newBuffer(capacity, csize)
	scratch := make([]byte, 3*capacity)
	var (
		data         []byte // every byte ever appended: data[off] is offset off
		start        int64
		eof          = int64(-1)
		end          = func() int64 { return int64(len(data)) }
		errGap       *GapError
		errBeyond    *BeyondError
		errAck       *AckError
		errAckWanted AckError
	)
	for len(o) > 0 {
		switch o.byte() % 6 {
		case 0: // append, or reserve, fill and commit
			if o.byte()&1 == 1 {
				m, seed := o.num()%(len(scratch)+1), o.byte()
				if eof >= 0 {
					require.Panics(t, func() { b.Reserve(m, nil) })
					continue
				}
				iov := b.Reserve(m, nil)
				want, got := min(m, capacity-int(end()-start)), 0
				for _, v := range iov {
					got += len(v)
				}
				eq(t, "Reserve", got, want)
				if o.byte()&1 == 1 {
					// An ack while the producer fills the reservation.
					off := start + int64(o.num())%(end()-start+1)
					require.NoError(t, b.Ack(off))
					start = off
				}
				p := fill(scratch, o.num()%(want+1), seed)
				rest := p
				for _, v := range iov {
					rest = rest[copy(v, rest):]
				}
				b.Commit(len(p))
				data = append(data, p...)
				break
			}
			p := fill(scratch, o.num()%(len(scratch)+1), o.byte())
			if eof >= 0 {
				require.Panics(t, func() { b.Append(p) })
				continue
			}
			want := min(len(p), capacity-int(end()-start))
			eq(t, "Append", b.Append(p), want)
			data = append(data, p[:want]...)
		case 1: // ack
			off := o.pick(start, end())
			err := b.Ack(off)
			switch {
			case off < start:
				errAckWanted = AckError{Offset: off, Start: start, End: end(), Err: ErrAckBackwards}
			case off > end():
				errAckWanted = AckError{Offset: off, Start: start, End: end(), Err: ErrAckBeyond}
			default:
				require.NoError(t, err)
				start = off
				continue
			}
			require.ErrorAs(t, err, &errAck)
			eq(t, "AckError", *errAck, errAckWanted)
		case 2, 3: // read from an offset, by view or by copy
			off, n := o.pick(start, end()), o.num()%(2*capacity+1)
			var x, y []byte
			var err error
			// A Slice stops at the end of the chunk after off's; a
			// CopyAt copies all it can.
			stop := int64(n)
			if o.byte()&1 == 0 {
				x, y, err = b.Slice(off, n)
				stop = min(stop, 2*int64(csize)-off%int64(csize))
			} else {
				var got int
				got, err = b.CopyAt(scratch[:n], off)
				x = scratch[:got:got]
			}
			switch {
			case off < start:
				require.ErrorAs(t, err, &errGap)
				eq(t, "GapError", *errGap, GapError{Requested: off, Oldest: start})
			case off > end():
				require.ErrorAs(t, err, &errBeyond)
				eq(t, "BeyondError", *errBeyond, BeyondError{Requested: off, End: end()})
			default:
				require.NoError(t, err)
				views(t, x, y, data[off:off+min(stop, end()-off)])
			}
		case 4: // end of stream
			b.CloseEOF()
			eof = end()
		case 5: // where is the end of stream?
			off := o.pick(start, end())
			eq(t, "AtEOF", b.AtEOF(off), eof >= 0 && off == eof)
		}
		eq(t, "Start", b.Start(), start)
		eq(t, "End", b.End(), end())
		eq(t, "Len", b.Len(), int(end()-start))
		eq(t, "Room", b.Room(), capacity-int(end()-start))
		eq(t, "Cap", b.Cap(), capacity)
		// Storage tracks what is held: whole chunks from the one of
		// Start to the one of End, none when empty.
		held := 0
		if start < end() {
			held = int((end()-1)/int64(csize)-start/int64(csize)+1) * csize
		}
		eq(t, "Allocated", b.Allocated(), held)
		off, ok := b.EOF()
		eq(t, "EOF ok", ok, eof >= 0)
		if ok {
			eq(t, "EOF", off, eof)
		}
	}
}

func runRing(t testing.TB, o ops) {
	capacity := 1 + o.num()%4096
	g := NewRing(capacity)
	scratch := make([]byte, 3*capacity)
	var data []byte // every byte ever written: data[off] is offset off
	for len(o) > 0 {
		end := int64(len(data))
		start := max(0, end-int64(capacity))
		switch o.byte() % 2 {
		case 0:
			p := fill(scratch, o.num()%(len(scratch)+1), o.byte())
			n, err := g.Write(p)
			require.NoError(t, err)
			eq(t, "Write", n, len(p))
			data = append(data, p...)
		case 1:
			off, n := o.pick(start, end), o.num()%(2*capacity+1)
			a, b, from := g.Slice(off, n)
			wantFrom := max(off, start)
			eq(t, "from", from, wantFrom)
			var want []byte
			if wantFrom < end {
				want = data[wantFrom : wantFrom+min(int64(n), end-wantFrom)]
			}
			views(t, a, b, want)
		}
		end = int64(len(data))
		start = max(0, end-int64(capacity))
		eq(t, "Start", g.Start(), start)
		eq(t, "End", g.End(), end)
		eq(t, "Dropped", g.Dropped(), start)
		eq(t, "Cap", g.Cap(), capacity)
		if a := g.Allocated(); a > capacity || (end > 0) != (a > 0) || a < int(end-start) {
			require.Failf(t, "Allocated", "%d bytes of storage for %d held, capacity %d", a, end-start, capacity)
		}
	}
}

// randomOps returns random op bytes; capacity, the first number, is small
// in most runs so that the storage wraps often.
func randomOps(seed uint64) ops {
	rng := rand.New(rand.NewPCG(seed, 2))
	o := make(ops, 1+rng.IntN(3000))
	for i := range o {
		o[i] = byte(rng.Uint32())
	}
	if seed%4 != 0 {
		o[0] = byte(1 + rng.IntN(64))
	}
	return o
}

func TestBufferProperty(t *testing.T) {
	for seed := range uint64(500) {
		runBuffer(t, randomOps(seed))
		if t.Failed() {
			t.Fatalf("seed %d", seed)
		}
	}
}

func TestRingProperty(t *testing.T) {
	for seed := range uint64(500) {
		runRing(t, randomOps(seed))
		if t.Failed() {
			t.Fatalf("seed %d", seed)
		}
	}
}

func FuzzBuffer(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{8, 0, 6, 'a', 1, 2, 0, 4, 'b', 2, 2, 10, 0, 3, 2, 10, 1})
	f.Add([]byte{3, 0, 9, 1, 1, 6, 1, 1, 2, 2, 1, 5, 0, 4, 5, 2, 0, 1})
	f.Add([]byte{129, 0, 0, 200, 7, 2, 2, 150, 0, 1, 1, 9, 0, 0, 2, 4, 0, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		runBuffer(t, data)
	})
}

func FuzzRing(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{4, 0, 3, 'a', 0, 3, 'd', 1, 0, 10})
	f.Add([]byte{5, 0, 17, 9, 1, 2, 3, 4, 1, 1, 6, 0, 4, 1, 1, 0, 1, 5})
	f.Fuzz(func(t *testing.T, data []byte) {
		runRing(t, data)
	})
}
