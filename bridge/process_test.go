//go:build linux

package bridge

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/procwire/procwire/proc"
	"github.com/procwire/procwire/replay"
)

func TestCatStreams16MiB(t *testing.T) {
	data := make([]byte, 16<<20)
	_, _ = rand.Read(data)
	cfg := &proc.Config{StdinWindow: 256 << 10, StdoutWindow: 512 << 10}
	p := start(t, proc.Request{Executable: "cat", WorkingDirectory: t.TempDir()}, cfg)

	h := sha256.New()
	c := newConsumer(t, p, h)
	sent := 0
	// Push as the server would: never beyond the credit StdinConsumed grants.
	c.until("cat to echo every byte", func() bool {
		for sent < len(data) {
			credit := int(p.StdinConsumed()) + cfg.StdinWindow - sent
			if credit == 0 {
				break
			}
			n := min(credit, 100_000, len(data)-sent)
			require.NoError(t, p.PushStdin(data[sent:sent+n]))
			sent += n
		}
		if sent == len(data) {
			require.NoError(t, p.CloseStdin())
		}
		return c.eof
	})
	require.Equal(t, sha256.Sum256(data), [32]byte(h.Sum(nil)))
	require.Equal(t, int64(len(data)), p.StdinConsumed())
	require.Equal(t, proc.ExitStatus{}, waitExit(t, p))
}

func TestCloseStdinGivesEOF(t *testing.T) {
	p := start(t, proc.Request{Executable: "wc", Arguments: []string{"-c"}, WorkingDirectory: t.TempDir()}, nil)
	require.NoError(t, p.PushStdin(bytes.Repeat([]byte("x"), 100_000)))
	require.NoError(t, p.PushStdin([]byte("tail")))
	require.NoError(t, p.CloseStdin())
	require.NoError(t, p.CloseStdin(), "idempotent")
	require.ErrorIs(t, p.PushStdin([]byte("late")), proc.ErrStdinClosed)
	var out bytes.Buffer
	newConsumer(t, p, &out).toEOF()
	require.Equal(t, "100004", strings.TrimSpace(out.String()))
	require.Equal(t, proc.ExitStatus{}, waitExit(t, p))
	require.Equal(t, int64(100004), p.StdinConsumed())
}

// A push to an empty queue is written to the pipe at once by the caller,
// without a hand-off to the stdin pump: counted as consumed when PushStdin
// returns, even though the child (sleep) never reads. What the pipe
// refuses is queued, in order (TestCatStreams16MiB mixes both).
func TestPushStdinWritesAtOnce(t *testing.T) {
	p := start(t, proc.Request{Executable: "sleep", Arguments: []string{"300"}, WorkingDirectory: t.TempDir()},
		&proc.Config{StdinWindow: 1 << 20})
	require.NoError(t, p.PushStdin([]byte("hello")))
	require.Equal(t, int64(5), p.StdinConsumed())
	require.NoError(t, p.PushStdin(make([]byte, 1<<20)))
	consumed := p.StdinConsumed()
	require.Less(t, consumed, int64(5+1<<20), "a pipe holds less than 1 MiB")
	require.NoError(t, p.Destroy())
}

func TestStdinOverflow(t *testing.T) {
	p := start(t, proc.Request{Executable: "sleep", Arguments: []string{"300"}, WorkingDirectory: t.TempDir()},
		&proc.Config{StdinWindow: 10})
	err := p.PushStdin(make([]byte, 11))
	var oe *proc.StdinOverflowError
	require.ErrorAs(t, err, &oe)
	require.Equal(t, proc.StdinOverflowError{Queued: 0, Pushed: 11, Window: 10}, *oe)
	require.NoError(t, p.PushStdin(make([]byte, 10)))
	require.NoError(t, p.Destroy())
	require.ErrorIs(t, p.PushStdin([]byte("x")), proc.ErrDestroyed)
}

