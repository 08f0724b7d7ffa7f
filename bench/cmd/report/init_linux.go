package main

import "github.com/procwire/procwire/bridge"

// maybeRunInit runs this program as the init of a procwire process when
// it was re-executed as one, and never returns then; otherwise it marks
// the program as able to serve as an init (bridge.MaybeRunInit).
func maybeRunInit() { bridge.MaybeRunInit() }
