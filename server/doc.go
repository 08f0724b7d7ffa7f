// Package server is the server side of procwire: an http.Handler that
// accepts WebSocket connections speaking the procwire.v1 subprotocol and
// runs one child process per session, carrying its stdio as frames.
//
// Create a Server with New and mount it on any HTTP server:
//
//	srv, err := server.New(server.Config{Token: token})
//	if err != nil { ... }
//	httpSrv := &http.Server{Addr: addr, Handler: srv}
//	go httpSrv.ListenAndServe()
//	...
//	srv.Shutdown(ctx) // destroys every child, closes every connection with 1001
//
// PROTOCOL.md (in the repository root) is normative; this package implements
// its server side exactly: authentication on the upgrade, sessions that
// outlive connections for a reconnect grace, stdin credit, a bounded stdout
// replay window, a lossy stderr ring, signals, idempotent destroy, tombstones
// and at most one live process per instance.
//
// Memory is bounded by the declared windows whatever the peer does: each
// process holds at most its stdout window, stdin window and stderr ring
// (taken as bytes arrive, given back as they are acknowledged or consumed),
// each connection one frame being read and one being written. The server as
// a whole promises at most Config.MaxMemory: the windows it granted plus the
// first frames being read; an open or a first frame beyond it is refused
// with SandboxCapabilityUnavailable{requirement: "resources"}.
//
// A child is started by an Executor, by default bridge.Start (Linux); an
// embedding provider may supply its own, keeping the contract of package
// proc, and the package then builds on any platform. Call CheckListenAddr before listening: a
// server without a token must listen on loopback only.
package server
