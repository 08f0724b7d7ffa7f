package server

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/procwire/procwire/credit"
	"github.com/procwire/procwire/frames"
	"github.com/procwire/procwire/internal/link"
	"github.com/procwire/procwire/proc"
	"github.com/procwire/procwire/replay"
)

// Operations named in error frames.
const (
	opOpen    = "open_process"
	opResume  = "resume_process"
	opDestroy = "destroy_process"
)

const reasonShutdown = "server shutting down"

func shutdownError(op string) *frames.Error {
	return &frames.Error{Code: frames.OperationFailed, Operation: op, Reason: "server_shutdown"}
}

// refuseShutdown refuses an open or resume racing a shutdown: the
// server_shutdown error, then 1001 (PROTOCOL.md §7), whether or not Shutdown
// has come to close this connection yet.
func (c *conn) refuseShutdown(op string) closeStatus {
	e := shutdownError(op)
	c.srv.m.refused(refusalReason(e), int(websocket.StatusGoingAway))
	c.log.Info("refused", "operation", op, "reason", refusalReason(e), "code", string(e.Code))
	c.send(e)
	return closeStatus{code: websocket.StatusGoingAway, reason: reasonShutdown}
}

// callContext returns the context for a call made on c's behalf that may
// block (Admit, Executor.Start): it ends when c's context ends or when the
// server's shutdown begins, so that no such call holds Shutdown. Call
// cancel once the call has returned.
func (c *conn) callContext() (ctx context.Context, cancel context.CancelFunc) {
	ctx, cancelCtx := context.WithCancel(c.ctx)
	unhook := context.AfterFunc(c.srv.stopping, cancelCtx)
	return ctx, func() {
		unhook()
		cancelCtx()
	}
}

// notFoundError answers a resume or destroy naming a process this server
// does not know. The frame decoded, so its process id and token are well
// formed: the likeliest cause is a connection routed to another server than
// the one that opened the process.
func notFoundError(op string) *frames.Error {
	return &frames.Error{Code: frames.LifecycleConflict, Operation: op, Actual: "process_not_found",
		Message: "this server does not know the process: if several servers sit behind a proxy, " +
			"the connection was probably routed to another server than the one that opened it " +
			"(route on the " + frames.HeaderInstance + " header); else the process_id or token is wrong"}
}

// pendingOpen is an open whose child is being started: its instance is
// reserved, and a repeated open or a destroy by its key waits on done.
type pendingOpen struct {
	key    string        // the open's open_key, or ""
	done   chan struct{} // closed once the start succeeded or failed
	killed bool          // a destroy by key arrived meanwhile; guarded by Server.mu
}

