package client_test

import (
	"fmt"
	"math"
	"sync/atomic"
	"testing"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

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
