//go:build !linux

package bench

// maybeRunInit does nothing: procwire's init is Linux's.
func maybeRunInit() {}
