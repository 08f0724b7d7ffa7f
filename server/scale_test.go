//go:build linux

package server

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"runtime"
	rtmetrics "runtime/metrics"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/frames"
	"github.com/procwire/procwire/internal/chunk"
)

// skipHeavy skips a test too heavy for -race or -short; .ci/run runs
// these without -race.
func skipHeavy(t *testing.T) {
	switch {
	case raceEnabled:
		t.Skip("too slow under the race detector; .ci/run runs it without -race")
	case testing.Short():
		t.Skip("too heavy for -short")
	}
}

// heapObjects returns the bytes of live heap objects, measured after two
// collections (the second empties what sync.Pools kept from the first).
func heapObjects() int64 {
	runtime.GC()
	runtime.GC()
	s := []rtmetrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	rtmetrics.Read(s)
	return int64(s[0].Value.Uint64())
}

// needFDs skips the test when RLIMIT_NOFILE (which Go raises to its hard
// limit at start) cannot hold n descriptors.
func needFDs(t *testing.T, n uint64) {
	var l syscall.Rlimit
	require.NoError(t, syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l))
	if l.Cur < n {
		t.Skipf("RLIMIT_NOFILE is %d; this test needs %d", l.Cur, n)
	}
}

// openMany opens n processes of f (its instance id suffixed with the
// index) at once, a few at a time, and returns the peers and their opened.
func (h *harness) openMany(n int, f func(i int) *frames.Open) ([]*peer, []*frames.Opened) {
	h.t.Helper()
	peers, opened := make([]*peer, n), make([]*frames.Opened, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			ws, _, err := h.dialWith(authHeader(), []string{frames.Subprotocol})
			if !assert.NoError(h.t, err) {
				return
			}
			p := &peer{t: h.t, ws: ws}
			if !assert.NoError(h.t, ws.Write(testCtx(h.t), websocket.MessageText, frames.Append(nil, f(i)))) {
				return
			}
			fr, err := p.read(testCtx(h.t))
			if assert.NoError(h.t, err) && assert.IsType(h.t, &frames.Opened{}, fr) {
				peers[i], opened[i] = p, fr.(*frames.Opened)
			}
		})
	}
	wg.Wait()
	require.False(h.t, h.t.Failed())
	return peers, opened
}

// TestThousandProcessesHoldingLittle: 1,000 live cat processes, each
// holding under 2 KiB of unacknowledged stdout, take heap for what they
// hold, not for their 4 MiB windows. The bound is measured in-process with
// runtime/metrics (server and test peers together), never timed.
func TestThousandProcessesHoldingLittle(t *testing.T) {
	skipHeavy(t)
	const n = 1000
	// Per process: the server's connection, process and session state,
	// its one stdout chunk, and the test's own peer.
	const perProcess = chunk.Size + 64<<10
	needFDs(t, 6*n+100)
	// No heartbeat: one goroutine fewer per process, so that 1,000 fit the
	// race detector's 8,128.
	h := newHarness(t, Config{MaxProcesses: n, Heartbeat: -1, MaxMemory: 1 << 40, Logger: discardLogger()})
	h.srv.testHook = nil // more events than the harness keeps
	before := heapObjects()

	line := []byte(strings.Repeat("x", 1500) + "\n")
	peers, opened := h.openMany(n, func(i int) *frames.Open { return openFrame(fmt.Sprintf("many-%d", i), "cat") })
	for i, p := range peers {
		p.send(&frames.Stdin{Off: 0, Data: line})
		// Read the echo without acknowledging it: the server holds it.
		got := nextOf[*frames.Stdout](p)
		require.Equal(t, line, got.Data, "process %d", i)
	}
	held := heapObjects() - before
	for _, st := range h.srv.Stats().Processes {
		require.Equal(t, len(line), st.StdoutHeld)
		require.Equal(t, DefaultStdoutWindow, st.StdoutWindow)
	}
	t.Logf("%d processes with %d bytes each held: heap grew %.1f MiB (%.1f KiB a process); windows granted %d MiB",
		n, len(line), float64(held)/(1<<20), float64(held)/n/1024, int64(n)*DefaultStdoutWindow>>20)
	require.Less(t, held, int64(64<<20+n*perProcess))

	// Destroyed 64 at a time, as they were opened a few at a time: a
	// thousand teardowns at once on two cores queue for seconds, and
	// would time the machine against DestroyWait, which is not what this
	// test is about (a timed-out destroy and its retry are destroy
	// tests').
	for first := 0; first < n; first += 64 {
		wave := peers[first:min(first+64, n)]
		for i, p := range wave {
			p.send(&frames.Destroy{ProcessID: opened[first+i].ProcessID, Token: opened[first+i].Token})
		}
		for i, p := range wave {
			p.destroyedAnswer(opened[first+i].ProcessID)
		}
	}
}

