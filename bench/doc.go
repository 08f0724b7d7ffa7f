// Package bench holds end-to-end benchmarks of procwire: a child's stdout
// streamed through a procwire server and client on loopback, measured in the
// same run against the same child streamed over a plain coder/websocket
// binary connection, and the latency of a one-byte echo through cat.
//
// Run them with:
//
//	go test -run '^$' -bench . -benchtime 3x -count 3 ./bench
package bench
