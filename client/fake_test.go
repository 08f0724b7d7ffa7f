package client_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/frames"
)

// fake is a scripted procwire server for what a real server never does:
// tampered evidence, replay gaps, overruns, contradicting exits.
type fake struct {
	url      string
	destroys chan *frames.Destroy // first-frame destroys received (answered destroyed)
}

// fakeConn is one connection to the fake server.
type fakeConn struct {
	t   *testing.T
	ctx context.Context
	ws  *websocket.Conn
	dec frames.Decoder
}

// newFake serves connections whose first frame is not a destroy with
// script; first-frame destroys are answered destroyed.
func newFake(t *testing.T, script func(fc *fakeConn, first frames.Frame)) *fake {
	f := &fake{destroys: make(chan *frames.Destroy, 16)}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{frames.Subprotocol}})
		if err != nil {
			return
		}
		defer ws.CloseNow()
		ws.SetReadLimit(frames.MaxFirstLine)
		fc := &fakeConn{t: t, ctx: r.Context(), ws: ws}
		first, ok := fc.recv()
		if !ok {
			return
		}
		if d, ok := first.(*frames.Destroy); ok {
			f.destroys <- d // recorded before the client can see the answer
			fc.send(&frames.Destroyed{ProcessID: d.ProcessID})
			ws.Close(websocket.StatusNormalClosure, "")
			return
		}
		script(fc, first)
	}))
	t.Cleanup(hs.Close)
	f.url = "ws" + strings.TrimPrefix(hs.URL, "http")
	return f
}

// recv returns the next frame from the client; ok is false once the
// connection ended.
func (fc *fakeConn) recv() (frames.Frame, bool) {
	_, b, err := fc.ws.Read(fc.ctx)
	if err != nil {
		return nil, false
	}
	f, err := fc.dec.Decode(b)
	require.NoError(fc.t, err)
	return f, true
}

// send sends frame f.
func (fc *fakeConn) send(f frames.Frame) {
	fc.sendRaw(frames.Append(nil, f))
}

func (fc *fakeConn) sendRaw(b []byte) {
	_ = fc.ws.Write(fc.ctx, websocket.MessageText, b)
}

// drain reads and drops the client's frames until the connection ends or
// stop is closed.
func (fc *fakeConn) drain(stop <-chan struct{}) {
	ctx, cancel := context.WithCancel(fc.ctx)
	defer cancel()
	go func() {
		select {
		case <-stop:
			cancel() // a read cancelled drops the connection
		case <-ctx.Done():
		}
	}()
	for {
		if _, _, err := fc.ws.Read(ctx); err != nil {
			return
		}
	}
}

const (
	fakeID    = "0123456789abcdef0123456789abcdef"
	fakeToken = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
)

// opened answers o faithfully.
func opened(o *frames.Open) *frames.Opened {
	return &frames.Opened{
		ProcessID: fakeID,
		Token:     fakeToken,
		Evidence: frames.Evidence{
			WireRevision:     frames.WireRevision,
			Provider:         "fake",
			ProviderRevision: "0",
			InstanceID:       o.InstanceID,
			ProcessID:        fakeID,
			Executable:       o.Request.Executable,
			WorkingDirectory: o.Request.WorkingDirectory,
			ArgumentsDigest:  frames.ArgumentsDigest(o.Request.Arguments),
			StartedAt:        frames.FormatTime(time.Date(2026, 11, 29, 9, 30, 0, 0, time.UTC)),
		},
		StdinLimit:   4096,
		StdoutWindow: 4096,
		StderrWindow: 4096,
		GraceMS:      5000,
		HeartbeatMS:  0,
		ExitWaitMS:   1000,
		MaxData:      4096,
	}
}