// TestNeverReadingProcessesBoundedByWindows: 100 processes whose client
// never acknowledges fill their granted windows and no more; with
// MaxMemory at exactly their windows, the 101st open is refused with
// SandboxCapabilityUnavailable{requirement: "resources"}, and a destroy
// gives its share back.
func TestNeverReadingProcessesBoundedByWindows(t *testing.T) {
	const n, window = 100, 64 << 10
	needFDs(t, 6*n+100)
	cost := processCost(window, DefaultStdinWindow, DefaultStderrRing)
	h := newHarness(t, Config{MaxProcesses: n + 1, Heartbeat: -1, MaxMemory: n * cost, Logger: discardLogger()})
	h.srv.testHook = nil // more events than the harness keeps
	before := heapObjects()

	open := func(i int) *frames.Open {
		f := openFrame(fmt.Sprintf("flood-%d", i), "head", "-c", "10000000", "/dev/zero")
		f.StdoutWindow = window
		return f
	}
	peers, opened := h.openMany(n, open)
	require.Equal(t, n*cost, h.srv.Stats().Memory, "the budget holds every granted window")
	ctx := testCtx(t)
	for _, o := range opened {
		require.Equal(t, int64(window), o.StdoutWindow)
		for h.process(o.ProcessID).StdoutHeld < window {
			select {
			case <-ctx.Done():
				t.Fatal("window never filled")
			case <-time.After(10 * time.Millisecond): // polling Stats: the fill has no hook
			}
		}
	}
	held := heapObjects() - before
	t.Logf("%d never-reading processes with %d KiB windows: heap grew %.1f MiB", n, window>>10, float64(held)/(1<<20))
	// Each holds its window, in whole chunks (at most one more), plus its
	// connection and process state.
	require.Less(t, held, int64(n*(window+chunk.Size+64<<10)))

	over := h.dial()
	over.send(open(n))
	f := over.next()
	e, ok := f.(*frames.Error)
	require.True(t, ok, "got %s", f.Type())
	require.Equal(t, frames.CapabilityUnavailable, e.Code)
	require.Equal(t, "resources", e.Requirement)
	over.requireClosed(websocket.StatusNormalClosure, "")

	peers[0].send(&frames.Destroy{ProcessID: opened[0].ProcessID, Token: opened[0].Token})
	peers[0].destroyedAnswer(opened[0].ProcessID)
	require.Equal(t, (n-1)*cost, h.srv.Stats().Memory, "a destroy gives its windows back")
	h.open(open(n + 1))
}

