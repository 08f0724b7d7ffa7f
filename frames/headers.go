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

// BearerSubprotocolPrefix starts the WebSocket subprotocol that carries the
// bearer token for a client that cannot set an Authorization header (a
// browser's WebSocket): "procwire.bearer." followed by the token in
// base64url without padding (RFC 4648 §5), offered besides Subprotocol. A
// server never selects it (PROTOCOL.md §1).
const BearerSubprotocolPrefix = "procwire.bearer."
