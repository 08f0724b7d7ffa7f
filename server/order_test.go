//go:build linux

package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/bridge"
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

// opFailExecutor starts bridge processes whose Signal fails with
// signalErr (when set) and whose PushStdin fails with pushErr once failPush
// is set.
type opFailExecutor struct {
	countingExecutor
	signalErr error
	pushErr   error
	failPush  atomic.Bool
}

type opFailProcess struct {
	Process
	e *opFailExecutor
}

func (e *opFailExecutor) Start(ctx context.Context, req bridge.Request, cfg bridge.Config) (Process, error) {
	p, err := e.countingExecutor.Start(ctx, req, cfg)
	if err != nil {
		return nil, err
	}
	return &opFailProcess{Process: p, e: e}, nil
}

func (p *opFailProcess) Signal(sig syscall.Signal) (bool, error) {
	if p.e.signalErr != nil {
		p.Process.(*countingProcess).signals.Add(1)
		return false, p.e.signalErr
	}
	return p.Process.Signal(sig)
}

func (p *opFailProcess) PushStdin(b []byte) error {
	if p.e.failPush.Load() {
		return p.e.pushErr
	}
	return p.Process.PushStdin(b)
}

// TestSignalFailureIsAnswered: a signal the process cannot be sent (EPERM)
// is answered on the connection with signal_failed and its id, not with a
// close; the connection goes on, and a repeat of the id answers the same
// error without a second attempt.
func TestSignalFailureIsAnswered(t *testing.T) {
	exec := &opFailExecutor{signalErr: fmt.Errorf("signal process group: %w", syscall.EPERM)}
	h := newHarness(t, Config{Executor: exec})
	p, opened := h.open(openFrame("inst-eperm", "cat"))
	want := func(id int64) *frames.Error {
		return &frames.Error{Code: frames.OperationFailed, Operation: "signal_process", Reason: "signal_failed",
			ID: id, Message: "signal process group: operation not permitted"}
	}

	p.send(&frames.Signal{ID: 1, Signal: frames.SIGTERM})
	require.Equal(t, want(1), p.next(), "the answer is the next frame: no close, no credit before it")
	p.send(&frames.Stdin{Off: 0, Data: []byte("still here\n")})
	require.Equal(t, "still here\n", string(nextOf[*frames.Stdout](p).Data))

	p.send(&frames.Signal{ID: 1, Signal: frames.SIGTERM})
	require.Equal(t, want(1), nextOf[*frames.Error](p))
	require.EqualValues(t, 1, exec.proc(0).signals.Load(), "a repeated id is not attempted again")
	p.send(&frames.Signal{ID: 2, Signal: frames.SIGKILL})
	require.Equal(t, want(2), nextOf[*frames.Error](p))
	require.EqualValues(t, 2, exec.proc(0).signals.Load())

	p.send(&frames.StdinClose{Off: 11})
	o := p.collectFrom(11, false)
	require.Equal(t, &frames.Exit{Code: 0}, o.exit)
	p.send(&frames.Destroy{})
	require.Equal(t, &frames.Destroyed{ProcessID: opened.ProcessID}, nextOf[*frames.Destroyed](p))
}

// TestStdinFailureIsAnswered: a stdin write the process fails (other than
// a broken pipe) is answered with write_stdin/stdin_failed; the stdin
// stream ends there (the child sees EOF), later stdin is discarded but
// credited, and the connection goes on to the exit.
func TestStdinFailureIsAnswered(t *testing.T) {
	exec := &opFailExecutor{pushErr: errors.New("stdin device gone")}
	h := newHarness(t, Config{Executor: exec})
	f := openFrame("inst-stdin-fail", "sh", "-c", "cat; echo done")
	f.StdinWindow = 1024
	p, opened := h.open(f)
	limit := opened.StdinLimit
	p.send(&frames.Stdin{Off: 0, Data: []byte("a\n")})
	require.Equal(t, "a\n", string(nextOf[*frames.Stdout](p).Data))

	exec.failPush.Store(true)
	p.send(&frames.Stdin{Off: 2, Data: []byte("b\n")})
	require.Equal(t, &frames.Error{Code: frames.OperationFailed, Operation: "write_stdin", Reason: "stdin_failed",
		Message: "stdin device gone"}, nextOf[*frames.Error](p))
	// Eight windows more: each is discarded and credited, so the writer
	// never waits for a child that no longer gets them.
	off := int64(4)
	for off < 8*1024 {
		for off < limit {
			n := min(limit-off, 256)
			p.send(&frames.Stdin{Off: off, Data: make([]byte, n)})
			off += n
		}
		for limit <= off {
			limit = max(limit, nextOf[*frames.Credit](p).StdinLimit)
		}
	}
	p.send(&frames.StdinClose{Off: off})
	o := p.collectFrom(2, false)
	require.Equal(t, "done\n", string(o.stdout))
	require.Equal(t, &frames.Exit{Code: 0}, o.exit)
	require.Empty(t, p.pending, "one error, once")
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
