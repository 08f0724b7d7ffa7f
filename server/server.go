package server

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/procwire/procwire/frames"
	"github.com/procwire/procwire/internal/coalesce"
)

// Server serves procwire connections. Create it with New; it is an
// http.Handler. All methods are safe for concurrent use. Shutdown or Close
// it to destroy its processes: a Server that is merely dropped leaves its
// children running until the grace of each expires.
type Server struct {
	cfg        Config
	log        *slog.Logger
	m          *metrics          // nil without Config.Registerer
	tokenSum   [sha256.Size]byte // sha256 of cfg.Token, for a constant-time compare
	acceptOpts websocket.AcceptOptions
	budget     *budget       // Config.MaxMemory
	upgrades   atomic.Int64  // requests in ServeHTTP past the auth checks, for MaxConnections
	connSeq    atomic.Uint64 // connections accepted, numbering them (conn.seq)
	refusals   *rateLog      // how often a refusal is logged at Info (logRefused)

	// wg counts session pumps and armed grace timers; connWG counts
	// connections being served. Both are only added to while !closing.
	wg     sync.WaitGroup
	connWG sync.WaitGroup

	// mu guards the maps and closing. It is never held across I/O, a
	// process operation or a session's lock.
	mu      sync.Mutex
	closing bool
	// draining: Drain was called; opens are refused. drained, when
	// non-nil, is closed (and reset) once no instance is reserved.
	draining bool
	drained  chan struct{}
	// stopping ends when shutdown begins (stop is called with closing
	// set): the calls a connection makes on the server's behalf (Admit,
	// Executor.Start) are given a context that ends with it.
	stopping  context.Context
	stop      context.CancelFunc
	conns     map[*conn]struct{}
	sessions  map[string]*session // by process id
	instances map[string]*session // reservations; nil while the process starts
	tombs     map[string]*tombstone
	tombq     []*tombstone // tombs in the order they were added (oldest first)
	keyq      []*tombstone // key-only tombstones (no process ran), oldest first

	// Also guarded by mu: the opens being started, and the tombstones that
	// carry an open key (PROTOCOL.md §4.8), both by instance id.
	opening  map[string]*pendingOpen
	keyTombs map[string][]*tombstone

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

	hookConnClosed  // a connection was served to its end (id: its remote address)
	hookConnCounted // a connection ended and its close was counted in the metrics (id: its process, or "")
	hookShutdown    // Shutdown began: new opens and resumes are refused
	hookKeyWait     // a repeated open or a destroy by key waits for the open starting (id: instance)
	hookDraining    // Drain began: new opens are refused
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
		budget:    newBudget(c.MaxMemory),
		conns:     make(map[*conn]struct{}),
		sessions:  make(map[string]*session),
		instances: make(map[string]*session),
		opening:   make(map[string]*pendingOpen),
		tombs:     make(map[string]*tombstone),
		keyTombs:  make(map[string][]*tombstone),
		now:       time.Now,
	}
	s.stopping, s.stop = context.WithCancel(context.Background())
	s.refusals = newRateLog(s.log, time.Second)
	s.tokenSum = sha256.Sum256([]byte(c.Token))
	if s.m, err = newMetrics(c.Registerer, s); err != nil {
		return nil, err
	}
	s.log.Info("process containment", "containment", s.containment())
	return s, nil
}

