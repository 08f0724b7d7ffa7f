//go:build linux

package server

import (
	"crypto/rand"
	"crypto/sha256"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/frames"
)

// streamer drives a process like a client would: stdin within its credit,
// stdout acknowledged in batches, over a connection that can be replaced.
type streamer struct {
	p        *peer
	data     []byte // all of stdin
	maxData  int
	sent     int64 // stdin sent up to here
	limit    int64 // stdin limit
	closed   bool  // stdin_close sent
	got      []byte
	acked    int64
	ackEvery int64
	eof      bool
	exit     *frames.Exit
}

// run streams until stdout holds stopAt bytes, or until stdout_eof and
// exit arrived.
func (s *streamer) run(stopAt int) {
	t := s.p.t
	t.Helper()
	if int64(len(s.got)) > s.acked { // left unacked by the last run
		s.acked = int64(len(s.got))
		s.p.send(&frames.Ack{Stdout: s.acked})
	}
	for len(s.got) < stopAt && !(s.eof && s.exit != nil) {
		for s.sent < int64(len(s.data)) && s.sent < s.limit {
			n := min(int64(s.maxData), s.limit-s.sent, int64(len(s.data))-s.sent)
			s.p.send(&frames.Stdin{Off: s.sent, Data: s.data[s.sent : s.sent+n]})
			s.sent += n
		}
		if s.sent == int64(len(s.data)) && !s.closed {
			s.p.send(&frames.StdinClose{Off: s.sent})
			s.closed = true
		}
		switch f := s.p.next().(type) {
		case *frames.Stdout:
			require.Equal(t, int64(len(s.got)), f.Off, "stdout offset")
			require.LessOrEqual(t, len(f.Data), s.maxData)
			s.got = append(s.got, f.Data...)
			// Not at the stop, so that something is left to replay.
			if int64(len(s.got))-s.acked >= s.ackEvery && len(s.got) < stopAt {
				s.acked = int64(len(s.got))
				s.p.send(&frames.Ack{Stdout: s.acked})
			}
		case *frames.Credit:
			require.LessOrEqual(t, f.StdinReceived, s.sent)
			s.limit = max(s.limit, f.StdinLimit)
		case *frames.StdoutEOF:
			require.Equal(t, int64(len(s.got)), f.Off)
			s.eof = true
		case *frames.Exit:
			s.exit = f
		case *frames.Stderr:
		default:
			t.Fatalf("unexpected %s %+v", f.Type(), f)
		}
	}
}

// resume replaces the streamer's connection: a resume from the acked
// offset, which replays what was received after it.
func (s *streamer) resume(h *harness, opened *frames.Opened) {
	h.t.Helper()
	p := h.dial()
	p.send(&frames.Resume{ProcessID: opened.ProcessID, Token: opened.Token, StdoutReceived: s.acked})
	r := nextOf[*frames.Resumed](p)
	require.Equal(h.t, opened.ProcessID, r.ProcessID)
	require.Equal(h.t, opened.Evidence, r.Evidence)
	require.LessOrEqual(h.t, r.StdinReceived, s.sent)
	require.GreaterOrEqual(h.t, r.StdinLimit, r.StdinReceived)
	s.p = p
	s.got = s.got[:s.acked]
	s.sent = r.StdinReceived
	s.limit = r.StdinLimit
}

func TestResumeReplaysStdoutExactly(t *testing.T) {
	h := newHarness(t, Config{})
	data := make([]byte, 1<<20)
	rand.Read(data)
	p, opened := h.open(&frames.Open{
		InstanceID:   "inst-resume",
		Request:      frames.ProcessRequest{Executable: "cat", WorkingDirectory: "/", Environment: testEnv},
		StdoutWindow: 64 << 10,
		StdinWindow:  32 << 10,
	})
	s := &streamer{p: p, data: data, maxData: int(opened.MaxData), limit: opened.StdinLimit, ackEvery: 20 << 10}

	for _, cut := range []int{200 << 10, 500 << 10, 700 << 10} {
		s.run(cut)
		require.Less(t, s.acked, int64(len(s.got)), "some stdout is unacknowledged")
		s.p.ws.CloseNow()
		h.waitEvent(hookDetached, opened.ProcessID)
		s.resume(h, opened)
	}
	s.run(len(data) + 1)
	require.Equal(t, &frames.Exit{Code: 0}, s.exit)
	require.Equal(t, sha256.Sum256(data), sha256.Sum256(s.got))
}

