package link

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// woken reports whether the writer was woken, and consumes the wakeup.
func woken(t *Turn) bool {
	select {
	case <-t.Woken():
		return true
	default:
		return false
	}
}

func TestTurnLeavesToTheWriterUntilOpened(t *testing.T) {
	near, co, _ := pair(t)
	var tr Turn
	tr.Init(co, false)
	send := func() (bool, error) { panic("a caller wrote before the first frame") }
	require.Equal(t, Starting, tr.State())
	tr.Kick(send)
	require.True(t, woken(&tr))

	require.NoError(t, tr.Begin()) // a round takes the kick's mark
	written, err := tr.Write(context.Background(), near, []byte("hello\n"))
	require.True(t, written)
	require.NoError(t, err)
	tr.Opened()
	require.Equal(t, WriterOwns, tr.State())
	tr.Kick(send) // the writer holds the turn: a mark for it
	require.True(t, tr.End(), "the writer looks again")
	require.Equal(t, Idle, tr.State())
}

func TestTurnCallerWrites(t *testing.T) {
	near, co, far := pair(t)
	var tr Turn
	tr.Init(co, false)
	tr.Lock()
	tr.Opened()
	tr.Unlock()

	msgs := 0
	send := func() (bool, error) {
		require.Equal(t, CallerWriting, tr.State())
		require.True(t, tr.Calling())
		if msgs == 2 {
			return false, nil
		}
		msgs++
		written, err := tr.Write(context.Background(), near, []byte("out\n"))
		require.True(t, written)
		return true, err
	}
	tr.Kick(send)
	require.Equal(t, 2, msgs)
	require.Equal(t, Idle, tr.State())
	require.False(t, woken(&tr), "nothing was left to the writer")
	for range 2 {
		_, b, err := far.Read(context.Background())
		require.NoError(t, err)
		require.Equal(t, "out\n", string(b))
	}
}

func TestTurnStallsOnAPeerNotReading(t *testing.T) {
	near, co, far := pair(t)
	var tr Turn
	tr.Init(co, false)
	tr.Lock()
	tr.Opened()
	tr.Unlock()

	msg := make([]byte, 64<<10)
	far.SetReadLimit(1 << 20)
	sent := 0
	send := func() (bool, error) {
		written, err := tr.Write(context.Background(), near, msg)
		sent++
		require.Equal(t, !written, tr.Stalled())
		return true, err
	}
	tr.Kick(send) // the peer reads nothing: the socket fills, and the kick stops
	require.Equal(t, Idle, tr.State())
	require.True(t, woken(&tr))

	// The writer sends what is pending once the peer reads.
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range sent {
			_, b, err := far.Read(context.Background())
			if err != nil || len(b) != len(msg) {
				t.Errorf("read %d bytes: %v", len(b), err)
				return
			}
		}
	}()
	require.NoError(t, tr.Begin())
	require.False(t, tr.End())
	wg.Wait()
}

func TestTurnStallForABacklog(t *testing.T) {
	_, co, _ := pair(t)
	var tr Turn
	tr.Init(co, false)
	tr.Lock()
	tr.Opened()
	tr.Stall() // the writer's turn: nothing to stall
	require.Equal(t, WriterOwns, tr.State())
	tr.Unlock()
	calls := 0
	tr.Kick(func() (bool, error) {
		calls++
		tr.Stall()
		require.True(t, tr.Calling())
		return true, nil
	})
	require.Equal(t, 1, calls)
	require.True(t, woken(&tr))
}

func TestTurnFailedWriteGoesToTheWriter(t *testing.T) {
	_, co, _ := pair(t)
	var tr Turn
	tr.Init(co, false)
	tr.Lock()
	tr.Opened()
	tr.Unlock()
	boom := errors.New("write failed")
	tr.Kick(func() (bool, error) { return false, boom })
	require.True(t, woken(&tr))
	require.Equal(t, Failed, tr.State())
	tr.Kick(func() (bool, error) { panic("a caller wrote after a failure") })
	require.Same(t, boom, tr.Begin())
	tr.End()
	tr.Close()
	require.Equal(t, Closed, tr.State())
	tr.Kick(func() (bool, error) { panic("a caller wrote after Close") })
	require.True(t, woken(&tr))
}

func TestTurnMarksAHeldTurn(t *testing.T) {
	_, co, _ := pair(t)
	var tr Turn
	tr.Init(co, false)
	require.NoError(t, tr.Begin())
	tr.Opened()
	tr.Kick(func() (bool, error) { panic("a caller wrote in the writer's turn") })
	require.True(t, tr.End(), "the writer looks again")
}

func TestTurnNeverTriesAnUntriableConnection(t *testing.T) {
	var tr Turn
	tr.Init(nil, false) // not a connection the coalescer wraps
	tr.Lock()
	tr.Opened()
	tr.Unlock()
	tr.Kick(func() (bool, error) { panic("a caller wrote") })
	require.True(t, woken(&tr))
}

func TestTurnBatchWrites(t *testing.T) {
	near, co, far := pair(t)
	var tr Turn
	tr.Init(co, true)
	tr.Lock()
	written, err := tr.Write(context.Background(), near, make([]byte, 20<<10))
	tr.Unlock()
	require.True(t, written)
	require.NoError(t, err)
	_, b, err := far.Read(context.Background())
	require.NoError(t, err)
	require.Len(t, b, 20<<10)
}

func TestTurnKickAllocatesNothing(t *testing.T) {
	_, co, _ := pair(t)
	var tr Turn
	tr.Init(co, false)
	tr.Lock()
	tr.Opened()
	tr.Unlock()
	n := 0
	send := func() (bool, error) { n++; return false, nil }
	allocs := testing.AllocsPerRun(100, func() { tr.Kick(send) })
	require.Zero(t, allocs)
	require.Positive(t, n)
}

func TestTurnResetForANewConnection(t *testing.T) {
	_, co, _ := pair(t)
	var tr Turn
	tr.Init(nil, true)
	tr.Lock()
	tr.Reset(co)
	tr.Opened()
	tr.Unlock()
	tr.Kick(func() (bool, error) { return false, errors.New("lost") })
	require.Equal(t, Failed, tr.State())
	tr.Lock()
	tr.Reset(nil)
	require.Equal(t, Starting, tr.State())
	tr.Unlock()
	require.NoError(t, tr.Begin())
	tr.End()
}
