//go:build !linux

package server

// runAsChild does nothing: off Linux no test starts this binary as a child.
func runAsChild() {}
