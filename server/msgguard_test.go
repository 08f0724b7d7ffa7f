//go:build linux

package server

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/frames"
)

// rawPeer is a WebSocket client written by hand, to send frames no
// library would: a message left open, empty continuation frames.
type rawPeer struct {
	c  net.Conn
	br *bufio.Reader
}

func (h *harness) dialRaw() *rawPeer {
	h.t.Helper()
	c, err := net.Dial("tcp", h.ts.Listener.Addr().String())
	require.NoError(h.t, err)
	h.t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"+
		"Sec-WebSocket-Protocol: %s\r\nAuthorization: Bearer %s\r\n\r\n", h.ts.Listener.Addr(), frames.Subprotocol, testToken)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(h.t, err)
	require.Equal(h.t, http.StatusSwitchingProtocols, resp.StatusCode)
	return &rawPeer{c: c, br: br}
}

// frame writes one client frame (masked with a zero key, which leaves
// the payload as it is).
func (p *rawPeer) frame(t *testing.T, fin bool, opcode byte, payload []byte) error {
	b := []byte{opcode}
	if fin {
		b[0] |= 0x80
	}
	switch n := len(payload); {
	case n < 126:
		b = append(b, 0x80|byte(n))
	case n < 1<<16:
		b = append(b, 0x80|126)
		b = binary.BigEndian.AppendUint16(b, uint16(n))
	default:
		b = append(b, 0x80|127)
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	b = append(b, 0, 0, 0, 0)
	_, err := p.c.Write(append(b, payload...))
	return err
}

// closedWithin reads until the server drops the connection, which must
// come within d.
func (p *rawPeer) closedWithin(t *testing.T, d time.Duration) {
	t.Helper()
	require.NoError(t, p.c.SetReadDeadline(time.Now().Add(d)))
	_, err := io.Copy(io.Discard, p.br)
	if errors.Is(err, syscall.ECONNRESET) {
		err = nil // dropped while the client was still writing: a reset
	}
	require.NoError(t, err, "the connection was still open after %v", d)
}

const (
	opContinuation = 0x0
	opText         = 0x1
)

// A message begun and never ended does not hold the connection: it is
// dropped MessageTimeout after its first frame (issue 23, finding 5: empty
// continuation frames held one open for 40 s and counting).
func TestMessageLeftOpenIsDroppedAfterMessageTimeout(t *testing.T) {
	h := newHarness(t, Config{Heartbeat: -1, MessageTimeout: 300 * time.Millisecond})
	p := h.dialRaw()
	open := frames.Append(nil, openFrame("inst-open-msg", "cat"))
	require.NoError(t, p.frame(t, true, opText, open))
	// A stdin frame's beginning, then a trickle of empty continuations.
	require.NoError(t, p.frame(t, false, opText, []byte(`{"type":"stdin",`)))
	done := make(chan struct{})
	go func() {
		defer close(done)
		for p.frame(t, false, opContinuation, nil) == nil {
			select {
			case <-time.After(50 * time.Millisecond): // a trickle, not a flood
			case <-h.t.Context().Done():
				return
			}
		}
	}()
	p.closedWithin(t, 10*time.Second) // generous: the timeout is 300 ms
	<-done
}

// A message in thousands of empty continuation frames is dropped long
// before MessageTimeout: frames besides the payload are bounded.
func TestMessageInTooManyFramesIsDropped(t *testing.T) {
	h := newHarness(t, Config{Heartbeat: -1, MessageTimeout: 10 * time.Minute})
	p := h.dialRaw()
	require.NoError(t, p.frame(t, true, opText, frames.Append(nil, openFrame("inst-frames", "cat"))))
	require.NoError(t, p.frame(t, false, opText, []byte(`{"type":"stdin",`)))
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 100000 && p.frame(t, false, opContinuation, nil) == nil; i++ {
		}
	}()
	p.closedWithin(t, 30*time.Second)
	<-done
	require.True(t, strings.HasPrefix(errTooManyFrames.Error(), "message"))
}

// A client's ordinary messages, large ones included, pass the guard.
func TestMessageGuardLetsLargeMessagesThrough(t *testing.T) {
	h := newHarness(t, Config{Heartbeat: -1, MessageTimeout: 5 * time.Second})
	p, _ := h.open(openFrame("inst-large", "cat"))
	data := []byte(strings.Repeat("x", 60<<10))
	var off int64
	for range 8 {
		p.send(&frames.Stdin{Off: off, Data: data})
		off += int64(len(data))
	}
	var got int64
	for got < off {
		if f, ok := p.next().(*frames.Stdout); ok {
			got += int64(len(f.Data))
			p.send(&frames.Ack{Stdout: got})
		}
	}
}
