package frames

import (
	"encoding/base64"
	"strings"
)

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

// The first frame in the upgrade (PROTOCOL.md §1): a client may carry the
// first message of a connection (open, resume or destroy) in the upgrade
// request itself, as the subprotocol FirstSubprotocolPrefix followed by
// the message (its JSON and its '\n') in base64url without padding,
// offered together with SubprotocolFirst and Subprotocol. A server that
// takes it selects SubprotocolFirst and serves the message as the
// connection's first, sparing the round trip of sending it after the
// answer; one that does not selects Subprotocol, and the client sends the
// message as usual. The server never selects the message's subprotocol
// and never logs it: an open's environment and a resume's token travel in
// it.
const (
	SubprotocolFirst       = "procwire.v1.first"
	FirstSubprotocolPrefix = "procwire.first."
	// MaxFirstSubprotocol is the longest first-frame subprotocol, prefix
	// included, that a client offers (a larger first message is sent as a
	// message), and the longest a server must accept: proxies bound a
	// request's header lines (nginx to 8 KiB by default).
	MaxFirstSubprotocol = 4096
)

// FirstSubprotocol returns the subprotocol that carries msg, a first
// message as it would be sent (its JSON and its '\n'), and whether it is
// short enough to offer (MaxFirstSubprotocol).
func FirstSubprotocol(msg []byte) (string, bool) {
	if len(FirstSubprotocolPrefix)+base64.RawURLEncoding.EncodedLen(len(msg)) > MaxFirstSubprotocol {
		return "", false
	}
	return FirstSubprotocolPrefix + base64.RawURLEncoding.EncodeToString(msg), true
}

// FirstFromSubprotocols returns the first message carried by the offered
// subprotocols (the values of Sec-WebSocket-Protocol headers), when they
// offer SubprotocolFirst and exactly one first-frame subprotocol of at most
// MaxFirstSubprotocol bytes that is strict base64url without padding and
// not empty. Otherwise ok is false, and a server selects Subprotocol and
// reads the first message from the connection (PROTOCOL.md §1).
func FirstFromSubprotocols(offered []string) (msg []byte, ok bool) {
	marked, n := false, 0
	var token string
	for _, h := range offered {
		for p := range strings.SplitSeq(h, ",") {
			p = strings.TrimSpace(p)
			switch {
			case strings.EqualFold(p, SubprotocolFirst):
				marked = true
			case len(p) >= len(FirstSubprotocolPrefix) && strings.EqualFold(p[:len(FirstSubprotocolPrefix)], FirstSubprotocolPrefix):
				n++
				token = p[len(FirstSubprotocolPrefix):]
			}
		}
	}
	if !marked || n != 1 || len(FirstSubprotocolPrefix)+len(token) > MaxFirstSubprotocol {
		return nil, false
	}
	msg, err := base64.RawURLEncoding.Strict().DecodeString(token)
	if err != nil || len(msg) == 0 {
		return nil, false
	}
	return msg, true
}
