package fuzz

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/klauspost/compress/s2"
	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/frames"
	"github.com/procwire/procwire/internal/testkit/fakeexec"
	"github.com/procwire/procwire/proc"
	"github.com/procwire/procwire/server"
)

// FuzzServerLifecycle drives one in-process server.Server through a
// sequence of connections, each input a small program (see life.step):
// opens with and without open_key (repeated keys, reused instances,
// compression offered or not, a child whose signals fail, one that greets
// before reading, a start that fails), resumes with fuzzed tokens and
// offsets, first-frame destroys by process_id+token and by
// instance_id+open_key (and malformed ones), races (the same open twice, an
// open and a destroy by its key, the first open held in Start, its
// connection cut meanwhile) and, inside sessions, stdin raw and
// s2-compressed (valid, corrupt, not negotiated), signals with fresh,
// repeated and old ids, right behind stdin or not, acks, stdin_close and
// destroys naming the process or not; cuts come between steps, right after
// a frame was sent, and inside a first frame or a stdin frame sent in
// fragments. The routing headers are right, absent or wrong.
//
// A model of every process (its instance, key, token, stdin, exit, signal
// answers) predicts each answer; what a cut leaves uncertain is settled
// from Stats once the server has finished with the cut connection, or by
// the next answer that shows it. After every step it checks that:
//   - every frame the server sends decodes, is canonical, is allowed in its
//     place and carries the bytes sent as stdin (stdout, and stderr, the tee);
//   - every connection ends with the close code its frames call for (an
//     answer then 1000, 1002, 1007, 4001 when taken over), within 123 bytes
//     of reason, or stays usable; never 1011;
//   - Stats lists exactly the live processes of the model, at most one per
//     instance, each attached as the model says; the executor runs as many
//     children; the memory budget holds exactly their windows;
//   - an open repeating a live process's instance and open_key answers
//     opened for the same process (id, token, evidence, windows,
//     encodings) and replays it, or process_already_open once a client
//     showed it had the token, and never starts a second process;
//   - after destroyed, Stats no longer lists the process; a resume of it
//     answers process_destroyed, a destroy destroyed again; an open with
//     its key, or with a key a destroy by key found nothing under, answers
//     process_destroyed and starts nothing;
//   - a signal is answered once per ask, with its id: delivered then its
//     exit, already_exited, or the signal_failed error with error.id, and a
//     repeated id gets the answer recorded for it; a delivered signal came
//     after every stdin byte sent before it was echoed;
//   - afterwards no connection, process, child or goroutine is left.
//
// Children are fakeexec's in-memory cats (no fork), so an execution is a few
// loopback round trips per step.
func FuzzServerLifecycle(f *testing.F) {
	e := newLifeEnv(f)
	for _, s := range lifeSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		newLife(t, e, in).exec()
	})
}

const (
	lifeInstances    = 3
	lifeKeys         = 3
	lifeMaxProcesses = 2
	lifeMaxSteps     = 32
	// lifeMaxTombstones exceeds the tombstones one input can make (one per
	// step, and one per process at the end), so the newest, this input's,
	// are all kept.
	lifeMaxTombstones = 2*lifeMaxSteps + 8
	lifeMaxStdin      = 640 // stdin per process: below every window, so nothing waits for credit or acks
	lifeMaxConns      = 5   // connections left open at once
	connHeader        = "X-Fuzz-Conn"
)

// lifeEnv is the server shared by the inputs of one worker.
type lifeEnv struct {
	srv    *server.Server
	hs     *httptest.Server
	url    string
	client *http.Client
	exec   *fakeexec.Executor
	gate   *lifeGate
	// admitted, when set, is closed by the next Admit: an open was read.
	admitted atomic.Pointer[chan struct{}]

	mu       sync.Mutex
	served   map[string]chan struct{} // by connHeader: closed when its handler returned
	handlers sync.WaitGroup
	inputs   uint64
}

func newLifeEnv(f *testing.F) *lifeEnv {
	e := &lifeEnv{gate: &lifeGate{}, served: map[string]chan struct{}{}}
	e.exec = newLifeExecutor(e.gate)
	srv, err := server.New(server.Config{
		Token:    fuzzToken,
		Executor: fakeExecutor{e.exec},
		Admit: func(context.Context, string) *frames.Error {
			if ch := e.admitted.Swap(nil); ch != nil {
				close(*ch)
			}
			return nil
		},
		StdoutWindow:    fuzzWindow,
		MaxStdoutWindow: fuzzMaxWindow,
		StdinWindow:     fuzzWindow,
		MaxStdinWindow:  fuzzMaxWindow,
		StderrRing:      fuzzStderrRing,
		MaxFrameData:    fuzzMaxData,
		Grace:           time.Minute, // never expires within an input
		Heartbeat:       -1,
		MaxTombstones:   lifeMaxTombstones,
		MaxProcesses:    lifeMaxProcesses,
	})
	require.NoError(f, err)
	e.srv = srv
	e.hs = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.handlers.Add(1)
		defer e.handlers.Done()
		e.mu.Lock()
		done := e.served[r.Header.Get(connHeader)]
		delete(e.served, r.Header.Get(connHeader))
		e.mu.Unlock()
		if done != nil {
			defer close(done)
		}
		srv.ServeHTTP(w, r)
	}))
	e.url = "ws" + strings.TrimPrefix(e.hs.URL, "http")
	e.client = &http.Client{Transport: &http.Transport{}}
	f.Cleanup(func() {
		require.NoError(f, srv.Close())
		e.hs.Close()
		e.client.CloseIdleConnections()
	})
	return e
}

// lifeGate holds an open while it starts: an executable named "slow…"
// waits in Start, once entered is told, until release is closed (or the
// open is cut off).
type lifeGate struct {
	mu      sync.Mutex
	entered chan struct{}
	release chan struct{}
}

