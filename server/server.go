package server

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"

	"github.com/procwire/procwire/bridge"
	"github.com/procwire/procwire/credit"
	"github.com/procwire/procwire/frames"
	"github.com/procwire/procwire/replay"
)

// Server serves procwire connections. Create it with New; it is an
// http.Handler. All methods are safe for concurrent use. Shutdown or Close
// it to destroy its processes: a Server that is merely dropped leaves its
// children running until the grace of each expires.
type Server struct {
	cfg        Config
	log        *slog.Logger
	tokenSum   [sha256.Size]byte // sha256 of cfg.Token, for a constant-time compare
	acceptOpts websocket.AcceptOptions

	// wg counts session pumps and armed grace timers; connWG counts
	// connections being served. Both are only added to while !closing.
	wg     sync.WaitGroup
	connWG sync.WaitGroup

	// mu guards the maps and closing. It is never held across I/O, a
	// process operation or a session's lock.
	mu        sync.Mutex
	closing   bool
	conns     map[*conn]struct{}
	sessions  map[string]*session // by process id
	instances map[string]*session // reservations; nil while the process starts
	tombs     map[string]*tombstone
	tombq     []*tombstone // tombs in the order they were added (oldest first)

	// Test hooks; set before serving, never changed after.
	testHook func(ev hookEvent, processID string)
	now      func() time.Time
}

// hookEvent names what a test hook observes.
type hookEvent uint8

const (
	hookStarted   hookEvent = iota // a process started and its session registered
	hookDetached                   // a session lost its connection; the grace runs
	hookExpired                    // the grace expired and the process was destroyed
	hookDestroyed                  // a process was destroyed by destroy or shutdown
)

// New returns a Server for cfg, or an error if a field is out of bounds.
func New(cfg Config) (*Server, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Server{
		cfg: c,
		log: c.Logger,
		acceptOpts: websocket.AcceptOptions{
			Subprotocols:    []string{frames.Subprotocol},
			OriginPatterns:  c.OriginPatterns,
			CompressionMode: websocket.CompressionDisabled,
		},
		conns:     make(map[*conn]struct{}),
		sessions:  make(map[string]*session),
		instances: make(map[string]*session),
		tombs:     make(map[string]*tombstone),
		now:       time.Now,
	}
	s.tokenSum = sha256.Sum256([]byte(c.Token))
	return s, nil
}

// ServeHTTP authenticates the request, upgrades it to a WebSocket with the
// procwire.v1 subprotocol and serves the connection until it ends. A missing
// or wrong bearer token is answered 401 before the upgrade; a foreign Origin
// 403; a connection that did not negotiate procwire.v1 is closed with 1002.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="procwire"`)
		http.Error(w, "missing or wrong bearer token", http.StatusUnauthorized)
		s.log.Info("connection refused", "remote", r.RemoteAddr, "reason", "unauthorized")
		return
	}
	if s.isClosing() {
		http.Error(w, "server shutting down", http.StatusServiceUnavailable)
		return
	}
	opts := s.acceptOpts
	ws, err := websocket.Accept(w, r, &opts)
	if err != nil {
		s.log.Info("connection refused", "remote", r.RemoteAddr, "reason", err.Error())
		return
	}
	if ws.Subprotocol() != frames.Subprotocol {
		s.log.Info("connection refused", "remote", r.RemoteAddr, "reason", "no subprotocol")
		_ = ws.Close(websocket.StatusProtocolError, "subprotocol "+frames.Subprotocol+" required")
		return
	}
	c := newConn(s, ws, r.RemoteAddr)
	if !s.addConn(c) {
		_ = ws.Close(websocket.StatusGoingAway, reasonShutdown)
		return
	}
	defer s.connWG.Done()
	c.serve()
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// authorized reports whether r carries the configured bearer token. Both
// sides are hashed first so that the compare is constant-time whatever the
// lengths.
func (s *Server) authorized(r *http.Request) bool {
	if s.cfg.Token == "" {
		return true
	}
	const scheme = "bearer "
	h := r.Header.Get("Authorization")
	if len(h) < len(scheme) || !strings.EqualFold(h[:len(scheme)], scheme) {
		return false
	}
	got := sha256.Sum256([]byte(h[len(scheme):]))
	return subtle.ConstantTimeCompare(got[:], s.tokenSum[:]) == 1
}

// tokenEqual compares two resume tokens in constant time.
func tokenEqual(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

func (s *Server) isClosing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}

// addConn registers c unless the server is closing.
func (s *Server) addConn(c *conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return false
	}
	s.conns[c] = struct{}{}
	s.connWG.Add(1)
	return true
}

// Shutdown stops accepting connections, closes every connection with 1001,
// destroys every process (no child survives it) and waits until every
// connection has ended. If ctx ends first, the remaining connections are
// closed without a close handshake and ctx's error is returned once they
// are gone. Calling it again waits again and returns nil.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	sessions := make([]*session, 0, len(s.sessions))
	for _, se := range s.sessions {
		sessions = append(sessions, se)
	}
	s.mu.Unlock()

	for _, c := range conns {
		c.closeWith(closeStatus{code: websocket.StatusGoingAway, reason: reasonShutdown})
	}
	var destroyers sync.WaitGroup
	for _, se := range sessions {
		destroyers.Go(func() { s.destroySession(se, nil, false) })
	}
	destroyers.Wait()

	// When ctx ends, drop the connections still closing.
	abort := context.AfterFunc(ctx, func() {
		for _, c := range conns {
			c.cancel()
		}
	})
	s.connWG.Wait()
	var err error
	if !abort() {
		err = ctx.Err()
	}
	s.wg.Wait()
	return err
}

// Close is Shutdown without the close handshakes: it destroys every process,
// drops every connection and returns once all are gone.
func (s *Server) Close() error {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = s.Shutdown(ctx)
	return nil
}

// Stats is a snapshot of a Server's state, for monitoring and tests.
type Stats struct {
	Connections int            // connections being served
	Tombstones  int            // destroyed or expired processes remembered
	Processes   []ProcessStats // live processes, in no particular order
}

// ProcessStats describes one live process.
type ProcessStats struct {
	ProcessID    string
	InstanceID   string
	Pid          int
	Attached     bool // a connection serves it; false while detached
	StdoutWindow int  // the stdout window granted at open
	StdoutHeld   int  // stdout bytes held unacknowledged; never above StdoutWindow
}

// Stats returns a snapshot of the server's state.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	st := Stats{Connections: len(s.conns), Tombstones: len(s.tombs)}
	sessions := make([]*session, 0, len(s.sessions))
	for _, se := range s.sessions {
		sessions = append(sessions, se)
	}
	s.mu.Unlock()
	for _, se := range sessions {
		se.mu.Lock()
		attached := se.attached != nil
		se.mu.Unlock()
		st.Processes = append(st.Processes, ProcessStats{
			ProcessID:    se.id,
			InstanceID:   se.instanceID,
			Pid:          se.p.Pid(),
			Attached:     attached,
			StdoutWindow: se.stdoutWindow,
			StdoutHeld:   se.stdoutHeld(),
		})
	}
	return st
}

func (s *Server) hook(ev hookEvent, processID string) {
	if s.testHook != nil {
		s.testHook(ev, processID)
	}
}

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
	if !taken && !closing {
		s.instances[f.InstanceID] = nil
	}
	s.mu.Unlock()
	switch {
	case closing:
		return c.refuse(shutdownError(opOpen)), false
	case taken:
		return c.refuse(&frames.Error{Code: frames.LifecycleConflict, Operation: opOpen, Actual: "process_already_open"}), false
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
