// Package chunk is the pool of fixed-size byte chunks that procwire's
// per-process buffers (the stdout replay buffer, the stdin queue) take
// memory from as bytes arrive and give back as they are acknowledged or
// consumed, so that a window is a ceiling, never an allocation.
//
// Get and Put are safe for concurrent use. A chunk given back must not be
// used again by its former holder.
package chunk

import "sync"

// Size is the size of every chunk: large enough that a pipe read or a
// frame is one or two chunks, small enough that a process holding a few
// bytes holds little.
const Size = 32 << 10

var pool = sync.Pool{New: func() any { return new([Size]byte) }}

// Get takes a chunk from the pool, or a new one. Its bytes are whatever
// its last holder left.
func Get() *[Size]byte {
	return pool.Get().(*[Size]byte)
}

// Put gives c back to the pool.
func Put(c *[Size]byte) {
	pool.Put(c)
}