// keyEqual compares two open keys in constant time; an empty key equals
// nothing.
func keyEqual(a, b string) bool {
	return a != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

func alreadyOpen() *frames.Error {
	return &frames.Error{Code: frames.LifecycleConflict, Operation: opOpen, Actual: "process_already_open"}
}

// open serves an open frame in four steps: admit (the embedder's Admit
// and the terminal check), reserve (the instance), start (the child,
// within the memory budget) and register (the session, attached to c). An
// open repeating the instance and open_key of a live process attaches c to
// that process instead (PROTOCOL.md §4.8). ok is false when the open was
// refused; st then ends the connection.
func (s *Server) open(c *conn, f *frames.Open) (st closeStatus, ok bool) {
	if st, ok := s.admit(c, f); !ok {
		return st, false
	}
	po, again, st, ok := s.reserve(c, f)
	switch {
	case !ok:
		return st, false
	case again != nil:
		return s.reopen(c, again)
	}
	// Whatever happens below, a repeated open or destroy waiting on this
	// one looks again once it is settled.
	defer close(po.done)
	se, st, ok := s.start(c, f)
	if !ok {
		return st, false
	}
	return s.register(c, se, po)
}

// admit asks Config.Admit about the open, and refuses a terminal the
// server does not offer.
func (s *Server) admit(c *conn, f *frames.Open) (st closeStatus, ok bool) {
	if s.cfg.Admit != nil {
		ctx, cancel := c.callContext()
		e := s.cfg.Admit(ctx, f.InstanceID)
		cancel()
		if s.stopping.Err() != nil {
			return c.refuseShutdown(opOpen), false
		}
		if e != nil {
			return c.refuse(e), false
		}
	}
	if f.TTY != nil {
		if e := s.ttyRefusal(); e != nil {
			return c.refuse(e), false
		}
	}
	return closeStatus{}, true
}

// reserve reserves f's instance for the process the open starts, and
// returns the reservation; or again, the live session whose instance and
// open key the open repeats; or ok false and how c ends. When the same
// open is starting on another connection (the client lost it and
// retries), it waits for that one to settle and looks again.
func (s *Server) reserve(c *conn, f *frames.Open) (po *pendingOpen, again *session, st closeStatus, ok bool) {
	for {
		s.mu.Lock()
		s.pruneTombsLocked(s.now())
		if s.closing {
			s.mu.Unlock()
			return nil, nil, c.refuseShutdown(opOpen), false
		}
		if ts := s.keyTombLocked(f.InstanceID, f.OpenKey); ts != nil {
			s.mu.Unlock()
			return nil, nil, c.refuse(tombstoneError(ts, opOpen)), false
		}
		if other := s.opening[f.InstanceID]; other != nil {
			s.mu.Unlock()
			if !keyEqual(f.OpenKey, other.key) {
				return nil, nil, c.refuse(alreadyOpen()), false
			}
			s.hook(hookKeyWait, f.InstanceID)
			select {
			case <-other.done:
				continue
			case <-c.stop: // shutdown: closeWith has set the status
				return nil, nil, closeStatus{}, false
			case <-c.ctx.Done():
				return nil, nil, closeStatus{code: websocket.StatusGoingAway, reason: reasonShutdown, abrupt: true}, false
			}
		}
		if se, taken := s.instances[f.InstanceID]; taken {
			s.mu.Unlock()
			if se == nil || !keyEqual(f.OpenKey, se.openKey) {
				return nil, nil, c.refuse(alreadyOpen()), false
			}
			return nil, se, closeStatus{}, true
		}
		if e := s.refuseNewLocked(); e != nil {
			s.mu.Unlock()
			return nil, nil, c.refuse(e), false
		}
		po = &pendingOpen{key: f.OpenKey, done: make(chan struct{})}
		s.instances[f.InstanceID] = nil
		s.opening[f.InstanceID] = po
		s.mu.Unlock()
		return po, nil, closeStatus{}, true
	}
}

// refuseNewLocked returns the error refusing a new process, if the server
// takes none now: it drains, or it holds its MaxProcesses. s.mu must be
// held.
func (s *Server) refuseNewLocked() *frames.Error {
	if s.draining {
		return drainingError()
	}
	if len(s.instances) >= s.cfg.MaxProcesses {
		return &frames.Error{Code: frames.CapabilityUnavailable, Requirement: "resources",
			Message: "the server holds its MaxProcesses processes"}
	}
	return nil
}

// unreserve releases the instance f reserved (reserve), when its start
// failed.
func (s *Server) unreserve(f *frames.Open) {
	s.mu.Lock()
	s.releaseInstanceLocked(f.InstanceID)
	delete(s.opening, f.InstanceID)
	s.mu.Unlock()
}

// start starts f's child, its windows taken from the memory budget, and
// returns its session, not yet shared, with c attached. When it cannot,
// what was taken is given back, the instance released and the open
// refused (ok false).
func (s *Server) start(c *conn, f *frames.Open) (se *session, st closeStatus, ok bool) {
	cfg := &s.cfg
	pcfg := proc.Config{
		StdoutWindow: clampWindow(f.StdoutWindow, cfg.StdoutWindow, cfg.MaxStdoutWindow),
		StdinWindow:  clampWindow(f.StdinWindow, cfg.StdinWindow, cfg.MaxStdinWindow),
		StderrRing:   cfg.StderrRing,
		ExitWait:     cfg.ExitWait,
		DestroyWait:  cfg.DestroyWait,
		RunAs:        cfg.RunAs,
		TTY:          ttyConfig(f.TTY),
	}
	limits, inForce, err := openLimits(cfg.Executor, f.Limits)
	if err != nil {
		s.unreserve(f)
		return nil, c.refuse(resourcesError(opOpen, err.Error())), false
	}
	pcfg.Limits = limits
	cost := processCost(pcfg.StdoutWindow, pcfg.StdinWindow, pcfg.StderrRing)
	if !s.budget.take(cost) {
		s.unreserve(f)
		return nil, c.refuse(resourcesError(opOpen, "the process's windows do not fit the server's memory budget")), false
	}
	req := proc.Request{
		Executable:       f.Request.Executable,
		Arguments:        f.Request.Arguments,
		WorkingDirectory: f.Request.WorkingDirectory,
		Environment:      ttyEnv(f.Request.Environment, f.TTY),
	}
	ctx, cancel := c.callContext()
	p, err := cfg.Executor.Start(ctx, req, pcfg)
	cancel()
	if err != nil {
		s.budget.give(cost)
		s.unreserve(f)
		if s.stopping.Err() != nil {
			s.log.Info("process start ended by shutdown", "instance", f.InstanceID, "err", err)
			return nil, c.refuseShutdown(opOpen), false
		}
		s.log.Info("process start failed", "instance", f.InstanceID, "executable", req.Executable, "err", err)
		return nil, c.refuse(startError(err)), false
	}
	se = s.newSession(f, req, pcfg, p, inForce)
	se.cost = cost
	se.setAttachedLocked(c) // not yet shared: no lock needed
	return se, closeStatus{}, true
}

// newSession is the session of process p, started for open f with req
// and pcfg; inForce are the limits in force.
func (s *Server) newSession(f *frames.Open, req proc.Request, pcfg proc.Config, p Process, inForce *frames.Limits) *session {
	cfg := &s.cfg
	id, token := randomHex(16), randomHex(32)
	se := &session{
		srv:        s,
		id:         id,
		token:      token,
		instanceID: f.InstanceID,
		openKey:    f.OpenKey,
		evidence: frames.Evidence{
			WireRevision:     frames.WireRevision,
			Provider:         cfg.Provider,
			ProviderRevision: cfg.ProviderRevision,
			InstanceID:       f.InstanceID,
			ProcessID:        id,
			Executable:       req.Executable,
			WorkingDirectory: req.WorkingDirectory,
			ArgumentsDigest:  frames.ArgumentsDigest(req.Arguments),
			StartedAt:        frames.FormatTime(p.StartedAt()),
			Limits:           inForce,
		},
		exitReasons:  f.ExitReasons,
		p:            p,
		log:          s.log.With("process", id, "instance", f.InstanceID),
		stdoutWindow: pcfg.StdoutWindow,
		stdinWindow:  pcfg.StdinWindow,
		stderrRing:   pcfg.StderrRing,
		gone:         make(chan struct{}),
		pumpDone:     make(chan struct{}),
		recv:         credit.NewReceiver(int64(pcfg.StdinWindow)),
		kick:         make(chan struct{}, 1),
	}
	if !cfg.NoCompression {
		if frames.EncListHas(f.OutputEnc, frames.EncS2) {
			se.outEnc = frames.EncS2
		}
		if frames.EncListHas(f.StdinEnc, frames.EncS2) {
			se.inEnc = frames.EncS2
		}
	}
	se.opened = &frames.Opened{
		ProcessID:    id,
		Token:        token,
		Evidence:     se.evidence,
		StdinLimit:   int64(pcfg.StdinWindow),
		StdoutWindow: int64(pcfg.StdoutWindow),
		StderrWindow: int64(pcfg.StderrRing),
		GraceMS:      cfg.Grace.Milliseconds(),
		HeartbeatMS:  max(cfg.Heartbeat, 0).Milliseconds(),
		ExitWaitMS:   cfg.ExitWait.Milliseconds(),
		MaxData:      int64(cfg.MaxFrameData),
		OutputEnc:    se.outEnc,
		StdinEnc:     se.inEnc,
		TTY:          f.TTY != nil,
	}
	return se
}

// register makes se, started under reservation po, the session of its
// instance, starts its pump and attaches c. A shutdown begun meanwhile
// destroys the child and refuses the open; a destroy by the open's key
// that came while it started destroys it now, and its tombstone answers.
func (s *Server) register(c *conn, se *session, po *pendingOpen) (st closeStatus, ok bool) {
	s.mu.Lock()
	delete(s.opening, se.instanceID)
	if s.closing {
		s.releaseInstanceLocked(se.instanceID)
		s.mu.Unlock()
		if err := se.p.Destroy(); err != nil {
			s.log.Error("destroy process", "err", err)
		}
		s.budget.give(se.cost)
		return c.refuseShutdown(opOpen), false
	}
	killed := po.killed
	if killed {
		// Destroyed by its key while it started: it is registered
		// detached and destroyed like any process, so that the destroy
		// waiting for it finds its tombstone (or the failed destroy keeps
		// it reserved), and a later open with the key is refused.
		se.setAttachedLocked(nil)
	}
	s.sessions[se.id] = se
	s.instances[se.instanceID] = se
	s.wg.Add(1)
	s.mu.Unlock()
	if cn, ok := se.p.(ChangeNotifier); ok {
		cn.OnChange(se.changed)
	}
	go func() {
		defer s.wg.Done()
		se.pump()
	}()
	s.m.processOpened()
	if killed {
		se.log.Info("process destroyed by its open key while starting")
		ts, err := s.destroySession(se, nil, false)
		if err != nil {
			return c.refuse(destroyFailure(err)), false
		}
		return c.refuse(tombstoneError(ts, opOpen)), false
	}
	se.log.Info("process started", "pid", se.p.Pid(), "executable", se.evidence.Executable,
		"stdout_window", se.stdoutWindow, "stdin_window", se.stdinWindow)
	s.hook(hookStarted, se.id)
	opened := *se.opened
	c.attach(se, &opened, 0, 0, nil)
	return closeStatus{}, true
}

// reopen serves an open repeating the instance and open_key of the live
// session se: opened again, then the replay of a resume from offset 0.
func (s *Server) reopen(c *conn, se *session) (st closeStatus, ok bool) {
	return s.takeOver(c, se, opOpen, 0, 0)
}

// startError turns an Executor's error into the error frame answering open.
func startError(err error) *frames.Error {
	reason := proc.ReasonStartFailed
	var se *proc.StartError
	if errors.As(err, &se) {
		reason = se.Reason
	}
	return &frames.Error{Code: frames.OperationFailed, Operation: opOpen, Reason: reason, Message: cleanMessage(err.Error())}
}

// cleanMessage makes s a valid error message: UTF-8, no NUL, at most 1,024
// bytes.
func cleanMessage(s string) string {
	s = strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", ""), "?")
	return link.Truncate(s, 1024)
}

// randomHex returns n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails (crypto/rand, Go 1.24+)
	return hex.EncodeToString(b)
}

