//go:build linux

package bench

import (
	"bytes"
	"context"
	"flag"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/server"
)

// BenchmarkColdPhases splits procwire's cold first byte (ColdFirstByte)
// into what the server's socket sees: the dial until the accept, the
// upgrade (the request read until the 101 written), the open read (the
// first read after the 101; 0 when the open came in the upgrade, as it
// does from procwire's clients), the start (until "opened" is written: the
// containment, the init and the child's exec), the child's first output
// (until a "stdout" frame is written) and the client's read of it. It
// reports each phase's p50 in µs. The server writes frames uncompressed,
// so its writes are told apart by their text; what the client writes is
// masked, and is told apart by its order.
//
//	go test -run '^$' -bench ColdPhases -benchtime 200x ./bench
//
// Back to back, a run may find no warm init ready (the next is made after
// the last run's first output) and wait for one; -cold-pause 20ms leaves
// that time between runs, untimed, as a client running a command now and
// then does.
func BenchmarkColdPhases(b *testing.B) {
	exec, closeExec, err := procwireExecutor()
	require.NoError(b, err)
	srv, err := server.New(server.Config{MaxProcesses: 16, MaxMemory: 1 << 30, Executor: exec, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(b, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(b, err)
	stamps := &phaseStamps{}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: time.Minute}
	go func() { _ = hs.Serve(stampingListener{ln, stamps}) }()
	p := &procwirePeer{srv: srv, hs: hs, url: "ws://" + ln.Addr().String() + "/", close: closeExec}
	defer func() { require.NoError(b, p.Close()) }()
	ctx, cancel := context.WithTimeout(context.Background(), benchTimeout)
	defer cancel()

	names := []string{"accept", "upgrade", "open-read", "start", "first-output", "client-read"}
	phases := make([][]time.Duration, len(names))
	b.ReportAllocs()
	for b.Loop() {
		if *coldPause > 0 {
			b.StopTimer()
			time.Sleep(*coldPause) // the workload's idle time, not a wait for anything
			b.StartTimer()
		}
		stamps.reset()
		start := time.Now()
		d, err := ColdFirstByte(ctx, p)
		require.NoError(b, err)
		ev := stamps.first()
		ev[len(ev)-1] = start.Add(d) // the client's first byte
		if ev[stepOpenRead].IsZero() || ev[stepOpenRead].After(ev[stepOpened]) {
			// The open came in the upgrade (PROTOCOL.md §1, "The first
			// frame in the upgrade"): no read of it after the 101, and
			// the first read there is a later frame.
			ev[stepOpenRead] = ev[stepUpgrade]
		}
		prev := start
		for i, t := range ev {
			require.False(b, t.IsZero(), "no %s seen", names[i])
			phases[i] = append(phases[i], t.Sub(prev))
			prev = t
		}
	}
	for i, s := range phases {
		slices.Sort(s)
		b.ReportMetric(float64(Percentile(s, 0.5).Nanoseconds())/1e3, names[i]+"-µs")
	}
}

// coldPause is BenchmarkColdPhases' pause between runs.
var coldPause = flag.Duration("cold-pause", 0, "BenchmarkColdPhases: an untimed pause between runs, in which the next warm init is made")

// phaseStamps records, for the connection accepted first since reset,
// when each step of a cold run was seen on the server's socket.
type phaseStamps struct {
	mu    sync.Mutex
	conn  net.Conn // the connection whose steps are recorded
	at    [6]time.Time
	reads int
}

// Steps, the indexes of phaseStamps.at.
const (
	stepAccept = iota
	stepUpgrade
	stepOpenRead
	stepOpened
	stepStdout
	stepClient
)

func (s *phaseStamps) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.conn, s.at, s.reads = nil, [6]time.Time{}, 0
}

func (s *phaseStamps) first() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.at[:])
}

// mark records step at now for c if it is the recorded connection and
// the step is not recorded yet.
func (s *phaseStamps) mark(c net.Conn, step int) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if step == stepAccept && s.conn == nil {
		s.conn = c
	}
	if s.conn == c && s.at[step].IsZero() {
		s.at[step] = now
	}
}

// read counts c's reads after the 101 was written: the first is the open.
func (s *phaseStamps) read(c net.Conn) {
	s.mu.Lock()
	upgraded := s.conn == c && !s.at[stepUpgrade].IsZero()
	if upgraded {
		s.reads++
	}
	first := upgraded && s.reads == 1
	s.mu.Unlock()
	if first {
		s.mark(c, stepOpenRead)
	}
}

type stampingListener struct {
	net.Listener
	s *phaseStamps
}

func (l stampingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	sc := &stampingConn{Conn: c, s: l.s}
	l.s.mark(sc, stepAccept)
	return sc, nil
}

type stampingConn struct {
	net.Conn
	s *phaseStamps
}

func (c *stampingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.s.read(c)
	}
	return n, err
}

func (c *stampingConn) Write(b []byte) (int, error) {
	switch {
	case bytes.HasPrefix(b, []byte("HTTP/1.1 101")):
		c.s.mark(c, stepUpgrade)
	case bytes.Contains(b, []byte(`"opened"`)):
		c.s.mark(c, stepOpened)
	case bytes.Contains(b, []byte(`"stdout"`)):
		c.s.mark(c, stepStdout)
	}
	return c.Conn.Write(b)
}
