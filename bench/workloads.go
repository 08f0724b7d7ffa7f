package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// StdinChunk is the write size of the stdin workload.
const StdinChunk = 64 << 10

// LineSize is the size of one request/response line (newline included), an
// ACP message of typical size.
const LineSize = 2 << 10

// RoundTripSize is the size of one round trip of the concurrent sessions
// workload.
const RoundTripSize = 64

// headCmd runs head -c size of /dev/zero.
func headCmd(size int64) []string {
	return []string{"head", "-c", strconv.FormatInt(size, 10), "/dev/zero"}
}

// closeSession closes s and joins its error to err.
func closeSession(s Session, err *error) {
	if cerr := s.Close(); cerr != nil && *err == nil {
		*err = fmt.Errorf("close: %w", cerr)
	}
}

// StdoutBulk streams head -c size /dev/zero's stdout to the client and
// returns how long it took from the open to the stdout's EOF.
func StdoutBulk(ctx context.Context, p Peer, size int64) (elapsed time.Duration, err error) {
	start := time.Now()
	s, err := p.Open(ctx, headCmd(size))
	if err != nil {
		return 0, fmt.Errorf("%s: open: %w", p.Name(), err)
	}
	defer closeSession(s, &err)
	n, err := io.CopyBuffer(io.Discard, onlyReader{s}, make([]byte, 256<<10))
	if err != nil {
		return 0, fmt.Errorf("%s: read: %w", p.Name(), err)
	}
	if n != size {
		return 0, fmt.Errorf("%s: read %d bytes, want %d", p.Name(), n, size)
	}
	return time.Since(start), nil
}

// onlyReader hides any WriterTo so io.CopyBuffer uses the given buffer.
type onlyReader struct{ io.Reader }

// StdinBulk writes size zero bytes into wc -c in StdinChunk writes,
// half-closes stdin and reads wc's count; it returns how long it took from
// the open to the count.
func StdinBulk(ctx context.Context, p Peer, size int64) (elapsed time.Duration, err error) {
	start := time.Now()
	s, err := p.Open(ctx, []string{"wc", "-c"})
	if err != nil {
		return 0, fmt.Errorf("%s: open: %w", p.Name(), err)
	}
	defer closeSession(s, &err)
	chunk := make([]byte, StdinChunk)
	for left := size; left > 0; {
		k := min(left, StdinChunk)
		if _, err := s.Write(chunk[:k]); err != nil {
			return 0, fmt.Errorf("%s: write: %w", p.Name(), err)
		}
		left -= k
	}
	if err := s.CloseStdin(); err != nil {
		return 0, fmt.Errorf("%s: close stdin: %w", p.Name(), err)
	}
	out, err := io.ReadAll(s)
	if err != nil {
		return 0, fmt.Errorf("%s: read: %w", p.Name(), err)
	}
	if got := strings.TrimSpace(string(out)); got != strconv.FormatInt(size, 10) {
		return 0, fmt.Errorf("%s: wc counted %q, want %d", p.Name(), got, size)
	}
	return time.Since(start), nil
}

// roundTrip writes msg and reads len(got) bytes back.
func roundTrip(s Session, msg, got []byte) error {
	if _, err := s.Write(msg); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	if _, err := io.ReadFull(s, got); err != nil {
		return fmt.Errorf("read: %w", err)
	}
	return nil
}

// Echo writes one byte to cat and reads it back, n times in a row, and
// returns every round trip.
func Echo(ctx context.Context, p Peer, n int) (samples []time.Duration, err error) {
	s, err := p.Open(ctx, []string{"cat"})
	if err != nil {
		return nil, fmt.Errorf("%s: open: %w", p.Name(), err)
	}
	defer closeSession(s, &err)
	return echoes(p.Name(), s, n)
}

