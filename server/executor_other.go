//go:build !linux

package server

import (
	"errors"
	"runtime"
)

// defaultExecutor is the Executor of a Config without one: there is none
// off Linux.
func defaultExecutor() (Executor, error) {
	return nil, errors.New("server: no default executor on " + runtime.GOOS + ": set Config.Executor")
}
