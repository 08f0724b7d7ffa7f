//go:build linux

package bridge

import (
	"bytes"
	"os"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/proc"
)

// spareOf returns the pid and cgroup directory of c's warm init, which
// must be ready.
func spareOf(t *testing.T, c *Containment) (pid int, cgroupDir string) {
	t.Helper()
	c.warm.mu.Lock()
	defer c.warm.mu.Unlock()
	require.NotEmpty(t, c.warm.spares, "a warm init is ready")
	spare := c.warm.spares[0]
	if spare.cg != nil {
		cgroupDir = spare.cg.dir
	}
	return spare.pid, cgroupDir
}

// warmSnapshot is what c's warm inits were at one moment: the spares'
// pids, whether a refill runs, and whether one waits to start.
type warmSnapshot struct {
	spares            []int
	making, announced bool
}

// warmState takes a snapshot of c's warm inits under their lock, so that a
// failed check never holds it (Close, in the test's cleanup, takes it).
func warmState(c *Containment) warmSnapshot {
	c.warm.mu.Lock()
	defer c.warm.mu.Unlock()
	s := warmSnapshot{making: c.warm.making, announced: c.warm.startRefill != nil}
	for _, l := range c.warm.spares {
		s.spares = append(s.spares, l.pid)
	}
	return s
}

// requireGone checks that pid was reaped (it has no /proc entry, not
// even a zombie's) and that the cgroup directory, if any, was removed.
func requireGone(t *testing.T, pid int, cgroupDir string) {
	t.Helper()
	_, err := os.Stat("/proc/" + strconv.Itoa(pid))
	require.ErrorIs(t, err, os.ErrNotExist, "init %d reaped", pid)
	if cgroupDir != "" {
		_, err := os.Stat(cgroupDir)
		require.ErrorIs(t, err, os.ErrNotExist, "cgroup %s removed", cgroupDir)
	}
}

// runs starts req in c and returns its stdout and exit, destroyed.
func runs(t *testing.T, c *Containment, req proc.Request) (*Process, string, proc.ExitStatus) {
	t.Helper()
	p, err := c.Start(req, nil)
	require.NoError(t, err)
	var out bytes.Buffer
	newConsumer(t, p, &out).toEOF()
	st := waitExit(t, p)
	require.NoError(t, p.Destroy())
	return p, out.String(), st
}

// TestWarmInitTakenByTheNextStart: with WarmInit, a start makes the next
// process's init ahead; the next start takes it (its pid is the one that
// waited), gives it its own request, environment, directory and exit, and
// makes another; Close ends the one waiting, reaped, its cgroup removed,
// and starts after it are cold.
func TestWarmInitTakenByTheNextStart(t *testing.T) {
	eachContainment(t, func(t *testing.T, c *Containment) {
		refilled := make(chan struct{}, 4)
		c.warm.onRefill = func() { refilled <- struct{}{} }

		_, out, st := runs(t, c, shReq(t, `echo cold`))
		require.Equal(t, "cold\n", out)
		require.Equal(t, proc.ExitStatus{Code: 0}, st)
		<-refilled
		spare, dir := spareOf(t, c)
		require.NoError(t, syscall.Kill(spare, 0), "the warm init waits")

		req := shReq(t, `pwd; echo "$GREETING"; exit 3`)
		req.Environment["GREETING"] = "warm"
		p, out, st := runs(t, c, req)
		require.Equal(t, spare, p.Pid(), "the start took the warm init")
		require.Equal(t, req.WorkingDirectory+"\nwarm\n", out)
		require.Equal(t, proc.ExitStatus{Code: 3}, st)
		requireGone(t, spare, dir)
		<-refilled

		spare, dir = spareOf(t, c)
		require.NoError(t, c.Close())
		requireGone(t, spare, dir)
		on, ready := c.WarmInits()
		require.False(t, on)
		require.False(t, ready)
		p, out, _ = runs(t, c, shReq(t, `echo after`))
		require.Equal(t, "after\n", out)
		require.NotEqual(t, spare, p.Pid())
		require.NoError(t, c.Close(), "Close is idempotent")
	})
}

