//go:build linux

package client

import "fmt"

// Constructors of the errors the client builds on paths too slow or too
// rare to drive in a unit test (a grace running out, a server breaking the
// wire), with the same wrapping as the code that builds them.

// ProtocolViolation is what the state machine returns for a frame out of
// order (machine.go).
func ProtocolViolation() error {
	return protocolErrorf("stdout.off", "offset %d, expected %d", 10, 0)
}

// EvidenceMismatch is what the evidence check returns (evidence.go).
func EvidenceMismatch() error {
	return &ProtocolError{Operation: identityOperation, Field: "evidence.executable", Detail: fmt.Sprintf("%q, expected %q", "sh", "cat")}
}
