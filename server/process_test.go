//go:build linux

package server

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/credit"
	"github.com/procwire/procwire/frames"
	"github.com/procwire/procwire/internal/testkit/fakeexec"
	"github.com/procwire/procwire/proc"
)

func TestCatRoundTrip(t *testing.T) {
	h := newHarness(t, Config{})
	p, opened := h.open(openFrame("inst-cat", "cat"))
	require.Equal(t, int64(DefaultStdinWindow), opened.StdinLimit)

	p.send(&frames.Stdin{Off: 0, Data: []byte("hello\n")})
	out := nextOf[*frames.Stdout](p)
	require.Equal(t, &frames.Stdout{Off: 0, Data: []byte("hello\n")}, out)
	p.send(&frames.Ack{Stdout: 6})
	p.send(&frames.Stdin{Off: 6, Data: []byte("world\n")})
	p.send(&frames.StdinClose{Off: 12})

	o := p.collectFrom(6, false)
	require.Equal(t, "world\n", string(o.stdout))
	require.Equal(t, []frames.Type{frames.TypeStdoutEOF, frames.TypeExit}, o.order)
	require.Equal(t, int64(12), o.eof)
	require.Equal(t, &frames.Exit{Code: 0}, o.exit)
}

func TestExitCodes(t *testing.T) {
	h := newHarness(t, Config{})
	for i, code := range []int{0, 1, 255} {
		p, _ := h.sh("inst-exit-"+string(rune('a'+i)), "exit "+strconv.Itoa(code))
		o := p.collect(false)
		require.Equal(t, &frames.Exit{Code: code}, o.exit)
		require.Equal(t, []frames.Type{frames.TypeStdoutEOF, frames.TypeExit}, o.order)
	}
}

func TestSignals(t *testing.T) {
	exec := &countingExecutor{}
	h := newHarness(t, Config{Executor: exec})
	for i, sig := range []frames.SignalName{frames.SIGINT, frames.SIGTERM, frames.SIGKILL} {
		p, _ := h.open(openFrame("inst-sig-"+string(sig), "sleep", "300"))
		proc := exec.proc(i)

		p.send(&frames.Signal{ID: 7, Signal: sig})
		require.Equal(t, &frames.Signaled{ID: 7, Result: frames.SignalDelivered}, nextOf[*frames.Signaled](p))
		// A repeated id is answered with the recorded result, not delivered.
		p.send(&frames.Signal{ID: 7, Signal: sig})
		p.send(&frames.Signal{ID: 3, Signal: sig})
		require.Equal(t, &frames.Signaled{ID: 7, Result: frames.SignalDelivered}, nextOf[*frames.Signaled](p))
		require.Equal(t, &frames.Signaled{ID: 3, Result: frames.SignalAlreadyExited}, nextOf[*frames.Signaled](p))
		require.EqualValues(t, 1, proc.signals.Load())

		o := p.collect(false)
		require.Equal(t, &frames.Exit{Signal: string(sig)}, o.exit)

		// After the exit a new id is answered already_exited.
		p.send(&frames.Signal{ID: 8, Signal: sig})
		require.Equal(t, &frames.Signaled{ID: 8, Result: frames.SignalAlreadyExited}, nextOf[*frames.Signaled](p))
		p.send(&frames.Signal{ID: 7, Signal: sig})
		require.Equal(t, &frames.Signaled{ID: 7, Result: frames.SignalDelivered}, nextOf[*frames.Signaled](p))
	}
}

func TestSignalHistory(t *testing.T) {
	c := &conn{} // its writer's wakeup (c.lw) is a no-op until Init
	fp := startFake(t, func(p *fakeexec.Process) { p.IgnoreSignals = true })
	s := &session{p: fp, recv: credit.NewReceiver(1024),
		log: slog.New(slog.DiscardHandler), attached: c}
	answer := func(id int64) frames.Frame {
		t.Helper()
		require.True(t, s.signalLocked(c, id, frames.SIGTERM))
		require.Len(t, c.answers, 1)
		a := c.answers[0]
		c.answers = nil
		return a
	}
	for id := int64(1); id <= 100; id++ {
		require.Equal(t, &frames.Signaled{ID: id * 2, Result: frames.SignalDelivered}, answer(id*2))
	}
	for id := int64(1); id <= 100; id++ {
		if id > 100-signalHistory {
			require.Equal(t, &frames.Signaled{ID: id * 2, Result: frames.SignalDelivered}, answer(id*2), "id %d is among the last 64", id*2)
		} else {
			require.Equal(t, &frames.Signaled{ID: id * 2, Result: frames.SignalAlreadyExited}, answer(id*2), "id %d is forgotten", id*2)
		}
	}
	require.EqualValues(t, 100, fp.Signals())
}