// A warm init's failure to start the child is the request's start
// failure, as a cold one's: the exec's errno says why.
func TestWarmInitStartFailureIsTheRequests(t *testing.T) {
	eachContainment(t, func(t *testing.T, c *Containment) {
		refilled := make(chan struct{}, 4)
		c.warm.onRefill = func() { refilled <- struct{}{} }
		runs(t, c, shReq(t, `true`))
		<-refilled
		spare, dir := spareOf(t, c)

		script := t.TempDir() + "/script"
		require.NoError(t, os.WriteFile(script, []byte("#!/nonexistent/interpreter\n"), 0o755))
		_, err := c.Start(proc.Request{Executable: script, WorkingDirectory: "/"}, nil)
		var se *proc.StartError
		require.ErrorAs(t, err, &se)
		require.Equal(t, proc.ReasonExecutableNotFound, se.Reason, "%v", err)
		requireGone(t, spare, dir)
		<-refilled
	})
}

// What a warm init was made for must match what the start needs of its
// init: a spare of other limits, or of another init user, is not taken.
func TestSpareKeyTellsInitsApart(t *testing.T) {
	c := &Containment{kind: ContainProcessGroup, lim: &limiter{}}
	keyOf := func(cfg proc.Config, limits Limits) spareKey {
		initHooked.Store(true)
		k, ok := spareKeyOf(&launch{ct: c, c: cfg, limits: limits})
		require.True(t, ok)
		return k
	}
	base := keyOf(proc.Config{}, Limits{})
	require.Equal(t, base, keyOf(proc.Config{StdoutWindow: 1 << 20}, Limits{}), "windows are the Process's, not the init's")
	require.NotEqual(t, base, keyOf(proc.Config{}, Limits{Pids: 10}))
	_, ok := spareKeyOf(&launch{ct: c, c: proc.Config{TTY: &proc.TTY{Rows: 24, Cols: 80}}})
	require.False(t, ok, "a terminal's slave is made per process")
}

// The next warm init is made once the process that took the last one
// printed its first output, not beside its start; a start that comes
// before that output has it made at once, takes it, and has the next one
// made after its own output.
func TestWarmInitMadeAfterTheFirstOutput(t *testing.T) {
	defer func(d time.Duration) { firstOutputWait = d }(firstOutputWait)
	firstOutputWait = time.Hour // only the output, or a start, makes it
	eachContainment(t, func(t *testing.T, c *Containment) {
		refilled := make(chan struct{}, 4)
		c.warm.onRefill = func() { refilled <- struct{}{} }
		runs(t, c, shReq(t, `echo first`))
		<-refilled // made after echo's output

		// This start takes the warm init; its process prints nothing
		// until its stdin says so: no init is made meanwhile.
		quiet, err := c.Start(shReq(t, `read x; echo "$x"`), nil)
		require.NoError(t, err)
		w := warmState(c)
		require.Empty(t, w.spares)
		require.True(t, w.making, "announced")
		require.True(t, w.announced, "but not started")

		// A start before that output has it made at once, takes it,
		// and has the next made after its own output.
		_, out, _ := runs(t, c, shReq(t, `echo next`))
		require.Equal(t, "next\n", out)
		<-refilled
		<-refilled
		require.NoError(t, quiet.PushStdin([]byte("go\n")))
		var got bytes.Buffer
		newConsumer(t, quiet, &got).toEOF()
		require.Equal(t, "go\n", got.String())
		require.NoError(t, quiet.Destroy())
		_, ready := c.WarmInits()
		require.True(t, ready)
	})
}

// A start that takes the warm init just made, while the refill that made
// it has not yet returned (held here in onRefill), finds that refill
// ended: it announces the next one, made after its own first output, and
// the ended refill makes no other beside its start.
func TestAStartRightAfterARefillAnnouncesTheNext(t *testing.T) {
	defer func(d time.Duration) { firstOutputWait = d }(firstOutputWait)
	firstOutputWait = time.Hour // only the output, or a start, makes it
	c, err := NewContainment(ContainOptions{WarmInit: true})
	require.NoError(t, err)
	defer func() { require.NoError(t, c.Close()) }()
	events := make(chan string, 8)
	hold := make(chan struct{})
	c.warm.onRefillStart = func() { events <- "start" }
	c.warm.onRefill = func() {
		events <- "made"
		<-hold
	}
	runs(t, c, shReq(t, `echo first`))
	require.Equal(t, "start", <-events)
	require.Equal(t, "made", <-events) // and the refill is held

	quiet, err := c.Start(shReq(t, `read x; echo "$x"`), nil)
	require.NoError(t, err)
	w := warmState(c)
	close(hold)
	require.Empty(t, w.spares)
	require.True(t, w.making, "announced")
	require.NoError(t, quiet.PushStdin([]byte("go\n")))
	require.Equal(t, "start", <-events, "the next refill starts after the output, and no init is made before it")
	require.Equal(t, "made", <-events)
	var got bytes.Buffer
	newConsumer(t, quiet, &got).toEOF()
	require.Equal(t, "go\n", got.String())
	require.NoError(t, quiet.Destroy())
}

