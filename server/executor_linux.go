//go:build linux

package server

import (
	"context"

	"github.com/procwire/procwire/bridge"
	"github.com/procwire/procwire/proc"
)

var _ Process = (*bridge.Process)(nil)

// BridgeExecutor is the default Executor on Linux: it starts the child on
// this machine with package bridge, in Containment (nil means
// bridge.DefaultContainment: a cgroup, else a PID namespace, else the
// process group).
type BridgeExecutor struct {
	Containment *bridge.Containment
}

func (e BridgeExecutor) containment() *bridge.Containment {
	if e.Containment != nil {
		return e.Containment
	}
	return bridge.DefaultContainment()
}

// Start starts the child in the executor's containment.
func (e BridgeExecutor) Start(_ context.Context, req proc.Request, cfg proc.Config) (Process, error) {
	p, err := e.containment().Start(req, &cfg)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// Limits returns the limits of the containment, in force for every
// process: it makes BridgeExecutor a Limiter.
func (e BridgeExecutor) Limits() proc.Limits { return e.containment().Limits() }

// ContainmentName describes the containment, such as "cgroup under
// /sys/fs/cgroup/procwire.service" or "process_group".
func (e BridgeExecutor) ContainmentName() string { return e.containment().String() }

// defaultExecutor is the Executor of a Config without one.
func defaultExecutor() (Executor, error) { return BridgeExecutor{}, nil }

// *bridge.Process tells when its stdin waits on a full pipe.
var _ StdinBlocker = (*bridge.Process)(nil)