func TestResumeReplaysEOFAndExit(t *testing.T) {
	h := newHarness(t, Config{})
	p, opened := h.sh("inst-gap", "printf abcdefghij")
	o := p.collect(false)
	require.Equal(t, "abcdefghij", string(o.stdout))
	// The signaled answer shows that the ack before it was processed.
	p.send(&frames.Signal{ID: 1, Signal: frames.SIGTERM})
	require.Equal(t, &frames.Signaled{ID: 1, Result: frames.SignalAlreadyExited}, nextOf[*frames.Signaled](p))
	p.ws.CloseNow()
	h.waitEvent(hookDetached, opened.ProcessID)

	resume := func(off int64) *peer {
		p := h.dial()
		p.send(&frames.Resume{ProcessID: opened.ProcessID, Token: opened.Token, StdoutReceived: off})
		return p
	}
	resume(5).requireError(&frames.Error{Code: frames.OperationFailed, Operation: "resume_process",
		Reason: "replay_gap", Gap: &frames.Gap{Requested: 5, Oldest: 10}})
	resume(11).requireError(&frames.Error{Code: frames.OperationFailed, Operation: "resume_process",
		Reason: "replay_beyond_end"})

	p = resume(10)
	require.Equal(t, &frames.Resumed{ProcessID: opened.ProcessID, Evidence: opened.Evidence, StdinReceived: 0, StdinLimit: opened.StdinLimit}, p.next())
	require.Equal(t, &frames.StdoutEOF{Off: 10}, p.next())
	require.Equal(t, &frames.Exit{Code: 0}, p.next())
	require.Equal(t, &frames.Credit{StdinReceived: 0, StdinLimit: opened.StdinLimit}, p.next())
	// The signal history survives the connection.
	p.send(&frames.Signal{ID: 1, Signal: frames.SIGTERM})
	require.Equal(t, &frames.Signaled{ID: 1, Result: frames.SignalAlreadyExited}, p.next())
}

func TestResumeUnknownOrWrongToken(t *testing.T) {
	h := newHarness(t, Config{})
	_, opened := h.open(openFrame("inst-tok", "sleep", "300"))
	notFound := notFoundError(opResume)
	for _, r := range []*frames.Resume{
		{ProcessID: opened.ProcessID, Token: opened.Token[:63] + flip(opened.Token[63])},
		{ProcessID: opened.ProcessID[:31] + flip(opened.ProcessID[31]), Token: opened.Token},
	} {
		p := h.dial()
		p.send(r)
		p.requireError(notFound)
	}
}

func TestResumeElsewhere(t *testing.T) {
	h := newHarness(t, Config{})
	a, opened := h.open(openFrame("inst-else", "cat"))
	a.send(&frames.Stdin{Off: 0, Data: []byte("one\n")})
	require.Equal(t, "one\n", string(nextOf[*frames.Stdout](a).Data))

	b := h.dial()
	b.send(&frames.Resume{ProcessID: opened.ProcessID, Token: opened.Token, StdoutReceived: 4})
	r := nextOf[*frames.Resumed](b)
	require.Equal(t, int64(4), r.StdinReceived)
	a.requireClosed(statusResumedElsewhere, "resumed elsewhere")

	b.send(&frames.Stdin{Off: 4, Data: []byte("two\n")})
	b.send(&frames.StdinClose{Off: 8})
	o := b.collectFrom(4, false)
	require.Equal(t, "two\n", string(o.stdout))
	require.Equal(t, &frames.Exit{Code: 0}, o.exit)
}

func TestResumeStderrFromTheOldestHeld(t *testing.T) {
	h := newHarness(t, Config{StderrRing: 8})
	p, opened := h.sh("inst-stderr-resume", "printf 01234567 >&2; read x; printf 89ab >&2; echo done; read y")
	o := output{}
	p.stderrUntil(&o, 8)
	require.Equal(t, "01234567", string(o.stderr))
	p.send(&frames.Stdin{Off: 0, Data: []byte("go\n")})
	require.Equal(t, "done\n", string(nextOf[*frames.Stdout](p).Data))
	p.stderrUntil(&o, 12)
	p.ws.CloseNow()
	h.waitEvent(hookDetached, opened.ProcessID)

	for _, tc := range []struct {
		received int64
		want     *frames.Stderr
	}{
		{8, &frames.Stderr{Off: 8, Data: []byte("89ab")}},
		{2, &frames.Stderr{Off: 4, Data: []byte("456789ab")}}, // 4 bytes were dropped
		{12, nil},
	} {
		p := h.dial()
		p.send(&frames.Resume{ProcessID: opened.ProcessID, Token: opened.Token, StdoutReceived: 0, StderrReceived: tc.received})
		nextOf[*frames.Resumed](p)
		require.Equal(t, &frames.Stdout{Off: 0, Data: []byte("done\n")}, p.next())
		// The ring wraps, so its bytes may come in two frames.
		var got *frames.Stderr
		for {
			f := p.next()
			if _, ok := f.(*frames.Credit); ok {
				break
			}
			e := f.(*frames.Stderr)
			if got == nil {
				got = &frames.Stderr{Off: e.Off}
			}
			require.Equal(t, got.Off+int64(len(got.Data)), e.Off)
			got.Data = append(got.Data, e.Data...)
		}
		require.Equal(t, tc.want, got)
		p.ws.CloseNow()
		h.waitEvent(hookDetached, opened.ProcessID)
	}
}

