//go:build !linux

package bench

import "github.com/procwire/procwire/server"

// procwireExecutor is the server's default off Linux (executor_linux.go
// says what it is there).
func procwireExecutor() (exec server.Executor, close func() error, err error) {
	return nil, func() error { return nil }, nil
}
