package replay

// ring is fixed storage addressed by absolute offset modulo its length. It
// knows nothing of which offsets are valid: Buffer and Ring keep that.
type ring []byte

// index returns where offset off lives. off must not be negative.
func (r ring) index(off int64) int { return int(off % int64(len(r))) }

// put copies p, which must fit in r, to the storage of offsets off onward.
func (r ring) put(off int64, p []byte) {
	n := copy(r[r.index(off):], p)
	copy(r, p[n:])
}

// view returns the storage of the n offsets from off as at most two
// segments, capped so that appending to one cannot overwrite the ring.
func (r ring) view(off int64, n int) (a, b []byte) {
	if n == 0 {
		return nil, nil
	}
	i := r.index(off)
	if j := i + n; j <= len(r) {
		return r[i:j:j], nil
	}
	return r[i:len(r):len(r)], r[: n-(len(r)-i) : n-(len(r)-i)]
}
