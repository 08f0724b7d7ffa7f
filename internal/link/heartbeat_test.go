package link

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestHeartbeatReturnsAFailedPing(t *testing.T) {
	boom := errors.New("no pong")
	n := 0
	err := Heartbeat(context.Background(), time.Millisecond, func(ctx context.Context) error {
		_, ok := ctx.Deadline()
		require.True(t, ok, "each ping is bounded")
		if n++; n == 3 {
			return boom
		}
		return nil
	})
	require.Same(t, boom, err)
	require.Equal(t, 3, n)
}

func TestHeartbeatEndsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	// A ping failing because the context ended is no failure.
	err := Heartbeat(ctx, time.Millisecond, func(pctx context.Context) error {
		cancel()
		<-pctx.Done()
		return pctx.Err()
	})
	require.NoError(t, err)

	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	require.NoError(t, Heartbeat(ctx, time.Hour, func(context.Context) error { panic("pinged") }))
}
