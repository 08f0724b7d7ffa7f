package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/procwire/procwire/credit"
	"github.com/procwire/procwire/frames"
)

// Process is a handle on one remote process. Its methods are safe for
// concurrent use: Wait, Signal and Destroy may be called from any number of
// goroutines, alongside one reader of Stdout, one reader of Stderr and one
// writer of Stdin.
//
// The handle owns one connection at a time and the goroutines serving it
// (a reader, a writer and a heartbeat). A lost connection is resumed within
// the server's grace without the caller noticing. Destroy must be called
// when the process is no longer needed: it frees the server's reservation
// and stops the goroutines.
type Process struct {
	url        string
	instanceID string
	req        frames.ProcessRequest
	opts       Options
	log        *slog.Logger

	// Set by Open, read-only afterwards.
	id          string
	token       string
	evidence    frames.Evidence
	grace       time.Duration
	heartbeat   time.Duration
	maxData     int
	stdinWindow int64 // the initial stdin_limit: the most stdin in flight
	errCap      int   // bound of the stderr buffer

	stdin    Stdin
	stdout   Stream
	stderr   Stream
	stdinWin *credit.Window // bytes written by the caller against the server's limit

	// done is closed once err is set; destroyReqCh once destroyReq is set;
	// destroyDone once the destroy settled; superDone when the supervisor
	// goroutine returns.
	done         chan struct{}
	destroyReqCh chan struct{}
	destroyDone  chan struct{}
	superDone    chan struct{}
	// destroyToken is held by whoever destroys on a connection of its own,
	// so that concurrent Destroy calls make one attempt at a time.
	destroyToken chan struct{}
	// redial wakes the supervisor's backoff when a Destroy is requested.
	redial chan struct{}

	mu sync.Mutex
	// Everything below is guarded by mu.

	conn    *conn         // the attached connection; nil while reconnecting
	changed chan struct{} // closed on every change a blocked call may wait for; nil when nobody waits

	outRecv  *credit.Receiver // stdout accounting against the window
	outBuf   byteQueue        // stdout received and not yet read
	outEOF   int64            // stdout length, once outEOFOK
	outEOFOK bool
	ackTo    int64 // the last stdout ack decided (the writer sends it)

	errBuf     byteQueue // stderr received and not yet read (offsets unused)
	errRecv    int64     // stderr offset after the last byte received
	errDropped int64     // stderr bytes dropped by the server's ring or errBuf

	inBuf     byteQueue // stdin from the server's stdin_received to what was written
	inSent    int64     // stdin offset after the last byte sent on any connection
	inClosed  bool      // stdin_close requested at inBuf.end()
	closeSent bool      // stdin_close written to a connection

	exit    *ExitStatus
	nextSig int64
	signals []*pendingSignal // sent or to send, ascending ids, not yet answered

	testHookBlocked func() // called when a call is about to block
	testHookFrame   func() // called after each frame of a session was handled

	destroyReq bool
	abandoned  bool // the handle ended leaving the process to the server or another client
	destroyed  bool // the destroy settled, with destroyErr
	destroyErr error
	err        error // why the handle ended; set once
}

type pendingSignal struct {
	id     int64
	sig    frames.SignalName
	result chan string // receives the answer once
}

// ExitStatus is how the remote process ended: by exiting with Code, or,
// when Signal is not empty, killed by that signal ("SIGKILL", "SIGSEGV", ...).
type ExitStatus struct {
	Code   int
	Signal string
}

// Exited reports whether the process exited normally with Code.
func (s ExitStatus) Exited() bool { return s.Signal == "" }

// Signaled reports whether the process was killed by Signal.
func (s ExitStatus) Signaled() bool { return s.Signal != "" }

// Success reports whether the process exited with code 0.
func (s ExitStatus) Success() bool { return s == ExitStatus{} }

// String reads "exit status 3" or "signal: SIGKILL".
func (s ExitStatus) String() string {
	if s.Signaled() {
		return "signal: " + s.Signal
	}
	return fmt.Sprintf("exit status %d", s.Code)
}

