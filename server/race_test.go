//go:build race

package server

// raceEnabled: the race detector makes the heaviest scale tests (1,000
// processes, 512 MiB of first frames) slow and close to its 8,128-goroutine
// limit; .ci/run runs them without it.
const raceEnabled = true