// lookup finds the live session or the tombstone of process id whose token
// is token. An unknown id and a wrong token look the same.
func (s *Server) lookup(id, token string) (*session, *tombstone, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pruneTombsLocked(s.now())
	if se, ok := s.sessions[id]; ok && tokenEqual(se.token, token) {
		return se, nil, s.closing
	}
	if ts, ok := s.tombs[id]; ok && tokenEqual(ts.token, token) {
		return nil, ts, s.closing
	}
	return nil, nil, s.closing
}

// resume serves a resume frame: it checks the offsets, takes the session
// over from its current connection (closed with 4001) and attaches c, which
// then replays what the client lacks.
func (s *Server) resume(c *conn, f *frames.Resume) (st closeStatus, ok bool) {
	se, ts, closing := s.lookup(f.ProcessID, f.Token)
	switch {
	case closing:
		return c.refuseShutdown(opResume), false
	case ts != nil:
		return c.refuse(tombstoneError(ts, opResume)), false
	case se == nil:
		return c.refuse(notFoundError(opResume)), false
	}
	if st, bad := c.route.checkInstance(se.instanceID); bad {
		return c.refuseStatus(refuseRouting, st), false
	}
	return s.takeOver(c, se, opResume, f.StdoutReceived, f.StderrReceived)
}