// Open starts req on the instance instanceID through the server at url
// (ws://, wss://, http:// or https://) and returns its handle. ctx bounds
// the opening handshake only.
//
// A typed refusal from the server is a *RemoteError (for example
// SandboxLifecycleConflict with Actual "process_already_open" when the
// instance already has a process); evidence that does not match req is a
// *ProtocolError naming the field, and the process is destroyed.
func Open(ctx context.Context, url, instanceID string, req frames.ProcessRequest, opts *Options) (*Process, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	open := &frames.Open{InstanceID: instanceID, Request: req, StdoutWindow: o.StdoutWindow, StdinWindow: o.StdinWindow}
	if err := frames.Validate(open); err != nil {
		return nil, fmt.Errorf("procwire: open: %w", err)
	}
	p := &Process{
		url:          url,
		instanceID:   instanceID,
		req:          req,
		opts:         o,
		log:          o.Logger,
		done:         make(chan struct{}),
		destroyReqCh: make(chan struct{}),
		destroyDone:  make(chan struct{}),
		superDone:    make(chan struct{}),
		destroyToken: make(chan struct{}, 1),
		redial:       make(chan struct{}, 1),
	}
	p.stdin.p, p.stdout.p, p.stderr.p = p, p, p
	p.stderr.stderr = true

	ws, err := p.dial(ctx)
	if err != nil {
		return nil, fmt.Errorf("procwire: open: %w", err)
	}
	var opened *frames.Opened
	f, err := ws.exchange(ctx, open)
	if err == nil {
		var ok bool
		if opened, ok = f.(*frames.Opened); ok {
			err = p.init(opened)
		} else {
			err = protocolErrorf(f.Type().String(), "unexpected answer to open")
		}
	}
	if err != nil {
		var pe *ProtocolError
		if errors.As(err, &pe) {
			// Fail closed: a process may run, but not as asked for.
			dctx, cancel := context.WithTimeout(ctx, autoDestroyTimeout)
			derr := p.destroyOn(dctx, ws, &frames.Destroy{})
			cancel()
			if derr != nil {
				err = errors.Join(err, fmt.Errorf("procwire: destroy after failed open: %w", derr))
			}
		}
		ws.close()
		if pe == nil && !errors.As(err, new(*RemoteError)) {
			err = fmt.Errorf("procwire: open: %w", err)
		}
		return nil, err
	}
	p.log = p.log.With("process_id", p.id)
	c := newConn(ws)
	p.conn = c
	c.kick()
	go p.supervise(c)
	return p, nil
}

// init takes the parameters of opened after checking them.
func (p *Process) init(o *frames.Opened) error {
	p.id = o.ProcessID // destroyOn checks the answer against it
	if err := checkOpened(o, p.instanceID, &p.req); err != nil {
		return err
	}
	switch {
	case o.MaxData < 1 || o.MaxData > frames.MaxData:
		return protocolErrorf("opened.max_data", "%d outside 1..%d", o.MaxData, frames.MaxData)
	case o.StdoutWindow < 1:
		return protocolErrorf("opened.stdout_window", "%d", o.StdoutWindow)
	case o.StderrWindow < 1:
		return protocolErrorf("opened.stderr_window", "%d", o.StderrWindow)
	case o.StdinLimit < 1:
		return protocolErrorf("opened.stdin_limit", "%d", o.StdinLimit)
	}
	p.token, p.evidence = o.Token, o.Evidence
	p.grace = milliseconds(o.GraceMS)
	p.heartbeat = milliseconds(o.HeartbeatMS)
	p.maxData = int(o.MaxData)
	p.stdinWindow = o.StdinLimit
	p.stdinWin = credit.NewWindow(o.StdinLimit)
	p.outRecv = credit.NewReceiver(o.StdoutWindow)
	p.errCap = p.opts.StderrBuffer
	if p.errCap == 0 {
		p.errCap = int(min(o.StderrWindow, 1<<30))
	}
	return nil
}

// milliseconds converts a count of milliseconds from the server, up to
// 2^63-1, to a Duration, saturating past the 292 years a Duration holds
// rather than wrapping to a negative or tiny one.
func milliseconds(ms int64) time.Duration {
	if ms > math.MaxInt64/int64(time.Millisecond) {
		return math.MaxInt64
	}
	return time.Duration(ms) * time.Millisecond
}

// ID returns the server-chosen process id.
func (p *Process) ID() string { return p.id }

// Evidence returns the server-authored evidence of the process, as checked
// against the request when it was opened.
func (p *Process) Evidence() frames.Evidence { return p.evidence }

// Stdin returns the process's standard input.
func (p *Process) Stdin() *Stdin { return &p.stdin }

// Stdout returns the process's standard output: lossless, with a real EOF.
func (p *Process) Stdout() *Stream { return &p.stdout }

// Stderr returns the process's standard error: best effort and bounded.
func (p *Process) Stderr() *Stream { return &p.stderr }

// Wait blocks until the process has exited and returns how. The answer is
// settled once and is the same on every call. It returns early with ctx's
// error, or with the error that ended the handle (ErrDestroyed when the
// process was destroyed before its exit was seen, ErrConnectionLost, a
// *RemoteError, a *ProtocolError) if no exit was seen before that.
func (p *Process) Wait(ctx context.Context) (ExitStatus, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		switch {
		case p.exit != nil:
			return *p.exit, nil
		case p.err != nil:
			return ExitStatus{}, p.err
		}
		if err := p.waitLocked(ctx); err != nil {
			return ExitStatus{}, fmt.Errorf("procwire: wait: %w", err)
		}
	}
}

