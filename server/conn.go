package server

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/procwire/procwire/frames"
	"github.com/procwire/procwire/internal/coalesce"
	"github.com/procwire/procwire/internal/link"
	"github.com/procwire/procwire/proc"
	"github.com/procwire/procwire/replay"
)

// statusResumedElsewhere closes a connection whose process was resumed on
// another one (PROTOCOL.md §7).
const statusResumedElsewhere websocket.StatusCode = frames.CloseResumedElsewhere

// ctrlQueue bounds the answers (signaled, error) waiting for the writer; a
// reader with a full queue stops reading, so a peer that floods signals
// without reading its answers holds no more memory than this.
const ctrlQueue = 16

// closeTimeout bounds how long a connection may take to close after
// closeWith: a writer stuck on a peer that does not read is cut off then.
const closeTimeout = 10 * time.Second

// closeStatus says how a connection ends.
type closeStatus struct {
	code   websocket.StatusCode
	reason string // at most 123 bytes
	// abrupt: the connection is already gone (peer closed, reset, heartbeat
	// failed); no close handshake is attempted.
	abrupt bool
	// destroyed, when set, is the id of the process destroyed: the writer
	// sends exit (unless it already did on this connection) and destroyed
	// before closing.
	destroyed string
	exit      *frames.Exit
}

func protocolError(format string, args ...any) closeStatus {
	return closeStatus{code: websocket.StatusProtocolError, reason: link.Truncate(fmt.Sprintf(format, args...), frames.MaxCloseReason)}
}

// linkStatus is the close status of a failed read (see link.Close).
func linkStatus(cl link.Close) closeStatus {
	return closeStatus{code: cl.Code, reason: cl.Reason, abrupt: cl.Abrupt}
}

func internalStatus(format string, args ...any) closeStatus {
	return closeStatus{code: websocket.StatusInternalError, reason: link.Truncate(fmt.Sprintf(format, args...), frames.MaxCloseReason)}
}

// internalError is a writer failure that is the server's fault, not the
// connection's: the connection is closed with 1011.
type internalError struct{ err error }

func (e *internalError) Error() string { return e.err.Error() }
func (e *internalError) Unwrap() error { return e.err }

// destroyedStatus ends a connection after destroy: exit, destroyed, 1000.
func destroyedStatus(ts *tombstone) closeStatus {
	return closeStatus{code: websocket.StatusNormalClosure, destroyed: ts.id, exit: ts.exit}
}

// replayMark is what a resumed connection must send before its first
// credit (PROTOCOL.md §4.4): the stdout and stderr held at resume, and the
// stdout_eof and exit if they had happened.
type replayMark struct {
	stdout, stderr int64
	eof, exit      bool
}

// conn serves one WebSocket connection. Three goroutines share it: the
// handler (ServeHTTP's, which reads frames), the writer (which writes
// frames) and the heartbeat; a process's output pump may write stream
// frames too, in a turn it takes from the writer (kick). Fields are owned
// as marked.
type conn struct {
	srv    *Server
	ws     *websocket.Conn
	remote string       // the client's address (through trusted proxies)
	log    *slog.Logger // with the remote address
	route  routeHeaders // the upgrade's routing headers
	seq    uint64       // the order in which the server took the connection's upgrade request
	guard  *msgGuard    // the connection beneath ws; nil in tests that dial no socket
	first  []byte       // the first message, when the upgrade carried it (PROTOCOL.md §1)
	// ctx bounds the first frame's read; cancel drops the connection at
	// once (no close handshake): it closes ws, which ends every blocking
	// call on it.
	ctx    context.Context
	cancel context.CancelFunc

	ctrl       chan frames.Frame // answers from the reader to the writer
	stop       chan struct{}     // closed by closeWith: the writer finishes and closes
	closeOnce  sync.Once
	status     closeStatus // set by the first closeWith, before stop is closed
	abortTimer *time.Timer // set by the first closeWith
	writerDone chan struct{}
	hbDone     chan struct{}

	// stdoutSent is the stdout offset the writer has sent up to; the
	// reader refuses acks beyond it.
	stdoutSent atomic.Int64

	// Signal answers: queued by whoever delivers the signal (the reader or
	// the session's pump), written by the writer. sigInFlight counts the
	// signals asked on this connection and not yet answered on it; the
	// writer wakes the reader through sigRoom as it writes answers.
	ansMu       sync.Mutex
	answers     []frames.Frame
	sigInFlight atomic.Int32
	sigRoom     chan struct{}

	// Owned by the handler goroutine; sess is set before the writer starts
	// and never changes.
	rd   link.Reader // with the guard's hooks (readGuard)
	sess *session
	// pings: the first frame asked for application-level pings; the hello
	// says so and every ping is answered with a pong (set before the
	// writer starts).
	pings bool

	// The turn to write stream frames: the writer goroutine takes it to
	// write, and a kick (an output pump) when it is free; its state says
	// who writes (link.State). It wakes the writer.
	lw link.Turn

	// stopCloseOnCancel stops the AfterFunc that closes ws when ctx ends
	// (set before the writer starts).
	stopCloseOnCancel func() bool

	// Held by whoever has lw's turn (the writer alone once lw is closed).
	sendOut    func() (bool, error) // c.sendStreams, for kicks
	view       stepView
	viewStdout func(*replay.Buffer, proc.ExitStatus, bool) // c.stdoutView
	viewStderr func(*replay.Ring)                          // c.stderrView
	frame      struct {                                    // frames sendStreams encodes, kept to spare an allocation each
		stdout frames.Stdout
		stderr frames.Stderr
		credit frames.Credit
	}
	wbuf       []byte
	greeting   frames.Frame // opened or resumed, sent first
	stderrSent int64
	eofSent    bool
	exitSent   bool
	replay     *replayMark // non-nil until the resume replay is complete
}

