package client

import (
	"encoding/base64"

	"github.com/procwire/procwire/frames"
)

// bearerSubprotocol is the subprotocol that carries token where no header
// can be sent (a browser's WebSocket, js/wasm): "procwire.bearer." and the
// token in base64url without padding (PROTOCOL.md §1). It is offered after
// procwire.v1, which the server selects.
func bearerSubprotocol(token string) string {
	return frames.BearerSubprotocolPrefix + base64.RawURLEncoding.EncodeToString([]byte(token))
}
