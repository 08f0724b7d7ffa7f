package credit

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type reserved struct {
	n   int64
	err error
}

// startReserve calls w.Reserve in a goroutine, waits until it is durably
// blocked (synctest.Wait), and checks that it has not returned.
func startReserve(t *testing.T, ctx context.Context, w *Window, max int64) <-chan reserved {
	t.Helper()
	done := make(chan reserved, 1)
	go func() {
		n, err := w.Reserve(ctx, max)
		done <- reserved{n, err}
	}()
	synctest.Wait()
	select {
	case r := <-done:
		t.Fatalf("Reserve returned %v before being woken", r)
	default:
	}
	return done
}

func TestReserveUnblock(t *testing.T) {
	errLost := errors.New("connection lost")
	tests := []struct {
		name   string
		wake   func(t *testing.T, w *Window, cancel context.CancelFunc)
		wantN  int64
		wantIs error
	}{
		{"cancel", func(_ *testing.T, _ *Window, cancel context.CancelFunc) { cancel() }, 0, context.Canceled},
		{"close with error", func(_ *testing.T, w *Window, _ context.CancelFunc) { w.Close(errLost) }, 0, errLost},
		{"close nil", func(_ *testing.T, w *Window, _ context.CancelFunc) { w.Close(nil) }, 0, ErrClosed},
		{"update grant", func(t *testing.T, w *Window, _ context.CancelFunc) {
			grew, err := w.Update(15)
			require.NoError(t, err)
			require.True(t, grew)
		}, 5, nil},
		{"update grant larger than max", func(_ *testing.T, w *Window, _ context.CancelFunc) { _, _ = w.Update(100) }, 8, nil},
		{"reset", func(_ *testing.T, w *Window, _ context.CancelFunc) { w.Reset(4, 7) }, 3, nil},
		{"resume", func(t *testing.T, w *Window, _ context.CancelFunc) { require.NoError(t, w.Resume(2, 10)) }, 8, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := NewWindow(10)
				n, err := w.Reserve(t.Context(), 10)
				require.NoError(t, err)
				require.Equal(t, int64(10), n)

				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				done := startReserve(t, ctx, w, 8)
				tt.wake(t, w, cancel)
				r := <-done
				if tt.wantIs != nil {
					require.ErrorIs(t, r.err, tt.wantIs)
				} else {
					require.NoError(t, r.err)
				}
				assert.Equal(t, tt.wantN, r.n)
			})
		})
	}
}

func TestReserveIgnoresStaleUpdate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := NewWindow(0)
		done := startReserve(t, t.Context(), w, 8)
		grew, err := w.Update(0)
		require.NoError(t, err)
		require.False(t, grew)
		_, err = w.Update(-1)
		require.ErrorIs(t, err, ErrInvalidLimit)
		synctest.Wait()
		select {
		case r := <-done:
			t.Fatalf("woken by a stale limit: %v", r)
		default:
		}
		w.Close(nil)
		require.ErrorIs(t, (<-done).err, ErrClosed)
	})
}

func TestReserveDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := NewWindow(0)
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		_, err := w.Reserve(ctx, 1)
		require.ErrorIs(t, err, context.DeadlineExceeded)
	})
}

func TestReserveAfterCloseOrCancel(t *testing.T) {
	w := NewWindow(10)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := w.Reserve(ctx, 1)
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, int64(0), w.Sent(), "a cancelled Reserve takes nothing")

	errFirst := errors.New("first")
	w.Close(errFirst)
	w.Close(errors.New("second"))
	_, err = w.Reserve(t.Context(), 1)
	require.ErrorIs(t, err, errFirst, "only the first Close counts")
	w.Reset(0, 20)
	_, err = w.Reserve(t.Context(), 1)
	require.ErrorIs(t, err, errFirst, "Reset does not reopen")
}

// TestReserveWakesAll: one grant wakes every waiter; those that find no
// credit left wait again.
func TestReserveWakesAll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := NewWindow(0)
		a := startReserve(t, t.Context(), w, 5)
		b := startReserve(t, t.Context(), w, 5)
		_, _ = w.Update(5)
		synctest.Wait()
		var first reserved
		var rest <-chan reserved
		select {
		case first = <-a:
			rest = b
		case first = <-b:
			rest = a
		}
		require.NoError(t, first.err)
		require.Equal(t, int64(5), first.n)
		select {
		case r := <-rest:
			t.Fatalf("second waiter got %v from spent credit", r)
		default:
		}
		_, _ = w.Update(7)
		r := <-rest
		require.NoError(t, r.err)
		require.Equal(t, int64(2), r.n)
		assert.Equal(t, int64(7), w.Sent())
		assert.Equal(t, int64(7), w.Limit())
		assert.Equal(t, int64(0), w.Available())
	})
}

// TestWindowConcurrent runs writers against a granting peer under -race: the
// credit taken adds up exactly and never passes the limit.
func TestWindowConcurrent(t *testing.T) {
	const writers, quota = 4, 5000
	w := NewWindow(0)
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for left := int64(quota); left > 0; {
				n, err := w.Reserve(t.Context(), min(left, 7))
				if !assert.NoError(t, err) {
					return
				}
				left -= n
			}
		})
	}
	for limit := int64(3); limit < writers*quota; limit += 3 {
		_, err := w.Update(limit)
		require.NoError(t, err)
		require.LessOrEqual(t, w.Sent(), w.Limit())
	}
	_, err := w.Update(writers * quota)
	require.NoError(t, err)
	wg.Wait()
	assert.Equal(t, int64(writers*quota), w.Sent())
	assert.Equal(t, int64(0), w.Available())
}
