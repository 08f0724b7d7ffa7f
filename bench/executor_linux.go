//go:build linux

package bench

import (
	"github.com/procwire/procwire/bridge"
	"github.com/procwire/procwire/server"
)

// procwireExecutor starts procwire's children as procwire serve does: in
// the best containment, with a warm init (serve's --warm-init, on by
// default). close ends the warm init.
func procwireExecutor() (exec server.Executor, close func() error, err error) {
	c, err := bridge.NewContainment(bridge.ContainOptions{WarmInit: true, WarmInits: 2})
	if err != nil {
		return nil, nil, err
	}
	return server.BridgeExecutor{Containment: c}, c.Close, nil
}