func TestExitCodes(t *testing.T) {
	for _, code := range []int{0, 1, 255} {
		t.Run(strconv.Itoa(code), func(t *testing.T) {
			p := start(t, shReq(t, "echo bye; exit "+strconv.Itoa(code)), nil)
			st := waitExit(t, p)
			require.Equal(t, proc.ExitStatus{Code: code}, st)
			// A normal child's stdout EOF is recorded before its exit.
			p.Stdout(func(b *replay.Buffer) {
				off, ok := b.EOF()
				require.True(t, ok, "EOF not recorded before Done")
				require.Equal(t, int64(4), off)
			})
			delivered, err := p.Signal(syscall.SIGTERM)
			require.NoError(t, err)
			require.False(t, delivered, "already exited")
		})
	}
}

func TestSignalKills(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGKILL} {
		t.Run(proc.SignalName(int(sig)), func(t *testing.T) {
			p := start(t, proc.Request{Executable: "sleep", Arguments: []string{"300"}, WorkingDirectory: t.TempDir()}, nil)
			delivered, err := p.Signal(sig)
			require.NoError(t, err)
			require.True(t, delivered)
			require.Equal(t, proc.ExitStatus{Signal: proc.SignalName(int(sig))}, waitExit(t, p))
			require.NoError(t, p.Destroy())
			st, ok := p.Exit()
			require.True(t, ok)
			require.Equal(t, proc.ExitStatus{Signal: proc.SignalName(int(sig))}, st, "Destroy keeps the real status")
		})
	}
}

func TestSignalUnsupported(t *testing.T) {
	p := start(t, proc.Request{Executable: "sleep", Arguments: []string{"300"}, WorkingDirectory: t.TempDir()}, nil)
	delivered, err := p.Signal(syscall.SIGHUP)
	require.False(t, delivered)
	var ue *proc.UnsupportedSignalError
	require.ErrorAs(t, err, &ue)
	require.Equal(t, syscall.SIGHUP, ue.Signal)
	_, exited := p.Exit()
	require.False(t, exited)
}

func TestTrappedTermSurvivesUntilKill(t *testing.T) {
	p := start(t, shReq(t, `trap "" TERM; echo ready; while :; do sleep 0.05; echo tick; done`), nil)
	var out bytes.Buffer
	c := newConsumer(t, p, &out)
	c.until("ready", func() bool { return strings.HasPrefix(out.String(), "ready\n") })

	delivered, err := p.Signal(syscall.SIGTERM)
	require.NoError(t, err)
	require.True(t, delivered)
	// An ignored signal is discarded when sent; ticks printed after it prove
	// the group lives on.
	mark := out.Len()
	c.until("two ticks after SIGTERM", func() bool { return strings.Count(out.String()[mark:], "tick\n") >= 2 })
	_, exited := p.Exit()
	require.False(t, exited)

	delivered, err = p.Signal(syscall.SIGKILL)
	require.NoError(t, err)
	require.True(t, delivered)
	require.Equal(t, proc.ExitStatus{Signal: "SIGKILL"}, waitExit(t, p))
}

func TestFullStdoutBlocksTheChild(t *testing.T) {
	const window = 64 << 10
	blocked := make(chan struct{}, 1)
	testHookStdoutBlocked = func() {
		select {
		case blocked <- struct{}{}:
		default:
		}
	}
	t.Cleanup(func() { testHookStdoutBlocked = nil })
	p := start(t, proc.Request{Executable: "yes", WorkingDirectory: t.TempDir()}, &proc.Config{StdoutWindow: window})

	held := func() (n int64) {
		p.Stdout(func(b *replay.Buffer) {
			n = b.End() - b.Start()
			require.LessOrEqual(t, n, int64(window))
		})
		return n
	}
	select {
	case <-blocked:
	case <-time.After(testTimeout):
		t.Fatal("stdout pump never found the buffer full")
	}
	require.Equal(t, int64(window), held())

	// The child fills the pipe behind the full window, then blocks writing.
	eventually(t, "the child to block writing its pipe", func() bool {
		state, wchan := procState(t, workloadPid(t, p))
		if wchan == "0" || wchan == "" {
			t.Log("kernel hides wchan; not checking where the child sleeps")
			return true
		}
		return state == "S" && strings.Contains(wchan, "pipe_write")
	})
	// While nothing is acked, nothing is read: whatever Notify says, the
	// buffer stays at capacity.
	quiet := time.After(200 * time.Millisecond)
	for watching := true; watching; {
		select {
		case <-p.Notify():
			require.Equal(t, int64(window), held())
		case <-quiet:
			watching = false
		}
	}
	require.Equal(t, int64(window), held())
	_, exited := p.Exit()
	require.False(t, exited)

	// Acking frees room and wakes the pump.
	var end int64
	p.Stdout(func(b *replay.Buffer) {
		end = b.End()
		require.NoError(t, b.Ack(b.Start()+window/2))
	})
	newConsumer(t, p, nil).until("stdout to advance past the window", func() bool {
		var e int64
		p.Stdout(func(b *replay.Buffer) { e = b.End() })
		return e > end
	})
}

