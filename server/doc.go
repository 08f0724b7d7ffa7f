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
//
// # Goroutines
//
// Per connection (conn):
//   - the handler, ServeHTTP's goroutine (conn.serve): reads every frame.
//     It serves the first (open, resume, destroy: lifecycle.go), then each
//     frame of the session by a session method (session_frames.go) whose
//     result it maps to an answer, a wakeup or a close status (conn.handle).
//     It owns the decoder and read buffer; it alone pushes stdin.
//   - the writer (conn.writeLoop): the only goroutine that waits on the
//     socket to write. It owns what was sent (offsets, replay mark, hello)
//     under the connection's writer lock.
//   - the heartbeat (conn.heartbeat), and timers: the close deadline
//     (closeWith) and the close of the socket when the context ends.
//
// Per session (session, which outlives its connections):
//   - the pump (session.pump): forwards the process's changes to whichever
//     connection is attached, delivers the signals waiting for stdin
//     (sigq), logs the exit; it ends when the session is retired.
//   - the grace timer while detached (armGraceLocked, then Server.expire),
//     which destroys the process.
//   - the process's own goroutines (bridge: output and stdin pumps). Through
//     ChangeNotifier they call session.changed, which wakes the attached
//     writer or, from an output pump with no process lock held, writes the
//     output itself when the writer is idle (conn.kick, which only tries
//     the writer lock).
//
// Shutdown destroys the processes from one goroutine per session.
//
// # Lock order
//
// A lock may be taken while holding those above it, never the reverse:
//
//  1. the connection's writer lock (held by the writer, or by a kick that
//     got it without waiting);
//  2. session.in, the stdin order (handler only: from a stdin or
//     stdin_close frame's check to the end of its push); never held with
//     the writer lock;
//  3. session.mu (the session's state, stdin credit, signals, attachment);
//  4. then any of: the process's locks (Stdout, Stderr, Exit, Signal,
//     stdin), Server.mu (a failed destroy asks whether the server closes),
//     the connection's answer queue, the memory budget.
//
// Server.mu is never held while taking a session's lock. No pipe is
// written under session.mu: PushStdin and CloseStdin are called holding
// session.in alone, the credit taken before (under session.mu) and the
// outcome recorded after (session.pushed).
package server
