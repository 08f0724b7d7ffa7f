package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/procwire/procwire/frames"
	"github.com/procwire/procwire/internal/link"
)

// Process is a handle on one remote process. Its methods are safe for
// concurrent use: Wait, Signal and Destroy may be called from any number of
// goroutines, alongside one reader of Stdout, one reader of Stderr and one
// writer of Stdin.
//
// The handle owns one connection at a time and the goroutines serving it
// (a supervisor, and per connection a reader, a writer and a heartbeat). A
// lost connection is resumed within the server's grace without the caller
// noticing. Destroy must be called when the process is no longer needed
// (or Detach, to leave it to another client): it frees the server's
// reservation and stops the goroutines.
type Process struct {
	url        string
	instanceID string
	opts       Options
	dialClient *http.Client // opts.HTTPClient dialling through coalescers; nil: not ours
	log        *slog.Logger
	// firstRefused is set once a hop refused an upgrade that carried the
	// first frame (conn.go, refusesFirst): every later first frame goes as
	// a message, as with Options.FirstFrameAsMessage.
	firstRefused atomic.Bool

	stdin  Stdin
	stdout Stream
	stderr Stream

	// life ends when the supervisor must stop at once (Detach, a destroy
	// that ran out of time); superDone is closed when it returned.
	life      context.Context
	stopLife  context.CancelFunc
	superDone chan struct{}
	// done is closed once the handle ended; destroyDone once the destroy
	// settled.
	done        chan struct{}
	destroyDone chan struct{}
	// destroyToken is held by whoever destroys on a connection of its own,
	// so that concurrent Destroy calls make one attempt at a time.
	destroyToken chan struct{}
	// redial wakes the supervisor's backoff when a Destroy is requested.
	redial chan struct{}

	// turn is held by whoever writes the machine's frames to the attached
	// connection: its writer goroutine, or a caller's goroutine sending its
	// own stdin (see flush). It serves one connection after the other.
	turn link.Turn
	cur  *wsConn // the attached connection, or nil; guarded by turn
	// kick is sendKicked, bound once for turn.Kick; kickCtx bounds the
	// writes of the Write that kicks, and is used by its goroutine only.
	kick    func() (bool, error)
	kickCtx context.Context

	mu sync.Mutex
	// Everything below is guarded by mu.

	m       *machine
	out     outFrames                // frames being encoded (machine.next)
	changed [waitKinds]chan struct{} // per kind, closed on a change its blocked calls may wait for; nil when none waits
	// The lending read (lend.go): the connection the read loop serves,
	// the Read that reads it itself, the calls waiting for other news.
	rconn     *wsConn
	lender    *Stream
	waiters   int
	lendIdle  time.Duration // lendIdle, or what a test set
	lentReads uint64        // frames lenders read, for tests
	tried     chan struct{} // closed when a destroy attempt fails (evTried), then replaced

	testHookBlocked func() // called when a call is about to block
	testHookFrame   func() // called after each frame of a session was handled
}

// ExitStatus is how the remote process ended: by exiting with Code, or,
// when Signal is not empty, killed by that signal ("SIGKILL", "SIGSEGV", ...).
type ExitStatus struct {
	Code   int
	Signal string
	// Reason, when not empty, says why the process ended: "oom" when the
	// kernel's OOM killer ended it (Signal is then SIGKILL).
	Reason string
}

// Exited reports whether the process exited normally with Code.
func (s ExitStatus) Exited() bool { return s.Signal == "" }

// Signaled reports whether the process was killed by Signal.
func (s ExitStatus) Signaled() bool { return s.Signal != "" }

// Success reports whether the process exited with code 0.
func (s ExitStatus) Success() bool { return s == ExitStatus{} }

// String reads "exit status 3", "signal: SIGKILL" or "signal: SIGKILL (oom)".
func (s ExitStatus) String() string {
	if s.Signaled() && s.Reason != "" {
		return "signal: " + s.Signal + " (" + s.Reason + ")"
	}
	if s.Signaled() {
		return "signal: " + s.Signal
	}
	return fmt.Sprintf("exit status %d", s.Code)
}

// Handle names a process for Attach: from any program, on any machine that
// reaches the server. It holds the resume token, a bearer secret: whoever
// has it can read, write, signal and destroy the process. The session
// fields repeat what opened said; 0 takes a default (max_data 65,536, a 30 s
// grace and a 15 s heartbeat). It marshals to JSON with the wire's names.
type Handle struct {
	InstanceID  string `json:"instance_id"`
	ProcessID   string `json:"process_id"`
	Token       string `json:"token"`
	MaxData     int64  `json:"max_data,omitempty"`
	GraceMS     int64  `json:"grace_ms,omitempty"`
	HeartbeatMS int64  `json:"heartbeat_ms,omitempty"`
	// OutputEnc and StdinEnc repeat the encodings opened chose ("s2"), so
	// that the attaching client accepts compressed stdout and stderr and
	// compresses stdin too; empty: none.
	OutputEnc string `json:"output_enc,omitempty"`
	StdinEnc  string `json:"stdin_enc,omitempty"`
}