func authHeader() http.Header { return http.Header{"Authorization": {"Bearer " + testToken}} }

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// TestFirstFramesWithinBudget: four connections send a first frame of
// nearly 128 MiB (an open padded with JSON whitespace) at once to a server
// whose budget is 257 MiB: one such frame at its cost (firstFrameCost, 256
// MiB) and room to spare. The budget never promises more than that;
// every connection is answered: opened, or refused with
// SandboxCapabilityUnavailable{requirement: "resources"}.
func TestFirstFramesWithinBudget(t *testing.T) {
	skipHeavy(t)
	// One big frame at its cost, and room for the beginnings of the
	// others and for a process.
	const budget = firstFrameCost*frames.MaxFirstLine + 1<<20
	h := newHarness(t, Config{MaxMemory: budget, StdoutWindow: 64 << 10, StdinWindow: 64 << 10,
		StderrRing: 4 << 10, FirstFrameTimeout: testTimeout, Heartbeat: -1, Logger: discardLogger()})
	small := string(frames.Append(nil, openFrame("big", "true")))
	pad := frames.MaxFirstLine - len(small) - 2 // under the limit, '\n' counted
	msg := []byte(small[:1] + strings.Repeat(" ", pad) + small[1:])

	var wg sync.WaitGroup
	results := make([]frames.Frame, 4)
	for i := range results {
		wg.Go(func() {
			ws, _, err := h.dialWith(authHeader(), []string{frames.Subprotocol})
			if !assert.NoError(t, err) {
				return
			}
			p := &peer{t: t, ws: ws}
			own := []byte(strings.Replace(string(msg), `"big"`, fmt.Sprintf(`"big%d"`, i), 1))
			// The write fails when the server refuses the frame halfway
			// and closes; the answer was sent first.
			_ = ws.Write(testCtx(t), websocket.MessageText, own)
			f, err := p.read(testCtx(t))
			if assert.NoError(t, err, "connection %d", i) {
				results[i] = f
			}
		})
	}
	wg.Wait()
	_, peak := h.srv.budget.usage()
	t.Logf("budget peak %.1f MiB of %d MiB", float64(peak)/(1<<20), budget>>20)
	require.LessOrEqual(t, peak, int64(budget))
	opened := 0
	for i, f := range results {
		switch f := f.(type) {
		case *frames.Opened:
			opened++
		case *frames.Error:
			assert.Equal(t, frames.CapabilityUnavailable, f.Code, "connection %d", i)
			assert.Equal(t, "resources", f.Requirement, "connection %d", i)
		default:
			t.Errorf("connection %d: %v", i, f)
		}
	}
	t.Logf("%d of 4 opened, %d refused", opened, 4-opened)
	require.Positive(t, opened, "the budget serves big first frames one after another")
	used, _ := h.srv.budget.usage()
	require.Equal(t, int64(opened)*processCost(64<<10, 64<<10, 4<<10), used, "first frames give their bytes back")
}

// TestShutdownWithSilentPeers: Shutdown does not wait for peers that
// upgraded and never sent a first frame; it returns within a second plus
// the destroy bound, its context never ending.
func TestShutdownWithSilentPeers(t *testing.T) {
	const n = 100
	needFDs(t, 4*n+100)
	h := newHarness(t, Config{DestroyWait: time.Second, Logger: discardLogger()})
	srv := h.srv
	// A live process whose client reads, so that its close handshake
	// completes: its destroy is part of the bound.
	live, _ := h.sh("live", "sleep 300")
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		for {
			if _, err := live.read(context.Background()); err != nil {
				return
			}
		}
	}()
	defer func() { <-drained }()
	for range n {
		_, _, err := h.dialWith(authHeader(), []string{frames.Subprotocol})
		require.NoError(t, err)
	}
	ctx := testCtx(t)
	for srv.Stats().Connections < n+1 && ctx.Err() == nil {
		runtime.Gosched() // the handlers register just after the upgrade
	}
	start := time.Now()
	require.NoError(t, srv.Shutdown(context.Background()))
	took := time.Since(start)
	t.Logf("Shutdown with %d silent peers and a live process: %v", n, took)
	require.Less(t, took, time.Second+srv.cfg.DestroyWait, "Shutdown waited for silent peers")
	require.Empty(t, srv.Stats().Processes)
}

