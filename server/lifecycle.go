package server

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/procwire/procwire/bridge"
	"github.com/procwire/procwire/credit"
	"github.com/procwire/procwire/frames"
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

func notFoundError(op string) *frames.Error {
	return &frames.Error{Code: frames.LifecycleConflict, Operation: op, Actual: "process_not_found"}
}

// open serves an open frame: admission, the instance reservation, the start
// of the child and the attachment of connection c. ok is false when the
// open was refused; st then ends the connection.
func (s *Server) open(c *conn, f *frames.Open) (st closeStatus, ok bool) {
	if s.cfg.Admit != nil {
		if e := s.cfg.Admit(c.ctx, f.InstanceID); e != nil {
			return c.refuse(e), false
		}
	}
	s.mu.Lock()
	_, taken := s.instances[f.InstanceID]
	closing := s.closing
	full := len(s.instances) >= s.cfg.MaxProcesses
	if !taken && !closing && !full {
		s.instances[f.InstanceID] = nil
	}
	s.mu.Unlock()
	switch {
	case closing:
		return c.refuse(shutdownError(opOpen)), false
	case taken:
		return c.refuse(&frames.Error{Code: frames.LifecycleConflict, Operation: opOpen, Actual: "process_already_open"}), false
	case full:
		return c.refuse(&frames.Error{Code: frames.CapabilityUnavailable, Requirement: "resources",
			Message: "the server holds its MaxProcesses processes"}), false
	}

	cfg := &s.cfg
	bcfg := bridge.Config{
		StdoutWindow: clampWindow(f.StdoutWindow, cfg.StdoutWindow, cfg.MaxStdoutWindow),
		StdinWindow:  clampWindow(f.StdinWindow, cfg.StdinWindow, cfg.MaxStdinWindow),
		StderrRing:   cfg.StderrRing,
		ExitWait:     cfg.ExitWait,
		DestroyWait:  cfg.DestroyWait,
	}
	req := bridge.Request{
		Executable:       f.Request.Executable,
		Arguments:        f.Request.Arguments,
		WorkingDirectory: f.Request.WorkingDirectory,
		Environment:      f.Request.Environment,
	}
	p, err := cfg.Executor.Start(c.ctx, req, bcfg)
	if err != nil {
		s.mu.Lock()
		delete(s.instances, f.InstanceID)
		s.mu.Unlock()
		s.log.Info("process start failed", "instance", f.InstanceID, "executable", req.Executable, "err", err)
		return c.refuse(startError(err)), false
	}

	id, token := randomHex(16), randomHex(32)
	se := &session{
		srv:        s,
		id:         id,
		token:      token,
		instanceID: f.InstanceID,
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
		},
		p:            p,
		log:          s.log.With("process", id, "instance", f.InstanceID),
		stdoutWindow: bcfg.StdoutWindow,
		stdinWindow:  bcfg.StdinWindow,
		stderrRing:   bcfg.StderrRing,
		gone:         make(chan struct{}),
		pumpDone:     make(chan struct{}),
		attached:     c,
		recv:         credit.NewReceiver(int64(bcfg.StdinWindow)),
	}

	s.mu.Lock()
	if s.closing {
		delete(s.instances, f.InstanceID)
		s.mu.Unlock()
		if err := p.Destroy(); err != nil {
			s.log.Error("destroy process", "err", err)
		}
		return c.refuse(shutdownError(opOpen)), false
	}
	s.sessions[id] = se
	s.instances[f.InstanceID] = se
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		se.pump()
	}()

	se.log.Info("process started", "pid", p.Pid(), "executable", req.Executable,
		"stdout_window", bcfg.StdoutWindow, "stdin_window", bcfg.StdinWindow)
	s.hook(hookStarted, id)
	c.attach(se, &frames.Opened{
		ProcessID:    id,
		Token:        token,
		Evidence:     se.evidence,
		StdinLimit:   int64(bcfg.StdinWindow),
		StdoutWindow: int64(bcfg.StdoutWindow),
		StderrWindow: int64(bcfg.StderrRing),
		GraceMS:      cfg.Grace.Milliseconds(),
		HeartbeatMS:  max(cfg.Heartbeat, 0).Milliseconds(),
		ExitWaitMS:   cfg.ExitWait.Milliseconds(),
		MaxData:      int64(cfg.MaxFrameData),
	}, 0, 0, nil)
	return closeStatus{}, true
}

// startError turns an Executor's error into the error frame answering open.
func startError(err error) *frames.Error {
	reason := bridge.ReasonStartFailed
	var se *bridge.StartError
	if errors.As(err, &se) {
		reason = se.Reason
	}
	return &frames.Error{Code: frames.OperationFailed, Operation: opOpen, Reason: reason, Message: cleanMessage(err.Error())}
}

// cleanMessage makes s a valid error message: UTF-8, no NUL, at most 1,024
// bytes.
func cleanMessage(s string) string {
	s = strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", ""), "?")
	return truncate(s, 1024)
}