// newLifeExecutor returns in-memory cats for the lifecycle harness: "slow…"
// starts held by g, "nosig" starts one whose Signal fails while it runs, as
// a signal the OS refuses (EPERM), and "greet" one that writes greeting
// before its stdin.
func newLifeExecutor(g *lifeGate) *fakeexec.Executor {
	e := &fakeexec.Executor{}
	e.BeforeStart = func(ctx context.Context, req *proc.Request, cfg proc.Config) error {
		checkWindows(e, cfg)
		name, ok := strings.CutPrefix(req.Executable, "slow")
		if !ok {
			return nil
		}
		g.mu.Lock()
		entered, release := g.entered, g.release
		g.mu.Unlock()
		if entered != nil {
			entered <- struct{}{}
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		req.Executable = name
		return nil
	}
	e.Setup = func(req proc.Request, p *fakeexec.Process) {
		switch req.Executable {
		case "nosig":
			p.SignalErr = func() error { return fmt.Errorf("kill: %w", syscall.EPERM) }
		case "greet":
			p.Write(greeting)
		}
	}
	return e
}

// greeting is what the executable "greet" writes to stdout first, before
// it copies its stdin: stdout a client may acknowledge before it sends
// anything.
var greeting = []byte("hello, procwire\n")

// ---------------------------------------------------------------------------
// The model.

// tri is a fact a cut may leave unknown.
type tri uint8

const (
	no tri = iota
	yes
	maybe
)

// lproc is one process as the model knows it.
type lproc struct {
	n        int // index in life.procs
	inst     int
	key      int    // index of its open_key, or -1
	id       string // from opened, or from Stats after a cut open
	token    string // "" while no opened was seen
	opened   *frames.Opened
	nosig    bool
	greet    []byte // stdout before the echo of stdin
	inEnc    bool   // opened chose s2 for stdin
	outEnc   bool   // and for stdout and stderr
	stream   []byte
	sure     int   // the server surely holds stream[:sure]; the rest may be lost with a cut
	closed   bool  // stdin_close accepted
	acked    int64 // the largest ack the server took
	maxOut   int64 // the most stdout any connection received
	eofAt    int64 // stdout_eof offset once seen, or -1
	exit     *frames.Exit
	sigMaybe bool // a signal cut off may kill it yet
	lastSig  int64
	sigs     map[int64]frames.Frame // answer recorded per id; nil value: unknown (cut off)
	conn     *lconn                 // the connection attached, or nil
	gone     bool                   // destroyed
}

// outExact reports whether the model knows all the stdout cat produced.
func (p *lproc) outExact() bool {
	if p.eofAt >= 0 {
		return p.maxOut == p.eofAt
	}
	return p.exit == nil && !p.sigMaybe && p.sure == len(p.stream) && p.maxOut == p.outLen()
}

// outLen is the stdout cat writes for the stdin held: greeting and echo.
func (p *lproc) outLen() int64 { return int64(len(p.greet) + len(p.stream)) }

// outAt returns the n bytes of stdout at off, or false when cat cannot
// have written them.
func (p *lproc) outAt(off, n int64) ([]byte, bool) {
	if off+n > p.outLen() {
		return nil, false
	}
	out := append(append([]byte(nil), p.greet...), p.stream...)
	return out[off : off+n], true
}

// running reports whether cat surely still copies its stdin.
func (p *lproc) running() bool { return p.exit == nil && !p.sigMaybe && !p.closed }

// keyState is what the server remembers of an instance's open key.
type keyState struct {
	tomb tri    // the key was destroyed (a destroy by key found nothing, or its process was destroyed)
	proc *lproc // the process it started, when known
}

// life is one input.
type life struct {
	t        *testing.T
	e        *lifeEnv
	p        program
	seq      uint64
	deadline time.Time
	trace    []string

	insts [lifeInstances]string
	keys  [lifeKeys]string
	live  [lifeInstances]*lproc
	kst   map[[2]int]*keyState
	procs []*lproc
	conns []*lconn
	nconn int
}

func newLife(t *testing.T, e *lifeEnv, in []byte) *life {
	e.mu.Lock()
	e.inputs++
	seq := e.inputs
	e.mu.Unlock()
	l := &life{t: t, e: e, p: program{b: in}, seq: seq, deadline: time.Now().Add(inputLimit), kst: map[[2]int]*keyState{}}
	for i := range l.insts {
		l.insts[i] = fmt.Sprintf("life%d-%d", seq, i)
	}
	for k := range l.keys {
		l.keys[k] = fmt.Sprintf("%016x%048x", seq, k+1)
	}
	t.Cleanup(l.cleanup)
	return l
}

func (l *life) log(format string, args ...any) {
	elapsed := time.Since(l.deadline.Add(-inputLimit))
	l.trace = append(l.trace, fmt.Sprintf("%6.1fms ", float64(elapsed.Microseconds())/1000)+fmt.Sprintf(format, args...))
}

func (l *life) fail(format string, args ...any) {
	l.t.Helper()
	var b strings.Builder
	for _, c := range l.conns {
		c.mu.Lock()
		fmt.Fprintf(&b, "  %s: hello %T out %d eof %v exit %+v destroyed %v want %d self %v got %d readErr %v\n",
			c.name, c.hello, c.outEnd, c.eof, c.exit, c.destroyed, c.want, c.selfClosed, len(c.got), c.readErr)
		c.mu.Unlock()
	}
	for _, p := range l.procs {
		fmt.Fprintf(&b, "  proc %d: inst %d key %d id %s stdin %d/%d closed %v acked %d out %d eof %d exit %+v sigMaybe %v gone %v attached %v\n",
			p.n, p.inst, p.key, p.id, p.sure, len(p.stream), p.closed, p.acked, p.maxOut, p.eofAt, p.exit, p.sigMaybe, p.gone, p.conn != nil)
	}
	fmt.Fprintf(&b, "  stats: %+v\n", l.e.srv.Stats())
	l.t.Fatalf("%s\ntrace:\n  %s\nstate:\n%s", fmt.Sprintf(format, args...), strings.Join(l.trace, "\n  "), b.String())
}

func (l *life) stuck(format string, args ...any) {
	l.t.Helper()
	buf := make([]byte, 4<<20)
	l.fail("stuck: %s\ngoroutines:\n%s", fmt.Sprintf(format, args...), buf[:runtime.Stack(buf, true)])
}

func (l *life) require(ok bool, format string, args ...any) {
	l.t.Helper()
	if !ok {
		l.fail(format, args...)
	}
}

// cleanup, after a failed input, destroys what it can, so that the next
// inputs start afresh.
func (l *life) cleanup() {
	if !l.t.Failed() {
		return
	}
	for _, c := range l.conns {
		_ = c.ws.CloseNow()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, p := range l.procs {
		f := &frames.Destroy{ProcessID: p.id, Token: p.token}
		if p.token == "" {
			if p.key < 0 {
				continue
			}
			f = &frames.Destroy{InstanceID: l.insts[p.inst], OpenKey: l.keys[p.key]}
		}
		ws, _, err := websocket.Dial(ctx, l.e.url, &websocket.DialOptions{
			HTTPClient:   l.e.client,
			HTTPHeader:   http.Header{"Authorization": {"Bearer " + fuzzToken}},
			Subprotocols: []string{frames.Subprotocol},
		})
		if err != nil {
			continue
		}
		_ = ws.Write(ctx, websocket.MessageText, frames.Append(nil, f))
		for err == nil {
			_, _, err = ws.Read(ctx)
		}
		_ = ws.CloseNow()
	}
}

// ---------------------------------------------------------------------------
// Connections.

// lconn is one connection; a goroutine reads its frames into got, and the
// input's goroutine checks them in order (pump).
type lconn struct {
	l      *life
	name   string
	ws     *websocket.Conn
	served chan struct{} // closed when the server's handler returned
	done   chan struct{} // closed when the reader returned

	mu      sync.Mutex
	got     []frames.Frame
	bad     string // a message that is not a canonical frame
	readErr error
	changed chan struct{}

	// The rest belongs to the input's goroutine.
	pos        int
	first      frames.Type // the first frame sent
	p          *lproc      // the process it is about
	reopen     bool        // an open that may attach to p
	hello      frames.Frame
	attached   bool // opened or resumed seen, and not ended
	outEnd     int64
	errEnd     int64
	eof        bool
	exit       *frames.Exit
	destroyed  bool
	credits    int
	asked      map[int64]int // signal ids asked on c, and how many answers are due
	answers    []frames.Frame
	want       websocket.StatusCode // the close its frames call for; 0: it stays open
	wantAny    bool                 // an uncertain close: any code of PROTOCOL.md §7 but 1011
	wantReason string               // what the close reason must name, if known
	selfClosed bool                 // the harness cut or closed it
	ended      bool                 // its end was checked
}

// dial opens a connection with the given routing headers.
func (l *life) dial(inst, proc string) *lconn {
	l.nconn++
	c := &lconn{l: l, name: fmt.Sprintf("c%d", l.nconn), served: make(chan struct{}), done: make(chan struct{}),
		changed: make(chan struct{}, 1), asked: map[int64]int{}}
	tag := fmt.Sprintf("%d/%d", l.seq, l.nconn)
	l.e.mu.Lock()
	l.e.served[tag] = c.served
	l.e.mu.Unlock()
	h := http.Header{"Authorization": {"Bearer " + fuzzToken}, connHeader: {tag}}
	if inst != "" {
		h.Set(frames.HeaderInstance, inst)
	}
	if proc != "" {
		h.Set(frames.HeaderProcess, proc)
	}
	ctx, cancel := context.WithDeadline(context.Background(), l.deadline)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, l.e.url, &websocket.DialOptions{
		HTTPClient: l.e.client, HTTPHeader: h, Subprotocols: []string{frames.Subprotocol},
	})
	if err != nil {
		l.e.mu.Lock()
		delete(l.e.served, tag)
		l.e.mu.Unlock()
		l.fail("dial %s: %v", c.name, err)
	}
	ws.SetReadLimit(frames.MaxLine)
	c.ws = ws
	l.conns = append(l.conns, c)
	go c.read()
	return c
}

func (c *lconn) read() {
	defer close(c.done)
	for {
		typ, b, err := c.ws.Read(context.Background())
		c.mu.Lock()
		switch {
		case err != nil:
			c.readErr = err
		case typ != websocket.MessageText:
			if c.bad == "" {
				c.bad = "a binary message"
			}
		default:
			f, derr := frames.Decode(b)
			switch {
			case derr != nil:
				if c.bad == "" {
					c.bad = fmt.Sprintf("undecodable frame %q: %v", trim(b), derr)
				}
			case !bytes.Equal(frames.Append(nil, f), b):
				if c.bad == "" {
					c.bad = fmt.Sprintf("non-canonical frame %q", trim(b))
				}
			default:
				c.got = append(c.got, f)
			}
		}
		c.mu.Unlock()
		select {
		case c.changed <- struct{}{}:
		default:
		}
		if err != nil {
			return
		}
	}
}

// send writes one text message; a failed write means the server closed
// the connection, which pump then checks.
func (c *lconn) send(msg []byte) {
	c.l.log("%s <- %s", c.name, trim(bytes.TrimSuffix(msg, []byte("\n"))))
	ctx, cancel := context.WithDeadline(context.Background(), c.l.deadline)
	defer cancel()
	if err := c.ws.Write(ctx, websocket.MessageText, msg); err != nil && ctx.Err() != nil {
		c.l.stuck("%s: a write blocked", c.name)
	}
}

func (c *lconn) sendFrame(f frames.Frame) { c.send(frames.Append(nil, f)) }

// sendPart sends the first half of msg as a WebSocket fragment, then cuts
// the connection: the server never has the frame.
func (c *lconn) sendPart(msg []byte) {
	c.l.log("%s <- part of %s, then cut", c.name, trim(msg))
	ctx, cancel := context.WithDeadline(context.Background(), c.l.deadline)
	defer cancel()
	if w, err := c.ws.Writer(ctx, websocket.MessageText); err == nil {
		_, _ = w.Write(msg[:len(msg)/2])
	}
	c.cut()
}

// cut drops the connection without a close handshake.
func (c *lconn) cut() {
	c.l.log("%s cut", c.name)
	c.selfClosed = true
	_ = c.ws.CloseNow()
	c.detach()
}

// detach forgets that c serves its process.
func (c *lconn) detach() {
	if c.p != nil && c.p.conn == c {
		c.p.conn = nil
	}
}

// awaitServed waits until the server's handler for c returned: whatever
// c's frames did is done, and its process is detached.
func (c *lconn) awaitServed() {
	select {
	case <-c.served:
	case <-time.After(time.Until(c.l.deadline)):
		c.l.stuck("%s is still being served", c.name)
	}
}

// pump checks the frames c received since the last call, and its end.
func (c *lconn) pump() {
	l := c.l
	l.t.Helper()
	c.mu.Lock()
	got, bad, ended := c.got[c.pos:], c.bad, c.readErr
	c.pos = len(c.got)
	c.mu.Unlock()
	l.require(bad == "", "%s: %s", c.name, bad)
	for _, f := range got {
		l.log("%s -> %s", c.name, trim(bytes.TrimSuffix(frames.Append(nil, f), []byte("\n"))))
		if v := c.onFrame(f); v != "" {
			l.fail("%s: %s", c.name, v)
		}
	}
	if ended != nil && !c.ended {
		c.ended = true
		c.checkEnd(ended)
	}
}

// onFrame checks one frame from the server against the model, and returns
// what is wrong with it.
func (c *lconn) onFrame(f frames.Frame) string {
	if c.destroyed {
		return fmt.Sprintf("%s after destroyed", f.Type())
	}
	p := c.p
	switch f := f.(type) {
	case *frames.Opened:
		if c.hello != nil || c.first != frames.TypeOpen || p == nil {
			return fmt.Sprintf("opened after %T, or where an error was due", c.hello)
		}
		c.hello, c.attached = f, true
		if !c.reopen {
			if p.id == "" { // a race: the step learns it here
				p.id = f.ProcessID
			}
			if p.token == "" { // a race, where destroyed may have told the id first
				p.token = f.Token
			}
			if f.ProcessID != p.id || f.Token != p.token {
				return fmt.Sprintf("opened %s, the same open elsewhere opened %s", f.ProcessID, p.id)
			}
			if f.MaxData != fuzzMaxData || f.StderrWindow != fuzzStderrRing || f.GraceMS != time.Minute.Milliseconds() {
				return fmt.Sprintf("opened announces %+v", f)
			}
			return ""
		}
		if p.sure != 0 {
			return fmt.Sprintf("opened again after %d bytes of stdin", p.sure)
		}
		p.stream = nil
		if p.opened == nil {
			// Its first opened was cut off: this one tells.
			if f.ProcessID != p.id || f.Evidence.InstanceID != c.l.insts[p.inst] {
				return fmt.Sprintf("opened again %s, Stats listed %s", f.ProcessID, p.id)
			}
			o := *f
			p.opened, p.token = &o, f.Token
			p.inEnc, p.outEnc = f.StdinEnc == frames.EncS2, f.OutputEnc == frames.EncS2
			return ""
		}
		// The same process again: same id, token, evidence, windows and
		// encodings; its stdin limit is the current one.
		want := *p.opened
		want.StdinLimit = f.StdinLimit
		if p.token == "" {
			want.Token = f.Token // learnt here, after a cut open
		}
		if *f != want {
			return fmt.Sprintf("repeated open answers %+v, the first %+v", f, p.opened)
		}
		p.token, p.opened.Token = f.Token, f.Token
		return ""
	case *frames.Resumed:
		if c.hello != nil || c.first != frames.TypeResume || p == nil {
			return fmt.Sprintf("resumed after %T", c.hello)
		}
		c.hello, c.attached = f, true
		switch {
		case f.ProcessID != p.id || f.Evidence != p.opened.Evidence:
			return fmt.Sprintf("resumed %+v differs from opened %+v", f, p.opened)
		case f.StdinReceived != int64(p.sure) && f.StdinReceived != int64(len(p.stream)):
			return fmt.Sprintf("resumed with stdin_received %d, sent %d surely and %d maybe", f.StdinReceived, p.sure, len(p.stream))
		case f.StdinLimit < f.StdinReceived:
			return fmt.Sprintf("resumed with stdin_limit %d below stdin_received %d", f.StdinLimit, f.StdinReceived)
		}
		p.stream = p.stream[:f.StdinReceived]
		p.sure = len(p.stream)
		return ""
	case *frames.Error:
		if f.ID != 0 {
			return c.onAnswer(f, f.ID)
		}
		if c.hello != nil {
			return fmt.Sprintf("error %+v after %T", f, c.hello)
		}
		c.hello = f
		return ""
	case *frames.Signaled:
		return c.onAnswer(f, f.ID)
	case *frames.Destroyed:
		if p != nil && p.id == "" { // a race: the step learns it here
			p.id = f.ProcessID
		}
		if p == nil || f.ProcessID != p.id {
			return fmt.Sprintf("destroyed %s, not the process asked", f.ProcessID)
		}
		if c.first == frames.TypeDestroy && c.hello == nil {
			c.hello = f
		}
		c.destroyed = true
		c.attached = false
		return ""
	case *frames.Exit:
		if p == nil {
			return "exit, no process named"
		}
		if c.exit != nil {
			return "a second exit on one connection"
		}
		if !c.attached && !(c.first == frames.TypeDestroy && c.hello == nil) {
			return "exit before opened or resumed"
		}
		c.exit = f
		switch {
		case p.exit == nil:
			p.exit = f
		case *p.exit != *f:
			return fmt.Sprintf("exit %+v, before %+v", f, p.exit)
		}
		return ""
	}
	if !c.attached {
		return fmt.Sprintf("%s before opened or resumed", f.Type())
	}
	switch f := f.(type) {
	case *frames.Stdout:
		n := int64(len(f.Data))
		switch {
		case f.Off != c.outEnd:
			return fmt.Sprintf("stdout at %d, expected %d", f.Off, c.outEnd)
		case c.eof:
			return "stdout after stdout_eof"
		case n > fuzzMaxData:
			return fmt.Sprintf("stdout of %d bytes", n)
		case f.Enc != "" && !p.outEnc:
			return "stdout compressed, not negotiated"
		case !p.is(f.Off, f.Data):
			return fmt.Sprintf("stdout at %d is not what cat writes there", f.Off)
		}
		c.outEnd += n
		p.maxOut = max(p.maxOut, c.outEnd)
	case *frames.Stderr:
		n := int64(len(f.Data))
		switch {
		case f.Off < c.errEnd:
			return fmt.Sprintf("stderr at %d, below %d", f.Off, c.errEnd)
		case n > fuzzStderrRing:
			return fmt.Sprintf("stderr of %d bytes", n)
		case f.Enc != "" && !p.outEnc:
			return "stderr compressed, not negotiated"
		case f.Off+n > int64(len(p.stream)) || !bytes.Equal(f.Data, p.stream[f.Off:f.Off+n]):
			return fmt.Sprintf("stderr at %d is not the stdin tee'd there", f.Off)
		}
		c.errEnd = f.Off + n
	case *frames.StdoutEOF:
		switch {
		case c.eof:
			return "a second stdout_eof"
		case f.Off != c.outEnd:
			return fmt.Sprintf("stdout_eof at %d, stdout at %d", f.Off, c.outEnd)
		case p.eofAt >= 0 && p.eofAt != f.Off:
			return fmt.Sprintf("stdout_eof at %d, before at %d", f.Off, p.eofAt)
		}
		c.eof, p.eofAt = true, f.Off
	case *frames.Credit:
		if f.StdinReceived > int64(len(p.stream)) || f.StdinLimit < f.StdinReceived {
			return fmt.Sprintf("credit %+v, %d bytes sent", f, len(p.stream))
		}
		c.credits++
	default:
		return fmt.Sprintf("%s is not a server frame", f.Type())
	}
	return ""
}

// is reports whether stdout data at off is what cat writes there.
func (p *lproc) is(off int64, data []byte) bool {
	want, ok := p.outAt(off, int64(len(data)))
	return ok && bytes.Equal(data, want)
}

// onAnswer checks the answer to a signal asked on c.
func (c *lconn) onAnswer(f frames.Frame, id int64) string {
	if !c.attached || c.asked[id] == 0 {
		return fmt.Sprintf("an answer for signal %d, not asked", id)
	}
	c.asked[id]--
	c.answers = append(c.answers, f)
	return ""
}

// checkEnd checks how c ended.
func (c *lconn) checkEnd(err error) {
	l := c.l
	l.t.Helper()
	c.detach()
	if c.selfClosed {
		return
	}
	var ce websocket.CloseError
	l.require(errors.As(err, &ce), "%s ended without a close frame: %v", c.name, err)
	l.log("%s closed %d %q", c.name, ce.Code, ce.Reason)
	l.require(len(ce.Reason) <= 123, "%s: close reason of %d bytes", c.name, len(ce.Reason))
	l.require(ce.Code != websocket.StatusInternalError, "%s closed with 1011 %q", c.name, ce.Reason)
	l.require(ce.Code == websocket.StatusNormalClosure || ce.Reason != "", "%s closed with %d and no reason", c.name, ce.Code)
	l.require(c.wantReason == "" || strings.Contains(ce.Reason, c.wantReason), "%s closed with %d %q, not naming %s", c.name, ce.Code, ce.Reason, c.wantReason)
	_, refused := c.hello.(*frames.Error)
	if c.destroyed || refused {
		l.require(ce.Code == websocket.StatusNormalClosure, "%s closed with %d %q after %T", c.name, ce.Code, ce.Reason, c.hello)
	}
	switch {
	case c.wantAny:
	case c.want == 0:
		l.fail("%s closed with %d %q, but nothing calls for it", c.name, ce.Code, ce.Reason)
	default:
		l.require(ce.Code == c.want, "%s closed with %d %q, expected %d", c.name, ce.Code, ce.Reason, c.want)
	}
}

// await waits until cond holds, checking what c receives; false means c
// ended first.
func (c *lconn) await(what string, cond func() bool) bool {
	l := c.l
	l.t.Helper()
	timer := time.NewTimer(time.Until(l.deadline))
	defer timer.Stop()
	for {
		c.pump()
		if cond() {
			return true
		}
		if c.ended {
			return false
		}
		select {
		case <-c.changed:
		case <-c.done:
		case <-timer.C:
			l.stuck("%s: waiting for %s", c.name, what)
		}
	}
}

// awaitEnd waits for c's end and for the server to be done with it.
func (c *lconn) awaitEnd(what string) {
	c.await(what, func() bool { return false })
	c.awaitServed()
}

// sync waits until the server handled every frame sent on c: its pong
// comes after them. It reports whether c is still open.
func (c *lconn) sync() bool {
	l := c.l
	ctx, cancel := context.WithDeadline(context.Background(), l.deadline)
	defer cancel()
	err := c.ws.Ping(ctx)
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		l.stuck("%s: no pong", c.name)
	}
	c.pump()
	return err == nil
}

