//go:build race

package rsstest

// raceEnabled: the cases run once, without the race detector, in .ci/run
// (the server measured is a child built without it either way).
const raceEnabled = true