func newConn(s *Server, ws *websocket.Conn, co *coalesce.Coalescer, remote string) *conn {
	ctx, cancel := context.WithCancel(context.Background())
	c := &conn{
		srv:        s,
		ws:         ws,
		remote:     remote,
		ctx:        ctx,
		cancel:     cancel,
		sigRoom:    make(chan struct{}, 1),
		ctrl:       make(chan frames.Frame, ctrlQueue),
		stop:       make(chan struct{}),
		writerDone: make(chan struct{}),
		hbDone:     make(chan struct{}),
	}
	c.viewStdout, c.viewStderr = c.stdoutView, c.stderrView
	c.sendOut = c.sendStreams
	c.lw.Init(co, false)
	c.rd.Init(ws, readGuard{c})
	return c
}

// serve runs the connection to its end: the first frame, then the session.
func (c *conn) serve() {
	log := c.log
	if log == nil {
		log = c.srv.log.With("remote", c.remote)
		c.log = log
	}
	log.Info("connection opened")
	st, attached := c.serveFirstFrame()
	// The heartbeat starts with the read loop, which reads its pongs:
	// before, the handler is serving the first frame (an open may take
	// longer than a heartbeat to start its process) and reads nothing, and
	// FirstFrameTimeout bounds a peer that says nothing.
	if hb := c.srv.cfg.Heartbeat; hb > 0 && attached {
		go c.heartbeat(hb, log)
	} else {
		close(c.hbDone)
	}
	// From here reads and writes take no context (a context with a Done
	// channel costs an allocation and a registration per message); the
	// connection's own context ends them by closing it.
	c.stopCloseOnCancel = context.AfterFunc(c.ctx, func() { _ = c.ws.CloseNow() })
	go c.writeLoop(log)
	if attached {
		st = c.readLoop()
	}
	c.finish(st)

	attrs := []any{"code", int(c.status.code), "reason", c.status.reason}
	if c.sess != nil {
		attrs = append(attrs, "process", c.sess.id)
	}
	log.Info("connection closed", attrs...)
}

// finish closes the connection with st (unless it is already closing),
// waits for its goroutines and detaches its session.
func (c *conn) finish(st closeStatus) {
	c.closeWith(st)
	<-c.writerDone
	c.abortTimer.Stop()
	c.stopCloseOnCancel() // closed right below: no goroutine for it
	c.cancel()
	_ = c.ws.CloseNow()
	<-c.hbDone
	c.srv.m.closed(c.status) // before detach: a test that saw the detach sees the close
	if c.sess != nil {
		c.srv.hook(hookConnCounted, c.sess.id)
		c.sess.detach(c)
	} else {
		c.srv.hook(hookConnCounted, "")
	}
}

// closeWith asks the writer to send what st requires and close the
// connection. Only the first call counts. Safe from any goroutine.
func (c *conn) closeWith(st closeStatus) {
	c.closeOnce.Do(func() {
		c.status = st
		c.abortTimer = time.AfterFunc(closeTimeout, c.cancel)
		close(c.stop)
	})
}

// stopping reports whether closeWith was called.
func (c *conn) stopping() bool {
	select {
	case <-c.stop:
		return true
	default:
		return false
	}
}

// wakeUp tells the writer that the session has news. It never blocks.
func (c *conn) wakeUp() { c.lw.Wake() }