// ---------------------------------------------------------------------------
// Steps.

// exec runs the input, then settles and checks that nothing is left.
func (l *life) exec() {
	l.t.Helper()
	base := runtime.NumGoroutine()
	for steps := 0; steps < lifeMaxSteps && l.p.more(); steps++ {
		l.step()
		l.check()
	}
	l.settle()
	done := make(chan struct{})
	go func() { l.e.handlers.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Until(l.deadline)):
		l.stuck("a connection is still being served")
	}
	st := l.e.srv.Stats()
	l.require(st.Connections == 0 && len(st.Processes) == 0, "left behind: %+v", st)
	l.require(l.e.exec.Live() == 0, "%d children not destroyed", l.e.exec.Live())
	for runtime.NumGoroutine() > base {
		if time.Now().After(l.deadline) {
			l.stuck("%d goroutines, %d before the input", runtime.NumGoroutine(), base)
		}
		runtime.Gosched()
	}
}

// Steps (the first byte of each, modulo stepCount).
const (
	stepOpen         = iota // instance, key, encodings, executable, header, cut, windows
	stepReopen              // an open repeating a keyed process's instance and key
	stepResume              // a known process, token, offsets, header, cut
	stepDestroyID           // first-frame destroy by process_id+token
	stepDestroyKey          // first-frame destroy by instance_id+open_key
	stepBadFirst            // a destroy with no pair, mixed pairs or half a pair; an open with a bad key or encoding list
	stepStdin               // raw, s2, s2 forced, corrupt s2, wrong offset, fragment then cut
	stepSignal              // fresh, repeated, old or zero id
	stepAck                 // what was received, backwards, beyond
	stepStdinClose          // at the end, or elsewhere
	stepInnerDestroy        // plain, naming its own process by id or key, or another
	stepCut                 // cut or close a connection
	stepRace                // an open racing the same open, or a destroy by its key
	stepCount
)

func (l *life) step() {
	l.t.Helper()
	for _, c := range l.conns {
		c.pump()
	}
	op, a, b, c := l.p.byte(), l.p.byte(), l.p.byte(), l.p.byte()
	switch op % stepCount {
	case stepOpen:
		key := int(a>>2)%(lifeKeys+1) - 1
		l.open(int(a)%lifeInstances, key, b, c)
	case stepReopen:
		var keyed []*lproc
		for _, p := range l.procs {
			if p.key >= 0 {
				keyed = append(keyed, p)
			}
		}
		if len(keyed) == 0 {
			l.open(int(a)%lifeInstances, int(a>>2)%lifeKeys, b, c)
			return
		}
		p := keyed[int(a)%len(keyed)]
		l.open(p.inst, p.key, b, c)
	case stepResume:
		l.resume(a, b, c)
	case stepDestroyID:
		l.destroyByID(a, b, c)
	case stepDestroyKey:
		l.destroyByKey(int(a)%lifeInstances, int(a>>2)%lifeKeys, c)
	case stepBadFirst:
		l.badFirst(a)
	case stepRace:
		l.race(int(a)%lifeInstances, int(a>>2)%lifeKeys, b)
	default:
		cn := l.attachedConn(a)
		if cn == nil {
			return
		}
		switch op % stepCount {
		case stepStdin:
			l.stdin(cn, b, c)
		case stepSignal:
			l.signal(cn, b, c)
		case stepAck:
			l.ack(cn, b)
		case stepStdinClose:
			l.stdinClose(cn, b)
		case stepInnerDestroy:
			l.innerDestroy(cn, b, c)
		case stepCut:
			if b&1 == 0 {
				cn.cut()
				cn.awaitServed()
			} else {
				l.closeNormally(cn)
			}
		}
	}
}

// attachedConn picks an open connection serving a process.
func (l *life) attachedConn(a byte) *lconn {
	var cs []*lconn
	for _, c := range l.conns {
		if c.p != nil && c.p.conn == c && c.attached && !c.ended && !c.selfClosed {
			cs = append(cs, c)
		}
	}
	if len(cs) == 0 {
		return nil
	}
	return cs[int(a)%len(cs)]
}

// limitConns cuts the oldest open connections beyond lifeMaxConns.
func (l *life) limitConns() {
	var open []*lconn
	for _, c := range l.conns {
		if !c.ended && !c.selfClosed {
			open = append(open, c)
		}
	}
	for i := 0; len(open)-i >= lifeMaxConns; i++ {
		open[i].cut()
		open[i].awaitServed()
	}
}

// liveCount is the number of processes the model holds.
func (l *life) liveCount() int {
	n := 0
	for _, p := range l.live {
		if p != nil {
			n++
		}
	}
	return n
}

func (l *life) keyState(inst, key int) *keyState {
	ks := l.kst[[2]int{inst, key}]
	if ks == nil {
		ks = &keyState{}
		l.kst[[2]int{inst, key}] = ks
	}
	return ks
}

// headers returns the routing headers for a first frame naming inst (a
// name, or "") and proc: right (0), absent (1), or one of them wrong (2, 3).
func headers(mode byte, inst, proc string) (string, string, bool) {
	switch mode % 4 {
	case 1:
		return "", "", false
	case 2:
		if inst != "" {
			return "other-instance", proc, true
		}
	case 3:
		if proc != "" {
			return inst, strings.Repeat("0", 32), true
		}
	}
	return inst, proc, false
}

