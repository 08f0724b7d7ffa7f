package replay

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBufferWrap(t *testing.T) {
	b := New(8)
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
	assert.Equal(t, "gh", string(x), "first segment runs to the end of the storage")
	assert.Equal(t, "ijkl", string(y), "second segment wraps to its start")
	assert.Equal(t, len(x), cap(x), "views are capped: appending to one cannot clobber the ring")
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