// takeOver attaches c to se, taking it from its current connection (closed
// with 4001) unless that one was accepted after c (then c is closed with
// 4001), and has c replay stdout from stdoutFrom and stderr from
// stderrFrom (or the oldest byte held). op says what c asked for: a resume
// is answered resumed; a repeated open (opOpen) opened, and only while no
// client has shown it received the first opened.
func (s *Server) takeOver(c *conn, se *session, op string, stdoutFrom, stderrFrom int64) (st closeStatus, ok bool) {
	// The exit is read before the stdout buffer, so that a published exit
	// is never seen without the EOF that preceded it.
	_, exited := se.p.Exit()
	se.mu.Lock()
	if se.awaitDestroyLocked() != live {
		se.mu.Unlock()
		return c.refuse(tombstoneError(se.tomb, op)), false
	}
	var (
		err       error
		acked     bool
		stdoutEnd int64
		eof       bool
	)
	se.p.Stdout(func(b *replay.Buffer) {
		_, _, err = b.Slice(stdoutFrom, 0)
		acked = b.Start() > 0
		stdoutEnd = b.End()
		_, eof = b.EOF()
	})
	if old := se.attached; old != nil && old.seq > c.seq {
		// A connection accepted after c holds the process: c's frame,
		// though read later, was sent earlier (a client's attempt on a
		// connection it has since given up, its frame still buffered
		// here). Taking over would close the live connection for a dead
		// one.
		se.mu.Unlock()
		return c.refuseStatus(refuseStale, closeStatus{code: statusResumedElsewhere, reason: frames.ReasonAttachedToNewer}), false
	}
	if op == opOpen && (acked || se.recv.Received() > 0) {
		// A client acknowledged stdout or sent stdin: it received opened
		// and holds the token. A repeated open is not how it gets back.
		se.mu.Unlock()
		e := alreadyOpen()
		e.Message = "this open was answered already; resume the process with its token"
		return c.refuse(e), false
	}
	if err != nil {
		se.mu.Unlock()
		return c.refuse(s.replayError(op, err)), false
	}
	old := se.attached
	detached := time.Duration(0)
	if old == nil {
		detached = s.now().Sub(se.detachedAt)
	}
	se.setAttachedLocked(c)
	se.stopGraceLocked()
	se.syncStdinLocked()
	se.recv.Grant()
	hello := se.helloLocked(op)
	se.mu.Unlock()
	if old != nil {
		old.closeWith(closeStatus{code: statusResumedElsewhere, reason: frames.ReasonResumedElsewhere})
	}

	var stderrOff, stderrEnd int64
	se.p.Stderr(func(r *replay.Ring) {
		stderrEnd = r.End()
		stderrOff = min(max(stderrFrom, r.Start()), stderrEnd)
	})
	s.m.resumed(stdoutEnd-stdoutFrom, detached)
	s.m.stderrSkipped(stderrOff - stderrFrom)
	if op == opOpen {
		se.log.Info("process opened again by its open key", "stdout_end", stdoutEnd)
	} else {
		se.log.Info("process resumed", "stdout_received", stdoutFrom, "stdout_end", stdoutEnd)
	}
	c.attach(se, hello, stdoutFrom, stderrOff, &replayMark{
		stdout: stdoutEnd,
		stderr: stderrEnd,
		eof:    eof,
		exit:   exited,
	})
	return closeStatus{}, true
}

