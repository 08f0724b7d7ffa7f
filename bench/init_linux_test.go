package bench

import "github.com/procwire/procwire/bridge"

// maybeRunInit runs the test binary as the init of a procwire process
// when it was re-executed as one (bridge.MaybeRunInit).
func maybeRunInit() { bridge.MaybeRunInit() }