// Signal sends sig (SIGINT, SIGTERM or SIGKILL) to the process's group and
// reports whether it was delivered (false: the process had already exited).
// A signal interrupted by a lost connection is sent again after the resume
// with the same id, so it is never delivered twice.
func (p *Process) Signal(ctx context.Context, sig frames.SignalName) (delivered bool, err error) {
	switch sig {
	case frames.SIGINT, frames.SIGTERM, frames.SIGKILL:
	default:
		return false, fmt.Errorf("procwire: signal %q not one of SIGINT, SIGTERM, SIGKILL", sig)
	}
	p.mu.Lock()
	if err := p.usableLocked(); err != nil {
		p.mu.Unlock()
		return false, err
	}
	p.nextSig++
	s := &pendingSignal{id: p.nextSig, sig: sig, result: make(chan string, 1)}
	p.signals = append(p.signals, s)
	p.kickLocked()
	p.blockingLocked()
	p.mu.Unlock()

	select {
	case r := <-s.result:
		return r == frames.SignalDelivered, nil
	case <-p.done:
		err = p.err
	case <-p.destroyReqCh:
		err = ErrDestroyed
	case <-ctx.Done():
		err = fmt.Errorf("procwire: signal: %w", ctx.Err())
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case r := <-s.result: // answered meanwhile
		return r == frames.SignalDelivered, nil
	default:
	}
	p.dropSignalLocked(s.id)
	return false, err
}

// Destroy tears the process down: it kills its process group, waits for the
// server to reap it and frees the instance. It is idempotent: concurrent and
// later calls settle the same way, also after the process exited, after the
// connection was lost for good, and after an answer was lost (the destroy is
// then repeated on a new connection). It returns nil once the server said
// the process is destroyed (or that it is shutting down, which destroys
// every process), a *RemoteError if the server refused, or early with
// ctx's error, and a later call tries again. Every blocked call of the
// handle returns ErrDestroyed; Wait returns the exit if the server
// reported one.
func (p *Process) Destroy(ctx context.Context) error {
	p.mu.Lock()
	if !p.destroyReq {
		p.destroyReq = true
		close(p.destroyReqCh)
		p.stdinWin.Close(ErrDestroyed)
		p.kickLocked()
		p.broadcastLocked()
		select { // cut a reconnection backoff short
		case p.redial <- struct{}{}:
		default:
		}
	}
	p.blockingLocked()
	p.mu.Unlock()

	select {
	case <-p.destroyDone:
	case <-p.superDone:
		// The supervisor has stopped without settling the destroy: it is
		// done on a connection of our own.
		if err := p.destroyExclusive(ctx); err != nil && !p.destroySettled() {
			return err
		}
	case <-ctx.Done():
		return fmt.Errorf("procwire: destroy: %w", ctx.Err())
	}
	// The supervisor stops promptly once the destroy settled.
	select {
	case <-p.superDone:
	case <-ctx.Done():
		return fmt.Errorf("procwire: destroy: %w", ctx.Err())
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.destroyErr
}

func (p *Process) destroySettled() bool {
	select {
	case <-p.destroyDone:
		return true
	default:
		return false
	}
}

// destroyExclusive runs destroyRemote holding the destroy token.
func (p *Process) destroyExclusive(ctx context.Context) error {
	select {
	case p.destroyToken <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("procwire: destroy: %w", ctx.Err())
	}
	defer func() { <-p.destroyToken }()
	if p.destroySettled() {
		return nil
	}
	return p.destroyRemote(ctx)
}

// settleDestroyLocked records the outcome of a destroy, once. A destroyed
// process ends the handle.
func (p *Process) settleDestroyLocked(err error) {
	if !p.destroyed {
		p.destroyed, p.destroyErr = true, err
		close(p.destroyDone)
	}
	if err == nil {
		p.endLocked(ErrDestroyed)
	}
}

// endLocked ends the handle with err, once: every blocked and later call
// returns err (Wait returns the exit if one was seen first).
func (p *Process) endLocked(err error) {
	if p.err != nil {
		return
	}
	p.err = err
	close(p.done)
	p.stdinWin.Close(err)
	p.broadcastLocked()
	if !errors.Is(err, ErrDestroyed) {
		p.log.Warn("process handle ended", "err", err)
	}
}

// usableLocked returns the error a new call must fail with, if any.
func (p *Process) usableLocked() error {
	if p.destroyReq {
		return ErrDestroyed
	}
	return p.err
}

// waitLocked waits, with mu released, until the state changes or ctx
// ends.
func (p *Process) waitLocked(ctx context.Context) error {
	if p.changed == nil {
		p.changed = make(chan struct{})
	}
	ch := p.changed
	p.blockingLocked()
	p.mu.Unlock()
	var err error
	select {
	case <-ch:
	case <-ctx.Done():
		err = ctx.Err()
	}
	p.mu.Lock()
	return err
}

// blockingLocked tells a test that a call is about to block.
func (p *Process) blockingLocked() {
	if p.testHookBlocked != nil {
		p.testHookBlocked()
	}
}

func (p *Process) broadcastLocked() {
	if p.changed != nil {
		close(p.changed)
		p.changed = nil
	}
}

// kickLocked wakes the writer of the attached connection, if any.
func (p *Process) kickLocked() {
	if p.conn != nil {
		p.conn.kick()
	}
}

func (p *Process) dropSignalLocked(id int64) {
	for i, s := range p.signals {
		if s.id == id {
			p.signals = append(p.signals[:i], p.signals[i+1:]...)
			return
		}
	}
}
