package credit

import (
	"math"
	"testing"
)

// The credit benchmarks move no bytes, so they report ns/op and allocs/op
// only: go test -run=^$ -bench=. -count 3 ./credit

func BenchmarkSenderTake(b *testing.B) {
	b.ReportAllocs()
	s := NewSender(math.MaxInt64)
	for b.Loop() {
		s.Take(32 << 10)
	}
}

func BenchmarkSenderUpdateLimit(b *testing.B) {
	b.ReportAllocs()
	s := NewSender(0)
	var limit int64
	for b.Loop() {
		limit += 32 << 10
		if _, err := s.UpdateLimit(limit); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkReceiverReceive(b *testing.B) {
	b.ReportAllocs()
	r := NewReceiver(math.MaxInt64)
	for b.Loop() {
		if err := r.Receive(32 << 10); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReceiverCycle is one chunk's life on the receiving side:
// Receive, Consume, Grant.
func BenchmarkReceiverCycle(b *testing.B) {
	b.ReportAllocs()
	r := NewReceiver(1 << 20)
	for b.Loop() {
		if err := r.Receive(32 << 10); err != nil {
			b.Fatal(err)
		}
		r.Consume(32 << 10)
		r.Grant()
	}
}
