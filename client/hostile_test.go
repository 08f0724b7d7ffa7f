package client_test

import (
	"fmt"
	"math"
	"sync/atomic"
	"testing"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/client"
	"github.com/procwire/procwire/frames"
)

// Regression tests for what FuzzClientSession found a hostile server could
// do.

// A grace longer than a time.Duration holds (292 years) is a long grace,
// not a negative or sub-millisecond one: the client resumes after a loss
// even when its first attempt fails.
func TestGraceBeyondDuration(t *testing.T) {
	for _, ms := range []int64{9223372036855, 18446744073710, math.MaxInt64} {
		t.Run(fmt.Sprint(ms), func(t *testing.T) {
			cut := make(chan struct{})
			var resumes atomic.Int32
			f := newFake(t, func(fc *fakeConn, first frames.Frame) {
				switch first := first.(type) {
				case *frames.Open:
					o := opened(first)
					o.GraceMS = ms
					fc.send(o)
					fc.drain(cut)
				case *frames.Resume:
					if resumes.Add(1) == 1 {
						return // dropped: the client tries again after a backoff
					}
					fc.send(&frames.Resumed{ProcessID: fakeID, Evidence: fakeEvidence(), StdinLimit: 4096})
					fc.send(&frames.Stdout{Off: 0, Data: []byte("x")})
					answerDestroy(fc)
				}
			})
			p := openFake(t, f)
			close(cut)
			c := ctx(t)
			b := make([]byte, 1)
			n, err := p.Stdout().ReadContext(c, b)
			require.NoError(t, err)
			require.Equal(t, "x", string(b[:n]))
			require.Equal(t, int32(2), resumes.Load())
			require.NoError(t, p.Destroy(c))
		})
	}
}

// answerDestroy reads the client's frames until a destroy, answers it
// destroyed and closes the connection.
func answerDestroy(fc *fakeConn) {
	for {
		f, ok := fc.recv()
		if !ok {
			return
		}
		if _, ok := f.(*frames.Destroy); ok {
			fc.send(&frames.Destroyed{ProcessID: fakeID})
			fc.ws.Close(websocket.StatusNormalClosure, "")
			return
		}
	}
}

// A close code that ends the handle (here 1002) ends it even when the
// connection's writer, racing to send an ack, fails first: the close code
// the reader saw decides, not the first loop to notice.
func TestCloseCodeWinsOverWriterError(t *testing.T) {
	for i := range 100 {
		var resumed atomic.Bool
		f := newFake(t, func(fc *fakeConn, first frames.Frame) {
			o, ok := first.(*frames.Open)
			if !ok {
				resumed.Store(true)
				fc.send(&frames.Error{Code: frames.LifecycleConflict, Operation: "resume_process", Actual: "process_not_found"})
				return
			}
			fc.send(opened(o))
			fc.send(&frames.Stdout{Off: 0, Data: []byte("hello")})
			go fc.drain(nil) // the close handshake needs a reader
			fc.ws.Close(websocket.StatusProtocolError, "ack.stdout 9 beyond 5 sent")
		})
		p := openFake(t, f)
		c := ctx(t)
		b := make([]byte, 5)
		_, err := p.Stdout().ReadContext(c, b) // the ack races the close
		if err == nil {
			_, err = p.Wait(c)
		}
		require.ErrorIs(t, err, client.ErrConnectionLost, "iteration %d", i)
		require.False(t, resumed.Load(), "iteration %d", i)
		require.NoError(t, p.Destroy(c))
	}
}

// A resume the server refuses with a close code that ends the handle on an
// attached connection ends it there too, rather than being retried for the
// whole grace: 1002 and 1008, and the process is destroyed. (1001 is not
// one: without procwire's word it is a proxy going away, resumed.)
func TestResumeClosedForGood(t *testing.T) {
	for _, code := range []websocket.StatusCode{websocket.StatusProtocolError, websocket.StatusPolicyViolation} {
		t.Run(fmt.Sprint(int(code)), func(t *testing.T) {
			cut := make(chan struct{})
			var resumes atomic.Int32
			f := resumeFake(t, cut, func(fc *fakeConn, r *frames.Resume) {
				if resumes.Add(1) == 1 {
					fc.ws.Close(code, "refused")
					return
				}
				// Not reached by a client that stops at the close.
				fc.send(&frames.Error{Code: frames.LifecycleConflict, Operation: "resume_process", Actual: "process_not_found"})
			})
			p := openFake(t, f)
			err := cutWhileReading(t, p, cut)
			require.ErrorIs(t, err, client.ErrConnectionLost)
			require.Equal(t, int32(1), resumes.Load())
			c := ctx(t)
			require.NoError(t, p.Destroy(c))
			require.Len(t, f.destroys, 1)
		})
	}
}

// A resumed claiming stdin the client never sent is refused, even when the
// Runner has written that much meanwhile: the bytes between would never
// reach the process.
func TestResumedStdinNeverSent(t *testing.T) {
	cut := make(chan struct{})
	resuming := make(chan struct{})
	written := make(chan struct{})
	f := resumeFake(t, cut, func(fc *fakeConn, r *frames.Resume) {
		close(resuming)
		<-written
		fc.send(&frames.Resumed{ProcessID: fakeID, Evidence: fakeEvidence(), StdinReceived: 5, StdinLimit: 4096})
		// Read only by a client that took the resumed.
		fc.send(&frames.Error{Code: frames.LifecycleConflict, Operation: "resume_process", Actual: "process_not_found"})
	})
	p := openFake(t, f)
	c := ctx(t)
	close(cut)
	await(t, c, resuming, "the resume")
	_, err := p.Stdin().WriteContext(c, []byte("0123456789")) // held, not sent
	require.NoError(t, err)
	close(written)
	isField := func(err error) {
		var pe *client.ProtocolError
		require.ErrorAs(t, err, &pe)
		require.Equal(t, "resumed.stdin_received", pe.Field)
	}
	_, err = p.Stdout().ReadContext(c, make([]byte, 1))
	isField(err)
	assertEnded(t, p, f, isField)
}
