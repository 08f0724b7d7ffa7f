package replay

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/internal/chunk"
)

func TestBufferWrap(t *testing.T) {
	b := newBuffer(8, 8) // chunks of 8 bytes: offsets 8..15 are the second
	assert.Equal(t, 8, b.Cap())
	assert.Equal(t, 6, b.Append([]byte("abcdef")))
	assert.Equal(t, 2, b.Append([]byte("ghij")), "takes only Room()")
	assert.Equal(t, 0, b.Room())
	assert.Equal(t, 0, b.Append([]byte("x")))
	require.NoError(t, b.Ack(5))
	assert.Equal(t, 5, b.Room())
	assert.Equal(t, 3, b.Len())
	assert.Equal(t, 4, b.Append([]byte("ijkl")))
	assert.Equal(t, int64(5), b.Start())
	assert.Equal(t, int64(12), b.End())

	x, y, err := b.Slice(6, 100)
	require.NoError(t, err)
	assert.Equal(t, "gh", string(x), "first segment runs to the end of its chunk")
	assert.Equal(t, "ijkl", string(y), "second segment is the next chunk")
	assert.Equal(t, len(x), cap(x), "views are capped: appending to one cannot clobber the storage")
	assert.Equal(t, len(y), cap(y))

	x, y, err = b.Slice(5, 2)
	require.NoError(t, err)
	assert.Equal(t, "fg", string(x))
	assert.Empty(t, y)

	p := make([]byte, 5)
	n, err := b.CopyAt(p, 7)
	require.NoError(t, err)
	assert.Equal(t, "hijkl", string(p[:n]))

	x, y, err = b.Slice(b.End(), 10)
	require.NoError(t, err, "reading at End is fine: nothing yet")
	assert.Empty(t, x)
	assert.Empty(t, y)
}

func TestBufferEOF(t *testing.T) {
	b := New(4)
	_, ok := b.EOF()
	assert.False(t, ok)
	assert.False(t, b.AtEOF(0))
	b.Append([]byte("ab"))
	b.CloseEOF()
	b.CloseEOF()
	off, ok := b.EOF()
	assert.True(t, ok)
	assert.Equal(t, int64(2), off)
	assert.True(t, b.AtEOF(2))
	assert.False(t, b.AtEOF(1))
	assert.Panics(t, func() { b.Append([]byte("c")) })
	assert.Panics(t, func() { b.Append(nil) })
	require.NoError(t, b.Ack(2), "acknowledging the EOF offset is fine")
	assert.Equal(t, 0, b.Len())
	assert.True(t, b.AtEOF(b.Start()), "the end of stream replays after all data is acknowledged")
}

func TestBufferMisusePanics(t *testing.T) {
	assert.Panics(t, func() { New(0) })
	assert.Panics(t, func() { _, _, _ = New(1).Slice(0, -1) })
	assert.Panics(t, func() { NewRing(0) })
	assert.Panics(t, func() { NewRing(1).Slice(0, -1) })
}

func TestZeroAllocs(t *testing.T) {
	b := New(100)
	g := NewRing(100)
	p := make([]byte, 37)
	allocs := testing.AllocsPerRun(100, func() {
		off := b.End()
		b.Append(p)
		x, y, err := b.Slice(off, len(p))
		if err != nil || len(x)+len(y) != len(p) {
			t.Fatal(err)
		}
		if _, err := b.CopyAt(p, off); err != nil {
			t.Fatal(err)
		}
		if err := b.Ack(b.End()); err != nil {
			t.Fatal(err)
		}
		_, _ = g.Write(p)
		g.Slice(0, 50)
	})
	assert.Zero(t, allocs)
}

func TestBufferStorageTracksHeldBytes(t *testing.T) {
	b := New(1 << 20)
	assert.Zero(t, b.Allocated(), "a new Buffer holds no storage whatever its capacity")
	p := make([]byte, 100<<10)
	for i := range p {
		p[i] = byte(i * 7)
	}
	require.Equal(t, len(p), b.Append(p))
	assert.Equal(t, 4*chunk.Size, b.Allocated(), "100 KiB take four 32 KiB chunks")

	x, y, err := b.Slice(10, len(p))
	require.NoError(t, err)
	assert.Equal(t, p[10:chunk.Size], x, "a view ends at its chunk")
	assert.Equal(t, p[chunk.Size:2*chunk.Size], y, "the second view is the next chunk")
	got := make([]byte, len(p))
	n, err := b.CopyAt(got, 0)
	require.NoError(t, err)
	assert.Equal(t, p, got[:n], "CopyAt copies across every chunk")

	require.NoError(t, b.Ack(2*chunk.Size+1))
	assert.Equal(t, 2*chunk.Size, b.Allocated(), "chunks wholly acknowledged are given back")
	require.NoError(t, b.Ack(b.End()))
	assert.Zero(t, b.Allocated(), "an empty Buffer gives back its last chunk too")
	require.Equal(t, 3, b.Append([]byte("abc")))
	x, _, err = b.Slice(b.End()-3, 10)
	require.NoError(t, err)
	assert.Equal(t, "abc", string(x))
	assert.Equal(t, chunk.Size, b.Allocated())
}

func TestRingStorageGrows(t *testing.T) {
	g := NewRing(64 << 10)
	assert.Zero(t, g.Allocated())
	_, _ = g.Write([]byte("hello"))
	assert.Equal(t, minRing, g.Allocated(), "a few bytes take the smallest storage")
	_, _ = g.Write(make([]byte, 10<<10))
	assert.Equal(t, 5+10<<10, g.Allocated(), "at least doubled, and enough for what it holds")
	a, b, from := g.Slice(0, 5)
	assert.Equal(t, int64(0), from, "growing drops nothing")
	assert.Equal(t, "hello", string(a)+string(b))
	_, _ = g.Write(make([]byte, 1<<20))
	assert.Equal(t, 64<<10, g.Allocated(), "never beyond the capacity")
}
