package replay

// Ring holds the most recent bytes of a lossy stream (stderr), at most its
// capacity of them. Write always accepts everything and overwrites the oldest
// bytes when full, so the writer never blocks. Not safe for concurrent use.
//
// Its storage grows as bytes arrive, at least doubling, from minRing bytes to the
// capacity, so that a process that writes little to stderr holds little.
// Nothing acknowledges stderr: once grown, the storage stays until the Ring
// is dropped.
type Ring struct {
	capacity int
	r        ring  // storage, len(r) <= capacity; the bytes held fit in it
	start    int64 // oldest offset held
	end      int64 // offset after the last written byte
}

// minRing is the first storage a Ring allocates.
const minRing = 4 << 10

// NewRing returns an empty Ring holding at most capacity bytes. It
// allocates no storage until bytes arrive. It panics unless capacity > 0.
func NewRing(capacity int) *Ring {
	if capacity <= 0 {
		panic("replay: NewRing needs a positive capacity")
	}
	return &Ring{capacity: capacity}
}

// Cap returns the capacity.
func (g *Ring) Cap() int { return g.capacity }

// Allocated returns the bytes of storage the Ring holds now.
func (g *Ring) Allocated() int { return len(g.r) }

// grow makes the storage hold need bytes (at most the capacity), moving the
// bytes held.
func (g *Ring) grow(need int) {
	r := make(ring, min(g.capacity, max(need, 2*len(g.r), minRing)))
	if held := int(g.end - g.start); held > 0 {
		a, b := g.r.view(g.start, held)
		r.put(g.start, a)
		r.put(g.start+int64(len(a)), b)
	}
	g.r = r
}

// Write appends p, dropping the oldest bytes if the Ring is full; if p is
// longer than the capacity only its last capacity bytes are kept. It always
// returns len(p), nil.
func (g *Ring) Write(p []byte) (int, error) {
	n := len(p)
	if n == 0 {
		return 0, nil
	}
	if need := int(min(g.end-g.start+int64(n), int64(g.capacity))); need > len(g.r) {
		g.grow(need)
	}
	// While the storage is below the capacity, it holds every byte
	// written: nothing is dropped before the Ring is full.
	end := g.end + int64(n)
	if n > len(g.r) {
		p = p[n-len(g.r):]
	}
	g.r.put(end-int64(len(p)), p)
	g.end = end
	g.start = max(g.start, end-int64(len(g.r)))
	return n, nil
}

// Start returns the oldest offset held.
func (g *Ring) Start() int64 { return g.start }

// End returns the offset after the last written byte.
func (g *Ring) End() int64 { return g.end }

// Dropped returns how many bytes were overwritten or never held. A Ring
// frees bytes only by overwriting them, so this equals Start().
func (g *Ring) Dropped() int64 { return g.start }

// Slice returns the held bytes from max(off, Start()), at most max of them,
// without copying, as at most two segments. from is the offset where the
// bytes begin: from > off tells the reader that from-off bytes were dropped.
// An off beyond End() gives no bytes and from == off. The views are valid
// until the next Write. It panics if max is negative.
func (g *Ring) Slice(off int64, max int) (a, b []byte, from int64) {
	if max < 0 {
		panic("replay: Slice with negative max")
	}
	from = off
	if from < g.start {
		from = g.start
	}
	if from >= g.end {
		return nil, nil, from
	}
	a, b = g.r.view(from, int(min(int64(max), g.end-from)))
	return a, b, from
}