func TestSecondOpenConflicts(t *testing.T) {
	h := newHarness(t, Config{})
	p, opened := h.open(openFrame("inst-1", "sleep", "300"))

	p2 := h.dial()
	p2.send(openFrame("inst-1", "true"))
	p2.requireError(&frames.Error{Code: frames.LifecycleConflict, Operation: "open_process", Actual: "process_already_open"})

	// Another instance is independent.
	h.open(openFrame("inst-2", "sleep", "300"))

	p.send(&frames.Destroy{})
	require.Equal(t, &frames.Exit{Signal: "SIGKILL"}, p.destroyedAnswer(opened.ProcessID))

	p3, _ := h.sh("inst-1", "exit 3")
	require.Equal(t, &frames.Exit{Code: 3}, p3.collect(false).exit)

	// An exited process still holds its instance until destroyed.
	p4 := h.dial()
	p4.send(openFrame("inst-1", "true"))
	p4.requireError(&frames.Error{Code: frames.LifecycleConflict, Operation: "open_process", Actual: "process_already_open"})
}

func TestMaxProcesses(t *testing.T) {
	h := newHarness(t, Config{MaxProcesses: 2})
	p, opened := h.open(openFrame("inst-a", "sleep", "300"))
	h.open(openFrame("inst-b", "sleep", "300"))

	full := h.dial()
	full.send(openFrame("inst-c", "true"))
	full.requireError(&frames.Error{Code: frames.CapabilityUnavailable, Requirement: "resources",
		Message: "the server holds its MaxProcesses processes"})

	// Destroy frees a place.
	p.send(&frames.Destroy{})
	require.Equal(t, &frames.Exit{Signal: "SIGKILL"}, p.destroyedAnswer(opened.ProcessID))
	h.open(openFrame("inst-c", "sleep", "300"))
}

func TestDestroyIdempotent(t *testing.T) {
	h := newHarness(t, Config{})
	p, opened := h.open(openFrame("inst-d", "sleep", "300"))
	pid := h.process(opened.ProcessID).Pid
	killed := &frames.Exit{Signal: "SIGKILL"}

	// Twice on one connection: the first answer ends the connection.
	p.send(&frames.Destroy{})
	p.send(&frames.Destroy{})
	require.Equal(t, killed, p.destroyedAnswer(opened.ProcessID))
	require.True(t, groupGone(pid))

	// As the first frame of new connections, again and again: exit, destroyed.
	for range 2 {
		p := h.dial()
		p.send(&frames.Destroy{ProcessID: opened.ProcessID, Token: opened.Token})
		require.Equal(t, killed, p.next())
		require.Equal(t, &frames.Destroyed{ProcessID: opened.ProcessID}, p.next())
		p.requireClosed(websocket.StatusNormalClosure, "")
	}

	// A wrong token is an unknown process.
	p = h.dial()
	p.send(&frames.Destroy{ProcessID: opened.ProcessID, Token: opened.Token[:63] + "x"[:0] + flip(opened.Token[63])})
	p.requireError(notFoundError(opDestroy))

	// And the instance is free again.
	h.open(openFrame("inst-d", "true"))
}

// flip returns a hex digit other than c.
func flip(c byte) string {
	if c == '0' {
		return "1"
	}
	return "0"
}

func TestDestroyFirstFrameOfLiveProcess(t *testing.T) {
	h := newHarness(t, Config{})
	p, opened := h.open(openFrame("inst-dl", "sleep", "300"))

	// Destroyed from another connection: the attached one is told too.
	p2 := h.dial()
	p2.send(&frames.Destroy{ProcessID: opened.ProcessID, Token: opened.Token})
	require.Equal(t, &frames.Exit{Signal: "SIGKILL"}, p2.next())
	require.Equal(t, &frames.Destroyed{ProcessID: opened.ProcessID}, p2.next())
	p2.requireClosed(websocket.StatusNormalClosure, "")

	require.Equal(t, &frames.Exit{Signal: "SIGKILL"}, p.destroyedAnswer(opened.ProcessID))
}