// open sends an open on a new connection: on instance inst with key (-1:
// none); b chooses encodings and executable, c the header, the cut and the
// windows.
func (l *life) open(inst, key int, b, c byte) {
	l.t.Helper()
	l.limitConns()
	f := catOpen(l.insts[inst], []int64{0, 1024, 2048, 8192}[c>>4%4], []int64{0, 1024, 4096, 1 << 20}[c>>6])
	if key >= 0 {
		f.OpenKey = l.keys[key]
	}
	if b&1 != 0 {
		f.OutputEnc = "s2"
	}
	if b&2 != 0 {
		f.StdinEnc = "s2"
	}
	if b&4 != 0 {
		// Lists naming encodings the server does not know, which it ignores.
		f.OutputEnc, f.StdinEnc = "zstd", "x9,s2"
		if b&1 != 0 {
			f.OutputEnc = "zstd,s2"
		}
	}
	switch b >> 3 % 4 {
	case 1:
		f.Request.Executable = "greet"
	case 2:
		f.Request.Executable = "nosig"
	case 3:
		f.Request.Executable = "failcat"
	}
	hInst, _, badHeader := headers(c, f.InstanceID, "")
	cn := l.dial(hInst, "")
	cn.first = frames.TypeOpen
	cut := c >> 2 % 4 // 0, 1: answered; 2: cut after sending (keyed only); 3: cut inside
	msg := frames.Append(nil, f)
	if cut == 3 {
		cn.sendPart(msg)
		cn.awaitServed()
		return
	}

	// What the server must answer.
	var ks *keyState
	if key >= 0 {
		ks = l.keyState(inst, key)
	}
	cur := l.live[inst]
	var fresh *lproc
	var wantErr *frames.Error
	switch {
	case badHeader:
		cn.want = websocket.StatusProtocolError
	case ks != nil && ks.tomb == yes:
		wantErr = &frames.Error{Code: frames.LifecycleConflict, Operation: "open_process", Expected: "running", Actual: "process_destroyed"}
	case cur != nil && key >= 0 && cur.key == key && cur.sure == 0 && len(cur.stream) == 0 && cur.acked == 0:
		cn.p, cn.reopen = cur, true
	case cur != nil:
		if key >= 0 && cur.key == key && cur.sure == 0 && cur.acked == 0 {
			cn.wantAny = true // stdin cut off: opened again, or already open
			cn.p, cn.reopen = cur, true
		} else {
			wantErr = &frames.Error{Code: frames.LifecycleConflict, Operation: "open_process", Actual: "process_already_open"}
		}
	case l.liveCount() >= lifeMaxProcesses:
		wantErr = &frames.Error{Code: frames.CapabilityUnavailable, Requirement: "resources"}
	case f.Request.Executable == "failcat":
		wantErr = &frames.Error{Code: frames.OperationFailed, Operation: "open_process", Reason: "executable_not_found"}
	}
	if cn.p == nil && !badHeader && wantErr == nil {
		fresh = &lproc{n: len(l.procs), inst: inst, key: key, nosig: f.Request.Executable == "nosig", eofAt: -1, sigs: map[int64]frames.Frame{}}
		if f.Request.Executable == "greet" {
			fresh.greet = greeting
		}
		cn.p = fresh
	}
	if wantErr != nil {
		cn.want = websocket.StatusNormalClosure
	}
	if ks != nil && ks.tomb == maybe && !badHeader {
		// A destroy by this key was cut off: the open is refused with
		// process_destroyed, or answered as if it never came.
		cn.wantAny = true
	}

	if cut == 2 && key >= 0 && !badHeader {
		cn.send(msg)
		cn.cut()
		cn.awaitServed()
		cn.pump()
		l.settleCutOpen(cn, f, fresh, ks)
		return
	}
	cn.send(msg)
	if badHeader {
		cn.awaitEnd("the header's refusal")
		l.require(cn.hello == nil, "%s: a wrong header answered %T", cn.name, cn.hello)
		return
	}
	cn.await("the answer to open", func() bool { return cn.hello != nil })
	l.require(cn.hello != nil, "%s: open unanswered", cn.name)
	if e, ok := cn.hello.(*frames.Error); ok {
		cn.want, cn.wantAny = websocket.StatusNormalClosure, false
		if ks != nil && ks.tomb == maybe && e.Actual == "process_destroyed" {
			wantErr = &frames.Error{Code: frames.LifecycleConflict, Operation: "open_process", Expected: "running", Actual: "process_destroyed"}
		}
		if wantErr == nil && cn.reopen {
			wantErr = &frames.Error{Code: frames.LifecycleConflict, Operation: "open_process", Actual: "process_already_open"}
		}
		l.require(wantErr != nil && sameError(e, wantErr), "%s: open answered %+v, expected %+v", cn.name, e, wantErr)
		if ks != nil && ks.tomb == maybe {
			ks.tomb = yes
		}
		if cn.reopen {
			cur.sure = len(cur.stream) // it was received
		}
		cn.p = nil
		cn.awaitEnd("close after the refusal")
		return
	}
	op := cn.hello.(*frames.Opened)
	l.require(wantErr == nil, "%s: open answered opened, expected %+v", cn.name, wantErr)
	cn.want, cn.wantAny = 0, false
	if ks != nil && ks.tomb == maybe {
		ks.tomb = no
	}
	if cn.reopen {
		// Taken over: the previous connection is closed with 4001, and
		// the replay ends with a credit.
		l.takeOver(cur, cn)
		cn.await("the replay after opened again", func() bool { return cn.credits > 0 })
		l.checkReplay(cn)
		return
	}
	fresh.id, fresh.token = op.ProcessID, op.Token
	l.newProc(fresh, op, cn)
	if ks != nil {
		ks.proc = fresh
	}
}

// newProc records a process started by an open answered op (nil when
// unknown) on cn.
func (l *life) newProc(p *lproc, op *frames.Opened, cn *lconn) {
	if op != nil {
		o := *op
		p.opened = &o
		p.inEnc, p.outEnc = op.StdinEnc == frames.EncS2, op.OutputEnc == frames.EncS2
	}
	l.procs = append(l.procs, p)
	l.live[p.inst] = p
	if cn != nil && !cn.selfClosed {
		p.conn = cn
	}
}

// settleCutOpen settles a keyed open whose connection was cut after it was
// sent: from what cn received, and Stats.
func (l *life) settleCutOpen(cn *lconn, f *frames.Open, fresh *lproc, ks *keyState) {
	l.t.Helper()
	st := l.procStats()
	inst := l.instIndex(f.InstanceID)
	ps, listed := st.byInst[f.InstanceID]
	cur := l.live[inst]
	switch {
	case cn.reopen:
		// Opened again or refused: either way the same process; if it was
		// taken over, the connection before is closed with 4001.
		l.require(listed && ps.ProcessID == cur.id, "the process of %s is gone after a cut open", f.InstanceID)
		if old := cur.conn; old != nil && !ps.Attached {
			old.want = 4001
			cur.conn = nil
			old.awaitEnd("4001 after a cut open took the process over")
		}
	case fresh != nil && listed:
		if ks.tomb == maybe {
			ks.tomb = no
		}
		fresh.id = ps.ProcessID
		var op *frames.Opened
		if o, ok := cn.hello.(*frames.Opened); ok {
			op = o
			fresh.token = o.Token
		}
		l.newProc(fresh, op, nil)
		if op == nil {
			// Learnt from the next open with the key.
			fresh.opened = nil
		}
		ks.proc = fresh
	case fresh != nil:
		// Nothing started: the open was not read, or refused.
		if _, refused := cn.hello.(*frames.Error); refused && ks.tomb == maybe {
			ks.tomb = yes
		}
	default:
		l.require(!listed || cur != nil && ps.ProcessID == cur.id, "a refused cut open started %+v", ps)
	}
}

// takeOver records that cn took p over from the connection before.
func (l *life) takeOver(p *lproc, cn *lconn) {
	if old := p.conn; old != nil && old != cn {
		old.want = 4001
		p.conn = cn
		old.awaitEnd("4001 after the process was taken over")
	}
	p.conn = cn
}

// checkReplay checks a connection that took a process over, once its
// first credit came: the replay holds the exit and EOF that happened, and
// settles whether a signal cut off was delivered.
func (l *life) checkReplay(cn *lconn) {
	p := cn.p
	if p.exit != nil {
		l.require(cn.exit != nil, "%s: the replay lacks the exit %+v", cn.name, p.exit)
	}
	if p.eofAt >= 0 {
		l.require(cn.eof, "%s: the replay lacks stdout_eof", cn.name)
	}
}

// sameError reports whether got has the code, operation, expected, actual,
// requirement and reason of want.
func sameError(got, want *frames.Error) bool {
	return got.Code == want.Code && got.Operation == want.Operation && got.Expected == want.Expected &&
		got.Actual == want.Actual && got.Requirement == want.Requirement && got.Reason == want.Reason && got.ID == want.ID
}

// pickProc picks a process of the input, or nil for a made-up one.
func (l *life) pickProc(a byte) *lproc {
	if len(l.procs) == 0 || int(a)%(len(l.procs)+1) == len(l.procs) {
		return nil
	}
	return l.procs[int(a)%(len(l.procs)+1)]
}

// credentials names p (nil: a made-up process) with its token, or a wrong
// one; known is false when they name nothing the server knows.
func credentials(p *lproc, wrong bool) (id, token string, known bool) {
	id, token = strings.Repeat("ab", 16), strings.Repeat("cd", 32)
	if p == nil || p.id == "" {
		return id, token, false
	}
	if wrong || p.token == "" {
		return p.id, token, false
	}
	return p.id, p.token, true
}

