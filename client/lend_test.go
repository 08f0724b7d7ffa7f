package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/client"
	"github.com/procwire/procwire/server"
)

// A blocked Read with no deadline reads the connection itself (the read
// loop lends it the socket): request/response through cat, byte-exact,
// with the frames read by the caller's goroutine.
func TestReadLendsTheSocket(t *testing.T) {
	e := newEnv(t, server.Config{})
	c := ctx(t)
	p := open(t, e.url, req("cat"), nil)
	for i := range 200 {
		line := fmt.Sprintf("line %d %s\n", i, strings.Repeat("x", i))
		_, err := p.Stdin().Write([]byte(line))
		require.NoError(t, err)
		require.Equal(t, line, readLine(t, c, p.Stdout()))
	}
	require.Greater(t, client.LentReads(p), uint64(100), "most answers read by the caller")
	require.NoError(t, p.Stdin().Close())
	require.Equal(t, "", readAll(t, c, p.Stdout()))
	st, err := p.Wait(c)
	require.NoError(t, err)
	require.True(t, st.Success(), "%v", st)
}

// After a lender's Read returned, the socket stays lent for a while; a
// call that waits for something the lender would not read for (Wait, a
// Signal's answer, Destroy's) takes it back at once. The idle bound is
// set far beyond the test's so that only that can make these pass.
func TestWaitingCallsTakeTheSocketBack(t *testing.T) {
	e := newEnv(t, server.Config{})
	c := ctx(t)
	lend := func(p *client.Process) {
		t.Helper()
		client.SetLendIdle(p, time.Hour)
		lendSocket(t, c, p)
	}

	t.Run("wait", func(t *testing.T) {
		p := open(t, e.url, req("cat"), nil)
		lend(p)
		require.NoError(t, p.Stdin().Close())
		st, err := p.Wait(c)
		require.NoError(t, err)
		require.True(t, st.Success(), "%v", st)
	})
	t.Run("signal", func(t *testing.T) {
		p := open(t, e.url, req("cat"), nil)
		lend(p)
		delivered, err := p.Signal(c, "SIGTERM")
		require.NoError(t, err)
		require.True(t, delivered)
	})
	t.Run("destroy", func(t *testing.T) {
		p := open(t, e.url, req("cat"), nil)
		lend(p)
		require.NoError(t, p.Destroy(c))
	})
	t.Run("read with a deadline", func(t *testing.T) {
		p := open(t, e.url, req("cat"), nil)
		lend(p)
		_, err := p.Stdin().Write([]byte("again\n"))
		require.NoError(t, err)
		b := make([]byte, 6)
		_, err = io.ReadFull(readerFunc(func(b []byte) (int, error) { return p.Stdout().ReadContext(c, b) }), b)
		require.NoError(t, err)
		require.Equal(t, "again\n", string(b))
	})
}

// A read with a deadline never lends: ending it early would close the
// connection. It returns at its deadline, and the connection goes on.
func TestReadWithADeadlineDoesNotLend(t *testing.T) {
	e := newEnv(t, server.Config{})
	c := ctx(t)
	p := open(t, e.url, req("cat"), nil)
	client.SetLendIdle(p, time.Hour)
	lendSocket(t, c, p)
	received := p.Stdout().Received()
	for range 3 {
		dc, cancel := context.WithTimeout(c, 20*time.Millisecond)
		_, err := p.Stdout().ReadContext(dc, make([]byte, 1))
		cancel()
		require.ErrorIs(t, err, context.DeadlineExceeded)
	}
	_, err := p.Stdin().Write([]byte("b\n"))
	require.NoError(t, err)
	require.Equal(t, "b\n", readLine(t, c, p.Stdout()))
	require.Equal(t, received+2, p.Stdout().Received())
}

// Output that arrives while the lender is away is read by the loop once
// the socket sat unread for the idle bound, with no call waiting.
func TestIdleSocketGoesBackToTheLoop(t *testing.T) {
	e := newEnv(t, server.Config{})
	c := ctx(t)
	p := open(t, e.url, req("cat"), nil)
	client.SetLendIdle(p, 5*time.Millisecond)
	lendSocket(t, c, p)
	lent, received := client.LentReads(p), p.Stdout().Received()
	_, err := p.Stdin().Write([]byte("b\n"))
	require.NoError(t, err)
	// Well within the heartbeat, whose failing ping would reconnect.
	bc, cancel := context.WithTimeout(c, 2*time.Second)
	defer cancel()
	eventually(t, bc, "the loop to receive b", func() bool { return p.Stdout().Received() == received+2 })
	require.Equal(t, lent, client.LentReads(p), "received by the loop")
}

