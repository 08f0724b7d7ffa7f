package credit

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSender(t *testing.T) {
	s := NewSender(10)
	assert.Equal(t, int64(10), s.Available())
	assert.Equal(t, int64(4), s.Take(4))
	assert.Equal(t, int64(6), s.Take(100), "Take stops at the limit")
	assert.Equal(t, int64(0), s.Take(1))
	assert.Equal(t, int64(10), s.Sent())

	grew, err := s.UpdateLimit(15)
	require.NoError(t, err)
	assert.True(t, grew)
	for _, stale := range []int64{15, 12, 0} {
		grew, err = s.UpdateLimit(stale)
		require.NoError(t, err, "duplicate or older limit %d", stale)
		assert.False(t, grew)
		assert.Equal(t, int64(15), s.Limit())
	}
	assert.Equal(t, int64(5), s.Available())

	s.Reset(3, 20)
	assert.Equal(t, int64(3), s.Sent())
	assert.Equal(t, int64(20), s.Limit())
	assert.Equal(t, int64(17), s.Available())

	require.NoError(t, s.Resume(2, 8))
	assert.Equal(t, int64(2), s.Sent())
	assert.Equal(t, int64(8), s.Limit())
	require.Error(t, s.Resume(3, 8))
	assert.Equal(t, int64(2), s.Sent(), "a refused resume changes nothing")
}

func TestSenderMisusePanics(t *testing.T) {
	assert.Panics(t, func() { NewSender(-1) })
	assert.Panics(t, func() { NewSender(1).Take(-1) })
	assert.Panics(t, func() { NewSender(1).Reset(-1, 0) })
	assert.Panics(t, func() { NewSender(1).Reset(5, 4) })
}

func TestReceiverMisusePanics(t *testing.T) {
	assert.Panics(t, func() { NewReceiver(0) })
	assert.Panics(t, func() { NewReceiver(-1) })
	assert.Panics(t, func() { _ = NewReceiver(1).Receive(-1) })
	assert.Panics(t, func() { NewReceiver(1).Consume(-1) })
	assert.Panics(t, func() { NewReceiver(1).Consume(1) }, "consume more than received")
}