// The next warm init is made only once the first output has been handed
// on (Process.OnChange, from which a server's session writes it): its
// making, milliseconds of CPU, would otherwise compete with that first
// byte on its way to the client.
func TestWarmInitMadeAfterTheFirstOutputIsHandedOn(t *testing.T) {
	defer func(d time.Duration) { firstOutputWait = d }(firstOutputWait)
	firstOutputWait = time.Hour // only the output, or a start, makes it
	c, err := NewContainment(ContainOptions{WarmInit: true})
	require.NoError(t, err)
	defer func() { require.NoError(t, c.Close()) }()
	refilled := make(chan struct{}, 4)
	c.warm.onRefill = func() { refilled <- struct{}{} }
	var started atomic.Bool
	c.warm.onRefillStart = func() { started.Store(true) }
	runs(t, c, shReq(t, `echo first`))
	<-refilled
	started.Store(false)

	p, err := c.Start(shReq(t, `read x; echo "$x"`), nil)
	require.NoError(t, err)
	var handedOn atomic.Int32 // 1: before the refill started, 2: after
	p.OnChange(func(ch proc.Change) {
		if ch&proc.ChangeOutput != 0 && handedOn.Load() == 0 {
			if started.Load() {
				handedOn.Store(2)
			} else {
				handedOn.Store(1)
			}
		}
		select { // on to the consumer, which waits on Notify
		case p.notify <- struct{}{}:
		default:
		}
	})
	require.NoError(t, p.PushStdin([]byte("go\n")))
	var out bytes.Buffer
	newConsumer(t, p, &out).toEOF()
	require.Equal(t, "go\n", out.String())
	<-refilled
	require.Equal(t, int32(1), handedOn.Load(), "the refill started before the first output was handed on")
	require.NoError(t, p.Destroy())
}

// With WarmInits 2, both wait: a start takes the older, and the one
// after it, coming before any refill could end, takes the younger.
func TestWarmInitsWaitTwoDeep(t *testing.T) {
	defer func(d time.Duration) { firstOutputWait = d }(firstOutputWait)
	firstOutputWait = time.Hour // only the output, or a start, makes one
	c, err := NewContainment(ContainOptions{WarmInit: true, WarmInits: 2})
	require.NoError(t, err)
	defer func() { require.NoError(t, c.Close()) }()
	refilled := make(chan struct{}, 8)
	c.warm.onRefill = func() { refilled <- struct{}{} }
	runs(t, c, shReq(t, `echo first`))
	<-refilled
	<-refilled
	w := warmState(c)
	require.Len(t, w.spares, 2)
	older, younger := w.spares[0], w.spares[1]

	// Two quiet processes: neither prints, so no refill starts.
	a, err := c.Start(shReq(t, `read x; echo "$x"`), nil)
	require.NoError(t, err)
	b, err := c.Start(shReq(t, `read x; echo "$x"`), nil)
	require.NoError(t, err)
	require.Equal(t, older, a.Pid())
	require.Equal(t, younger, b.Pid())
	for _, p := range []*Process{a, b} {
		require.NoError(t, p.PushStdin([]byte("x\n")))
		var out bytes.Buffer
		newConsumer(t, p, &out).toEOF()
		require.Equal(t, "x\n", out.String())
		require.NoError(t, p.Destroy())
	}
	<-refilled // a's output started the refill, which makes two
	<-refilled
	_, ready := c.WarmInits()
	require.True(t, ready)
}