func TestGraceExpiry(t *testing.T) {
	h := newHarness(t, Config{Grace: 200 * time.Millisecond})
	p, opened := h.sh("inst-grace", "sleep 300 & wait")
	pid := h.process(opened.ProcessID).Pid
	p.ws.CloseNow()
	h.waitEvent(hookExpired, opened.ProcessID)
	require.True(t, groupGone(pid))
	require.Empty(t, h.srv.Stats().Processes)

	p = h.dial()
	p.send(&frames.Resume{ProcessID: opened.ProcessID, Token: opened.Token})
	p.requireError(&frames.Error{Code: frames.LifecycleConflict, Operation: "resume_process", Expected: "running", Actual: "process_expired"})

	p = h.dial()
	p.send(&frames.Destroy{ProcessID: opened.ProcessID, Token: opened.Token})
	require.Equal(t, &frames.Exit{Signal: "SIGKILL"}, p.next())
	require.Equal(t, &frames.Destroyed{ProcessID: opened.ProcessID}, p.next())
	p.requireClosed(websocket.StatusNormalClosure, "")

	// The instance was released by the expiry.
	h.open(openFrame("inst-grace", "true"))
}

func TestResumeWithinGraceKeepsTheProcess(t *testing.T) {
	h := newHarness(t, Config{Grace: 3 * time.Second})
	p, opened := h.open(openFrame("inst-keep", "cat"))
	for i := range 3 {
		p.ws.CloseNow()
		h.waitEvent(hookDetached, opened.ProcessID)
		p = h.dial()
		p.send(&frames.Resume{ProcessID: opened.ProcessID, Token: opened.Token, StdoutReceived: int64(i)})
		nextOf[*frames.Resumed](p)
		p.send(&frames.Stdin{Off: int64(i), Data: []byte{'a' + byte(i)}})
		require.Equal(t, &frames.Stdout{Off: int64(i), Data: []byte{'a' + byte(i)}}, nextOf[*frames.Stdout](p))
	}
	// Attached for longer than the grace: nothing expires.
	p.send(&frames.Signal{ID: 1, Signal: frames.SIGTERM})
	require.Equal(t, &frames.Signaled{ID: 1, Result: frames.SignalDelivered}, nextOf[*frames.Signaled](p))
	require.Equal(t, &frames.Exit{Signal: "SIGTERM"}, p.collectFrom(3, false).exit)
}

func TestResumeDestroyed(t *testing.T) {
	h := newHarness(t, Config{})
	p, opened := h.open(openFrame("inst-rd", "sleep", "300"))
	p.send(&frames.Destroy{})
	p.destroyedAnswer(opened.ProcessID)
	p = h.dial()
	p.send(&frames.Resume{ProcessID: opened.ProcessID, Token: opened.Token})
	p.requireError(&frames.Error{Code: frames.LifecycleConflict, Operation: "resume_process", Expected: "running", Actual: "process_destroyed"})
}

func TestHeartbeatFailureDetaches(t *testing.T) {
	h := newHarness(t, Config{Heartbeat: 50 * time.Millisecond})
	p, opened := h.open(openFrame("inst-hb", "cat"))
	require.Equal(t, int64(50), opened.HeartbeatMS)
	// The peer stops reading, so it answers no ping.
	h.waitEvent(hookDetached, opened.ProcessID)
	p.ws.CloseNow()

	p = h.dial()
	p.send(&frames.Resume{ProcessID: opened.ProcessID, Token: opened.Token})
	nextOf[*frames.Resumed](p)
	// A peer that reads answers pings; the session stays attached while
	// the heartbeat ticks.
	for i := range 20 {
		p.send(&frames.Stdin{Off: int64(i), Data: []byte("x")})
		require.Equal(t, &frames.Stdout{Off: int64(i), Data: []byte("x")}, nextOf[*frames.Stdout](p))
	}
}

func TestTombstones(t *testing.T) {
	s, err := New(Config{MaxTombstones: 3, TombstoneTTL: time.Minute})
	require.NoError(t, err)
	now := time.Unix(1000, 0)
	s.now = func() time.Time { return now }
	add := func(id string) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.addTombLocked(&tombstone{id: id, token: "t", at: now})
	}
	has := func(id string) bool {
		_, ts, _ := s.lookup(id, "t")
		return ts != nil
	}
	for _, id := range []string{"a", "b", "c", "d"} {
		add(id)
		now = now.Add(time.Second)
	}
	require.False(t, has("a"), "the oldest is forgotten first")
	require.True(t, has("b") && has("c") && has("d"))
	require.False(t, func() bool { _, ts, _ := s.lookup("b", "wrong"); return ts != nil }())
	now = now.Add(time.Minute - 3*time.Second) // b is a minute old, c is not
	require.False(t, has("b"))
	require.True(t, has("c") && has("d"))
	now = now.Add(time.Hour)
	require.False(t, has("c") || has("d"))
	require.Zero(t, s.Stats().Tombstones)
}
