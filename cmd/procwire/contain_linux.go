//go:build linux

package main

import "github.com/procwire/procwire/bridge"

// Before anything of main runs: when this program was re-executed as the
// init of a process's PID namespace (bridge.ContainPIDNamespace), be that
// init and exit.
func init() { bridge.MaybeRunInit() }