// ServeHTTP authenticates the request, upgrades it to a WebSocket with the
// procwire.v1 subprotocol and serves the connection until it ends. A missing
// or wrong bearer token is answered 401 before the upgrade; a foreign Origin,
// or without a token a request not from this machine (notLocal), 403; a
// shutting-down server 503; a connection that did not negotiate procwire.v1 is closed with 1002.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	remote := clientAddr(r, s.cfg.TrustedProxies)
	log := s.log.With("remote", remote)
	if remote != r.RemoteAddr {
		log = log.With("peer", r.RemoteAddr)
	}
	if s.cfg.Token == "" {
		// Without a token only this machine may connect (PROTOCOL.md §1),
		// even if the listener was not checked with CheckListenAddr.
		if why := notLocal(r); why != "" {
			s.refuseHTTP(w, log.With("detail", why), http.StatusForbidden, refuseNotLocal,
				"a server without a token serves this machine only: "+why)
			return
		}
	}
	if !s.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="procwire"`)
		s.refuseHTTP(w, log, http.StatusUnauthorized, refuseUnauthorized, "missing or wrong bearer token")
		return
	}
	if s.isClosing() {
		s.refuseHTTP(w, log, http.StatusServiceUnavailable, refuseShutdown, "server shutting down")
		return
	}
	if s.refuseDrainingUpgrade(w, r, log) {
		return
	}
	if s.upgrades.Add(1) > int64(s.cfg.MaxConnections) {
		s.upgrades.Add(-1)
		s.refuseHTTP(w, log, http.StatusServiceUnavailable, refuseConnections, "the server serves its MaxConnections connections")
		return
	}
	defer s.upgrades.Add(-1)
	// Numbered before the upgrade is answered: a client dials its next
	// attempt only after this one's answer, so the next is numbered
	// higher even when this handler is slow to go on after answering.
	seq := s.connSeq.Add(1)
	opts := s.acceptOpts
	// The first message may come in the upgrade (PROTOCOL.md §1): taking
	// it is answered by selecting SubprotocolFirst.
	first, hasFirst := frames.FirstFromSubprotocols(r.Header.Values("Sec-WebSocket-Protocol"))
	if hasFirst {
		opts.Subprotocols = firstSubprotocols
	}
	co := &coalesce.Coalescer{}
	rec := &statusRecorder{ResponseWriter: w, co: co}
	ws, err := websocket.Accept(rec, r, &opts)
	if err != nil {
		reason := refuseUpgrade
		if rec.status == http.StatusForbidden {
			reason = refuseOrigin
		}
		s.m.refused(reason, rec.status)
		s.logRefused(log, reason, "status", rec.status, "err", err)
		return
	}
	taken := hasFirst && strings.EqualFold(ws.Subprotocol(), frames.SubprotocolFirst)
	if ws.Subprotocol() != frames.Subprotocol && !taken {
		s.m.refused(refuseSubprotocol, int(websocket.StatusProtocolError))
		s.logRefused(log, refuseSubprotocol, "code", int(websocket.StatusProtocolError))
		_ = ws.Close(websocket.StatusProtocolError, "subprotocol "+frames.Subprotocol+" required")
		return
	}
	c := newConn(s, ws, co, remote)
	c.seq = seq
	c.log = log
	c.route = routeFrom(r)
	c.guard = rec.guard
	if taken {
		c.first = first
	}
	if !s.addConn(c) {
		s.m.refused(refuseShutdown, int(websocket.StatusGoingAway))
		s.logRefused(log, refuseShutdown, "code", int(websocket.StatusGoingAway))
		_ = ws.Close(websocket.StatusGoingAway, reasonShutdown)
		return
	}
	defer s.connWG.Done()
	c.serve()
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	s.hook(hookConnClosed, r.RemoteAddr)
}

// firstSubprotocols are the subprotocols a server selects from when the
// upgrade carries the first message: SubprotocolFirst, which says it took
// it, before Subprotocol.
var firstSubprotocols = []string{frames.SubprotocolFirst, frames.Subprotocol}

// refuseHTTP answers a request refused before the upgrade, logs the
// refusal with its reason and counts it.
func (s *Server) refuseHTTP(w http.ResponseWriter, log *slog.Logger, status int, reason, msg string) {
	s.m.refused(reason, status) // before the answer: a client that saw it sees it counted
	http.Error(w, msg, status)
	s.logRefused(log, reason, "status", status)
}

// statusRecorder remembers the status websocket.Accept answers with when it
// refuses an upgrade. Unwrap lets Accept reach the Hijacker beneath.
type statusRecorder struct {
	http.ResponseWriter
	status int
	co     *coalesce.Coalescer // wraps the hijacked connection
	guard  *msgGuard           // beneath co: bounds each message read
}

func (r *statusRecorder) WriteHeader(status int) {
	r.status = status
	r.ResponseWriter.WriteHeader(status)
}

func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// Hijack hands coder/websocket the connection wrapped in the coalescer,
// with a write buffer on the wrapped connection (net/http's writes to the
// bare one), so that every frame the library writes goes through it: in
// one write per message, or without waiting (conn.kick). The read buffer,
// which may hold what the client sent after its request, is kept.
func (r *statusRecorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	nc, brw, err := http.NewResponseController(r.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	r.guard = &msgGuard{Conn: nc}
	wc := r.co.Wrap(r.guard)
	return wc, bufio.NewReadWriter(brw.Reader, bufio.NewWriterSize(wc, brw.Writer.Size())), nil
}

// forwardingHeaders mark a request relayed by a proxy, whose peer address
// is the proxy's and says nothing about where the request came from.
var forwardingHeaders = [...]string{"Forwarded", "X-Forwarded-For", "X-Real-IP"}

// notLocal says why a request to a server without a token does not come
// from this machine, or "" when it does: the peer address is loopback, the
// Host names loopback (so a DNS-rebound name is refused), no proxy relayed
// it, and a browser's Origin, if any, is a loopback page.
func notLocal(r *http.Request) string {
	if !loopbackPeer(r.RemoteAddr) {
		return "peer address not loopback"
	}
	if !loopbackHost(r.Host) {
		return "Host not loopback"
	}
	for _, h := range forwardingHeaders {
		if _, ok := r.Header[http.CanonicalHeaderKey(h)]; ok {
			return "forwarded by a proxy (" + h + ")"
		}
	}
	if origin, ok := r.Header["Origin"]; ok {
		u, err := url.Parse(strings.Join(origin, ","))
		if err != nil || u.Host == "" || !loopbackHost(u.Host) {
			return "Origin not loopback"
		}
	}
	return ""
}

// loopbackHost reports whether host, a Host header or URL authority with or
// without a port, is "localhost" or a loopback IP address.
func loopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	} else {
		host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Zone() == "" && ip.Unmap().IsLoopback()
}

// loopbackPeer reports whether a request's RemoteAddr is not an IP address
// off this machine. Addresses of other transports (a Unix socket) count as
// local.
func loopbackPeer(remote string) bool {
	ap, err := netip.ParseAddrPort(remote)
	return err != nil || ap.Addr().Unmap().IsLoopback()
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

// Shutdown stops accepting connections, destroys every process (no child
// survives it), tells each connection attached to one in frames (the
// destroy's exit and destroyed) before it closes it with 1001, closes the
// other connections with 1001, and waits until every connection has ended.
// An open or resume racing it is answered with the server_shutdown error.
// A process it cannot destroy is named in the error it returns, and its
// connection is told so (SandboxOperationFailed destroy_process) before the
// close.
// If ctx ends first, the remaining connections are closed without a close
// handshake and ctx's error is returned once they are gone. Calling it
// again waits again and returns nil.
func (s *Server) Shutdown(ctx context.Context) error {
	destroyErr, ctxErr := s.shutdown(ctx)
	return errors.Join(destroyErr, ctxErr)
}

// shutdown is Shutdown; it returns the failed destroys and ctx's error apart.
func (s *Server) shutdown(ctx context.Context) (destroyErr, ctxErr error) {
	s.mu.Lock()
	s.closing = true
	s.stop()
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	sessions := make([]*session, 0, len(s.sessions))
	for _, se := range s.sessions {
		sessions = append(sessions, se)
	}
	s.mu.Unlock()
	s.hook(hookShutdown, "")

	// Destroy first: the connection attached to a process is closed by its
	// destroy, after exit and destroyed (retire), or told of a failed
	// destroy. Only then are the others (no process yet, or one racing the
	// shutdown) closed, so no client sees a close before the destroy it
	// stands for.
	var destroyers sync.WaitGroup
	var failMu sync.Mutex
	var failed []error
	for _, se := range sessions {
		destroyers.Go(func() {
			if _, err := s.destroySession(se, nil, false); err != nil {
				se.mu.Lock()
				att := se.attached
				se.mu.Unlock()
				if att != nil {
					att.send(destroyFailure(err))
				}
				failMu.Lock()
				failed = append(failed, fmt.Errorf("process %s: %w", se.id, err))
				failMu.Unlock()
			}
		})
	}
	destroyers.Wait()
	for _, c := range conns {
		c.closeWith(closeStatus{code: websocket.StatusGoingAway, reason: reasonShutdown})
	}

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
	return errors.Join(failed...), err
}

// Close is Shutdown without the close handshakes: it destroys every process,
// drops every connection and returns once all are gone. Its error names the
// processes it could not destroy.
func (s *Server) Close() error {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	destroyErr, _ := s.shutdown(ctx)
	return destroyErr
}

// containment names how the executor contains its children's trees, or
// "unknown" for an executor that does not say (Contained).
func (s *Server) containment() string {
	if c, ok := s.cfg.Executor.(Contained); ok {
		return c.ContainmentName()
	}
	return "unknown"
}

// Stats is a snapshot of a Server's state, for monitoring and tests.
type Stats struct {
	Containment string         // how each process's tree is contained (Contained), or "unknown"
	Draining    bool           // Drain was called: opens are refused
	Connections int            // connections being served
	Tombstones  int            // destroyed or expired processes remembered
	Memory      int64          // bytes promised against Config.MaxMemory: granted windows and first frames being read
	MaxMemory   int64          // Config.MaxMemory in force (its default filled in)
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
	st := Stats{Containment: s.containment(), Draining: s.draining, Connections: len(s.conns), Tombstones: len(s.tombs)}
	st.Memory, _ = s.budget.usage()
	st.MaxMemory = s.cfg.MaxMemory
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