// resume resumes a process: a chooses it, b the token and offsets, c the
// header and the cut.
func (l *life) resume(a, b, c byte) {
	l.t.Helper()
	l.limitConns()
	p := l.pickProc(a)
	id, token, known := credentials(p, b&1 != 0)
	f := &frames.Resume{ProcessID: id, Token: token}
	if known {
		switch b >> 1 % 5 {
		case 1:
			f.StdoutReceived = p.acked
		case 2:
			f.StdoutReceived = p.maxOut
		case 3:
			f.StdoutReceived = p.acked - 1 // a gap when acked
		case 4:
			f.StdoutReceived = p.maxOut + 1 // beyond, when exact
		}
		f.StdoutReceived = max(f.StdoutReceived, 0)
		f.StderrReceived = int64(b>>4) * 8
	}
	instName := ""
	if p != nil {
		instName = l.insts[p.inst]
	}
	hInst, hProc, badHeader := headers(c, instName, id)
	if !known || p.gone {
		// The instance header is checked only against a live process.
		badHeader = hProc != "" && hProc != id
	}
	cn := l.dial(hInst, hProc)
	cn.first = frames.TypeResume
	cn.outEnd = f.StdoutReceived
	msg := frames.Append(nil, f)
	switch c >> 2 % 4 {
	case 3:
		cn.sendPart(msg)
		cn.awaitServed()
		return
	case 2:
		if known && !p.gone && !badHeader {
			cn.p = p
			cn.send(msg)
			cn.cut()
			cn.awaitServed()
			cn.pump()
			ps, listed := l.procStats().byID[p.id]
			l.require(listed, "a cut resume lost %s", p.id)
			if old := p.conn; old != nil && !ps.Attached {
				old.want = 4001
				p.conn = nil
				old.awaitEnd("4001 after a cut resume took the process over")
			}
			return
		}
	}
	var wantErr *frames.Error
	switch {
	case badHeader:
		cn.want = websocket.StatusProtocolError
	case !known:
		wantErr = &frames.Error{Code: frames.LifecycleConflict, Operation: "resume_process", Actual: "process_not_found"}
	case p.gone:
		wantErr = &frames.Error{Code: frames.LifecycleConflict, Operation: "resume_process", Expected: "running", Actual: "process_destroyed"}
	case f.StdoutReceived < p.acked:
		wantErr = &frames.Error{Code: frames.OperationFailed, Operation: "resume_process", Reason: "replay_gap"}
	case f.StdoutReceived > p.maxOut:
		if !p.outExact() {
			cn.wantAny = true // cat may have produced it
		}
		wantErr = &frames.Error{Code: frames.OperationFailed, Operation: "resume_process", Reason: "replay_beyond_end"}
	}
	if wantErr != nil {
		cn.want = websocket.StatusNormalClosure
	}
	if !badHeader && known && !p.gone {
		cn.p = p // resumed, unless refused
	}
	cn.send(msg)
	if badHeader {
		cn.awaitEnd("the header's refusal")
		l.require(cn.hello == nil, "%s: a wrong header answered %T", cn.name, cn.hello)
		return
	}
	cn.await("the answer to resume", func() bool { return cn.hello != nil })
	l.require(cn.hello != nil, "%s: resume unanswered", cn.name)
	if e, ok := cn.hello.(*frames.Error); ok {
		l.require(wantErr != nil && sameError(e, wantErr), "%s: resume answered %+v, expected %+v", cn.name, e, wantErr)
		if e.Reason == "replay_gap" {
			l.require(e.Gap != nil && e.Gap.Requested == f.StdoutReceived && e.Gap.Oldest == p.acked, "%s: gap %+v", cn.name, e.Gap)
		}
		cn.want = websocket.StatusNormalClosure
		cn.p = nil
		cn.awaitEnd("close after the refusal")
		return
	}
	l.require(wantErr == nil || cn.wantAny, "%s: resume answered resumed, expected %+v", cn.name, wantErr)
	cn.want, cn.wantAny = 0, false
	l.takeOver(p, cn)
	cn.await("the replay after resumed", func() bool { return cn.credits > 0 })
	l.checkReplay(cn)
}

// destroyByID destroys a process from a new connection by process_id and
// token.
func (l *life) destroyByID(a, b, c byte) {
	l.t.Helper()
	l.limitConns()
	p := l.pickProc(a)
	id, token, known := credentials(p, b&1 != 0)
	instName := ""
	if p != nil {
		instName = l.insts[p.inst]
	}
	hInst, hProc, badHeader := headers(c, instName, id)
	if !known || p.gone {
		badHeader = hProc != "" && hProc != id
	}
	cn := l.dial(hInst, hProc)
	cn.first = frames.TypeDestroy
	f := &frames.Destroy{ProcessID: id, Token: token}
	if known {
		cn.p = p
	}
	l.destroyFirst(cn, f, p, known, badHeader, c>>2%4)
}

// destroyByKey destroys from a new connection by instance_id and open_key.
func (l *life) destroyByKey(inst, key int, c byte) {
	l.t.Helper()
	l.limitConns()
	hInst, _, badHeader := headers(c, l.insts[inst], "")
	cn := l.dial(hInst, "")
	cn.first = frames.TypeDestroy
	f := &frames.Destroy{InstanceID: l.insts[inst], OpenKey: l.keys[key]}
	ks := l.keyState(inst, key)
	p := ks.proc
	if p != nil && p.id == "" {
		p = nil
	}
	if p == nil && ks.tomb == no {
		// Nothing under the key: process_not_found, and the key is
		// destroyed.
		if c>>2%4 == 2 && !badHeader {
			cn.send(frames.Append(nil, f))
			cn.cut()
			cn.awaitServed()
			cn.pump()
			ks.tomb = maybe
			if _, ok := cn.hello.(*frames.Error); ok {
				ks.tomb = yes
			}
			return
		}
		if c>>2%4 == 3 {
			cn.sendPart(frames.Append(nil, f))
			cn.awaitServed()
			return
		}
		cn.send(frames.Append(nil, f))
		if badHeader {
			cn.want = websocket.StatusProtocolError
			cn.awaitEnd("the header's refusal")
			return
		}
		cn.want = websocket.StatusNormalClosure
		cn.awaitEnd("process_not_found")
		e, _ := cn.hello.(*frames.Error)
		l.require(e != nil && sameError(e, &frames.Error{Code: frames.LifecycleConflict, Operation: "destroy_process", Actual: "process_not_found"}),
			"%s: destroy by a key never used answered %+v", cn.name, cn.hello)
		ks.tomb = yes
		return
	}
	if p == nil {
		// A key destroyed while nothing was started under it (or maybe):
		// process_not_found again.
		cn.send(frames.Append(nil, f))
		if badHeader {
			cn.want = websocket.StatusProtocolError
			cn.awaitEnd("the header's refusal")
			return
		}
		cn.want = websocket.StatusNormalClosure
		cn.awaitEnd("process_not_found again")
		e, _ := cn.hello.(*frames.Error)
		l.require(e != nil && e.Actual == "process_not_found" && e.Operation == "destroy_process",
			"%s: destroy by a destroyed key answered %+v", cn.name, cn.hello)
		ks.tomb = yes
		return
	}
	cn.p = p
	l.destroyFirst(cn, f, p, true, badHeader, c>>2%4)
}

// destroyFirst sends a first-frame destroy of p (known: the frame names it)
// on cn and checks its answer; cut 2 cuts after sending, 3 inside.
func (l *life) destroyFirst(cn *lconn, f *frames.Destroy, p *lproc, known, badHeader bool, cut byte) {
	l.t.Helper()
	msg := frames.Append(nil, f)
	switch {
	case cut == 3:
		cn.sendPart(msg)
		cn.awaitServed()
		return
	case cut == 2 && known && !badHeader:
		cn.send(msg)
		cn.cut()
		cn.awaitServed()
		cn.pump()
		if !p.gone {
			if _, listed := l.procStats().byID[p.id]; !listed {
				l.gone(p, cn)
			}
		}
		return
	}
	cn.send(msg)
	switch {
	case badHeader:
		cn.want = websocket.StatusProtocolError
		cn.awaitEnd("the header's refusal")
		l.require(cn.hello == nil, "%s: a wrong header answered %T", cn.name, cn.hello)
		return
	case !known:
		cn.want = websocket.StatusNormalClosure
		cn.awaitEnd("process_not_found")
		e, _ := cn.hello.(*frames.Error)
		l.require(e != nil && sameError(e, &frames.Error{Code: frames.LifecycleConflict, Operation: "destroy_process", Actual: "process_not_found"}),
			"%s: destroy of an unknown process answered %+v", cn.name, cn.hello)
		return
	}
	cn.want = websocket.StatusNormalClosure
	if !p.gone {
		// The connection attached is told too: exit, destroyed, 1000.
		if old := p.conn; old != nil {
			old.want = websocket.StatusNormalClosure
		}
	}
	cn.awaitEnd("destroyed")
	l.require(cn.destroyed && cn.exit != nil, "%s: destroy answered %T, exit %v", cn.name, cn.hello, cn.exit)
	if !p.gone {
		l.gone(p, cn)
	}
}

// gone records p destroyed (by cn): its attached connection must end with
// exit and destroyed.
func (l *life) gone(p *lproc, by *lconn) {
	l.t.Helper()
	p.gone = true
	if l.live[p.inst] == p {
		l.live[p.inst] = nil
	}
	if p.key >= 0 {
		ks := l.keyState(p.inst, p.key)
		ks.tomb, ks.proc = yes, p
	}
	if old := p.conn; old != nil && old != by {
		old.want = websocket.StatusNormalClosure
		old.awaitEnd("destroyed, told the attached connection")
		l.require(old.destroyed && old.exit != nil, "%s: its process destroyed elsewhere, it got exit %v destroyed %v", old.name, old.exit, old.destroyed)
	}
	p.conn = nil
	_, listed := l.procStats().byID[p.id]
	l.require(!listed, "Stats lists %s after destroyed", p.id)
}

