// Package bench measures procwire end to end on loopback with real
// children, side by side in the same run with two peers carrying the same
// child's stdio: a plain coder/websocket binary connection (no framing, no
// flow control, no replay: the floor) and golang.org/x/crypto/ssh exec
// (an in-process server, default ciphers). The workloads (workloads.go):
// stdout bulk (head -c 256M /dev/zero), stdin bulk (256 MiB into wc -c in
// 64 KiB writes, then a half-close), a 1-byte echo through cat (p50, p99),
// ACP-shaped request/response (2 KiB lines through cat) and 200 concurrent
// sessions making 64-byte round trips (round trips/s, p99, CPU per round
// trip). BenchmarkScale runs N concurrent echoing processes on one server
// measured from outside it (RunScale, also behind bench/cmd/scale).
//
// The table with ratios, and bench/results.svg:
//
//	go run ./bench/cmd/report -rounds 5
//
// The same workloads as benchmarks, one sub-benchmark per peer:
//
//	go test -run '^$' -bench . -benchtime 3x -count 3 ./bench
//	go test -run '^$' -bench Scale -benchtime 1x ./bench   # N=100, 1,000 and 4,000
package bench
