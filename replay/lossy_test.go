package replay

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRing(t *testing.T) {
	g := NewRing(4)
	assert.Equal(t, 4, g.Cap())
	n, err := g.Write([]byte("abc"))
	assert.NoError(t, err)
	assert.Equal(t, 3, n)
	assert.Equal(t, int64(0), g.Dropped())

	n, _ = g.Write([]byte("def"))
	assert.Equal(t, 3, n, "a full Ring still takes everything")
	assert.Equal(t, int64(2), g.Start())
	assert.Equal(t, int64(6), g.End())
	assert.Equal(t, int64(2), g.Dropped())

	a, b, from := g.Slice(0, 10)
	assert.Equal(t, int64(2), from, "from > off: two bytes were dropped")
	assert.Equal(t, "cdef", string(a)+string(b))
	assert.Equal(t, "cd", string(a))

	a, b, from = g.Slice(4, 1)
	assert.Equal(t, int64(4), from)
	assert.Equal(t, "e", string(a)+string(b))

	n, _ = g.Write([]byte("0123456789"))
	assert.Equal(t, 10, n)
	a, b, from = g.Slice(0, 10)
	assert.Equal(t, int64(12), from)
	assert.Equal(t, "6789", string(a)+string(b), "only the last capacity bytes are kept")
	assert.Equal(t, int64(12), g.Dropped())

	a, b, from = g.Slice(20, 10)
	assert.Equal(t, int64(20), from, "beyond End: nothing, and no drop reported")
	assert.Empty(t, a)
	assert.Empty(t, b)
}