// race sends, on two new connections at once, a keyed open of cat on a
// free instance and either the same open (b&1 == 0: one process, held by
// the second connection; the first is opened and taken over, or, when its
// open is read last, closed unanswered: both with 4001) or a destroy by its key
// (the open starts nothing or is destroyed; the key ends destroyed). b&2
// makes the start fail.
func (l *life) race(inst, key int, b byte) {
	l.t.Helper()
	ks := l.keyState(inst, key)
	if l.live[inst] != nil || l.liveCount() >= lifeMaxProcesses || ks.tomb != no {
		l.open(inst, key, 0, 0)
		return
	}
	l.limitConns()
	f := catOpen(l.insts[inst], 0, 0)
	f.OpenKey = l.keys[key]
	destroy := b&1 != 0
	fails := destroy && b&2 != 0
	if fails {
		f.Request.Executable = "failcat"
	}
	held := b&4 != 0             // the first open waits in Start until the second frame is read
	cutFirst := held && b&8 != 0 // and its connection is cut meanwhile
	if held {
		f.Request.Executable = "slow" + f.Request.Executable
	}
	p := &lproc{n: len(l.procs), inst: inst, key: key, eofAt: -1, sigs: map[int64]frames.Frame{}}
	var w *lconn // a third connection repeating the open
	x := l.dial(l.insts[inst], "")
	y := l.dial(l.insts[inst], "")
	x.first, x.p = frames.TypeOpen, p
	y.p = p
	var second frames.Frame = f
	y.first = frames.TypeOpen
	if destroy {
		second = &frames.Destroy{InstanceID: l.insts[inst], OpenKey: l.keys[key]}
		y.first = frames.TypeDestroy
	}
	if !held {
		x.send(frames.Append(nil, f))
		y.send(frames.Append(nil, second))
	} else {
		entered, release := make(chan struct{}, 1), make(chan struct{})
		l.e.gate.mu.Lock()
		l.e.gate.entered, l.e.gate.release = entered, release
		l.e.gate.mu.Unlock()
		defer func() {
			l.e.gate.mu.Lock()
			l.e.gate.entered, l.e.gate.release = nil, nil
			l.e.gate.mu.Unlock()
		}()
		x.send(frames.Append(nil, f))
		select {
		case <-entered:
		case <-time.After(time.Until(l.deadline)):
			close(release)
			l.stuck("the held open never started")
		}
		admitted := make(chan struct{})
		if !destroy {
			l.e.admitted.Store(&admitted)
		}
		y.send(frames.Append(nil, second))
		if destroy && b&16 != 0 {
			// The open again, while the first still starts: it may take
			// the process over from the first before the destroy comes
			// (4001 there), or be refused.
			w = l.dial(l.insts[inst], "")
			w.first, w.p, w.want = frames.TypeOpen, p, websocket.StatusNormalClosure
			w.send(frames.Append(nil, f))
			x.wantAny = true
		}
		if destroy {
			// Nothing tells when the destroy is read: a connection's
			// round trip through the server gives it the time.
			z := l.dial("", "")
			z.cut()
			z.awaitServed()
			close(admitted)
		}
		select {
		case <-admitted:
		case <-time.After(time.Until(l.deadline)):
			close(release)
			l.stuck("the racing open was never admitted")
		}
		if cutFirst {
			x.cut()
		}
		l.log("the held open starts")
		close(release)
	}

	if !destroy {
		// Both opened, the same process; whichever was attached first is
		// taken over by the other.
		x.want, y.want = 4001, 4001
		y.await("the answer to the same open", func() bool { return y.hello != nil })
		oy, oky := y.hello.(*frames.Opened)
		winner := y
		if cutFirst {
			// The first open's connection was cut while it started: the
			// second is answered as a repeat of it (opened, the replay).
			l.require(oky, "an open repeating one cut while it started answered %T", y.hello)
			x.awaitServed()
			y.await("the replay after the race", func() bool { return y.credits > 0 })
		} else if !x.await("the answer to the first open", func() bool { return x.hello != nil }) {
			// The second open was read first: the first, on the connection
			// the server accepted before, takes nothing over and is closed
			// with 4001 unanswered (PROTOCOL.md §4.4).
			x.mu.Lock()
			err := x.readErr
			x.mu.Unlock()
			var ce websocket.CloseError
			l.require(errors.As(err, &ce) && ce.Reason == "attached to a newer connection",
				"%s: an open racing a newer connection's ended unanswered with %v", x.name, err)
			l.require(oky, "%s: the newer of two racing opens answered %T", y.name, y.hello)
			x.awaitServed()
		} else {
			ox, okx := x.hello.(*frames.Opened)
			l.require(okx && oky, "racing opens answered %T and %T", x.hello, y.hello)
			l.require(ox.ProcessID == oy.ProcessID && ox.Token == oy.Token && ox.Evidence == oy.Evidence,
				"racing opens opened %+v and %+v", ox, oy)
			timer := time.NewTimer(time.Until(l.deadline))
			defer timer.Stop()
			for x.pump(); !x.ended; x.pump() {
				if y.pump(); y.ended {
					break
				}
				select {
				case <-x.changed:
				case <-y.changed:
				case <-timer.C:
					l.stuck("neither racing open was taken over")
				}
			}
			loser := x
			if y.ended {
				loser, winner = y, x
			}
			loser.awaitServed()
		}
		winner.want = 0
		o := *oy
		p.opened = &o
		p.inEnc, p.outEnc = o.StdinEnc == frames.EncS2, o.OutputEnc == frames.EncS2
		l.procs = append(l.procs, p)
		l.live[inst] = p
		p.conn = winner
		ks.proc = p
		return
	}

	// The open and the destroy by its key: each ends with 1000, nothing
	// is left, and the key is destroyed.
	notFound := &frames.Error{Code: frames.LifecycleConflict, Operation: "destroy_process", Actual: "process_not_found"}
	refused := &frames.Error{Code: frames.LifecycleConflict, Operation: "open_process", Expected: "running", Actual: "process_destroyed"}
	failed := &frames.Error{Code: frames.OperationFailed, Operation: "open_process", Reason: "executable_not_found"}
	x.want, y.want = websocket.StatusNormalClosure, websocket.StatusNormalClosure
	if cutFirst {
		x.awaitServed()
	} else {
		x.awaitEnd("the end of the open racing a destroy")
	}
	y.awaitEnd("the end of the destroy racing an open")
	if w != nil {
		// Refused, or opened and then destroyed: never another process.
		w.awaitEnd("the end of an open repeated while it started")
		ew, _ := w.hello.(*frames.Error)
		_, wo := w.hello.(*frames.Opened)
		l.require(wo && w.destroyed && w.exit != nil || ew != nil && (sameError(ew, refused) || fails && sameError(ew, failed)),
			"%s: an open repeated while a destroy by its key raced it answered %T %+v", w.name, w.hello, ew)
	}
	ex, _ := x.hello.(*frames.Error)
	ey, _ := y.hello.(*frames.Error)
	_, opened := x.hello.(*frames.Opened)

	switch {
	case ey != nil:
		l.require(sameError(ey, notFound), "%s: a destroy racing an open answered %+v", y.name, ey)
		l.require(cutFirst || ex != nil && (sameError(ex, refused) || fails && sameError(ex, failed)),
			"%s: an open whose key a destroy found nothing under answered %T %+v", x.name, x.hello, ex)
	default:
		l.require(y.destroyed && y.exit != nil && !fails, "%s: a destroy racing an open answered %T, destroyed %v", y.name, y.hello, y.destroyed)
		x.mu.Lock()
		takenOver := w != nil && websocket.CloseStatus(x.readErr) == 4001
		x.mu.Unlock()
		l.require(cutFirst || opened && (x.destroyed && x.exit != nil || takenOver) || ex != nil && sameError(ex, refused),
			"%s: an open destroyed by its key answered %T %+v, destroyed %v", x.name, x.hello, ex, x.destroyed)
	}
	_, listed := l.procStats().byInst[l.insts[inst]]
	l.require(!listed, "a process is left on %s after a destroy by its key", l.insts[inst])
	ks.tomb = yes
	if p.id != "" {
		p.gone = true
		l.procs = append(l.procs, p)
		ks.proc = p
	}
}

// badFirst sends a first frame the server refuses before doing anything:
// a destroy with no pair (1002), or one that does not decode (1007): mixed
// pairs, half a pair, an open whose open_key or encoding list breaks its
// pattern.
func (l *life) badFirst(a byte) {
	l.t.Helper()
	l.limitConns()
	cn := l.dial("", "")
	cn.first = frames.TypeDestroy
	key, id, tok := l.keys[0], strings.Repeat("ab", 16), strings.Repeat("cd", 32)
	var line string
	open := func(field, value, reason string) {
		f := catOpen(l.insts[int(a>>3)%lifeInstances], 0, 0)
		b := frames.Append(nil, f)
		line = string(b[:len(b)-2]) + `,"` + field + `":"` + value + `"}`
		cn.first, cn.want, cn.wantReason = frames.TypeOpen, websocket.StatusInvalidFramePayloadData, reason
	}
	switch a % 8 {
	case 0:
		line, cn.want = `{"type":"destroy"}`, websocket.StatusProtocolError
	case 1:
		line, cn.want = `{"type":"destroy","process_id":"`+id+`","open_key":"`+key+`"}`, websocket.StatusInvalidFramePayloadData
		cn.wantReason = "destroy: bad_destroy"
	case 2:
		line, cn.want = `{"type":"destroy","instance_id":"`+l.insts[0]+`","token":"`+tok+`"}`, websocket.StatusInvalidFramePayloadData
		cn.wantReason = "destroy: bad_destroy"
	case 3:
		line, cn.want = `{"type":"destroy","instance_id":"`+l.insts[0]+`"}`, websocket.StatusInvalidFramePayloadData
		cn.wantReason = "destroy.open_key: missing_field"
	case 4:
		open("open_key", "ABCDEF"+key[6:], "open.open_key: bad_value") // upper case
	case 5:
		open("open_key", key[:63], "open.open_key: bad_value")
	case 6:
		open("output_enc", "S2", "open.output_enc: bad_value")
	case 7:
		open("stdin_enc", "a,b,c,d,e,f,g,h,s2", "open.stdin_enc: bad_value")
	}
	cn.send([]byte(line + "\n"))
	cn.awaitEnd("the refusal of a malformed first frame")
	l.require(cn.hello == nil, "%s: a malformed first frame answered %T", cn.name, cn.hello)
}

// stdin sends stdin on cn: b chooses the size and the mode, c the cut.
func (l *life) stdin(cn *lconn, b, c byte) {
	l.t.Helper()
	p := cn.p
	n := 1 + int(b>>3)%64
	if b&4 != 0 {
		n += 64 // compressible sizes
	}
	n = min(n, lifeMaxStdin-len(p.stream))
	if n <= 0 {
		l.stdinClose(cn, 0)
		return
	}
	off := int64(len(p.stream))
	data := make([]byte, n)
	for i := range data {
		data[i] = byte(l.seq) + byte(off+int64(i))%7*3 // compressible, distinct per input
	}
	var msg []byte
	accepted := true
	switch c % 8 {
	case 0, 1: // raw
		msg = frames.Append(nil, &frames.Stdin{Off: off, Data: data})
	case 2: // s2 when negotiated
		enc := ""
		if p.inEnc {
			enc = frames.EncS2
		}
		msg = frames.Append(nil, &frames.Stdin{Off: off, Data: data, Enc: enc})
	case 3: // s2, negotiated or not
		msg = frames.Append(nil, &frames.Stdin{Off: off, Data: data, Enc: frames.EncS2})
		if bytes.Contains(msg, []byte(`"enc"`)) && !p.inEnc {
			cn.want, accepted = websocket.StatusProtocolError, false
		}
	case 4: // one s2 block, however small
		msg = fmt.Appendf(nil, `{"type":"stdin","off":%d,"data":"%s","enc":"s2"}`+"\n", off, base64.StdEncoding.EncodeToString(s2.Encode(nil, data)))
		if !p.inEnc {
			cn.want, accepted = websocket.StatusProtocolError, false
		}
	case 5: // a corrupt block: truncated, or declaring more than max_data
		block := s2.Encode(nil, data)
		block = block[:len(block)-1]
		if c&8 != 0 {
			block = append(uvarint(fuzzMaxData+1), 0, 'a')
		}
		msg = fmt.Appendf(nil, `{"type":"stdin","off":%d,"data":"%s","enc":"s2"}`+"\n", off, base64.StdEncoding.EncodeToString(block))
		cn.want, accepted = websocket.StatusInvalidFramePayloadData, false
		cn.wantReason = "stdin.data: bad_payload"
	case 6: // at a wrong offset
		msg = frames.Append(nil, &frames.Stdin{Off: off + 1 + int64(c>>4), Data: data})
		cn.want, accepted = websocket.StatusProtocolError, false
	case 7: // in fragments, cut inside
		cn.sendPart(frames.Append(nil, &frames.Stdin{Off: off, Data: data}))
		cn.awaitServed()
		return
	}
	if p.closed && accepted {
		cn.want, accepted = websocket.StatusProtocolError, false
	}
	if c&0x80 != 0 && accepted {
		// Cut right after: the server may or may not have taken it.
		p.stream = append(p.stream, data...)
		cn.send(msg)
		cn.cut()
		cn.awaitServed()
		cn.pump()
		return
	}
	cn.send(msg)
	if !accepted {
		cn.awaitEnd("the refusal of a stdin frame")
		return
	}
	p.stream = append(p.stream, data...)
	p.sure = len(p.stream)
	if c&0x40 != 0 {
		// A signal right behind it, before cat echoed it: the signal
		// waits for the echo (checked in signal).
		l.signal(cn, (c>>4)<<3&0x18, 0)
	} else if p.running() {
		end := p.outLen()
		l.require(cn.await("the echo", func() bool { return cn.outEnd >= end }), "%s ended before the echo", cn.name)
	} else if p.sigMaybe && p.exit == nil {
		// A signal cut off may kill cat before it echoes.
		l.require(cn.await("the echo or the exit", func() bool { return cn.outEnd >= p.outLen() || cn.exit != nil }), "%s ended before the echo", cn.name)
	} else {
		l.require(cn.sync(), "%s ended after stdin", cn.name)
	}
}

