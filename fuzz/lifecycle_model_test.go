package fuzz

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/procwire/procwire/frames"
)

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
