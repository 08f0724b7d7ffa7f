//go:build linux

package server

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/frames"
)

// TestSignalAfterStdin: a client writes a line and then sends SIGINT to a
// child that waits for the signal; when the signal arrives, the line is
// always already in the child's stdin pipe (PROTOCOL.md §5), in each of
// 1,000 rounds.
func TestSignalAfterStdin(t *testing.T) {
	exe, err := os.Executable()
	require.NoError(t, err)
	h := newHarness(t, Config{})
	f := openFrame("inst-order", exe)
	f.Request.Environment = map[string]string{childEnv: "signal-order"}
	p, opened := h.open(f)

	var out []byte
	var stdoutOff, stdinOff int64
	readLine := func() string {
		t.Helper()
		for {
			if i := bytes.IndexByte(out, '\n'); i >= 0 {
				line := string(out[:i+1])
				out = out[i+1:]
				return line
			}
			s := nextOf[*frames.Stdout](p)
			require.Equal(t, stdoutOff, s.Off)
			out = append(out, s.Data...)
			stdoutOff += int64(len(s.Data))
			p.send(&frames.Ack{Stdout: stdoutOff})
		}
	}
	for round := range 1000 {
		require.Equal(t, "ready\n", readLine(), "round %d", round)
		p.send(&frames.Stdin{Off: stdinOff, Data: []byte("quit\n")})
		stdinOff += 5
		id := int64(round + 1)
		p.send(&frames.Signal{ID: id, Signal: frames.SIGINT})
		require.Equal(t, &frames.Signaled{ID: id, Result: frames.SignalDelivered}, nextOf[*frames.Signaled](p))
		require.Equal(t, "in order\n", readLine(), "round %d", round)
	}
	p.send(&frames.Destroy{})
	p.destroyedAnswer(opened.ProcessID)
}

// TestSignalToAChildThatDoesNotRead: stdin queued behind a full pipe does
// not hold a signal back, or a child that reads nothing until it is
// signalled could never be.
func TestSignalToAChildThatDoesNotRead(t *testing.T) {
	h := newHarness(t, Config{})
	p, _ := h.sh("inst-full-pipe", `trap 'exec wc -c' TERM; echo ready; while :; do sleep 1; done`)
	require.Equal(t, "ready\n", string(nextOf[*frames.Stdout](p).Data))
	data := make([]byte, 512<<10) // far more than a pipe holds, within the stdin window
	for off := 0; off < len(data); off += 64 << 10 {
		p.send(&frames.Stdin{Off: int64(off), Data: data[off : off+64<<10]})
	}
	p.send(&frames.Signal{ID: 1, Signal: frames.SIGTERM})
	require.Equal(t, &frames.Signaled{ID: 1, Result: frames.SignalDelivered}, nextOf[*frames.Signaled](p))
	p.send(&frames.StdinClose{Off: int64(len(data))})
	o := p.collectFrom(6, false)
	require.Equal(t, "524288\n", strings.TrimLeft(string(o.stdout), " "))
	require.Equal(t, &frames.Exit{Code: 0}, o.exit)
}
