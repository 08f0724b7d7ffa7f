//go:build linux

package server

import (
	"crypto/rand"
	"fmt"
	"strings"
	"testing"

	"github.com/coder/websocket"
	"github.com/klauspost/compress/s2"
	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/frames"
)

// ndjson is ACP-shaped output: JSON lines that repeat their keys.
func ndjson(n int) []byte {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"text":"chunk %d"}}}`+"\n", i)
	}
	return []byte(b.String()[:n])
}

func TestCompressionEndToEnd(t *testing.T) {
	h := newHarness(t, Config{})
	f := openFrame("inst-s2", "cat")
	f.OutputEnc, f.StdinEnc = "zstd,s2", "s2"
	p, opened := h.open(f)
	require.Equal(t, frames.EncS2, opened.OutputEnc)
	require.Equal(t, frames.EncS2, opened.StdinEnc)

	random := make([]byte, 40<<10)
	_, _ = rand.Read(random)
	in := append(ndjson(200<<10), random...)
	var off int64
	for rest := in; len(rest) > 0; {
		chunk := rest[:min(len(rest), int(opened.MaxData))]
		rest = rest[len(chunk):]
		// Offsets and credit count raw bytes, compressed or not.
		p.send(&frames.Stdin{Off: off, Data: chunk, Enc: frames.EncS2})
		off += int64(len(chunk))
	}
	p.send(&frames.StdinClose{Off: off})

	var out []byte
	compressed, raw := 0, 0
	for eof := false; !eof; {
		switch f := p.next().(type) {
		case *frames.Stdout:
			require.Equal(t, int64(len(out)), f.Off, "stdout offsets count raw bytes")
			out = append(out, f.Data...)
			if f.Enc == frames.EncS2 {
				compressed++
			} else {
				raw++
			}
			p.send(&frames.Ack{Stdout: int64(len(out))})
		case *frames.StdoutEOF:
			require.Equal(t, int64(len(in)), f.Off)
			eof = true
		}
	}
	require.Equal(t, in, out)
	require.Positive(t, compressed, "NDJSON travels compressed")
	require.Positive(t, raw, "random bytes travel raw")
}

func TestCompressionRefused(t *testing.T) {
	h := newHarness(t, Config{NoCompression: true})
	f := openFrame("inst-nos2", "cat")
	f.OutputEnc, f.StdinEnc = "s2", "s2"
	p, opened := h.open(f)
	require.Empty(t, opened.OutputEnc, "a server that refuses compression chooses none")
	require.Empty(t, opened.StdinEnc)
	p.send(&frames.Stdin{Off: 0, Data: ndjson(4096), Enc: frames.EncS2})
	p.requireClosed(websocket.StatusProtocolError, "stdin.enc s2, not negotiated")
}

func TestCompressedStdinBombs(t *testing.T) {
	h := newHarness(t, Config{MaxFrameData: 1000})
	b64 := func(b []byte) string {
		return string(frames.Append(nil, &frames.Stdin{Data: b})[len(`{"type":"stdin","off":0,"data":"`):])
	}
	line := func(block []byte) string {
		s := b64(block)
		return `{"type":"stdin","off":0,"data":"` + s[:strings.IndexByte(s, '"')] + `","enc":"s2"}` + "\n"
	}
	for i, tc := range []struct {
		name  string
		block []byte
	}{
		{"claims 4 GiB", []byte{0xff, 0xff, 0xff, 0xff, 0x0f, 0}},
		{"inflates past the announced max_data", s2.Encode(nil, make([]byte, 1001))},
		{"truncated", s2.Encode(nil, ndjson(900))[:40]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := openFrame(fmt.Sprintf("inst-bomb-%d", i), "cat")
			f.StdinEnc = "s2"
			p, _ := h.open(f)
			p.sendLine(line(tc.block))
			ce := p.closed()
			require.Equal(t, websocket.StatusInvalidFramePayloadData, ce.Code, ce.Reason)
			require.Regexp(t, `^stdin\.data: bad_payload`, ce.Reason)
		})
	}
}

// Replay after a resume sends the raw bytes the buffer holds, compressed
// again as the open negotiated.
func TestCompressionSurvivesResume(t *testing.T) {
	h := newHarness(t, Config{})
	f := openFrame("inst-s2-resume", "cat")
	f.OutputEnc = "s2"
	p, opened := h.open(f)
	require.Equal(t, frames.EncS2, opened.OutputEnc)
	require.Empty(t, opened.StdinEnc, "stdin was not offered")
	in := ndjson(48 << 10)
	p.send(&frames.Stdin{Off: 0, Data: in})
	p.send(&frames.StdinClose{Off: int64(len(in))})
	var got []byte
	for len(got) < len(in) {
		if so, ok := p.next().(*frames.Stdout); ok {
			got = append(got, so.Data...)
		}
	}
	require.Equal(t, in, got)
	p.ws.CloseNow() // nothing acked: everything is replayed
	h.waitEvent(hookDetached, opened.ProcessID)

	again := h.dial()
	again.send(&frames.Resume{ProcessID: opened.ProcessID, Token: opened.Token, StdoutReceived: 0})
	nextOf[*frames.Resumed](again)
	var replayed []byte
	compressed := false
	for len(replayed) < len(in) {
		if so, ok := again.next().(*frames.Stdout); ok {
			require.Equal(t, int64(len(replayed)), so.Off)
			replayed = append(replayed, so.Data...)
			compressed = compressed || so.Enc == frames.EncS2
		}
	}
	require.Equal(t, in, replayed)
	require.True(t, compressed, "the replay is compressed too")
}
