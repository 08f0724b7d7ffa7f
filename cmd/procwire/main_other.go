//go:build !linux

package main

import (
	"fmt"
	"os"
	"runtime"
)

// The command serves processes with package bridge, which is Linux-only,
// and its client commands share serve's flags and terminal handling; off
// Linux it only says so. The client, frames and proc packages build
// everywhere for programs of their own.
func main() {
	fmt.Fprintf(os.Stderr, "procwire: needs Linux (this is %s/%s)\n", runtime.GOOS, runtime.GOARCH)
	os.Exit(1)
}