// RequestResponse is the shape of an ACP session: it writes a LineSize
// line to cat and reads the line back before writing the next, n times,
// and returns how long the n took.
func RequestResponse(ctx context.Context, p Peer, n int) (elapsed time.Duration, err error) {
	s, err := p.Open(ctx, []string{"cat"})
	if err != nil {
		return 0, fmt.Errorf("%s: open: %w", p.Name(), err)
	}
	defer closeSession(s, &err)
	line := append(bytes.Repeat([]byte{'a'}, LineSize-1), '\n')
	got := make([]byte, LineSize)
	start := time.Now()
	for range n {
		if err := roundTrip(s, line, got); err != nil {
			return 0, fmt.Errorf("%s: %w", p.Name(), err)
		}
	}
	elapsed = time.Since(start)
	if !bytes.Equal(got, line) {
		return 0, fmt.Errorf("%s: line came back changed", p.Name())
	}
	return elapsed, nil
}

// Interleaved makes n round trips of msg through cat on every peer, in
// blocks of block round trips that take turns between the peers (the
// order rotating every block), and returns each peer's round trips and
// the CPU time this process spent in its blocks. Back to back, each
// peer's run would meet the machine in whatever state it happened to be
// in; interleaved, they meet the same states, which is what a ratio of
// latencies needs on a machine whose wake-up latency changes by the
// second.
func Interleaved(ctx context.Context, peers []Peer, n, block int, msg []byte) (samples [][]time.Duration, cpu []time.Duration, err error) {
	ss := make([]Session, len(peers))
	defer func() {
		for _, s := range ss {
			if s != nil {
				closeSession(s, &err)
			}
		}
	}()
	for i, p := range peers {
		if ss[i], err = p.Open(ctx, []string{"cat"}); err != nil {
			return nil, nil, fmt.Errorf("%s: open: %w", p.Name(), err)
		}
	}
	samples, cpu = make([][]time.Duration, len(peers)), make([]time.Duration, len(peers))
	for i := range samples {
		samples[i] = make([]time.Duration, 0, n)
	}
	got := make([]byte, len(msg))
	for b := 0; b*block < n; b++ {
		for k := range peers {
			i := (k + b) % len(peers)
			c := CPUTime()
			for range min(block, n-b*block) {
				start := time.Now()
				if err := roundTrip(ss[i], msg, got); err != nil {
					return nil, nil, fmt.Errorf("%s: %w", peers[i].Name(), err)
				}
				samples[i] = append(samples[i], time.Since(start))
			}
			cpu[i] += CPUTime() - c
			if !bytes.Equal(got, msg) {
				return nil, nil, fmt.Errorf("%s: the message came back changed", peers[i].Name())
			}
		}
	}
	return samples, cpu, nil
}

// SessionsResult is the outcome of the concurrent sessions workload.
type SessionsResult struct {
	RoundTrips int
	Elapsed    time.Duration // from the first write to the last read
	P99        time.Duration // of the round trips
	CPU        time.Duration // user + system time of this process over Elapsed
}

// RTPerSecond returns the round trips per second.
func (r SessionsResult) RTPerSecond() float64 { return float64(r.RoundTrips) / r.Elapsed.Seconds() }

// CPUPerRT returns the CPU time per round trip.
func (r SessionsResult) CPUPerRT() time.Duration { return r.CPU / time.Duration(r.RoundTrips) }

// sessionOpeners bounds the opens in flight at once.
const sessionOpeners = 32

// Sessions opens sessions cat processes, then has each make perSession
// round trips of RoundTripSize bytes, all at once. CPU is this process's
// (the client and the server; not the cats').
func Sessions(ctx context.Context, p Peer, sessions, perSession int) (res SessionsResult, err error) {
	ss, err := openSessions(ctx, p, sessions)
	defer closeSessions(ss)
	if err != nil {
		return res, err
	}
	startCPU, start := CPUTime(), time.Now()
	all, err := roundTripsAtOnce(p, ss, perSession)
	res.Elapsed = time.Since(start)
	res.CPU = CPUTime() - startCPU
	if err != nil {
		return res, err
	}
	res.setRoundTrips(all)
	return res, nil
}

