package client_test

import (
	"bytes"
	"context"
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/client"
	"github.com/procwire/procwire/frames"
)

// A frame wakes the calls it concerns and no others: stdout frames that
// arrive while a Write waits for credit and a Wait for the exit wake
// neither (each would wake, find nothing for it and block again), stderr
// frames do not wake a Read of stdout either; the exit wakes Wait.
func TestAFrameWakesOnlyTheCallsItConcerns(t *testing.T) {
	const outFrames = 32
	send := make(chan frames.Frame)
	f := newFake(t, func(fc *fakeConn, first frames.Frame) {
		o, ok := first.(*frames.Open)
		if !ok {
			return
		}
		fc.send(opened(o)) // stdin limit 4096, and never more credit
		stop := make(chan struct{})
		go func() {
			defer close(stop)
			for fr := range send {
				fc.send(fr)
			}
		}()
		fc.drain(stop)
	})
	p := openFake(t, f)

	blocked := make(chan struct{}, 64)
	client.SetBlockedHook(p, func() { blocked <- struct{}{} })
	handled := make(chan struct{}, 64)
	client.SetFrameHook(p, func(client.Held) { handled <- struct{}{} })

	wrote := make(chan error, 1)
	go func() {
		_, err := p.Stdin().Write(make([]byte, 8192)) // half of it waits for credit
		wrote <- err
	}()
	<-blocked
	waited := make(chan error, 1)
	go func() {
		_, err := p.Wait(context.Background())
		waited <- err
	}()
	<-blocked

	// sendAll sends outFrames frames made by frame, each handled before
	// the next; noneWoke fails if a blocked call woke and blocked again.
	sendAll := func(frame func(off int64) frames.Frame) {
		for i := range outFrames {
			send <- frame(int64(i))
			<-handled
		}
	}
	noneWoke := func(what string) {
		t.Helper()
		select {
		case <-blocked:
			t.Fatalf("%s woke a blocked call it does not concern", what)
		default:
		}
	}

	sendAll(func(off int64) frames.Frame { return &frames.Stdout{Off: off, Data: []byte{'x'}} })
	noneWoke("a stdout frame (the Write waits for credit, the Wait for the exit)")
	got := make([]byte, outFrames)
	_, err := io.ReadFull(p.Stdout(), got)
	require.NoError(t, err)
	require.Equal(t, bytes.Repeat([]byte{'x'}, outFrames), got)
	noneWoke("reading what was held")

	// A Read of stdout that waits (with a deadline, so that it waits for
	// the loop rather than read the socket itself) is not woken by stderr.
	rc, cancel := context.WithCancel(context.Background())
	read := make(chan error, 1)
	go func() {
		_, err := p.Stdout().ReadContext(rc, make([]byte, 1))
		read <- err
	}()
	<-blocked
	sendAll(func(off int64) frames.Frame { return &frames.Stderr{Off: off, Data: []byte{'e'}} })
	noneWoke("a stderr frame (a Read of stdout, the Write and the Wait wait)")
	cancel()
	require.ErrorIs(t, <-read, context.Canceled)
	_, err = io.ReadFull(p.Stderr(), got)
	require.NoError(t, err)
	require.Equal(t, bytes.Repeat([]byte{'e'}, outFrames), got)

	send <- &frames.Exit{Code: 0}
	require.NoError(t, <-waited)
	close(send) // the connection drops; the destroy goes first on the next
	require.NoError(t, p.Destroy(ctx(t)))
	require.ErrorIs(t, <-wrote, client.ErrDestroyed, "the Write ends with the handle")
}