func TestStderrFloodNeverBlocks(t *testing.T) {
	p := start(t, shReq(t, `head -c 10000000 /dev/zero >&2; echo done`), &proc.Config{StderrRing: 4096})
	var out bytes.Buffer
	c := newConsumer(t, p, &out)
	c.until("all of stderr", func() bool {
		var end int64
		p.Stderr(func(r *replay.Ring) { end = r.End() })
		return end == 10_000_000
	})
	c.toEOF()
	require.Equal(t, "done\n", out.String())
	require.Equal(t, proc.ExitStatus{}, waitExit(t, p))
	p.Stderr(func(r *replay.Ring) {
		require.Equal(t, int64(10_000_000), r.End())
		require.Positive(t, r.Dropped())
		a, b, from := r.Slice(0, 1<<20)
		require.Equal(t, r.Start(), from)
		require.LessOrEqual(t, len(a)+len(b), 4096)
	})
}

func TestExitNotHeldByDescendantHoldingStdout(t *testing.T) {
	p := start(t, shReq(t, `sleep 300 & echo hi`), &proc.Config{ExitWait: 200 * time.Millisecond})
	var out bytes.Buffer
	c := newConsumer(t, p, &out)
	c.until("the exit", func() bool {
		_, ok := p.Exit()
		return ok
	})
	st, _ := p.Exit()
	require.Equal(t, proc.ExitStatus{}, st)
	c.until("hi", func() bool { return out.String() == "hi\n" })
	require.False(t, c.eof, "sleep still holds stdout")
	require.NoError(t, p.Destroy())
}

func TestStdinAfterExitDoesNotBlock(t *testing.T) {
	p := start(t, shReq(t, `exit 0`), &proc.Config{StdinWindow: 64 << 10})
	waitExit(t, p)
	c := newConsumer(t, p, nil)
	pushed := int64(0)
	for range 10 {
		// Each push fits the credit the discarded bytes gave back.
		c.until("credit", func() bool { return pushed-p.StdinConsumed() == 0 })
		require.NoError(t, p.PushStdin(make([]byte, 64<<10)))
		pushed += 64 << 10
	}
	c.until("every byte consumed", func() bool { return p.StdinConsumed() == pushed })
}

func TestDestroyIsIdempotent(t *testing.T) {
	t.Run("running", func(t *testing.T) {
		p := start(t, proc.Request{Executable: "sleep", Arguments: []string{"300"}, WorkingDirectory: t.TempDir()}, nil)
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for i := range errs {
			wg.Go(func() { errs[i] = p.Destroy() })
		}
		wg.Wait()
		for _, err := range errs {
			require.NoError(t, err)
		}
		require.NoError(t, p.Destroy())
		st, ok := p.Exit()
		require.True(t, ok)
		require.Equal(t, proc.ExitStatus{Signal: "SIGKILL"}, st)
		delivered, err := p.Signal(syscall.SIGTERM)
		require.NoError(t, err)
		require.False(t, delivered)
	})
	t.Run("after exit", func(t *testing.T) {
		p := start(t, shReq(t, `exit 7`), nil)
		require.Equal(t, proc.ExitStatus{Code: 7}, waitExit(t, p))
		require.NoError(t, p.Destroy())
		require.NoError(t, p.Destroy())
		st, _ := p.Exit()
		require.Equal(t, proc.ExitStatus{Code: 7}, st)
	})
}

