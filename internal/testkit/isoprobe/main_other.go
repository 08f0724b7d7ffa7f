//go:build !linux

package main

import (
	"fmt"
	"os"
	"runtime"
)

// The tool is Linux-only, as the tests that run it are; off Linux it only
// says so.
func main() {
	fmt.Fprintf(os.Stderr, "isoprobe: needs Linux (this is %s)\n", runtime.GOOS)
	os.Exit(1)
}
