// Package bench measures procwire end to end on loopback with real
// children, side by side in the same run with two peers carrying the same
// child's stdio: a plain coder/websocket binary connection (no framing, no
// flow control, no replay: the floor) and golang.org/x/crypto/ssh exec
// (an in-process server, default ciphers). The workloads (workloads.go):
// stdout bulk (head -c 256M /dev/zero), stdin bulk (256 MiB into wc -c in
// 64 KiB writes, then a half-close), a 1-byte echo through cat (p50, p99),
// ACP-shaped request/response (2 KiB lines through cat) and 200 concurrent
// sessions making 64-byte round trips (round trips/s, p99, CPU per round
// trip); and the time to first byte on a cold connection (ttfb.go): a new
// connection, echo started, the first byte of its stdout. BenchmarkScale
// runs N concurrent echoing processes on one server measured from outside
// it (RunScale, also behind bench/cmd/scale).
//
// The table with ratios, and bench/results.svg; with -baseline, the same
// workloads of an older report binary interleaved round by round, and a
// before/after table:
//
//	go run ./bench/cmd/report -rounds 5
//	go run ./bench/cmd/report -rounds 5 -baseline /tmp/report-old
//
// The same workloads as benchmarks, one sub-benchmark per peer:
//
//	go test -run '^$' -bench . -benchtime 3x -count 3 ./bench
//	go test -run '^$' -bench ColdFirstByte -benchtime 1000x ./bench
//	go test -run '^$' -bench ColdPhases -benchtime 200x ./bench # procwire's, step by step
//	go test -run '^$' -bench Scale -benchtime 1x ./bench   # N=100, 1,000 and 4,000
//
// # Goroutines
//
// The workloads run on the caller's goroutine, one session at a time,
// except those over many sessions (openSessions, closeSessions,
// roundTripsAtOnce, RunScale), which start one goroutine per session and
// wait for them all (sync.WaitGroup) before they return. The peers' servers
// run in this process:
//
//   - every HTTP server (serveHTTP: procwire's and the raw WebSocket's)
//     serves on a goroutine of its own, with net/http's per connection;
//     Close shuts it down and waits for its handlers.
//   - the raw handler runs on its connection's goroutine, copying messages
//     into the child's stdin, and starts one pump, the child's stdout into
//     messages, which it waits for before it returns.
//   - the SSH server: one accept loop, one goroutine per connection
//     (serveConn, which owns the connection and closes it), and in it one
//     per session channel (serveSSHSession) and one discarding global
//     requests; a session pumps the child's stdout itself and its stdin
//     (or a terminal's input) on a goroutine that ends with the channel,
//     and discards the channel's later requests on another, which ends
//     when the channel closes. Close closes the listener and every
//     connection, then waits for the accept loop and the connections
//     (sshPeer.wg).
//   - procwire's server and client run their own goroutines (see their
//     packages), ended by Session.Close and Peer.Close.
//
// Locks: sshPeer.mu guards the set of open SSH connections and is never
// held with another.
package bench
