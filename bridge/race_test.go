//go:build race

package bridge

// raceEnabled: under the race detector every init, a copy of the test
// binary, takes about 15 MB, so the tests that start thousands of
// processes start fewer.
const raceEnabled = true
