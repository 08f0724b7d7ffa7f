package server

import (
	"errors"
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/frames"
	"github.com/procwire/procwire/internal/testkit/fakeexec"
	"github.com/procwire/procwire/proc"
)

// TestSignalFailureIsAnswered: a signal the process cannot be sent (EPERM)
// is answered on the connection with signal_failed and its id, not with a
// close; the connection goes on, and a repeat of the id answers the same
// error without a second attempt.
func TestSignalFailureIsAnswered(t *testing.T) {
	fake, exec := newFake(func(_ proc.Request, p *fakeexec.Process) {
		p.SignalErr = func() error { return fmt.Errorf("signal process group: %w", syscall.EPERM) }
	})
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
	require.EqualValues(t, 1, fake.Proc(0).Signals(), "a repeated id is not attempted again")
	p.send(&frames.Signal{ID: 2, Signal: frames.SIGKILL})
	require.Equal(t, want(2), nextOf[*frames.Error](p))
	require.EqualValues(t, 2, fake.Proc(0).Signals())

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
	var failPush atomic.Bool
	_, exec := newFake(func(_ proc.Request, p *fakeexec.Process) {
		p.PushErr = func() error {
			if failPush.Load() {
				return errors.New("stdin device gone")
			}
			return nil
		}
		p.Epilogue = []byte("done\n") // cat; echo done
	})
	h := newHarness(t, Config{Executor: exec})
	f := openFrame("inst-stdin-fail", "cat")
	f.StdinWindow = 1024
	p, opened := h.open(f)
	limit := opened.StdinLimit
	p.send(&frames.Stdin{Off: 0, Data: []byte("a\n")})
	require.Equal(t, "a\n", string(nextOf[*frames.Stdout](p).Data))

	failPush.Store(true)
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