func TestDestroyKillsTheGroup(t *testing.T) {
	h := newHarness(t, Config{})
	p, opened := h.sh("inst-group", "sleep 300 & echo started; wait")
	require.Equal(t, "started\n", string(nextOf[*frames.Stdout](p).Data))
	pid := h.process(opened.ProcessID).Pid
	require.False(t, groupGone(pid))

	p.send(&frames.Destroy{})
	require.Equal(t, &frames.Exit{Signal: "SIGKILL"}, p.destroyedAnswer(opened.ProcessID))
	require.True(t, groupGone(pid), "a process of group %d survived", pid)
	require.Empty(t, h.srv.Stats().Processes)
}

func TestFramesPrintedByTheChildForgeNothing(t *testing.T) {
	h := newHarness(t, Config{})
	const forged = `{"type":"exit","code":7}` + "\n" + `{"type":"destroyed","process_id":"00000000000000000000000000000000"}` + "\n"
	const forgedErr = `{"type":"exit","signal":"SIGKILL"}` + "\n"
	p, _ := h.open(&frames.Open{InstanceID: "inst-forge", Request: frames.ProcessRequest{
		Executable: "sh", Arguments: []string{"-c", `printf '%s' "$1"; printf '%s' "$2" >&2`, "sh", forged, forgedErr},
		WorkingDirectory: "/", Environment: testEnv,
	}})
	o := p.collect(false)
	p.stderrUntil(&o, int64(len(forgedErr)))
	require.Equal(t, forged, string(o.stdout))
	require.Equal(t, forgedErr, string(o.stderr))
	require.Equal(t, &frames.Exit{Code: 0}, o.exit)
}

func TestServerEnvironmentDoesNotLeak(t *testing.T) {
	t.Setenv("PROCWIRE_SERVER_SECRET", "leaked")
	h := newHarness(t, Config{})
	p, _ := h.sh("inst-env", `echo "${PROCWIRE_SERVER_SECRET-unset}"; env | sort`)
	o := p.collect(false)
	require.Equal(t, &frames.Exit{Code: 0}, o.exit)
	require.Regexp(t, `^unset\n`, string(o.stdout))
	require.NotContains(t, string(o.stdout), "leaked")
	require.Contains(t, string(o.stdout), "PATH=/usr/bin:/bin\n")
}

func TestEvidence(t *testing.T) {
	h := newHarness(t, Config{Provider: "acme", ProviderRevision: "9.9", Grace: 2 * time.Second, Heartbeat: -1})
	args := []string{"-c", "exit 0", "", "ünïcode"}
	before := time.Now().Truncate(time.Millisecond)
	_, opened := h.open(&frames.Open{
		InstanceID:   "inst.ev:1",
		Request:      frames.ProcessRequest{Executable: "sh", Arguments: args, WorkingDirectory: "/tmp", Environment: testEnv},
		StdoutWindow: 1 << 30, // clamped
		StdinWindow:  2048,
	})
	after := time.Now()

	require.Regexp(t, regexp.MustCompile(`^[0-9a-f]{32}$`), opened.ProcessID)
	require.Regexp(t, regexp.MustCompile(`^[0-9a-f]{64}$`), opened.Token)
	ev := opened.Evidence
	require.Equal(t, frames.WireRevision, ev.WireRevision)
	require.Equal(t, "acme", ev.Provider)
	require.Equal(t, "9.9", ev.ProviderRevision)
	require.Equal(t, "inst.ev:1", ev.InstanceID)
	require.Equal(t, opened.ProcessID, ev.ProcessID)
	require.Equal(t, "sh", ev.Executable)
	require.Equal(t, "/tmp", ev.WorkingDirectory)
	require.Equal(t, digest(args), ev.ArgumentsDigest)
	require.Equal(t, frames.ArgumentsDigest(args), ev.ArgumentsDigest)
	started, err := frames.ParseTime(ev.StartedAt)
	require.NoError(t, err)
	require.Equal(t, ev.StartedAt, frames.FormatTime(started))
	require.Regexp(t, `^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`, ev.StartedAt)
	require.False(t, started.Before(before) || started.After(after), "started_at %s outside [%s, %s]", started, before, after)

	require.Equal(t, int64(2048), opened.StdinLimit)
	require.Equal(t, int64(DefaultMaxStdoutWindow), opened.StdoutWindow)
	require.Equal(t, int64(DefaultStderrRing), opened.StderrWindow)
	require.Equal(t, int64(2000), opened.GraceMS)
	require.Equal(t, int64(0), opened.HeartbeatMS)
	require.Equal(t, int64(1000), opened.ExitWaitMS)
	require.Equal(t, int64(DefaultMaxFrameData), opened.MaxData)
	require.NoError(t, frames.Validate(opened))
}

