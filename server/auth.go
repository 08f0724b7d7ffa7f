package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"strings"

	"github.com/procwire/procwire/frames"
)

// bearerSubprotocol returns the token carried by the request's offered
// subprotocols (frames.BearerSubprotocolPrefix, PROTOCOL.md §1): present
// reports whether one was offered at all, ok whether exactly one was and
// it is well-formed base64url without padding.
func bearerSubprotocol(r *http.Request) (token []byte, present, ok bool) {
	n := 0
	for _, h := range r.Header.Values("Sec-WebSocket-Protocol") {
		for p := range strings.SplitSeq(h, ",") {
			p = strings.TrimSpace(p)
			if len(p) < len(frames.BearerSubprotocolPrefix) ||
				!strings.EqualFold(p[:len(frames.BearerSubprotocolPrefix)], frames.BearerSubprotocolPrefix) {
				continue
			}
			n++
			b, err := base64.RawURLEncoding.Strict().DecodeString(p[len(frames.BearerSubprotocolPrefix):])
			if err != nil || len(b) == 0 {
				return nil, true, false
			}
			token = b
		}
	}
	if n != 1 {
		return nil, n > 0, false
	}
	return token, true, true
}

// authorized reports whether r carries the configured bearer token, in an
// Authorization header or a bearer subprotocol (PROTOCOL.md §1). When both
// are present both must carry it: a request is never let in by one
// credential while it carries a wrong other. Both sides of every compare
// are hashed first, so that it is constant-time whatever the lengths.
func (s *Server) authorized(r *http.Request) bool {
	if s.cfg.Token == "" {
		return true
	}
	sub, subPresent, subOK := bearerSubprotocol(r)
	h, hasHeader := r.Header["Authorization"]
	if !hasHeader && !subPresent {
		return false
	}
	if hasHeader {
		const scheme = "bearer "
		if len(h) != 1 || len(h[0]) < len(scheme) || !strings.EqualFold(h[0][:len(scheme)], scheme) {
			return false
		}
		if !s.tokenMatches([]byte(h[0][len(scheme):])) {
			return false
		}
	}
	if subPresent && (!subOK || !s.tokenMatches(sub)) {
		return false
	}
	return true
}

func (s *Server) tokenMatches(token []byte) bool {
	got := sha256.Sum256(token)
	return subtle.ConstantTimeCompare(got[:], s.tokenSum[:]) == 1
}