// SessionsInterleaved is Sessions on every peer at once, interleaved like
// Interleaved: each peer's sessions are opened first, then the peers take
// turns, each making block round trips on all its sessions at once (the
// order rotating every turn), until every session made perSession.
// Elapsed and CPU are the sums over a peer's turns.
func SessionsInterleaved(ctx context.Context, peers []Peer, sessions, perSession, block int) (res []SessionsResult, err error) {
	ss := make([][]Session, len(peers))
	defer func() {
		for _, ps := range ss {
			closeSessions(ps)
		}
	}()
	for i, p := range peers {
		if ss[i], err = openSessions(ctx, p, sessions); err != nil {
			return nil, err
		}
	}
	res = make([]SessionsResult, len(peers))
	samples := make([][]time.Duration, len(peers))
	for b := 0; b*block < perSession; b++ {
		for k := range peers {
			i := (k + b) % len(peers)
			startCPU, start := CPUTime(), time.Now()
			turn, err := roundTripsAtOnce(peers[i], ss[i], min(block, perSession-b*block))
			res[i].Elapsed += time.Since(start)
			res[i].CPU += CPUTime() - startCPU
			if err != nil {
				return nil, err
			}
			samples[i] = append(samples[i], turn...)
		}
	}
	for i, all := range samples {
		res[i].setRoundTrips(all)
	}
	return res, nil
}

// setRoundTrips records the count and the p99 of all, which it sorts.
func (r *SessionsResult) setRoundTrips(all []time.Duration) {
	slices.Sort(all)
	r.RoundTrips = len(all)
	r.P99 = all[len(all)*99/100]
}

// openSessions opens n cat sessions on p, sessionOpeners at a time. The
// sessions it opened are returned also with an error, for closeSessions.
func openSessions(ctx context.Context, p Peer, n int) ([]Session, error) {
	ss, errs := make([]Session, n), make([]error, n)
	sem := make(chan struct{}, sessionOpeners)
	var wg sync.WaitGroup
	for i := range ss {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			ss[i], errs[i] = p.Open(ctx, []string{"cat"})
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return ss, fmt.Errorf("%s: open: %w", p.Name(), err)
	}
	return ss, nil
}

// closeSessions closes the sessions of ss that were opened, all at once.
func closeSessions(ss []Session) {
	var wg sync.WaitGroup
	for _, s := range ss {
		if s != nil {
			wg.Go(func() { _ = s.Close() })
		}
	}
	wg.Wait()
}

// roundTripsAtOnce has every session of ss make n round trips of
// RoundTripSize bytes, all at once, and returns every round trip.
func roundTripsAtOnce(p Peer, ss []Session, n int) ([]time.Duration, error) {
	samples, errs := make([][]time.Duration, len(ss)), make([]error, len(ss))
	var wg sync.WaitGroup
	for i, s := range ss {
		wg.Go(func() {
			msg, got := bytes.Repeat([]byte{byte('a' + i%26)}, RoundTripSize), make([]byte, RoundTripSize)
			samples[i] = make([]time.Duration, 0, n)
			for range n {
				t := time.Now()
				if err := roundTrip(s, msg, got); err != nil {
					errs[i] = err
					return
				}
				samples[i] = append(samples[i], time.Since(t))
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%s: %w", p.Name(), err)
	}
	return slices.Concat(samples...), nil
}

// Percentile returns the q-quantile (0..1) of sorted samples.
func Percentile(sorted []time.Duration, q float64) time.Duration {
	return sorted[int(float64(len(sorted)-1)*q)]
}

// echoes times n round trips of one byte through s, checking each echo.
func echoes(name string, s Session, n int) ([]time.Duration, error) {
	one, got := []byte{'x'}, make([]byte, 1)
	samples := make([]time.Duration, 0, n)
	for range n {
		start := time.Now()
		if err := roundTrip(s, one, got); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		samples = append(samples, time.Since(start))
		if got[0] != 'x' {
			return nil, fmt.Errorf("%s: echoed %q", name, got)
		}
	}
	return samples, nil
}
