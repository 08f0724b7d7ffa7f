package server

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"

	"github.com/procwire/procwire/frames"
)

// reasonDraining is the reason of an open refused by a draining server.
const reasonDraining = "server_draining"

// drainingError answers an open on a draining server: nothing was started,
// and the same open is welcome on another server.
func drainingError() *frames.Error {
	return &frames.Error{Code: frames.OperationFailed, Operation: opOpen, Reason: reasonDraining,
		Message: "the server is draining before a restart: open the process on another server"}
}

// Drain prepares a rolling restart: from its call on, the server starts
// no process (an open is answered SandboxOperationFailed{operation:
// "open_process", reason: "server_draining"}, which tells a client to open
// elsewhere; an open repeating the open key of a process it holds is still
// answered with that process) and HealthHandler answers 503, while the
// processes it holds go on: resume, attach, stdin, signals and destroy are
// served as before, and a detached process still expires after its grace.
//
// Drain returns nil once no process is left (each destroyed, or expired),
// or when Shutdown or Close begins; otherwise ctx's error, wrapped, once
// ctx ends. Draining cannot be undone: call Shutdown after Drain to destroy
// what is left and close the connections. Calling Drain again waits again.
func (s *Server) Drain(ctx context.Context) error {
	s.mu.Lock()
	first := !s.draining
	s.draining = true
	held := len(s.instances)
	s.mu.Unlock()
	if first {
		s.log.Info("draining: new opens are refused", "processes", held)
		s.hook(hookDraining, "")
	}
	for {
		s.mu.Lock()
		held = len(s.instances)
		if held == 0 || s.closing {
			s.mu.Unlock()
			return nil
		}
		if s.drained == nil {
			s.drained = make(chan struct{})
		}
		drained := s.drained
		s.mu.Unlock()
		select {
		case <-drained:
		case <-s.stopping.Done():
		case <-ctx.Done():
			return fmt.Errorf("server: drain: %d processes left: %w", held, ctx.Err())
		}
	}
}

// isDraining reports whether Drain was called.
func (s *Server) isDraining() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.draining
}

// releaseInstanceLocked frees an instance's reservation and wakes Drain
// when it was the last. s.mu must be held.
func (s *Server) releaseInstanceLocked(instanceID string) {
	delete(s.instances, instanceID)
	if len(s.instances) == 0 && s.drained != nil {
		close(s.drained)
		s.drained = nil
	}
}

// refuseDrainingUpgrade answers 503 before the upgrade, and reports true,
// a request that can only be an open of a new process on a draining
// server, when it comes from a trusted proxy (Config.TrustedProxies): its
// Procwire-Instance header names an instance the server does not hold and
// it has no Procwire-Process header. A proxy told to try another server on
// 503 (nginx: proxy_next_upstream http_503; docs/operators.md) then opens
// the process there, even when it routes by instance. A request straight
// from a client is upgraded, and its open refused with server_draining
// (drainingError), which a client understands.
func (s *Server) refuseDrainingUpgrade(w http.ResponseWriter, r *http.Request, log *slog.Logger) bool {
	route := routeFrom(r)
	if route.instance == "" || route.process != "" || !s.fromTrustedProxy(r) {
		return false
	}
	s.mu.Lock()
	_, held := s.instances[route.instance]
	refuse := s.draining && !held
	s.mu.Unlock()
	if refuse {
		w.Header().Set("Retry-After", "0")
		s.refuseHTTP(w, log, http.StatusServiceUnavailable, reasonDraining,
			"server draining: open the process on another server")
	}
	return refuse
}

// fromTrustedProxy reports whether r's peer is one of the trusted proxies.
func (s *Server) fromTrustedProxy(r *http.Request) bool {
	peer, err := netip.ParseAddrPort(r.RemoteAddr)
	return err == nil && trustedAddr(peer.Addr(), s.cfg.TrustedProxies)
}
