//go:build linux && procwire_testhook

package main

import (
	"fmt"
	"os"
)

// A binary built with -tags procwire_testhook panics at the point
// PROCWIRE_TEST_PANIC names ("output": in the goroutine copying the remote
// output, which is not main's), and with PROCWIRE_TEST_PANIC_BARE=1 in a
// goroutine of its own that nothing recovers (only the watchdog restores
// the terminal then): the tmux tests check that the local terminal is
// restored.
func init() {
	testHook = func(point string) {
		if os.Getenv("PROCWIRE_TEST_PANIC") != point {
			return
		}
		msg := fmt.Sprintf("procwire_testhook: panic at %s", point)
		if os.Getenv("PROCWIRE_TEST_PANIC_BARE") != "1" {
			panic(msg)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			panic(msg)
		}()
		<-done
	}
}
