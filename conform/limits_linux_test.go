//go:build linux

package conform_test

import (
	"os"
	"testing"

	"github.com/procwire/procwire/bridge"
	"github.com/procwire/procwire/server"
)

// serverLimits are the limits of the test server, when this machine can
// enforce them (the limits case then runs in full).
var serverLimits = bridge.Limits{Pids: 4096, Memory: 1 << 30}

// limitedExecutor is an executor enforcing serverLimits, or nil (and
// false) when this machine cannot enforce them (a failure under CI=true).
func limitedExecutor(t *testing.T) (server.Executor, bool) {
	c, err := bridge.NewContainment(bridge.ContainOptions{Limits: serverLimits})
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("this machine cannot enforce %+v: %v", serverLimits, err)
		}
		t.Logf("this machine cannot enforce %+v (the limits case skips): %v", serverLimits, err)
		return nil, false
	}
	return server.BridgeExecutor{Containment: c}, true
}