func TestDestroyKillsTheGroup(t *testing.T) {
	fds := fdCount(t)
	// The child leads the group the server sees only when it is started
	// without an init (a program that does not call MaybeRunInit).
	direct := &Containment{kind: ContainProcessGroup, direct: true}
	p, err := direct.Start(shReq(t, `sleep 300 & echo $!; wait`), nil)
	require.NoError(t, err)
	var out bytes.Buffer
	c := newConsumer(t, p, &out)
	c.until("the background pid", func() bool { return strings.HasSuffix(out.String(), "\n") })
	child, err := strconv.Atoi(strings.TrimSpace(out.String()))
	require.NoError(t, err)
	pgid := p.Pid()
	got, err := syscall.Getpgid(child)
	require.NoError(t, err)
	require.Equal(t, pgid, got)

	require.NoError(t, p.Destroy())
	require.Equal(t, proc.ExitStatus{Signal: "SIGKILL"}, waitExit(t, p))
	require.False(t, groupHasLive(pgid), "a live process of the group survived Destroy")
	require.Equal(t, fds, fdCount(t), "leaked file descriptors")

	// The leader is reaped by Destroy; the orphaned sleep is reaped by init,
	// on its own schedule, so kill(-pgid, 0) turns ESRCH shortly after.
	eventually(t, "kill(-pgid, 0) == ESRCH", func() bool { return syscall.Kill(-pgid, 0) == syscall.ESRCH })
}

// A Destroy that failed and is tried again kills by the leader's pid (the
// group id) only while the leader is not reaped: once it is, the kernel may
// give the pid to another process, which may lead a group of its own.
// Here the first Destroy misses a 1ns bound, the leader is reaped, a
// process of the test's takes its pid (ns_last_pid), and the next Destroy
// must not kill it. Under every containment, and without an init.
func TestDestroyAgainSparesTheProcessThatTookTheLeadersPid(t *testing.T) {
	run := func(t *testing.T, c *Containment) {
		for attempt := 0; ; attempt++ {
			p, err := c.Start(shReq(t, `exec sleep 300`), &proc.Config{DestroyWait: time.Nanosecond})
			require.NoError(t, err)
			if err := p.Destroy(); err == nil {
				if attempt == 20 {
					t.Skip("every first Destroy beat its 1ns bound")
				}
				continue
			}
			leader := p.Pid()
			takePid(t, leader, os.Getpid())
			eventually(t, "a Destroy to succeed", func() bool { return p.Destroy() == nil })
			requireSpared(t, leader, syscall.SIGKILL)
			return
		}
	}
	t.Run("without an init", func(t *testing.T) { run(t, &Containment{kind: ContainProcessGroup, direct: true}) })
	eachContainment(t, run)
}

func TestDestroyUnblocksEverything(t *testing.T) {
	// A descendant in its own session (no group kill reaches it; only the
	// containment, where there is one) holds stdout and stderr open, and
	// nobody reads stdin. Whether Destroy's kill reaches it or not, the
	// destroyed stream must not report an EOF: with containment the kill
	// closes the pipe's last writer while the stdout pump may be reading.
	p := start(t, shReq(t, `setsid sleep 300 & echo $!; exec sleep 300`), &proc.Config{StdinWindow: 1 << 20})
	var out bytes.Buffer
	c := newConsumer(t, p, &out)
	c.until("the escaped pid", func() bool { return strings.HasSuffix(out.String(), "\n") })
	escaped, err := strconv.Atoi(strings.TrimSpace(out.String()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = syscall.Kill(escaped, syscall.SIGKILL) })

	require.NoError(t, p.PushStdin(make([]byte, 1<<20))) // fills the pipe; the pump blocks writing
	fds := fdCount(t)
	require.NoError(t, p.Destroy())
	require.Equal(t, proc.ExitStatus{Signal: "SIGKILL"}, waitExit(t, p))
	require.Less(t, fdCount(t), fds, "our pipe ends are closed")
	c.poll()
	require.False(t, c.eof, "a destroyed stream has no EOF")
}

func TestDestroyTimeoutError(t *testing.T) {
	e := &proc.DestroyTimeoutError{Wait: time.Second, Pending: "stdout pump"}
	require.Equal(t, "destroy process: not finished within 1s: stdout pump pending", e.Error())
	require.True(t, errors.As(error(e), new(*proc.DestroyTimeoutError)))
}