// send queues an answer for the writer, waiting while the queue is full.
// An answer that fits is queued even when the connection is closing: the
// writer sends what is queued before it closes (an error answering an
// open that raced a shutdown).
func (c *conn) send(f frames.Frame) {
	select {
	case c.ctrl <- f:
		return
	default:
	}
	select {
	case c.ctrl <- f:
	case <-c.stop:
	case <-c.ctx.Done():
	}
}

// answer queues the answer to a signal for the writer. It never blocks:
// the reader bounds the signals in flight.
func (c *conn) answer(f frames.Frame) {
	c.ansMu.Lock()
	c.answers = append(c.answers, f)
	c.ansMu.Unlock()
	c.wakeUp()
}

// refuse queues the error answering a first frame, logs and counts the
// refusal; the connection then closes normally.
func (c *conn) refuse(e *frames.Error) closeStatus {
	reason := refusalReason(e)
	c.srv.m.refused(reason, int(websocket.StatusNormalClosure))
	c.srv.logRefused(c.log, reason, "operation", e.Operation, "code", string(e.Code))
	c.send(e)
	return closeStatus{code: websocket.StatusNormalClosure}
}

// refuseStatus logs and counts a first frame refused with a close status.
func (c *conn) refuseStatus(reason string, st closeStatus) closeStatus {
	c.srv.m.refused(reason, int(st.code))
	c.srv.logRefused(c.log, reason, "code", int(st.code), "detail", st.reason)
	return st
}

// refusalReason names an error frame's refusal: its actual state, reason
// or requirement, else its code.
func refusalReason(e *frames.Error) string {
	for _, r := range []string{e.Actual, e.Reason, e.Requirement} {
		if r != "" {
			return r
		}
	}
	return string(e.Code)
}

// attach makes c serve se from the given offsets; called by the handler
// goroutine before the writer starts.
func (c *conn) attach(se *session, greeting frames.Frame, stdoutOff, stderrOff int64, mark *replayMark) {
	c.sess = se
	switch h := greeting.(type) {
	case *frames.Opened:
		h.Pings = c.pings
	case *frames.Resumed:
		h.Pings = c.pings
	}
	c.greeting = greeting
	c.stdoutSent.Store(stdoutOff)
	c.stderrSent = stderrOff
	c.replay = mark
}

// heartbeat pings the peer every interval; a pong missing for an interval
// drops the connection.
func (c *conn) heartbeat(every time.Duration, log *slog.Logger) {
	defer close(c.hbDone)
	if err := link.Heartbeat(c.ctx, every, c.ws.Ping); err != nil {
		log.Info("heartbeat failed", "err", err)
		c.closeWith(closeStatus{code: websocket.StatusGoingAway, reason: "heartbeat timeout", abrupt: true})
		c.cancel()
	}
}

// readFrame reads one message into the reused buffer and decodes it. When
// ok is false, st says how the connection ends.
func (c *conn) readFrame(ctx context.Context) (f frames.Frame, st closeStatus, ok bool) {
	f, cl, ok := c.rd.Read(ctx)
	if !ok {
		return nil, linkStatus(cl), false
	}
	return f, closeStatus{}, true
}

// serveFirstFrame reads and serves the first frame. attached reports
// whether c now serves a session; otherwise st says how the connection
// ends.
func (c *conn) serveFirstFrame() (st closeStatus, attached bool) {
	c.ws.SetReadLimit(frames.MaxFirstLine)
	c.rd.Dec.MaxLine = frames.MaxFirstLine
	// A peer that connects and says nothing does not hold a connection
	// (and its first-frame read limit) for ever, nor a shutdown.
	ctx, cancel := context.WithTimeout(c.ctx, c.srv.cfg.FirstFrameTimeout)
	stopped := c.cancelOnStop(cancel)
	f, st, ok, release := c.readFirstFrame(ctx)
	defer release() // the frame's bytes count until it is served
	wasStopped := stopped()
	timedOut := ctx.Err() != nil && c.ctx.Err() == nil
	cancel()
	switch {
	case wasStopped && !ok:
		// Shutdown came while the peer had not said what it wants:
		// there is nothing to answer, and a peer that says nothing may
		// not read either, so no close handshake is waited for.
		c.status.abrupt = true
		return c.status, false
	case timedOut && !ok:
		return closeStatus{code: websocket.StatusPolicyViolation, reason: "no first frame in time", abrupt: true}, false
	case !ok:
		return st, false
	}
	c.ws.SetReadLimit(frames.MaxLine)
	// A fresh decoder and buffer: a huge first frame's scratch space is
	// not kept for the life of the connection.
	c.rd.Reset(frames.Decoder{MaxLine: frames.MaxLine, MaxData: c.srv.cfg.MaxFrameData}, frames.MaxLine)
	if st, bad := c.route.check(f); bad {
		return c.refuseStatus(refuseRouting, st), false
	}
	switch f := f.(type) {
	case *frames.Open:
		c.pings = f.Pings
		return c.srv.open(c, f)
	case *frames.Resume:
		c.pings = f.Pings
		return c.srv.resume(c, f)
	case *frames.Destroy:
		return c.srv.destroyFirst(c, f), false
	}
	return protocolError("first frame must be open, resume or destroy, not %s", f.Type()), false
}

