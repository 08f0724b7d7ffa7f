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

// ColdResult is one peer's cold runs: the times to first byte, in run
// order, and the CPU time they took from the dial to the close, of this
// process alone (CPU) and with the processes the runs started and reaped
// (CPUAll: the child, and on procwire the init that started it, which is
// the server re-executed; ChildrenCPUTime). Elapsed is their wall
// time from the dial to the close.
type ColdResult struct {
	Samples              []time.Duration
	CPU, CPUAll, Elapsed time.Duration
}

// ColdInterleaved makes n cold runs (ColdFirstByte) on every peer, the
// peers taking turns run by run (the order rotating every run, as in
// Interleaved). Its CPUAll is rough: a server may reap the child of a run
// after the close, in another peer's run.
func ColdInterleaved(ctx context.Context, peers []Peer, n int) ([]ColdResult, error) {
	res := make([]ColdResult, len(peers))
	for i := range res {
		res[i].Samples = make([]time.Duration, 0, n)
	}
	for run := range n {
		for k := range peers {
			if err := coldRun(ctx, peers[(k+run)%len(peers)], &res[(k+run)%len(peers)]); err != nil {
				return nil, err
			}
		}
	}
	return res, nil
}

// ColdBackToBack makes n cold runs on every peer, one peer's n in a row
// before the next peer's (the first peer rotating with round): as a client
// that starts one short command after another sees it. On procwire it
// shows how fast the server makes a warm init ready again, which the
// interleaved runs hide (the other peers' runs give it the time). A child
// reaped after its run's close is charged to the next run, of the same
// peer but for the last.
func ColdBackToBack(ctx context.Context, peers []Peer, n, round int) ([]ColdResult, error) {
	res := make([]ColdResult, len(peers))
	for k := range peers {
		i := (k + round) % len(peers)
		res[i].Samples = make([]time.Duration, 0, n)
		for range n {
			if err := coldRun(ctx, peers[i], &res[i]); err != nil {
				return nil, err
			}
		}
	}
	return res, nil
}

// coldRun makes one cold run on p and adds it to r.
func coldRun(ctx context.Context, p Peer, r *ColdResult) error {
	self, children, start := CPUTime(), ChildrenCPUTime(), time.Now()
	d, err := ColdFirstByte(ctx, p)
	r.Elapsed += time.Since(start)
	cpu := CPUTime() - self
	r.CPU += cpu
	r.CPUAll += cpu + ChildrenCPUTime() - children
	if err != nil {
		return err
	}
	r.Samples = append(r.Samples, d)
	return nil
}
