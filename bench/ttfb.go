package bench

import (
	"context"
	"fmt"
	"io"
	"time"
)

// Time to first byte on a cold connection (issue 22): every run dials a
// new connection, has the server start a real child (echo) and times the
// first byte of its stdout, as a client that runs one short command per
// connection sees it. On procwire that is the dial, the upgrade, open and
// opened, the start of the child and its first stdout frame; on SSH the
// dial, the handshake (key exchange, host key, authentication), a session
// channel and exec; on the raw WebSocket the dial and upgrade, the start of
// the child and its first message.

// ColdWord is what the cold runs' echo prints (then a newline).
const ColdWord = "cold"

// coldArgv is the child of a cold run.
var coldArgv = []string{"echo", ColdWord}

// ColdFirstByte makes one cold run on p: it opens echo on a new
// connection, reads the first byte of its stdout and returns how long
// that took from before the dial. It then reads the rest to the end,
// checks it and closes the session, untimed.
func ColdFirstByte(ctx context.Context, p Peer) (ttfb time.Duration, err error) {
	start := time.Now()
	s, err := p.Open(ctx, coldArgv)
	if err != nil {
		return 0, fmt.Errorf("%s: open: %w", p.Name(), err)
	}
	defer closeSession(s, &err)
	first := make([]byte, 1)
	if _, err := io.ReadFull(s, first); err != nil {
		return 0, fmt.Errorf("%s: read the first byte: %w", p.Name(), err)
	}
	ttfb = time.Since(start)
	rest, err := io.ReadAll(s)
	if err != nil {
		return 0, fmt.Errorf("%s: read: %w", p.Name(), err)
	}
	if got := string(first) + string(rest); got != ColdWord+"\n" {
		return 0, fmt.Errorf("%s: echo printed %q", p.Name(), got)
	}
	return ttfb, nil
}

// ColdInterleaved makes n cold runs (ColdFirstByte) on every peer, the
// peers taking turns run by run (the order rotating every run, as in
// Interleaved), and returns each peer's times to first byte and the CPU
// time this process spent in its runs, from the dial to the close.
func ColdInterleaved(ctx context.Context, peers []Peer, n int) (samples [][]time.Duration, cpu []time.Duration, err error) {
	samples, cpu = make([][]time.Duration, len(peers)), make([]time.Duration, len(peers))
	for i := range samples {
		samples[i] = make([]time.Duration, 0, n)
	}
	for run := range n {
		for k := range peers {
			i := (k + run) % len(peers)
			c := CPUTime()
			d, err := ColdFirstByte(ctx, peers[i])
			cpu[i] += CPUTime() - c
			if err != nil {
				return nil, nil, err
			}
			samples[i] = append(samples[i], d)
		}
	}
	return samples, cpu, nil
}
