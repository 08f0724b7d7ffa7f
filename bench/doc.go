// Package bench holds end-to-end benchmarks of procwire: a child's stdout
// streamed through a procwire server and client on loopback, measured in the
// same run against the same child streamed over a plain coder/websocket
// binary connection, and the latency of a one-byte echo through cat; and
// BenchmarkScale, N concurrent echoing processes on one server measured
// from outside it (RunScale, also behind bench/cmd/scale).
//
// Run them with:
//
//	go test -run '^$' -bench . -benchtime 3x -count 3 ./bench
//	go test -run '^$' -bench Scale -benchtime 1x ./bench   # N=100, 1,000 and 4,000
package bench
