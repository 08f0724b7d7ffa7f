package link

import (
	"errors"
	"unicode/utf8"

	"github.com/coder/websocket"

	"github.com/procwire/procwire/frames"
)

// MaxReason is the most bytes a close reason may have (RFC 6455 §5.5).
const MaxReason = frames.MaxCloseReason

// Close says how a connection ends after a failed read: the close code
// and reason to send, or, when Abrupt, that the connection is already gone
// and no close handshake is attempted. Err is the failure that caused it.
type Close struct {
	Code   websocket.StatusCode
	Reason string
	Abrupt bool
	Err    error
}

// ErrBinary is the failure of a binary message: frames are text messages.
var ErrBinary = errors.New("frames are text messages, got a binary one")

// ReadFailure is the close of a connection whose read failed with err.
func ReadFailure(err error) Close {
	if errors.Is(err, websocket.ErrMessageTooBig) {
		// The library has already sent close 1009. Not abrupt: the rest
		// of the message is still arriving, and closing the socket with
		// it unread would reset the connection, which can destroy the
		// close frame before the peer reads it. The close handshake
		// reads and discards it (bounded by the library's 5 s).
		return Close{Code: websocket.StatusMessageTooBig, Reason: "message too big", Err: err}
	}
	if code := websocket.CloseStatus(err); code != -1 {
		return Close{Code: code, Reason: "closed by peer", Abrupt: true, Err: err}
	}
	return Close{Code: websocket.StatusAbnormalClosure, Reason: Truncate(err.Error(), MaxReason), Abrupt: true, Err: err}
}

// DecodeFailure is the close of a connection whose message did not decode
// (frames.Decoder.Decode's err): 1007 with the error, or 1009 for a line
// too long.
func DecodeFailure(err error) Close {
	code := websocket.StatusInvalidFramePayloadData
	if errors.Is(err, frames.ErrLineTooLong) {
		// The read limit lets through a message of exactly the limit,
		// which is over it without its '\n' (PROTOCOL.md §2): it is
		// closed as the read limit closes a longer one (§7).
		code = websocket.StatusMessageTooBig
	}
	return Close{Code: code, Reason: Truncate(err.Error(), MaxReason), Err: err}
}

// BinaryFailure is the close of a connection that sent a binary message.
func BinaryFailure() Close {
	return Close{Code: websocket.StatusProtocolError, Reason: ErrBinary.Error(), Err: ErrBinary}
}

// Truncate cuts s to at most n bytes at a rune boundary.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
