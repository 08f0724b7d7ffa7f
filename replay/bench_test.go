package replay

import "testing"

// go test -run=^$ -bench=. -count 3 ./replay
//
// BenchmarkBufferCycle32KiB against BenchmarkCopy32KiB is the cost of the
// replay buffer over the one copy it cannot avoid.

const cycle = 32 << 10

var sink byte

// BenchmarkBufferCycle32KiB is one chunk's life in a stdout window: Append
// 32 KiB from the pipe, Slice it to send, Ack it.
func BenchmarkBufferCycle32KiB(b *testing.B) {
	for _, capacity := range []struct {
		name string
		n    int
	}{{"window=64KiB", 64 << 10}, {"window=1MiB", 1 << 20}} {
		b.Run(capacity.name, func(b *testing.B) {
			buf := New(capacity.n)
			src := make([]byte, cycle)
			b.ReportAllocs()
			b.SetBytes(cycle)
			for b.Loop() {
				off := buf.End()
				if buf.Append(src) != cycle {
					b.Fatal("short append")
				}
				x, y, err := buf.Slice(off, cycle)
				if err != nil || len(x)+len(y) != cycle {
					b.Fatal(err)
				}
				sink ^= x[0]
				if err := buf.Ack(buf.End()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCopy32KiB is the baseline: a plain copy of 32 KiB.
func BenchmarkCopy32KiB(b *testing.B) {
	dst, src := make([]byte, cycle), make([]byte, cycle)
	b.ReportAllocs()
	b.SetBytes(cycle)
	for b.Loop() {
		copy(dst, src)
		sink ^= dst[0]
	}
}

// BenchmarkRingWrite32KiB is stderr's path: a lossy write into a 64 KiB ring.
func BenchmarkRingWrite32KiB(b *testing.B) {
	g := NewRing(64 << 10)
	src := make([]byte, cycle)
	b.ReportAllocs()
	b.SetBytes(cycle)
	for b.Loop() {
		if _, err := g.Write(src); err != nil {
			b.Fatal(err)
		}
	}
}
