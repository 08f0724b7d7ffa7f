//go:build !unix

package coalesce

import "net"

// nonBlockingWriter has no non-blocking write to offer here: the
// connection's writer goroutine sends every message.
func nonBlockingWriter(net.Conn) tryWriter { return nil }