// cancelOnStop calls cancel when closeWith is called, until the returned
// stopped is called; stopped reports whether closeWith came first. It is
// for the handler goroutine before the writer starts, so that a shutdown
// ends its waits at once.
func (c *conn) cancelOnStop(cancel context.CancelFunc) (stopped func() bool) {
	done := make(chan struct{})
	watched := make(chan bool, 1)
	go func() {
		select {
		case <-c.stop:
			cancel()
			watched <- true
		case <-done:
			watched <- false
		}
	}()
	return func() bool {
		close(done)
		return <-watched
	}
}

// readLoop serves the frames of an attached session until the connection
// ends, and returns how it ends.
func (c *conn) readLoop() closeStatus {
	for {
		f, st, ok := c.readFrame(context.Background()) // c.ctx closes c.ws
		if !ok {
			return st
		}
		if st, done := c.handle(f); done {
			return st
		}
	}
}

// handle serves one frame inside a session; done reports that the
// connection ends with st. What the frame does to the process is the
// session's (session_frames.go); c maps its result to answers, wakeups and
// close statuses.
func (c *conn) handle(f frames.Frame) (st closeStatus, done bool) {
	se := c.sess
	var r result
	var v *violation
	switch f := f.(type) {
	case *frames.Stdin:
		r, v = se.stdin(c, f)
	case *frames.StdinClose:
		r, v = se.stdinClose(c, f.Off)
	case *frames.Ack:
		if sent := c.stdoutSent.Load(); f.Stdout > sent {
			return protocolError("ack.stdout %d beyond %d sent", f.Stdout, sent), true
		}
		r, v = se.ack(c, f.Stdout)
	case *frames.Signal:
		return c.signal(f)
	case *frames.Destroy:
		r, v = se.destroy(c, f)
	case *frames.Ping:
		return c.ping(f)
	case *frames.Resize:
		r, v = se.resize(c, f)
	case *frames.Open, *frames.Resume:
		return protocolError("%s inside a session", f.Type()), true
	default:
		return protocolError("%s is not a client frame", f.Type()), true
	}
	return c.apply(r, v)
}

// apply carries out what serving a frame asked of c: the violation's
// close, or the result's answer, wakeup and end.
func (c *conn) apply(r result, v *violation) (st closeStatus, done bool) {
	switch {
	case v != nil:
		return v.status(), true
	case r.fault != nil:
		return internalStatus("%v", r.fault), true
	}
	if r.answer != nil {
		c.send(r.answer)
	}
	if r.wake != nil {
		r.wake.wakeUp()
	}
	if r.end != nil {
		return r.end.status(), true
	}
	return closeStatus{}, false
}

// signal serves a signal frame once c has room for its answer.
func (c *conn) signal(f *frames.Signal) (closeStatus, bool) {
	// A peer that floods signals without reading their answers holds no
	// more than maxSignalsInFlight of them.
	for c.sigInFlight.Load() >= maxSignalsInFlight {
		select {
		case <-c.sigRoom:
		case <-c.stop:
			return closeStatus{}, true // closeWith has set how c ends
		case <-c.ctx.Done():
			return closeStatus{code: websocket.StatusAbnormalClosure, reason: "connection dropped", abrupt: true}, true
		}
	}
	c.sigInFlight.Add(1) // before its answer can be written
	r, answered := c.sess.signal(c, f)
	if !answered {
		c.sigInFlight.Add(-1)
	}
	return c.apply(r, nil)
}

// ping answers an application-level ping (PROTOCOL.md §3) with its pong,
// through the writer's answer queue, which it takes before any stream
// frame: neither a stdout window nor a stdin credit delays it. A ping on a
// connection that did not negotiate pings is not allowed now (1002).
func (c *conn) ping(f *frames.Ping) (closeStatus, bool) {
	if !c.pings {
		return protocolError("ping without pings negotiated"), true
	}
	c.send(&frames.Pong{ID: f.ID})
	return closeStatus{}, false
}