func newProcess(url, instanceID string, o Options) *Process {
	p := &Process{
		url:          url,
		instanceID:   instanceID,
		opts:         o,
		dialClient:   dialClient(&o),
		log:          o.Logger,
		superDone:    make(chan struct{}),
		done:         make(chan struct{}),
		destroyDone:  make(chan struct{}),
		destroyToken: make(chan struct{}, 1),
		redial:       make(chan struct{}, 1),
		lendIdle:     lendIdle,
	}
	p.life, p.stopLife = context.WithCancel(context.Background())
	// The writer holds each message and writes it in one write to the
	// connection where the coalescer can make it so.
	p.turn.Init(nil, true)
	p.kick = p.sendKicked
	p.stdin.p, p.stdout.p, p.stderr.p = p, p, p
	p.stderr.stderr = true
	return p
}

// Open starts req on the instance instanceID through the server at url
// (ws://, wss://, http://, https://, or ws+unix:///PATH for a Unix
// socket; see Options.Token for where a token may go) and returns its
// handle. ctx bounds the opening handshake only.
//
// The open is idempotent: it carries a random open key, and a handshake
// cut before the answer is repeated with the same key, which the server
// answers with the process it started, never a second one. An Open that
// fails or is cancelled after it may have started the process destroys it
// (by the key, within Options.DestroyTimeout).
//
// An open refused by a draining server (ErrServerDraining) is repeated on
// a new connection, which a load balancer routes to another server.
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
	if url, err = o.target(url); err != nil {
		return nil, err
	}
	open := &frames.Open{InstanceID: instanceID, Request: req, StdoutWindow: o.StdoutWindow, StdinWindow: o.StdinWindow,
		ExitReasons: frames.ExitReasonOOM, Limits: o.Limits,
		TTY: ttyFrame(o.TTY)}
	if o.Compress {
		open.OutputEnc, open.StdinEnc = frames.EncS2, frames.EncS2
	}
	if err := frames.Validate(open); err != nil {
		return nil, fmt.Errorf("procwire: open: %w", err)
	}
	p := newProcess(url, instanceID, o)
	ws, err := p.open(ctx, open, &req)
	if err != nil {
		p.stopLife()
		return nil, err
	}
	p.log = p.log.With("process_id", p.m.id)
	go p.supervise(ws)
	return p, nil
}