func TestNotifyOnExit(t *testing.T) {
	p := start(t, shReq(t, `exit 3`), nil)
	c := newConsumer(t, p, nil)
	c.until("exit via Notify", func() bool {
		_, ok := p.Exit()
		return ok
	})
}

// TestStdinBlockedOnAFullPipe: stdin counts as consumed as the pipe takes
// it, and a child that reads nothing shows as StdinBlocked once its pipe is
// full; once it reads, the rest goes through and the flag clears.
func TestStdinBlockedOnAFullPipe(t *testing.T) {
	p := start(t, shReq(t, `read go; exec wc -c`), &proc.Config{StdinWindow: 1 << 20})
	var out bytes.Buffer
	c := newConsumer(t, p, &out)
	require.False(t, p.StdinBlocked())
	require.NoError(t, p.PushStdin(append([]byte("go\n"), make([]byte, 512<<10)...)))
	// sh's read takes "go\n" a byte at a time and then wc -c reads all: the
	// pipe fills only if the child is slow, so only what must hold is
	// checked: the flag clears and every byte is consumed.
	c.until("every byte consumed", func() bool { return p.StdinConsumed() == 3+512<<10 && !p.StdinBlocked() })
	require.NoError(t, p.CloseStdin())
	c.until("wc -c", func() bool { return out.String() == "524288\n" })

	q := start(t, proc.Request{Executable: "sleep", Arguments: []string{"300"}, WorkingDirectory: t.TempDir()}, &proc.Config{StdinWindow: 1 << 20})
	d := newConsumer(t, q, nil)
	require.NoError(t, q.PushStdin(make([]byte, 512<<10)))
	d.until("the pipe full", q.StdinBlocked)
	consumed := q.StdinConsumed()
	require.Greater(t, consumed, int64(0), "what fit is in the pipe and counted")
	require.Less(t, consumed, int64(512<<10))
	require.NoError(t, q.Destroy())
}

// StdoutExit reads stdout and the exit under one lock: an exit it sees
// comes with the stream's EOF, and acking inside it wakes a stdout pump
// that waits for room (a 4-byte window for 12 bytes), as Stdout does.
func TestStdoutExitSeesTheExitWithItsEOF(t *testing.T) {
	p := start(t, shReq(t, "printf 'hello, world'; exit 3"), &proc.Config{StdoutWindow: 4, ExitWait: testTimeout})
	var out bytes.Buffer
	var exit proc.ExitStatus
	deadline := time.NewTimer(testTimeout)
	defer deadline.Stop()
	for done := false; !done; {
		p.StdoutExit(func(b *replay.Buffer, st proc.ExitStatus, exited bool) {
			var chunk [4]byte
			n, err := b.CopyAt(chunk[:], b.Start())
			require.NoError(t, err)
			out.Write(chunk[:n])
			require.NoError(t, b.Ack(b.Start()+int64(n)))
			_, eof := b.EOF()
			if exited {
				require.True(t, eof, "an exit seen comes with its EOF")
				exit, done = st, true
			}
		})
		if done {
			break
		}
		select {
		case <-p.Notify():
		case <-deadline.C:
			t.Fatal("timed out waiting for the exit")
		}
	}
	require.Equal(t, "hello, world", out.String())
	require.Equal(t, proc.ExitStatus{Code: 3}, exit)
	st, ok := p.Exit()
	require.True(t, ok)
	require.Equal(t, exit, st)
}

// The child's stdout pipe holds a MiB (stdoutPipeSize), its stdin and
// stderr pipes the kernel's default.
func TestStdoutPipeIsAMiB(t *testing.T) {
	p := start(t, shReq(t, `sleep 300`), nil)
	size := func(f *os.File) int {
		rc, err := f.SyscallConn()
		require.NoError(t, err)
		var n int
		require.NoError(t, rc.Control(func(fd uintptr) { n, err = unix.FcntlInt(fd, unix.F_GETPIPE_SZ, 0) }))
		require.NoError(t, err)
		return n
	}
	require.Equal(t, stdoutPipeSize, size(p.stdoutR))
	require.Equal(t, 64<<10, size(p.stderrR))
	require.NoError(t, p.Destroy())
}
