//go:build !linux

package client_test

// runAsChild does nothing: off Linux no test starts this binary as a child.
func runAsChild() {}