// replayError refuses an operation op whose replay cannot start where the
// client asked: before the oldest byte held (a gap) or beyond the end.
func (s *Server) replayError(op string, err error) *frames.Error {
	e := &frames.Error{Code: frames.OperationFailed, Operation: op, Reason: "replay_beyond_end"}
	if gap, isGap := errors.AsType[*replay.GapError](err); isGap {
		e.Reason = "replay_gap"
		e.Gap = &frames.Gap{Requested: gap.Requested, Oldest: gap.Oldest}
		s.m.replayGap()
	}
	return e
}

// helloLocked is the first frame of a connection taking se over for op:
// opened again (a repeated open), else resumed, with the stdin credit as
// it stands. s.mu must be held.
func (s *session) helloLocked(op string) frames.Frame {
	if op == opOpen {
		opened := *s.opened
		opened.StdinLimit = s.recv.Limit()
		return &opened
	}
	return &frames.Resumed{
		ProcessID:     s.id,
		Evidence:      s.evidence,
		StdinReceived: s.recv.Received(),
		StdinLimit:    s.recv.Limit(),
		TTY:           s.opened.TTY,
	}
}

// tombstoneError answers an operation op (a resume, or an open repeating
// an open key) on a destroyed or expired process.
func tombstoneError(ts *tombstone, op string) *frames.Error {
	return &frames.Error{Code: frames.LifecycleConflict, Operation: op, Expected: "running", Actual: ts.actual()}
}

