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

	"github.com/procwire/procwire/client"
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

// openFake opens a process on f with fast reconnection.
func openFake(t *testing.T, f *fake) *client.Process {
	p, err := client.Open(ctx(t), f.url, "inst-1", req("cat"), fastOpts())
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Destroy(ctx(t)) })
	return p
}

// fakeEvidence is the evidence the fake's opened carries for openFake.
func fakeEvidence() frames.Evidence {
	return opened(&frames.Open{InstanceID: "inst-1", Request: req("cat")}).Evidence
}

// resumeFake opens faithfully, drops the connection when cut is closed and
// answers every resume with onResume.
func resumeFake(t *testing.T, cut <-chan struct{}, onResume func(fc *fakeConn, r *frames.Resume)) *fake {
	return newFake(t, func(fc *fakeConn, first frames.Frame) {
		switch first := first.(type) {
		case *frames.Open:
			fc.send(opened(first))
			fc.drain(cut)
		case *frames.Resume:
			require.Equal(t, &frames.Resume{ProcessID: fakeID, Token: fakeToken}, first)
			onResume(fc, first)
			fc.drain(nil)
		}
	})
}

// cutWhileReading cuts the first connection while a read of p's stdout is
// blocked and returns the read's error.
func cutWhileReading(t *testing.T, p *client.Process, cut chan struct{}) error {
	c := ctx(t)
	blocked := blockedHook(p)
	done := make(chan error, 1)
	go func() {
		_, err := p.Stdout().ReadContext(c, make([]byte, 1))
		done <- err
	}()
	await(t, c, blocked, "the read to block")
	close(cut)
	select {
	case err := <-done:
		return err
	case <-c.Done():
		t.Fatal("the read did not return")
		return nil
	}
}

// assertEnded checks that every call of p fails as check says and that the
// client destroyed the process on a connection of its own.
func assertEnded(t *testing.T, p *client.Process, f *fake, check func(error)) {
	t.Helper()
	c := ctx(t)
	_, err := p.Wait(c)
	check(err)
	// What was held is handed over first.
	for n := 1; n > 0; {
		n, err = p.Stdout().ReadContext(c, make([]byte, 1))
	}
	check(err)
	_, err = p.Stdin().WriteContext(c, []byte("x"))
	check(err)
	_, err = p.Signal(c, frames.SIGTERM)
	check(err)
	select {
	case d := <-f.destroys:
		require.Equal(t, &frames.Destroy{ProcessID: fakeID, Token: fakeToken}, d)
	case <-c.Done():
		t.Fatal("the process was not destroyed")
	}
	require.NoError(t, p.Destroy(c))
}
