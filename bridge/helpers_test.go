//go:build linux

package bridge

import (
	"bytes"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/proc"
	"github.com/procwire/procwire/replay"
)

// testTimeout bounds every wait in the tests.
const testTimeout = 30 * time.Second

// shReq is a request running sh -c script with args, in a fresh directory,
// with a minimal environment.
func shReq(t testing.TB, script string, args ...string) proc.Request {
	return proc.Request{
		Executable:       "sh",
		Arguments:        append([]string{"-c", script, "sh"}, args...),
		WorkingDirectory: t.TempDir(),
		Environment:      map[string]string{"PATH": "/usr/bin:/bin"},
	}
}

// start starts req and destroys it at the end of the test.
func start(t testing.TB, req proc.Request, cfg *proc.Config) *Process {
	t.Helper()
	p, err := Start(req, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Destroy() })
	return p
}

// consumer plays the server's writer: it is Notify's single consumer, and it
// slices and acks stdout as data arrives, copying it to w.
type consumer struct {
	t   testing.TB
	p   *Process
	w   io.Writer
	buf []byte // scratch for the copy out of the lock
	eof bool
	n   int64 // bytes consumed
}

func newConsumer(t testing.TB, p *Process, w io.Writer) *consumer {
	if w == nil {
		w = io.Discard
	}
	return &consumer{t: t, p: p, w: w, buf: make([]byte, 256<<10)}
}

// poll takes everything stdout holds now.
func (c *consumer) poll() {
	for {
		var n int
		var err error
		c.p.Stdout(func(b *replay.Buffer) {
			n, err = b.CopyAt(c.buf, b.Start())
			if err == nil && n > 0 {
				err = b.Ack(b.Start() + int64(n))
			}
			_, c.eof = b.EOF()
			if c.eof {
				c.eof = b.AtEOF(b.Start())
			}
		})
		require.NoError(c.t, err)
		if n == 0 {
			return
		}
		c.n += int64(n)
		_, _ = c.w.Write(c.buf[:n])
	}
}

// until consumes stdout and waits on Notify until cond holds, failing the
// test after testTimeout.
func (c *consumer) until(what string, cond func() bool) {
	c.t.Helper()
	deadline := time.NewTimer(testTimeout)
	defer deadline.Stop()
	for {
		c.poll()
		if cond() {
			return
		}
		select {
		case <-c.p.Notify():
		case <-deadline.C:
			c.t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// toEOF consumes stdout until its EOF.
func (c *consumer) toEOF() {
	c.t.Helper()
	c.until("stdout EOF", func() bool { return c.eof })
}

// output runs req to stdout EOF and exit, and returns stdout and the exit.
func output(t *testing.T, req proc.Request, cfg *proc.Config) (string, proc.ExitStatus) {
	t.Helper()
	p := start(t, req, cfg)
	var out bytes.Buffer
	c := newConsumer(t, p, &out)
	c.toEOF()
	return out.String(), waitExit(t, p)
}

// waitExit waits for the published exit.
func waitExit(t testing.TB, p *Process) proc.ExitStatus {
	t.Helper()
	select {
	case <-p.Done():
	case <-time.After(testTimeout):
		t.Fatal("timed out waiting for the exit")
	}
	st, ok := p.Exit()
	require.True(t, ok)
	return st
}

// workloadPid returns the pid of the child itself, under its init if it
// has one.
func workloadPid(t testing.TB, p *Process) int {
	if p.ctlW == nil {
		return p.Pid()
	}
	var kids []int
	eventually(t, "the init's child", func() bool {
		kids, _ = childrenOf(t, p.Pid())
		return len(kids) > 0
	})
	return kids[0]
}

// fdCount counts this process's open file descriptors. It first makes sure
// the runtime's poller, which holds descriptors of its own from the first
// pipe on, exists, so that a count before the first Start compares.
func fdCount(t testing.TB) int {
	r, w, err := os.Pipe()
	require.NoError(t, err)
	r.Close()
	w.Close()
	ents, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	return len(ents)
}

// procState returns the state letter and wchan of pid.
func procState(t testing.TB, pid int) (state, wchan string) {
	b, err := os.ReadFile("/proc/" + itoa(pid) + "/stat")
	require.NoError(t, err)
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	w, _ := os.ReadFile("/proc/" + itoa(pid) + "/wchan")
	return f[0], string(w)
}

func itoa(n int) string { return strconv.Itoa(n) }

// eventually polls cond until it holds, failing the test after testTimeout.
// It is only for the kernel's view of other processes (where a process
// sleeps, whether init reaped an orphan), for which there is no event to
// wait on; never for synchronising with this package's goroutines.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(testTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline.C:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