// destroyFirst serves destroy as the first frame of a connection.
func (s *Server) destroyFirst(c *conn, f *frames.Destroy) closeStatus {
	if f.InstanceID != "" && f.OpenKey != "" {
		return s.destroyByKey(c, f.InstanceID, f.OpenKey)
	}
	if f.ProcessID == "" || f.Token == "" {
		return protocolError("destroy as a first frame needs process_id and token, or instance_id and open_key")
	}
	se, ts, _ := s.lookup(f.ProcessID, f.Token)
	if se != nil {
		if st, bad := c.route.checkInstance(se.instanceID); bad {
			return c.refuseStatus(refuseRouting, st)
		}
	}
	switch {
	case se != nil:
		var err error
		if ts, err = s.destroySession(se, c, false); err != nil {
			return c.refuse(destroyFailure(err))
		}
	case ts == nil:
		return c.refuse(notFoundError(opDestroy))
	}
	return destroyedStatus(ts)
}

// destroyByKey serves a first-frame destroy naming its process by the
// instance and open key of the open that started it (PROTOCOL.md §4.5).
// When nothing was started under the key, the key is remembered as
// destroyed and the answer is process_not_found.
func (s *Server) destroyByKey(c *conn, instanceID, key string) closeStatus {
	for {
		s.mu.Lock()
		s.pruneTombsLocked(s.now())
		if po := s.opening[instanceID]; po != nil && keyEqual(key, po.key) {
			// Its open is starting: it destroys what it starts, and the
			// tombstone then answers.
			po.killed = true
			s.mu.Unlock()
			s.hook(hookKeyWait, instanceID)
			select {
			case <-po.done:
				continue
			case <-c.stop:
				return closeStatus{}
			case <-c.ctx.Done():
				return closeStatus{code: websocket.StatusGoingAway, reason: reasonShutdown, abrupt: true}
			}
		}
		if se := s.instances[instanceID]; se != nil && keyEqual(key, se.openKey) {
			s.mu.Unlock()
			ts, err := s.destroySession(se, c, false)
			if err != nil {
				return c.refuse(destroyFailure(err))
			}
			return destroyedStatus(ts)
		}
		ts := s.keyTombLocked(instanceID, key)
		if ts == nil {
			ts = &tombstone{instanceID: instanceID, openKey: key, at: s.now()}
			s.addTombLocked(ts)
		}
		s.mu.Unlock()
		if ts.id == "" {
			s.log.Info("destroy by open key: nothing was started under it", "instance", instanceID)
			return c.refuse(notFoundError(opDestroy))
		}
		return destroyedStatus(ts)
	}
}