// signal sends a signal on cn: b chooses the id and the signal, c the cut.
func (l *life) signal(cn *lconn, b, c byte) {
	l.t.Helper()
	p := cn.p
	id := p.lastSig + 1
	switch b % 8 {
	case 4:
		id = p.lastSig // repeated (0 when none: refused)
	case 5:
		id = max(p.lastSig-1, 1) // older
	case 6:
		id = 0 // refused (1007)
	case 7:
		id = p.lastSig + 2 + int64(b>>5) // skipping ids
	}
	name := []frames.SignalName{frames.SIGINT, frames.SIGTERM, frames.SIGKILL}[int(b>>3)%3]
	msg := frames.Append(nil, &frames.Signal{ID: id, Signal: name})
	if id == 0 {
		msg = []byte(`{"type":"signal","id":0,"signal":"` + string(name) + `"}` + "\n")
		cn.want = websocket.StatusInvalidFramePayloadData
		cn.wantReason = "signal.id: "
		cn.send(msg)
		cn.awaitEnd("the refusal of signal 0")
		return
	}
	if c&0x80 != 0 {
		cn.asked[id]++
		cn.send(msg)
		cn.cut()
		cn.awaitServed()
		cn.pump()
		if id > p.lastSig {
			p.lastSig = id
			p.sigs[id] = nil
			if !p.nosig && p.exit == nil {
				p.sigMaybe = true
			}
		}
		return
	}
	// The answer due.
	var want frames.Frame
	fresh := id > p.lastSig
	switch {
	case fresh && p.exit == nil && p.sigMaybe:
		// want nil: delivered, or already_exited after the one cut off.
	case fresh && p.exit != nil:
		want = &frames.Signaled{ID: id, Result: frames.SignalAlreadyExited}
	case fresh && p.nosig:
		want = &frames.Error{Code: frames.OperationFailed, Operation: "signal_process", Reason: "signal_failed", ID: id}
	case fresh:
		want = &frames.Signaled{ID: id, Result: frames.SignalDelivered}
	default:
		r, ok := p.sigs[id]
		switch {
		case !ok:
			want = &frames.Signaled{ID: id, Result: frames.SignalAlreadyExited}
		case r != nil:
			want = r
		}
	}
	cn.asked[id]++
	count := len(cn.answers)
	cn.send(msg)
	l.require(cn.await("the answer to signal", func() bool { return len(cn.answers) > count }), "%s ended before answering signal %d", cn.name, id)
	got := cn.answers[count]
	if want != nil {
		l.require(sameAnswer(got, want), "%s: signal %d answered %s, expected %s", cn.name, id, frames.Append(nil, got), frames.Append(nil, want))
	} else {
		// Its first ask was cut off: whatever it got then.
		ok := false
		switch g := got.(type) {
		case *frames.Signaled:
			ok = g.ID == id && (!p.nosig || g.Result == frames.SignalAlreadyExited)
		case *frames.Error:
			ok = g.ID == id && p.nosig && g.Reason == "signal_failed"
		}
		l.require(ok, "%s: signal %d, asked before a cut, answered %s", cn.name, id, frames.Append(nil, got))
	}
	if fresh {
		p.lastSig = id
	}
	p.sigs[id] = got
	if s, ok := got.(*frames.Signaled); ok && s.Result == frames.SignalDelivered {
		// cat dies of it: stdout_eof, then the exit.
		l.require(cn.await("the exit after the signal", func() bool { return cn.exit != nil }), "%s ended before the exit", cn.name)
		l.require(cn.exit.Signal == string(name) || !fresh, "%s: killed by %s, exit %+v", cn.name, name, cn.exit)
		if fresh && p.sure == len(p.stream) {
			// Delivered after every stdin byte before it was written
			// (PROTOCOL.md §5): cat echoed all of it before it died.
			l.require(cn.eof && p.eofAt == p.outLen(), "%s: signal %d killed cat at stdout %d, stdin before it %d bytes (+%d greeting)",
				cn.name, id, p.eofAt, len(p.stream), len(p.greet))
		}
	}
}

// sameAnswer compares signal answers; an error's message is free.
func sameAnswer(got, want frames.Frame) bool {
	switch w := want.(type) {
	case *frames.Signaled:
		g, ok := got.(*frames.Signaled)
		return ok && *g == *w
	case *frames.Error:
		g, ok := got.(*frames.Error)
		return ok && sameError(g, w)
	}
	return false
}

// ack sends an ack on cn: what it received, backwards, or beyond.
func (l *life) ack(cn *lconn, b byte) {
	l.t.Helper()
	p := cn.p
	if p.running() {
		// All the stdout cat wrote (the greeting, the echo) first.
		end := p.outLen()
		l.require(cn.await("stdout before an ack", func() bool { return cn.outEnd >= end }), "%s ended before its stdout", cn.name)
	}
	v := cn.outEnd
	switch b % 4 {
	case 1:
		if p.acked == 0 {
			break
		}
		v = p.acked - 1
		cn.want = websocket.StatusProtocolError
	case 2:
		v = p.outLen() + 1 + int64(b>>4)
		cn.want = websocket.StatusProtocolError
	}
	if v < p.acked {
		cn.want = websocket.StatusProtocolError
	}
	cn.sendFrame(&frames.Ack{Stdout: v})
	if cn.want != 0 {
		cn.awaitEnd("the refusal of an ack")
		return
	}
	l.require(cn.sync(), "%s ended after a valid ack", cn.name)
	p.acked = max(p.acked, v)
}

// stdinClose closes stdin on cn, at its end or elsewhere.
func (l *life) stdinClose(cn *lconn, b byte) {
	l.t.Helper()
	p := cn.p
	off := int64(len(p.stream))
	if b%4 == 3 {
		off += 1 + int64(b>>4)
		cn.want = websocket.StatusProtocolError
	}
	running := p.running()
	cn.sendFrame(&frames.StdinClose{Off: off})
	if cn.want != 0 {
		cn.awaitEnd("the refusal of stdin_close")
		return
	}
	p.closed = true
	if running {
		l.require(cn.await("the exit after stdin_close", func() bool { return cn.exit != nil }), "%s ended before its exit", cn.name)
		l.require(cn.eof && cn.exit.Signal == "" && cn.exit.Code == 0, "%s: cat exits 0 after its EOF, not %+v", cn.name, cn.exit)
		return
	}
	l.require(cn.sync(), "%s ended after stdin_close", cn.name)
}

// innerDestroy destroys cn's process from inside its session: b chooses
// how the frame names it, c the cut.
func (l *life) innerDestroy(cn *lconn, b, c byte) {
	l.t.Helper()
	p := cn.p
	f := &frames.Destroy{}
	switch b % 8 {
	case 1:
		f.ProcessID, f.Token = p.id, p.token
	case 2:
		if p.key >= 0 {
			f.InstanceID, f.OpenKey = l.insts[p.inst], l.keys[p.key]
		}
	case 4: // a key that did not open it
		f.InstanceID, f.OpenKey = l.insts[p.inst], l.keys[(p.key+1)%lifeKeys]
		cn.want = websocket.StatusProtocolError
	case 5: // its id with another token
		f.ProcessID, f.Token = p.id, strings.Repeat("cd", 32)
		cn.want = websocket.StatusProtocolError
	case 6: // its key on another instance
		if p.key >= 0 {
			f.InstanceID, f.OpenKey = l.insts[(p.inst+1)%lifeInstances], l.keys[p.key]
			cn.want = websocket.StatusProtocolError
		}
	case 3:
		for _, o := range l.procs {
			if o != p && o.token != "" {
				f.ProcessID, f.Token = o.id, o.token
				cn.want = websocket.StatusProtocolError
				break
			}
		}
	}
	cn.sendFrame(f)
	if cn.want != 0 {
		cn.awaitEnd("the refusal of a destroy naming another process")
		return
	}
	if c&0x80 != 0 {
		cn.cut()
		cn.awaitServed()
		cn.pump()
		if _, listed := l.procStats().byID[p.id]; !listed {
			l.gone(p, cn)
		}
		return
	}
	cn.want = websocket.StatusNormalClosure
	cn.awaitEnd("destroyed")
	l.require(cn.destroyed, "%s: destroy inside the session not answered destroyed", cn.name)
	l.require(cn.exit != nil, "%s: destroyed without an exit", cn.name)
	l.gone(p, cn)
}

// closeNormally closes cn with 1000 from the client's side.
func (l *life) closeNormally(cn *lconn) {
	l.log("%s close 1000", cn.name)
	cn.selfClosed = true
	_ = cn.ws.Close(websocket.StatusNormalClosure, "")
	cn.detach()
	cn.awaitServed()
}

// ---------------------------------------------------------------------------
// Invariants.

type procStats struct {
	byID   map[string]server.ProcessStats
	byInst map[string]server.ProcessStats
	n      int
}

func (l *life) procStats() procStats {
	st := l.e.srv.Stats()
	ps := procStats{byID: map[string]server.ProcessStats{}, byInst: map[string]server.ProcessStats{}}
	for _, p := range st.Processes {
		if !strings.HasPrefix(p.InstanceID, fmt.Sprintf("life%d-", l.seq)) {
			continue
		}
		_, twice := ps.byInst[p.InstanceID]
		l.require(!twice, "two processes on instance %s: %+v", p.InstanceID, st.Processes)
		ps.byID[p.ProcessID] = p
		ps.byInst[p.InstanceID] = p
		ps.n++
	}
	return ps
}

func (l *life) instIndex(name string) int {
	for i, n := range l.insts {
		if n == name {
			return i
		}
	}
	l.fail("no instance %s", name)
	return -1
}

// check compares the server with the model after a step.
func (l *life) check() {
	l.t.Helper()
	for _, c := range l.conns {
		c.pump()
		if c.ended && !c.selfClosed {
			// The server was done with it, or will be: wait, so that
			// Stats shows its process detached.
			c.awaitServed()
		}
	}
	if p := l.e.exec.Misuse(); p != "" {
		l.fail("the server misused a process: %s", p)
	}
	l.require(l.e.srv.Stats().Tombstones <= lifeMaxTombstones, "%d tombstones kept, at most %d", l.e.srv.Stats().Tombstones, lifeMaxTombstones)
	ps := l.procStats()
	l.require(ps.n == l.liveCount(), "Stats lists %d processes, the model %d", ps.n, l.liveCount())
	// The memory budget holds each live process's windows (Config.MaxMemory)
	// and nothing else: no first frame is being read now, and nothing leaks
	// from one process, connection or input to the next.
	want, exact := int64(0), true
	for _, p := range l.live {
		switch {
		case p == nil:
		case p.opened == nil:
			exact = false
		default:
			want += p.opened.StdoutWindow + p.opened.StdinLimit + p.opened.StderrWindow
		}
	}
	if st := l.e.srv.Stats(); exact {
		l.require(st.Memory == want, "Stats.Memory %d, the windows of the live processes %d", st.Memory, want)
	}
	l.require(int(l.e.exec.Live()) == l.liveCount(), "%d children run, the model has %d processes", l.e.exec.Live(), l.liveCount())
	for i, p := range l.live {
		if p == nil {
			continue
		}
		s, ok := ps.byInst[l.insts[i]]
		l.require(ok && s.ProcessID == p.id, "instance %d: Stats %+v, the model %s", i, s, p.id)
		attached := p.conn != nil && !p.conn.ended
		l.require(s.Attached == attached, "%s: attached %v in Stats, %v in the model", p.id, s.Attached, attached)
	}
}