// truncate cuts s to at most n bytes at a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
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
		return c.refuse(shutdownError(opResume)), false
	case ts != nil:
		return c.refuse(tombstoneError(ts)), false
	case se == nil:
		return c.refuse(notFoundError(opResume)), false
	}

	// The exit is read before the stdout buffer, so that a published exit
	// is never seen without the EOF that preceded it.
	_, exited := se.p.Exit()
	se.mu.Lock()
	if se.state != live {
		se.mu.Unlock()
		<-se.gone
		return c.refuse(tombstoneError(se.tomb)), false
	}
	var (
		err       error
		stdoutEnd int64
		eof       bool
	)
	se.p.Stdout(func(b *replay.Buffer) {
		_, _, err = b.Slice(f.StdoutReceived, 0)
		stdoutEnd = b.End()
		_, eof = b.EOF()
	})
	if err != nil {
		se.mu.Unlock()
		e := &frames.Error{Code: frames.OperationFailed, Operation: opResume, Reason: "replay_beyond_end"}
		if gap, isGap := errors.AsType[*replay.GapError](err); isGap {
			e.Reason = "replay_gap"
			e.Gap = &frames.Gap{Requested: gap.Requested, Oldest: gap.Oldest}
		}
		return c.refuse(e), false
	}
	old := se.attached
	se.attached = c
	se.stopGraceLocked()
	se.syncStdinLocked()
	se.recv.Grant()
	resumed := &frames.Resumed{
		ProcessID:     se.id,
		Evidence:      se.evidence,
		StdinReceived: se.recv.Received(),
		StdinLimit:    se.recv.Limit(),
	}
	se.mu.Unlock()
	if old != nil {
		old.closeWith(closeStatus{code: statusResumedElsewhere, reason: "resumed elsewhere"})
	}

	var stderrOff, stderrEnd int64
	se.p.Stderr(func(r *replay.Ring) {
		stderrEnd = r.End()
		stderrOff = min(max(f.StderrReceived, r.Start()), stderrEnd)
	})
	se.log.Info("process resumed", "stdout_received", f.StdoutReceived, "stdout_end", stdoutEnd)
	c.attach(se, resumed, f.StdoutReceived, stderrOff, &replayMark{
		stdout: stdoutEnd,
		stderr: stderrEnd,
		eof:    eof,
		exit:   exited,
	})
	return closeStatus{}, true
}

// tombstoneError answers a resume of a destroyed or expired process.
func tombstoneError(ts *tombstone) *frames.Error {
	return &frames.Error{Code: frames.LifecycleConflict, Operation: opResume, Expected: "running", Actual: ts.actual()}
}

// destroyFirst serves destroy as the first frame of a connection.
func (s *Server) destroyFirst(c *conn, f *frames.Destroy) closeStatus {
	if f.ProcessID == "" || f.Token == "" {
		return protocolError("destroy as a first frame needs process_id and token")
	}
	se, ts, _ := s.lookup(f.ProcessID, f.Token)
	switch {
	case se != nil:
		ts = s.destroySession(se, c, false)
	case ts == nil:
		return c.refuse(notFoundError(opDestroy))
	}
	return destroyedStatus(ts)
}

// destroySession destroys se's process, or waits for the destroy already in
// progress, and returns its tombstone. by is the connection that asked, if
// any: any other connection attached is told (exit, destroyed, close 1000).
func (s *Server) destroySession(se *session, by *conn, expired bool) *tombstone {
	se.mu.Lock()
	if se.state != live {
		se.mu.Unlock()
		<-se.gone
		return se.tomb
	}
	se.state = destroying
	se.stopGraceLocked()
	se.mu.Unlock()
	s.retire(se, by, expired)
	return se.tomb
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
	se.grace = nil // fired: its callback (this call) accounts for the WaitGroup
	se.mu.Unlock()
	s.retire(se, nil, true)
}

// retire destroys the process of a session in state destroying, releases
// its instance, leaves a tombstone and tells the attached connection.
func (s *Server) retire(se *session, by *conn, expired bool) {
	if err := se.p.Destroy(); err != nil {
		se.log.Error("destroy process", "err", err)
	}
	ts := &tombstone{id: se.id, token: se.token, expired: expired, exit: se.exitFrame(), at: s.now()}
	se.tomb = ts

	s.mu.Lock()
	delete(s.sessions, se.id)
	if s.instances[se.instanceID] == se {
		delete(s.instances, se.instanceID)
	}
	s.addTombLocked(ts)
	s.mu.Unlock()

	se.mu.Lock()
	se.state = gone
	att := se.attached
	se.attached = nil
	se.mu.Unlock()
	close(se.gone)

	if att != nil && att != by {
		att.closeWith(destroyedStatus(ts))
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
}

func exitString(e *frames.Exit) string {
	if e.Signal != "" {
		return "signal " + e.Signal
	}
	return fmt.Sprintf("exit %d", e.Code)
}

// addTombLocked remembers ts, forgetting the oldest tombstones beyond
// MaxTombstones or older than TombstoneTTL. s.mu must be held.
func (s *Server) addTombLocked(ts *tombstone) {
	s.tombs[ts.id] = ts
	s.tombq = append(s.tombq, ts)
	s.pruneTombsLocked(ts.at)
}

// pruneTombsLocked forgets expired tombstones and those over the bound.
func (s *Server) pruneTombsLocked(now time.Time) {
	for len(s.tombq) > 0 && (len(s.tombq) > s.cfg.MaxTombstones || now.Sub(s.tombq[0].at) >= s.cfg.TombstoneTTL) {
		old := s.tombq[0]
		s.tombq[0] = nil
		s.tombq = s.tombq[1:]
		if s.tombs[old.id] == old {
			delete(s.tombs, old.id)
		}
	}
}
