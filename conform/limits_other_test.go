//go:build !linux

package conform_test

import (
	"testing"

	"github.com/procwire/procwire/server"
)

// limitedExecutor: no limits off Linux (the limits case skips).
func limitedExecutor(t *testing.T) (server.Executor, bool) { return nil, false }
