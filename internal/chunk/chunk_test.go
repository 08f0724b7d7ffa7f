package chunk

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestGetPut(t *testing.T) {
	a, b := Get(), Get()
	assert.NotSame(t, a, b, "two chunks held at once are distinct")
	assert.Len(t, a[:], Size)
	Put(a)
	Put(b)
	assert.Zero(t, testing.AllocsPerRun(100, func() { Put(Get()) }), "a chunk given back is reused")
}