// settle destroys every process left, on its connection or from a new
// one, and closes every connection.
func (l *life) settle() {
	l.t.Helper()
	for _, p := range l.live {
		if p == nil {
			continue
		}
		switch {
		case p.conn != nil && !p.conn.ended:
			l.innerDestroy(p.conn, 0, 0)
		case p.token != "":
			cn := l.dial(l.insts[p.inst], p.id)
			cn.first, cn.p = frames.TypeDestroy, p
			l.destroyFirst(cn, &frames.Destroy{ProcessID: p.id, Token: p.token}, p, true, false, 0)
		default:
			cn := l.dial(l.insts[p.inst], "")
			cn.first, cn.p = frames.TypeDestroy, p
			l.destroyFirst(cn, &frames.Destroy{InstanceID: l.insts[p.inst], OpenKey: l.keys[p.key]}, p, true, false, 0)
		}
	}
	for _, c := range l.conns {
		c.pump()
		if !c.ended && !c.selfClosed {
			c.cut()
		}
		c.awaitServed()
	}
	l.check()
}

// ---------------------------------------------------------------------------
// Seeds.

// lifeSeeds reach each path: every step, every answer, every cut.
func lifeSeeds() [][]byte {
	// oa is the argument of stepOpen for instance inst and key (-1: none);
	// dk that of stepDestroyKey.
	oa := func(inst, key int) byte {
		for a := range 256 {
			if a%lifeInstances == inst && (a>>2)%(lifeKeys+1)-1 == key {
				return byte(a)
			}
		}
		panic("no argument")
	}
	dk := func(inst, key int) byte {
		for a := range 256 {
			if a%lifeInstances == inst && (a>>2)%lifeKeys == key {
				return byte(a)
			}
		}
		panic("no argument")
	}
	keyed0, keyed1 := oa(0, 0), oa(1, 1)
	s := func(steps ...byte) []byte { return steps }
	return [][]byte{
		// open, stdin, signal, stdin_close, destroy inside.
		s(stepOpen, 0, 0, 0, stepStdin, 0, 8, 0, stepSignal, 0, 1, 0, stepInnerDestroy, 0, 0, 0),
		s(stepOpen, 0, 0, 0, stepStdin, 0, 8, 0, stepStdinClose, 0, 0, 0, stepSignal, 0, 0, 0, stepSignal, 0, 4, 0),
		// A keyed open repeated before any stdin: opened again, 4001 for
		// the first connection; then stdin, and the repeat is refused.
		s(stepOpen, keyed0, 0, 0, stepReopen, 0, 0, 0, stepStdin, 0, 9, 0, stepReopen, 0, 0, 0),
		// A keyed open, stdin_close at 0, the connection cut, opened again:
		// the replay holds stdout_eof and the exit.
		s(stepOpen, keyed0, 0, 0, stepStdinClose, 0, 0, 0, stepCut, 0, 0, 0, stepReopen, 0, 0, 0),
		// A greeter: opened again with its greeting replayed, until an
		// ack of it shows the client had opened: then already open.
		s(stepOpen, keyed0, 1<<3, 0, stepReopen, 0, 0, 0, stepAck, 0, 0, 0, stepReopen, 0, 0, 0, stepResume, 0, 2, 0),
		s(stepOpen, keyed0, 1<<3|3, 0, stepCut, 0, 0, 0, stepReopen, 0, 0, 0, stepStdin, 0, 4|8, 2, stepSignal, 0, 1, 0),
		// Destroy by key with nothing under it, then an open with the key.
		s(stepDestroyKey, dk(0, 0), 0, 0, stepOpen, keyed0, 0, 0),
		// Destroy by key of a live process, then the open again, the
		// resume, the destroy by id and by key again.
		s(stepOpen, keyed1, 0, 0, stepDestroyKey, dk(1, 1), 0, 0, stepReopen, 0, 0, 0, stepResume, 0, 0, 0, stepDestroyID, 0, 0, 0, stepDestroyKey, dk(1, 1), 0, 0),
		// A keyed open cut right after it was sent, then opened again
		// (learning the token), destroyed by key.
		s(stepOpen, keyed0, 0, 2<<2, stepReopen, 0, 0, 0, stepDestroyKey, dk(0, 0), 0, 0),
		s(stepOpen, keyed0, 0, 2<<2, stepDestroyKey, dk(0, 0), 0, 0, stepOpen, keyed0, 0, 0),
		// A destroy by key cut after it was sent, then the open with the key.
		s(stepDestroyKey, dk(0, 0), 0, 2<<2, stepOpen, keyed0, 0, 0),
		// Open cut inside its frame; resume cut inside and after.
		s(stepOpen, 0, 0, 3<<2, stepOpen, 1, 0, 0, stepResume, 0, 0, 3<<2, stepResume, 0, 0, 2<<2, stepStdin, 0, 0, 0),
		// Resume with every offset, wrong token, made-up process.
		s(stepOpen, 0, 0, 0, stepStdin, 0, 40, 0, stepAck, 0, 0, 0, stepCut, 0, 0, 0,
			stepResume, 0, 2, 0, stepResume, 0, 4, 0, stepResume, 0, 6, 0, stepResume, 0, 8, 0, stepResume, 0, 1, 0, stepResume, 1, 0, 0),
		// Compression: s2 both ways, stdin compressed, forced, corrupt.
		s(stepOpen, 0, 3, 0, stepStdin, 0, 4|8, 2, stepStdin, 0, 4, 3, stepStdin, 0, 8, 4, stepStdin, 0, 0, 5),
		s(stepOpen, 0, 0, 0, stepStdin, 0, 4, 3),
		s(stepOpen, 0, 4, 0, stepStdin, 0, 4, 4),
		s(stepOpen, 0, 7, 0, stepStdin, 0, 4, 5|8),
		// A child whose signals fail: error.id, and the same answer again.
		s(stepOpen, 0, 2<<3, 0, stepSignal, 0, 0, 0, stepSignal, 0, 4, 0, stepStdin, 0, 3, 0, stepStdinClose, 0, 0, 0, stepSignal, 0, 0, 0),
		// A signal right after stdin not yet echoed: delivered after it.
		s(stepOpen, 0, 0, 0, stepStdin, 0, 4|0xf8, 0x40, stepSignal, 0, 0, 0),
		s(stepOpen, 0, 1<<3, 0, stepStdin, 0, 0xf8, 0x40, stepStdin, 0, 4|0xf8, 0x40, stepSignal, 0, 8, 0),
		// Signals cut off, then resumed and asked again.
		s(stepOpen, 0, 0, 0, stepStdin, 0, 8, 0, stepSignal, 0, 0, 0x80, stepResume, 0, 0, 0, stepSignal, 0, 4, 0, stepSignal, 0, 7, 0),
		// Stdin cut off after sending, then resumed.
		s(stepOpen, keyed0, 0, 0, stepStdin, 0, 16, 0x80, stepResume, 0, 0, 0, stepStdin, 0, 16, 0),
		s(stepOpen, keyed0, 0, 0, stepStdin, 0, 16, 0x80, stepReopen, 0, 0, 0, stepDestroyKey, dk(0, 0), 0, 0),
		// Stdin in fragments cut inside; at a wrong offset.
		s(stepOpen, 0, 0, 0, stepStdin, 0, 8, 7, stepResume, 0, 0, 0, stepStdin, 0, 8, 6),
		// Destroy by id from another connection while attached; cut; again.
		s(stepOpen, 0, 0, 0, stepDestroyID, 0, 0, 0, stepDestroyID, 0, 0, 0, stepResume, 0, 0, 0),
		s(stepOpen, 0, 0, 0, stepDestroyID, 0, 0, 2<<2, stepDestroyID, 0, 1, 0),
		// Malformed first frames.
		s(stepBadFirst, 0, 0, 0, stepBadFirst, 1, 0, 0, stepBadFirst, 2, 0, 0, stepBadFirst, 3, 0, 0),
		s(stepBadFirst, 4, 0, 0, stepBadFirst, 5, 0, 0, stepBadFirst, 6, 0, 0, stepBadFirst, 7, 0, 0, stepOpen, keyed0, 0, 0),
		// Wrong routing headers.
		s(stepOpen, 0, 0, 2, stepOpen, 0, 0, 0, stepResume, 0, 0, 2, stepResume, 0, 0, 3, stepDestroyID, 0, 0, 3, stepDestroyKey, 0, 0, 2),
		// Every instance, MaxProcesses reached, a start that fails, the
		// same instance twice.
		s(stepOpen, 0, 0, 0, stepOpen, 1, 0, 0, stepOpen, 2, 0, 0, stepOpen, 0, 0, 0, stepInnerDestroy, 0, 0, 0, stepOpen, 2, 3<<3, 0),
		// Inner destroys naming the process by id, by key, another one.
		s(stepOpen, keyed0, 0, 0, stepOpen, oa(2, -1), 0, 0, stepInnerDestroy, 0, 3, 0, stepInnerDestroy, 0, 2, 0),
		s(stepOpen, keyed0, 0, 0, stepOpen, oa(2, 2), 0, 0, stepInnerDestroy, 1, 1, 0, stepInnerDestroy, 0, 0, 0x80),
		s(stepOpen, keyed0, 0, 0, stepInnerDestroy, 0, 4, 0, stepResume, 0, 0, 0, stepInnerDestroy, 0, 5, 0, stepReopen, 0, 0, 0, stepInnerDestroy, 0, 6, 0),
		// The same key on two instances; instances reused after a destroy.
		s(stepOpen, oa(0, 1), 0, 0, stepOpen, oa(1, 1), 0, 0, stepDestroyKey, dk(0, 1), 0, 0, stepOpen, oa(0, 2), 0, 0, stepOpen, oa(0, 1), 0, 0, stepDestroyKey, dk(1, 1), 0, 0, stepOpen, oa(1, -1), 0, 0),
		// Acks: backwards, beyond; stdin_close elsewhere; stdin after close.
		s(stepOpen, 0, 0, 0, stepStdin, 0, 40, 0, stepAck, 0, 0, 0, stepAck, 0, 1, 0),
		s(stepOpen, 0, 0, 0, stepAck, 0, 2, 0),
		s(stepOpen, 0, 0, 0, stepStdinClose, 0, 3, 0),
		s(stepOpen, 0, 0, 0, stepStdinClose, 0, 0, 0, stepStdin, 0, 0, 0),
		// Races: the same open twice; an open and a destroy by its key.
		s(stepRace, dk(0, 0), 0, 0, stepStdin, 0, 8, 0, stepRace, dk(1, 1), 0, 0),
		s(stepRace, dk(0, 0), 1, 0, stepOpen, keyed0, 0, 0, stepDestroyKey, dk(0, 0), 0, 0, stepResume, 0, 0, 0),
		s(stepRace, dk(2, 1), 3, 0, stepOpen, oa(2, 1), 0, 0),
		s(stepRace, dk(0, 0), 4, 0, stepRace, dk(1, 1), 5, 0, stepRace, dk(2, 2), 7, 0, stepInnerDestroy, 0, 0, 0),
		s(stepRace, dk(0, 0), 12, 0, stepRace, dk(1, 1), 13, 0, stepStdin, 0, 8, 0),
		s(stepRace, dk(0, 0), 16|5, 0, stepRace, dk(1, 1), 16|7, 0, stepRace, dk(2, 2), 16|13, 0),
		// Signal id 0; a normal close and a cut.
		s(stepOpen, 0, 0, 0, stepSignal, 0, 6, 0),
		s(stepOpen, 0, 0, 0, stepCut, 0, 1, 0, stepResume, 0, 0, 0),
	}
}