// A Read blocked inside a read of the lent socket returns the handle's
// end: on Destroy once the destroy's answer comes, on Detach at once, on a
// Destroy that gets no answer (the link drops the server's replies) once
// Destroy gives up, on the server's shutdown, and when the connection is
// lost for longer than the grace.
func TestLenderUnblocks(t *testing.T) {
	for _, end := range []string{"destroy", "detach", "destroy unanswered", "shutdown", "grace"} {
		t.Run(end, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, server.Config{Grace: 500 * time.Millisecond})
			c := ctx(t)
			opts := fastOpts()
			opts.DestroyTimeout = 500 * time.Millisecond
			p := open(t, e.purl, req("cat"), opts)
			client.SetLendIdle(p, time.Hour)
			lendSocket(t, c, p)
			lent := client.LentReads(p)
			blocked := blockedHook(p)
			errc := make(chan error, 1)
			go func() {
				_, err := p.Stdout().Read(make([]byte, 1))
				errc <- err
			}()
			await(t, c, blocked, "the read to block")
			switch end {
			case "destroy":
				require.NoError(t, p.Destroy(c))
			case "detach":
				p.Detach()
			case "destroy unanswered":
				e.proxy.DropReplies(true)
				require.ErrorIs(t, p.Destroy(c), context.DeadlineExceeded)
			case "shutdown":
				require.NoError(t, e.srv.Shutdown(c))
			case "grace":
				e.proxy.Refuse(true)
				e.proxy.CutAll()
			}
			var err error
			select {
			case err = <-errc:
			case <-c.Done():
				t.Fatal("the read did not return")
			}
			switch end {
			case "detach":
				require.ErrorIs(t, err, client.ErrDetached)
			case "grace":
				require.ErrorIs(t, err, client.ErrConnectionLost)
			case "shutdown":
				if !errors.Is(err, io.EOF) { // cat's stdout may end before destroyed comes
					require.ErrorIs(t, err, client.ErrDestroyed)
				}
			default:
				require.ErrorIs(t, err, client.ErrDestroyed)
			}
			require.Greater(t, client.LentReads(p), lent, "the blocked Read read the socket itself")
			e.proxy.DropReplies(false)
			e.proxy.Refuse(false)
			if end == "detach" || end == "destroy unanswered" {
				e.proxy.CutAll()
				_ = p.Destroy(c) // the detached or unsettled process goes
			}
		})
	}
}

// lendSocket makes round trips through p (cat) until its Read has read
// frames itself: the first read lends the socket once the loop's read in
// course ended, and the ones after it read themselves.
func lendSocket(t *testing.T, c context.Context, p *client.Process) {
	t.Helper()
	// An answer already there when Read is called lends nothing: a
	// loaded machine may take a few rounds.
	for i := 0; i < 3 || client.LentReads(p) == 0 && i < 100; i++ {
		_, err := p.Stdin().Write([]byte("hi\n"))
		require.NoError(t, err)
		require.Equal(t, "hi\n", readLine(t, c, p.Stdout()))
	}
	require.NotZero(t, client.LentReads(p))
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(b []byte) (int, error) { return f(b) }

// A lent socket that nobody reads is taken back in time for the
// heartbeat: the pongs and the server's pings are read, and the
// connection lives through many heartbeats with no Read under way.
func TestLentSocketLivesThroughHeartbeats(t *testing.T) {
	e := newEnv(t, server.Config{Heartbeat: 50 * time.Millisecond})
	c := ctx(t)
	p := open(t, e.purl, req("cat"), nil)
	client.SetLendIdle(p, time.Hour)
	lendSocket(t, c, p)
	from := e.proxy.Forwarded()
	// Some 15 pings and pongs each way at the least.
	eventually(t, c, "heartbeats to pass", func() bool { return e.proxy.Forwarded() > from+400 })
	require.Equal(t, 1, e.proxy.Accepted(), "the connection was lost meanwhile")
	_, err := p.Stdin().Write([]byte("after\n"))
	require.NoError(t, err)
	require.Equal(t, "after\n", readLine(t, c, p.Stdout()))
	require.Equal(t, 1, e.proxy.Accepted())
}

// Cuts at every few hundred bytes while Reads read the socket themselves:
// a lender's read fails with the connection, the handle resumes on the
// next one, and the request/response goes on byte-exact, lending again.
func TestLendingAcrossCuts(t *testing.T) {
	e := newEnv(t, server.Config{})
	c := ctx(t)
	p := open(t, e.purl, req("cat"), fastOpts())
	lendSocket(t, c, p)
	const cuts = 8
	var at []int64
	for i := range int64(cuts) {
		at = append(at, 700*(i+1)+37*i)
	}
	e.proxy.CutAt(at...)
	lent := client.LentReads(p)
	for i := 0; e.proxy.Cuts() < cuts || i < 200; i++ {
		require.Less(t, i, 5000, "the cuts did not all come")
		line := fmt.Sprintf("line %d %s\n", i, strings.Repeat("y", i%50))
		_, err := p.Stdin().Write([]byte(line))
		require.NoError(t, err)
		require.Equal(t, line, readLine(t, c, p.Stdout()))
	}
	require.Greater(t, e.proxy.Accepted(), cuts)
	require.Greater(t, client.LentReads(p), lent+100, "the answers were read by the callers")
	require.NoError(t, p.Stdin().Close())
	st, err := p.Wait(c)
	require.NoError(t, err)
	require.True(t, st.Success(), "%v", st)
}

// A connection's loop lends the socket from the start when nothing waits:
// the first output of a fresh process, the cold start's first byte, is
// read by the caller's Read, not handed over by the loop. A Wait alone
// still gets the exit (it takes the socket back).
func TestFirstOutputReadByTheCaller(t *testing.T) {
	e := newEnv(t, server.Config{})
	c := ctx(t)
	for range 5 {
		p := open(t, e.url, req("echo", "hi"), nil)
		require.Equal(t, "hi\n", readLine(t, c, p.Stdout()))
		require.Positive(t, client.LentReads(p), "the first output read by the caller")
		st, err := p.Wait(c)
		require.NoError(t, err)
		require.True(t, st.Success(), "%v", st)
		require.NoError(t, p.Destroy(c)) // the instance is the test's, once at a time
	}
	p := open(t, e.url, req("true"), nil)
	client.SetLendIdle(p, time.Hour) // only the waiter can take the socket back
	st, err := p.Wait(c)
	require.NoError(t, err)
	require.True(t, st.Success(), "%v", st)
}
