//go:build linux

package server

import "github.com/procwire/procwire/bridge"

// SupportsTTY reports true: package bridge starts processes on
// pseudo-terminals.
func (BridgeExecutor) SupportsTTY() bool { return true }

var _ TTYProcess = (*bridge.Process)(nil)