func TestBudgetConfig(t *testing.T) {
	s, err := New(Config{})
	require.NoError(t, err)
	require.Equal(t, defaultMaxMemory(), s.cfg.MaxMemory)
	require.Positive(t, s.cfg.MaxMemory)
	require.Equal(t, 2*DefaultMaxProcesses+64, s.cfg.MaxConnections)
	s, err = New(Config{MaxProcesses: 10})
	require.NoError(t, err)
	require.Equal(t, 84, s.cfg.MaxConnections)

	for name, bad := range map[string]Config{
		"negative connections":       {MaxConnections: -1},
		"negative memory":            {MaxMemory: -1},
		"memory below one process":   {MaxMemory: processCost(DefaultStdoutWindow, DefaultStdinWindow, DefaultStderrRing) - 1},
		"memory below small windows": {MaxMemory: 4096, StdoutWindow: 1024, StdinWindow: 1024, StderrRing: 4096},
	} {
		_, err := New(bad)
		require.Error(t, err, name)
	}
	_, err = New(Config{MaxMemory: 3072, StdoutWindow: 1024, StdinWindow: 1024, StderrRing: 1024})
	require.NoError(t, err, "exactly one process's windows")
}

// TestMaxConnections: an upgrade beyond MaxConnections is answered 503
// before the upgrade; a connection that ends makes room.
func TestMaxConnections(t *testing.T) {
	h := newHarness(t, Config{MaxConnections: 2})
	a, _, err := h.dialWith(authHeader(), []string{frames.Subprotocol})
	require.NoError(t, err)
	_, _, err = h.dialWith(authHeader(), []string{frames.Subprotocol})
	require.NoError(t, err)
	_, resp, err := h.dialWith(authHeader(), []string{frames.Subprotocol})
	require.Error(t, err)
	require.NotNil(t, resp)
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)

	require.NoError(t, a.Close(websocket.StatusNormalClosure, ""))
	ctx := testCtx(t)
	for h.srv.upgrades.Load() >= 2 && ctx.Err() == nil {
		runtime.Gosched() // the handler of a returns just after the close
	}
	h.open(openFrame("room", "true"))
}

func TestBudgetAccounting(t *testing.T) {
	b := newBudget(100)
	require.True(t, b.take(60))
	require.False(t, b.take(41), "over the limit: refused, nothing taken")
	require.True(t, b.take(40))
	used, peak := b.usage()
	require.Equal(t, int64(100), used)
	require.Equal(t, int64(100), peak)
	b.give(70)
	used, peak = b.usage()
	require.Equal(t, int64(30), used)
	require.Equal(t, int64(100), peak, "the peak stays")
	require.Panics(t, func() { b.give(31) }, "giving back more than was taken is a bug")
}

// TestBigFirstFrameWaitEnds: a first frame past firstSmall bytes waits for
// a big-frame slot; the wait ends with its context (the first-frame
// timeout or a shutdown), giving back what it took.
func TestBigFirstFrameWaitEnds(t *testing.T) {
	b := newBudget(2*firstFrameCost*frames.MaxFirstLine + 1<<20)
	require.Equal(t, 2, cap(b.bigFirst), "one slot per big frame's cost, with room to spare")
	b.bigFirst <- struct{}{}
	b.bigFirst <- struct{}{} // both slots held by other frames

	ctx, cancel := context.WithCancel(context.Background())
	m := &firstMessage{b: b}
	done := make(chan error, 1)
	go func() { done <- m.read(ctx, strings.NewReader(strings.Repeat("x", firstSmall+1))) }()
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	require.Equal(t, firstSmall, m.n, "it read what it may without a slot")
	m.release()
	used, _ := b.usage()
	require.Zero(t, used)

	<-b.bigFirst // a slot frees: a frame now reads to its end
	m = &firstMessage{b: b}
	require.NoError(t, m.read(context.Background(), strings.NewReader(strings.Repeat("y", firstSmall+1))))
	require.Equal(t, strings.Repeat("y", firstSmall+1), string(m.bytes()))
	used, _ = b.usage()
	require.Equal(t, int64(firstFrameCost*3*chunk.Size), used, "its bytes, in whole chunks, at what they cost")
	m.release()
	m.release() // idempotent
	used, _ = b.usage()
	require.Zero(t, used)
	require.Len(t, b.bigFirst, 1, "its slot given back")
}