// digest is PROTOCOL.md §6's arguments_digest, computed independently.
func digest(args []string) string {
	h := sha256.New()
	h.Write(binary.BigEndian.AppendUint32(nil, uint32(len(args))))
	for _, a := range args {
		h.Write(binary.BigEndian.AppendUint32(nil, uint32(len(a))))
		h.Write([]byte(a))
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

func TestStartErrors(t *testing.T) {
	h := newHarness(t, Config{})
	for reason, open := range map[string]*frames.Open{
		proc.ReasonExecutableNotFound:      openFrame("inst-e1", "no-such-program-procwire"),
		proc.ReasonPermissionDenied:        openFrame("inst-e2", "/etc/passwd"),
		proc.ReasonWorkingDirectoryInvalid: {InstanceID: "inst-e3", Request: frames.ProcessRequest{Executable: "true", WorkingDirectory: "/no/such/dir", Environment: testEnv}},
	} {
		p := h.dial()
		p.send(open)
		e := nextOf[*frames.Error](p)
		require.Equal(t, frames.OperationFailed, e.Code)
		require.Equal(t, "open_process", e.Operation)
		require.Equal(t, reason, e.Reason)
		require.NoError(t, frames.Validate(e))
		p.requireClosed(websocket.StatusNormalClosure, "")
		// The reservation is released.
		h.open(&frames.Open{InstanceID: open.InstanceID, Request: frames.ProcessRequest{Executable: "true", WorkingDirectory: "/", Environment: testEnv}})
	}
}

func TestAdmit(t *testing.T) {
	h := newHarness(t, Config{Admit: func(ctx context.Context, instanceID string) *frames.Error {
		if instanceID == "known" {
			return nil
		}
		return &frames.Error{Code: frames.InstanceNotFound, Operation: "open_process"}
	}})
	p := h.dial()
	p.send(openFrame("unknown", "true"))
	p.requireError(&frames.Error{Code: frames.InstanceNotFound, Operation: "open_process"})
	h.open(openFrame("known", "true"))
}

func TestStderr(t *testing.T) {
	h := newHarness(t, Config{})
	const text = "0123456789abcdef"
	p, _ := h.sh("inst-stderr", `for i in 1 2 3 4; do printf `+text+` >&2; done`)
	o := p.collect(false)
	p.stderrUntil(&o, 4*int64(len(text)))
	require.Equal(t, strings.Repeat(text, 4), string(o.stderr))
	require.Empty(t, o.stdout)
	require.Equal(t, &frames.Exit{Code: 0}, o.exit)
}

func TestConcurrentOpensOfOneInstance(t *testing.T) {
	h := newHarness(t, Config{})
	const n = 6
	peers := make([]*peer, n)
	for i := range peers {
		peers[i] = h.dial()
	}
	var wg sync.WaitGroup
	for _, p := range peers {
		wg.Go(func() {
			_ = p.ws.Write(t.Context(), websocket.MessageText, frames.Append(nil, openFrame("inst-race", "sleep", "300")))
		})
	}
	wg.Wait()
	opened := 0
	for _, p := range peers {
		switch f := p.next().(type) {
		case *frames.Opened:
			opened++
		case *frames.Error:
			require.Equal(t, &frames.Error{Code: frames.LifecycleConflict, Operation: "open_process", Actual: "process_already_open"}, f)
		default:
			t.Fatalf("unexpected %s", f.Type())
		}
	}
	require.Equal(t, 1, opened)
	require.Len(t, h.srv.Stats().Processes, 1)
}

func TestFirstFrameLargerThanMaxLine(t *testing.T) {
	h := newHarness(t, Config{})
	args := []string{"-c", `echo $# ${#1}`, "sh"}
	for i := range 16 {
		args = append(args, strings.Repeat(string(rune('a'+i)), frames.MaxArgumentBytes))
	}
	open := &frames.Open{InstanceID: "inst-big-open", Request: frames.ProcessRequest{
		Executable: "sh", Arguments: args, WorkingDirectory: "/", Environment: testEnv,
	}}
	require.Greater(t, len(frames.Append(nil, open)), frames.MaxLine)
	p, opened := h.open(open)
	require.Equal(t, frames.ArgumentsDigest(args), opened.Evidence.ArgumentsDigest)
	o := p.collect(false)
	require.Equal(t, "16 65536\n", string(o.stdout))
}