// newOpenKey returns a fresh open key: 256 random bits in hex.
func newOpenKey() string {
	var b [32]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Attach takes over the process h names, opened elsewhere (by Open in
// another program, or by "procwire exec --detach"): it resumes the process
// and replays the stdout nobody acknowledged. Stdout reads from offset 0
// when the server still holds it, or else from the oldest byte it holds
// (the bytes before were acknowledged by an earlier reader); stdin goes on
// from what the server received. A connection attached to the process
// elsewhere is closed by the server (4001).
func Attach(ctx context.Context, url string, h Handle, opts *Options) (*Process, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if url, err = o.target(url); err != nil {
		return nil, err
	}
	if err := frames.Validate(&frames.Resume{ProcessID: h.ProcessID, Token: h.Token}); err != nil {
		return nil, fmt.Errorf("procwire: attach: %w", err)
	}
	if err := frames.Validate(&frames.Open{InstanceID: h.InstanceID, Request: frames.ProcessRequest{
		Executable: "x", Arguments: []string{}, WorkingDirectory: "/", Environment: map[string]string{},
	}}); err != nil {
		return nil, fmt.Errorf("procwire: attach: %w", err)
	}
	p := newProcess(url, h.InstanceID, o)
	from := int64(0)
	for gap := false; ; gap = true {
		resume := &frames.Resume{ProcessID: h.ProcessID, Token: h.Token, StdoutReceived: from}
		ws, err := p.dial(ctx, h.ProcessID, resume)
		if err != nil {
			p.stopLife()
			return nil, fmt.Errorf("procwire: attach: %w", err)
		}
		var f frames.Frame
		f, err = ws.exchange(ctx, resume)
		var re *RemoteError
		if !gap && errors.As(err, &re) && re.Frame.Reason == "replay_gap" && re.Frame.Gap != nil && re.Frame.Gap.Oldest > from {
			ws.close()
			from = re.Frame.Gap.Oldest
			continue
		}
		if err == nil {
			r, ok := f.(*frames.Resumed)
			if !ok {
				err = protocolErrorf(f.Type().String(), "unexpected answer to resume")
			} else {
				p.m, err = newAttachedMachine(&h, r, from, o.limits())
			}
		}
		if err != nil {
			ws.close()
			p.stopLife()
			if !isFinal(err) {
				err = fmt.Errorf("procwire: attach: %w", err)
			}
			return nil, err
		}
		p.log = p.log.With("process_id", h.ProcessID)
		go p.supervise(ws)
		return p, nil
	}
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
func (p *Process) ID() string { return p.m.id }

// Evidence returns the server-authored evidence of the process, as checked
// against the request when it was opened.
func (p *Process) Evidence() frames.Evidence { return p.m.evidence }

// Handle returns what Attach needs to take the process over. It holds the
// resume token: keep it secret.
func (p *Process) Handle() Handle {
	return Handle{
		InstanceID:  p.instanceID,
		ProcessID:   p.m.id,
		Token:       p.m.token,
		MaxData:     int64(p.m.maxData),
		GraceMS:     p.m.grace.Milliseconds(),
		HeartbeatMS: p.m.heartbeat.Milliseconds(),
		OutputEnc:   p.m.outEnc,
		StdinEnc:    p.m.inEnc,
	}
}

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
		if s, err, ok := p.m.wait(); ok {
			return s, err
		}
		if err := p.waitLocked(ctx, waitOther); err != nil {
			return ExitStatus{}, fmt.Errorf("procwire: wait: %w", err)
		}
	}
}

// Signal sends sig (SIGINT, SIGTERM or SIGKILL) to the process's group and
// reports whether it was delivered (false: the process had already exited).
// It is sent after every stdin byte written before the call. A signal
// interrupted by a lost connection is sent again after the resume with the
// same id, so it is never delivered twice. A signal the server failed to
// deliver returns a *RemoteError (SandboxOperationFailed, reason
// signal_failed).
func (p *Process) Signal(ctx context.Context, sig frames.SignalName) (delivered bool, err error) {
	switch sig {
	case frames.SIGINT, frames.SIGTERM, frames.SIGKILL:
	default:
		return false, fmt.Errorf("procwire: signal %q not one of SIGINT, SIGTERM, SIGKILL", sig)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	id, ev, err := p.m.sendSignal(sig)
	if err != nil {
		return false, err
	}
	p.applyLocked(ev)
	for {
		if done, ok, err := p.m.signalDone(id); done {
			return ok, err
		}
		if err := p.waitLocked(ctx, waitOther); err != nil {
			p.m.dropSignal(id)
			return false, fmt.Errorf("procwire: signal: %w", err)
		}
	}
}

// Destroy tears the process down: it kills its process group, waits for the
// server to reap it and frees the instance. It is idempotent: concurrent and
// later calls settle the same way, also after the process exited, after the
// connection was lost for good, and after an answer was lost (the destroy is
// then repeated on a new connection). It returns nil once the server said
// the process is destroyed, or a *RemoteError if the server refused.
//
// When the server could not end the process (something of it outlived the
// server's destroy bound: a *RemoteError with operation destroy_process and
// reason processes_survived, destroy_timeout or destroy_failed), nothing is
// settled: the process still runs, the handle goes on driving it, and a
// later Destroy tries again.
//
// Destroy is bounded by Options.DestroyTimeout whatever ctx: when the grace
// ran out with no connection it settles at once with ErrExpired (the server
// destroys a process nobody resumed), and when the server gives no answer in
// time it settles with an error wrapping context.DeadlineExceeded. If ctx
// ends first it returns ctx's error, and a later call tries again. Every
// blocked call of the handle returns ErrDestroyed; Wait returns the exit if
// the server reported one.
func (p *Process) Destroy(ctx context.Context) error {
	dctx, cancel := context.WithTimeout(ctx, p.opts.DestroyTimeout)
	defer cancel()
	p.mu.Lock()
	p.applyLocked(p.m.destroy(time.Now()))
	if p.m.st == stateLeft && errors.Is(p.m.err, ErrDetached) {
		p.mu.Unlock()
		return ErrDetached
	}
	if p.tried == nil {
		p.tried = make(chan struct{})
	}
	tried := p.tried
	select { // cut a reconnection backoff short
	case p.redial <- struct{}{}:
	default:
	}
	// Somebody reads the answer: a lender's Read returning meanwhile gives
	// the socket back to the loop (lend.go).
	p.waiters++
	p.needReaderLocked()
	p.blockingLocked()
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.waiters--
		p.mu.Unlock()
	}()

	select {
	case <-p.destroyDone:
	case <-tried:
		// The server destroyed nothing (something survived): the process
		// and the handle go on, and a later Destroy tries again.
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.m.triedErr
	case <-p.superDone:
		// The supervisor has stopped without settling the destroy: it is
		// done on a connection of our own.
		if err := p.destroyExclusive(dctx); err != nil && !p.destroySettled() {
			if dctx.Err() == nil {
				return err // a later call tries again
			}
			return p.destroyFailed(ctx, err)
		}
	case <-dctx.Done():
		return p.destroyFailed(ctx, dctx.Err())
	}
	// The supervisor stops promptly once the destroy settled.
	select {
	case <-p.superDone:
	case <-dctx.Done():
		return p.destroyFailed(ctx, dctx.Err())
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.m.destroyErr
}

// destroyFailed returns the error of a Destroy that got no answer: ctx's
// when the caller gave up (a later call tries again); else DestroyTimeout
// ran out, which settles the destroy and stops the handle.
func (p *Process) destroyFailed(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("procwire: destroy: %w", ctx.Err())
	}
	p.mu.Lock()
	p.applyLocked(p.m.settleDestroy(fmt.Errorf("procwire: destroy: no answer within the %v DestroyTimeout: %w",
		p.opts.DestroyTimeout, err)))
	p.mu.Unlock()
	p.stopLife()
	<-p.superDone // stopping takes no longer than closing a connection
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.m.destroyErr
}

// Detach lets go of the process without destroying it: it closes the
// connection and stops the handle's goroutines, leaving the process to
// the server's grace, within which Attach (with Handle) can take it over.
// Every later call of the handle returns ErrDetached, Destroy included
// (reads hand over the bytes already held first). A Detach during a
// Destroy does nothing.
func (p *Process) Detach() {
	p.mu.Lock()
	p.applyLocked(p.m.detach())
	destroying := p.m.st == stateDestroying || p.m.st == stateDestroyed
	p.mu.Unlock()
	if destroying {
		return
	}
	p.stopLife()
	<-p.superDone
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

// applyLocked carries out what a transition of the machine calls for.
func (p *Process) applyLocked(ev events) {
	if ev&evWake != 0 {
		p.wakeLocked(ev)
	}
	if ev&evSend != 0 {
		p.turn.Wake()
	}
	if ev&evTried != 0 && p.tried != nil {
		close(p.tried)
		p.tried = nil
	}
	if ev&evEnd != 0 {
		if p.m.err != nil && !isClosed(p.done) {
			close(p.done)
			if !errors.Is(p.m.err, ErrDestroyed) && !errors.Is(p.m.err, ErrDetached) {
				p.log.Warn("process handle ended", "err", p.m.err)
			}
		}
		if p.m.st == stateDestroyed && !isClosed(p.destroyDone) {
			close(p.destroyDone)
		}
	}
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// waitKind is what a blocked call waits for. Each kind has its own
// wake-up channel, so that a frame wakes only the calls it concerns
// (machine.go, evWakeOut and the rest); a change of the handle's state
// wakes them all.
type waitKind uint8

const (
	waitOut   waitKind = iota // a Read of stdout
	waitErr                   // a Read of stderr
	waitIn                    // a Write or Close of stdin
	waitOther                 // Wait, Signal
	waitKinds
)

// wakeOf is the event that wakes the calls waiting for k.
func wakeOf(k waitKind) events { return evWakeOut << k }

// waitLocked waits, with mu released, until something a call of kind k
// waits for changes or ctx ends, with somebody reading the connection
// meanwhile.
func (p *Process) waitLocked(ctx context.Context, k waitKind) error {
	p.waiters++
	p.needReaderLocked()
	err := p.waitChangeLocked(ctx, k)
	p.waiters--
	return err
}

// waitChangeLocked waits, with mu released, until something a call of
// kind k waits for changes or ctx ends.
func (p *Process) waitChangeLocked(ctx context.Context, k waitKind) error {
	if p.changed[k] == nil {
		p.changed[k] = make(chan struct{})
	}
	ch := p.changed[k]
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

// wakeLocked wakes the calls waiting for the kinds ev names.
func (p *Process) wakeLocked(ev events) {
	for k := range waitKinds {
		if ev&wakeOf(k) != 0 && p.changed[k] != nil {
			close(p.changed[k])
			p.changed[k] = nil
		}
	}
}

// broadcastLocked wakes every blocked call.
func (p *Process) broadcastLocked() { p.wakeLocked(evWake) }