// Reasons of a destroy_process failure.
const (
	reasonSurvived       = "processes_survived" // members of the containment outlived SIGKILL
	reasonDestroyTimeout = "destroy_timeout"    // a step of the teardown did not finish in time
	reasonDestroyFailed  = "destroy_failed"     // anything else
)

// destroyFailure answers a destroy whose process could not be destroyed:
// the instance stays reserved and a later destroy tries again.
func destroyFailure(err error) *frames.Error {
	reason := reasonDestroyFailed
	switch {
	case errors.As(err, new(*proc.SurvivorsError)):
		reason = reasonSurvived
	case errors.As(err, new(*proc.DestroyTimeoutError)):
		reason = reasonDestroyTimeout
	}
	return &frames.Error{Code: frames.OperationFailed, Operation: opDestroy, Reason: reason, Message: cleanMessage(err.Error())}
}

// destroySession destroys se's process, or waits for the destroy already in
// progress (and tries again if that one failed), and returns its tombstone.
// by is the connection that asked, if any: any other connection attached is
// told (exit, destroyed, close 1000). When the process cannot be destroyed
// the session stays, its instance reserved, and the error says what
// survived.
func (s *Server) destroySession(se *session, by *conn, expired bool) (*tombstone, error) {
	se.mu.Lock()
	if se.awaitDestroyLocked() == gone {
		se.mu.Unlock()
		return se.tomb, nil
	}
	se.state = destroying
	se.settled = make(chan struct{})
	se.stopGraceLocked()
	se.mu.Unlock()
	return s.retire(se, by, expired)
}

// expire destroys se when its grace timer of generation gen fired and no
// connection resumed it meanwhile.
func (s *Server) expire(se *session, gen uint64) {
	se.mu.Lock()
	if se.state != live || se.attached != nil || se.graceGen != gen {
		se.mu.Unlock()
		return
	}
	se.state = destroying
	se.settled = make(chan struct{})
	se.grace = nil // fired: its callback (this call) accounts for the WaitGroup
	se.mu.Unlock()
	_, _ = s.retire(se, nil, true)
}

// retire destroys the process of a session in state destroying, releases
// its instance, leaves a tombstone and tells the attached connection. When
// Destroy fails, nothing is released: the session is live again (a detached
// one gets a new grace, whose expiry tries again) and the error is returned.
func (s *Server) retire(se *session, by *conn, expired bool) (*tombstone, error) {
	start := time.Now()
	if err := se.p.Destroy(); err != nil {
		se.log.Error("destroy process failed; it stays reserved", "expired", expired, "err", err)
		se.mu.Lock()
		se.state = live
		close(se.settled)
		if se.attached == nil && !s.isClosing() {
			se.armGraceLocked()
		}
		se.mu.Unlock()
		return nil, err
	}
	s.budget.give(se.cost)
	s.m.processRetired(expired, time.Since(start))
	ts := &tombstone{id: se.id, token: se.token, instanceID: se.instanceID, openKey: se.openKey,
		expired: expired, exit: se.exitFrame(), at: s.now()}
	se.tomb = ts

	s.mu.Lock()
	delete(s.sessions, se.id)
	if s.instances[se.instanceID] == se {
		s.releaseInstanceLocked(se.instanceID)
	}
	s.addTombLocked(ts)
	closing := s.closing
	s.mu.Unlock()

	se.mu.Lock()
	se.state = gone
	close(se.settled)
	att := se.attached
	se.setAttachedLocked(nil)
	se.mu.Unlock()
	close(se.gone)

	if att != nil && att != by {
		st := destroyedStatus(ts)
		if closing {
			// exit and destroyed, then the shutdown's close.
			st.code, st.reason = websocket.StatusGoingAway, reasonShutdown
		}
		att.closeWith(st)
	}
	exit := "unknown"
	if ts.exit != nil {
		exit = exitString(ts.exit)
	}
	if expired {
		se.log.Info("process expired", "grace", s.cfg.Grace, "exit", exit)
		s.hook(hookExpired, se.id)
	} else {
		se.log.Info("process destroyed", "exit", exit)
		s.hook(hookDestroyed, se.id)
	}
	return ts, nil
}

