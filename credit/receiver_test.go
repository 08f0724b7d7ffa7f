package credit

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReceiverGrantBatches(t *testing.T) {
	r := NewReceiver(100)
	assert.Equal(t, int64(100), r.Limit())
	assert.Equal(t, int64(100), r.Window())
	_, ok := r.Grant()
	assert.False(t, ok, "nothing consumed, nothing to grant")

	require.NoError(t, r.Receive(60))
	r.Consume(24)
	l, ok := r.Grant()
	assert.False(t, ok, "24 < window/4 while bytes are still buffered")
	assert.Equal(t, int64(100), l)

	r.Consume(1)
	l, ok = r.Grant()
	assert.True(t, ok, "25 == window/4")
	assert.Equal(t, int64(125), l)
	assert.Equal(t, int64(125), r.Limit())
	_, ok = r.Grant()
	assert.False(t, ok, "already announced")

	r.Consume(35)
	l, ok = r.Grant()
	assert.True(t, ok)
	assert.Equal(t, int64(160), l)
}

// TestReceiverGrantQuiet: a reader that keeps up with a peer sending
// little announces nothing until a quarter window has been consumed; the
// peer still has most of its window.
func TestReceiverGrantQuiet(t *testing.T) {
	r := NewReceiver(100)
	for range 24 {
		require.NoError(t, r.Receive(1))
		r.Consume(1)
		_, ok := r.Grant()
		assert.False(t, ok)
	}
	require.NoError(t, r.Receive(1))
	r.Consume(1)
	l, ok := r.Grant()
	assert.True(t, ok)
	assert.Equal(t, int64(125), l)
}

// TestReceiverGrantStarving: once everything received is consumed and the
// peer has less than a quarter window left, even a small increase (here
// cut short by the math.MaxInt64 cap) is announced, so that a sender
// waiting for it cannot stall.
func TestReceiverGrantStarving(t *testing.T) {
	r := &Receiver{window: 100, limit: math.MaxInt64 - 10, received: math.MaxInt64 - 15, consumed: math.MaxInt64 - 16}
	_, ok := r.Grant()
	assert.False(t, ok, "a byte is still buffered")
	r.Consume(1)
	l, ok := r.Grant()
	assert.True(t, ok, "growth 10 < 25, but the peer has only 5 left")
	assert.Equal(t, int64(math.MaxInt64), l)
}

func TestReceiverTinyWindow(t *testing.T) {
	r := NewReceiver(1)
	for i := range int64(5) {
		require.NoError(t, r.Receive(1))
		require.ErrorIs(t, r.Receive(1), ErrOverrun)
		r.Consume(1)
		l, ok := r.Grant()
		require.True(t, ok)
		require.Equal(t, i+2, l)
	}
}

func TestReceiverOverrunCountsNothing(t *testing.T) {
	r := NewReceiver(10)
	require.NoError(t, r.Receive(4))
	require.ErrorIs(t, r.Receive(7), ErrOverrun)
	assert.Equal(t, int64(4), r.Received())
	require.NoError(t, r.Receive(6), "exactly up to the limit is fine")
}

func TestReceiverGrantSaturates(t *testing.T) {
	r := NewReceiver(math.MaxInt64)
	require.NoError(t, r.Receive(math.MaxInt64))
	r.Consume(math.MaxInt64)
	l, ok := r.Grant()
	assert.False(t, ok, "the limit cannot pass math.MaxInt64")
	assert.Equal(t, int64(math.MaxInt64), l)

	r = NewReceiver(math.MaxInt64 / 2)
	require.NoError(t, r.Receive(math.MaxInt64/2))
	r.Consume(math.MaxInt64 / 2)
	l, ok = r.Grant()
	assert.True(t, ok)
	assert.Equal(t, int64(math.MaxInt64-1), l)
}
