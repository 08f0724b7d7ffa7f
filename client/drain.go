package client

import "errors"

// reasonServerDraining is the reason of an open refused by a server that
// drains before a restart (PROTOCOL.md §7).
const reasonServerDraining = "server_draining"

// ErrServerDraining matches (errors.Is) the *RemoteError of an open that
// a draining server refused: it started nothing and wants the process
// opened on another server. Open repeats such an open on a new connection,
// which a load balancer routes to another server, within
// Options.ResumeBudget attempts; the error is returned when every attempt
// met a draining server.
var ErrServerDraining = errors.New("procwire: the server is draining: open on another server")

// Is reports whether e is the refusal target names: ErrServerDraining for
// an open refused with reason server_draining.
func (e *RemoteError) Is(target error) bool {
	return target == ErrServerDraining && e.Frame.Reason == reasonServerDraining
}
