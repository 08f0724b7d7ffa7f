//go:build linux

package server

import (
	"strings"
	"testing"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/frames"
	"github.com/procwire/procwire/internal/testkit/servertest"
)

// offerFirst returns the subprotocols that carry f in the upgrade.
func offerFirst(t *testing.T, f frames.Frame) []string {
	t.Helper()
	sub, ok := frames.FirstSubprotocol(frames.Append(nil, f))
	require.True(t, ok)
	return []string{frames.Subprotocol, frames.SubprotocolFirst, sub}
}

// The first frame in the upgrade (PROTOCOL.md §1) is served as the first
// message: an open is answered without a message, its process runs, and an
// open sent afterwards is a second one. The frame is never echoed.
func TestFirstFrameInTheUpgrade(t *testing.T) {
	h := newHarness(t, Config{Token: testToken})
	open := openFrame("first-1", "sh", "-c", "echo hi; exec cat")
	ws, resp, err := h.dialWith(servertest.Bearer(testToken), offerFirst(t, open))
	require.NoError(t, err)
	require.Equal(t, frames.SubprotocolFirst, ws.Subprotocol())
	require.Equal(t, []string{frames.SubprotocolFirst}, resp.Header.Values("Sec-WebSocket-Protocol"))
	p := &peer{t: t, ws: ws}
	o := nextOf[*frames.Opened](p)
	require.Equal(t, "first-1", o.Evidence.InstanceID)
	out := nextOf[*frames.Stdout](p)
	require.Equal(t, "hi\n", string(out.Data))
	p.send(open)
	p.requireClosed(websocket.StatusProtocolError, "open inside a session")

	// A resume in the upgrade takes the process over.
	ws, _, err = h.dialWith(servertest.Bearer(testToken), offerFirst(t, &frames.Resume{ProcessID: o.ProcessID, Token: o.Token, StdoutReceived: 3}))
	require.NoError(t, err)
	require.Equal(t, frames.SubprotocolFirst, ws.Subprotocol())
	p = &peer{t: t, ws: ws}
	nextOf[*frames.Resumed](p)
	p.send(&frames.Destroy{})
	p.destroyedAnswer(o.ProcessID)
}

// An offer the server cannot take is left: procwire.v1 is selected and the
// first frame read from the connection, as from a client that offered none.
func TestFirstFrameLeftWhenMalformed(t *testing.T) {
	h := newHarness(t, Config{Token: testToken})
	msg := frames.Append(nil, openFrame("first-2", "true"))
	sub, ok := frames.FirstSubprotocol(msg)
	require.True(t, ok)
	for _, c := range []struct {
		name  string
		offer []string
	}{
		{"no marker", []string{frames.Subprotocol, sub}},
		{"not base64url", []string{frames.Subprotocol, frames.SubprotocolFirst, sub + "="}},
		{"two first frames", []string{frames.Subprotocol, frames.SubprotocolFirst, sub, sub}},
		{"too long", []string{frames.Subprotocol, frames.SubprotocolFirst, frames.FirstSubprotocolPrefix + strings.Repeat("QUFB", frames.MaxFirstSubprotocol/4)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ws, _, err := h.dialWith(servertest.Bearer(testToken), c.offer)
			require.NoError(t, err)
			require.Equal(t, frames.Subprotocol, ws.Subprotocol())
			p := &peer{t: t, ws: ws}
			p.send(&frames.Destroy{InstanceID: "first-2", OpenKey: strings.Repeat("ab", 32)})
			require.Equal(t, "process_not_found", nextOf[*frames.Error](p).Actual, "the frame sent was the first")
		})
	}
}

// The first frame in the upgrade is checked like one in a message: a frame
// that does not decode closes 1007, and a routing header that disagrees
// with it closes 1002 before anything starts.
func TestFirstFrameInTheUpgradeChecked(t *testing.T) {
	h := newHarness(t, Config{Token: testToken})
	ws, _, err := h.dialWith(servertest.Bearer(testToken), []string{frames.Subprotocol, frames.SubprotocolFirst, frames.FirstSubprotocolPrefix + "eyJ0eXBlIjoiaGVsbG8ifQo"}) // {"type":"hello"}
	require.NoError(t, err)
	require.Equal(t, frames.SubprotocolFirst, ws.Subprotocol())
	(&peer{t: t, ws: ws}).requireClosed(websocket.StatusInvalidFramePayloadData, `type: unknown_type: "hello"`)

	hdr := servertest.Bearer(testToken)
	hdr.Set(frames.HeaderInstance, "elsewhere")
	ws, _, err = h.dialWith(hdr, offerFirst(t, openFrame("first-3", "true")))
	require.NoError(t, err)
	p := &peer{t: t, ws: ws}
	ce := p.closed()
	require.Equal(t, websocket.StatusProtocolError, ce.Code, "close reason %q", ce.Reason)
	require.Empty(t, h.srv.Stats().Processes)
}
