package bench

import "math"

// RaiseFDLimit has nothing to raise on Windows, whose handles have no
// per-process limit of this kind: it returns the largest limit.
func RaiseFDLimit(need uint64) (limit uint64, err error) { return math.MaxUint64, nil }
