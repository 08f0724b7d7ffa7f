package frames

// HTTP headers a client sends on every WebSocket upgrade so that a proxy in
// front of several servers can route every connection of one process to
// the same server (PROTOCOL.md §1). The server checks that they agree with
// the connection's first frame.
const (
	// HeaderInstance carries the instance id: on every open, and on a
	// resume or destroy when the client knows it.
	HeaderInstance = "Procwire-Instance"
	// HeaderProcess carries the process id on a resume and on a destroy
	// that names its process by id.
	HeaderProcess = "Procwire-Process"
)
