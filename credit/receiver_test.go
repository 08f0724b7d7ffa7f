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

// TestReceiverGrantRemainder: once everything received is consumed, even a
// small increase is announced, so a sender waiting for it cannot stall.
func TestReceiverGrantRemainder(t *testing.T) {
	r := NewReceiver(100)
	require.NoError(t, r.Receive(3))
	r.Consume(2)
	_, ok := r.Grant()
	assert.False(t, ok)
	r.Consume(1)
	l, ok := r.Grant()
	assert.True(t, ok)
	assert.Equal(t, int64(103), l)
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
