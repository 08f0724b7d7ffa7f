//go:build linux

package server

import (
	"context"

	"github.com/procwire/procwire/bridge"
	"github.com/procwire/procwire/proc"
)

var _ Process = (*bridge.Process)(nil)

// BridgeExecutor is the default Executor on Linux: it starts the child with
// bridge.Start on this machine.
type BridgeExecutor struct{}

// Start calls bridge.Start.
func (BridgeExecutor) Start(_ context.Context, req proc.Request, cfg proc.Config) (Process, error) {
	p, err := bridge.Start(req, &cfg)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// defaultExecutor is the Executor of a Config without one.
func defaultExecutor() (Executor, error) { return BridgeExecutor{}, nil }