func exitString(e *frames.Exit) string {
	if e.Signal != "" {
		return "signal " + e.Signal
	}
	return fmt.Sprintf("exit %d", e.Code)
}

// maxKeyTombsPerInstance bounds the key-only tombstones (a destroy by
// instance and open key that found nothing) kept for one instance: a flood
// of destroys naming random keys evicts that instance's own oldest key-only
// tombstones, never another's, and never the tombstone of a process.
const maxKeyTombsPerInstance = 64

// addTombLocked remembers ts, forgetting the oldest tombstones beyond the
// bounds or older than TombstoneTTL. The tombstones of processes (ts.id
// set) and key-only ones are kept apart, each kind up to MaxTombstones, so
// that destroys by key, which cost nothing to send, cannot flush the
// tombstone of a process that ran (PROTOCOL.md §4.5, §4.8); key-only ones
// are further bounded per instance (maxKeyTombsPerInstance). s.mu must be
// held.
func (s *Server) addTombLocked(ts *tombstone) {
	if ts.openKey != "" {
		if ts.id == "" {
			s.evictKeyTombsLocked(ts.instanceID, maxKeyTombsPerInstance-1)
		}
		s.keyTombs[ts.instanceID] = append(s.keyTombs[ts.instanceID], ts)
	}
	if ts.id != "" {
		s.tombs[ts.id] = ts
		s.tombq = append(s.tombq, ts)
	} else {
		s.keyq = append(s.keyq, ts)
	}
	s.pruneTombsLocked(ts.at)
}

// evictKeyTombsLocked forgets the instance's oldest key-only tombstones
// until at most keep are left. s.mu must be held.
func (s *Server) evictKeyTombsLocked(instanceID string, keep int) {
	var keyOnly []*tombstone // oldest first
	for _, ts := range s.keyTombs[instanceID] {
		if ts.id == "" {
			keyOnly = append(keyOnly, ts)
		}
	}
	for _, ts := range keyOnly[:max(0, len(keyOnly)-keep)] {
		s.forgetKeyTombLocked(ts)
		s.keyq = slices.DeleteFunc(s.keyq, func(k *tombstone) bool { return k == ts })
	}
}

// keyTombLocked returns the tombstone of the instance's open key, or nil.
// Every key remembered for the instance is compared, in constant time.
// s.mu must be held.
func (s *Server) keyTombLocked(instanceID, key string) *tombstone {
	if key == "" {
		return nil
	}
	var found *tombstone
	for _, ts := range s.keyTombs[instanceID] {
		if keyEqual(key, ts.openKey) {
			found = ts
		}
	}
	return found
}

// pruneTombsLocked forgets expired tombstones and those over the bounds.
func (s *Server) pruneTombsLocked(now time.Time) {
	for _, q := range []*[]*tombstone{&s.tombq, &s.keyq} {
		for len(*q) > 0 && (len(*q) > s.cfg.MaxTombstones || now.Sub((*q)[0].at) >= s.cfg.TombstoneTTL) {
			old := (*q)[0]
			(*q)[0] = nil
			*q = (*q)[1:]
			if s.tombs[old.id] == old {
				delete(s.tombs, old.id)
			}
			s.forgetKeyTombLocked(old)
		}
	}
}

// forgetKeyTombLocked removes ts from its instance's open keys.
func (s *Server) forgetKeyTombLocked(old *tombstone) {
	if old.openKey == "" {
		return
	}
	kt := slices.DeleteFunc(s.keyTombs[old.instanceID], func(ts *tombstone) bool { return ts == old })
	if len(kt) == 0 {
		delete(s.keyTombs, old.instanceID)
	} else {
		s.keyTombs[old.instanceID] = kt
	}
}
