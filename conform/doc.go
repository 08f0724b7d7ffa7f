// Package conform checks that a server speaks procwire.v1 (PROTOCOL.md):
// it runs conformance cases against a live endpoint and reports each as
// passed, failed with the first deviation it observed, or skipped with the
// reason. It is what "procwire conform URL" runs, and a library for Go
// programs that want the same checks.
//
//	rep, err := conform.Run(ctx, conform.Config{URL: "ws://127.0.0.1:7777/", Token: tok})
//	rep.WriteTable(os.Stdout)
//	if !rep.OK() { ... }
//
// The cases use their own raw WebSocket peer (coder/websocket and package
// frames), not the procwire client, because conformance must observe the
// wire itself: every frame the server sends is decoded strictly and
// checked against the invariants of a connection (contiguous stdout within
// the window, one stdout_eof and one exit per connection) as well as
// against what the case expects.
//
// Most cases start processes on the target with a POSIX shell and a few
// common commands (sh, cat, wc, head, sleep); a first probe lists the
// commands the target lacks, and a case needing one is a recorded skip
// naming it. Cases that must wait out the server's grace or heartbeat are
// skipped when those are longer than SlowThreshold, unless Config.Slow.
// A run leaves nothing behind: every process a case opened is destroyed
// when the case ends.
//
// # Goroutines and locks
//
//   - The case goroutine. Run runs the cases one at a time, each in a
//     goroutine of its own (runner.runCase), so that T.Fatalf and T.Skipf
//     end it with runtime.Goexit as testing.T does; Run waits for it, and
//     for its cleanup, before the next. It owns T and every peer's stream
//     state (next, observe, send). The probe (probeTarget, once per run)
//     runs the same way.
//   - One reader per peer (peer.read), except a manual peer's. It owns the
//     WebSocket's reads and hands each message to the case through peer.in,
//     so that the server's pings are answered while the case writes. It
//     ends with the connection, or when cut closes peer.done; cut waits
//     for it.
//
// runner.mu guards only the list of the running case's peers (track,
// cleanup) and is never held while taking another lock or doing I/O: there
// is no lock order.
package conform
