package frames

// Close codes of wire v1, the table of PROTOCOL.md §7. The codes below 4000
// are the WebSocket's own (RFC 6455), equal to coder/websocket's Status*
// names, which Go code may use as well; they are listed so that the table
// is whole here and in testdata/golden/constants.json, which the TypeScript
// client and other languages read. A test pins each against PROTOCOL.md.
const (
	// CloseNormal follows destroyed, or an error answering a first frame.
	CloseNormal = 1000
	// CloseGoingAway: the server is shutting down (or a heartbeat failed);
	// alone it never says the process was destroyed.
	CloseGoingAway = 1001
	// CloseProtocolError: a frame that is valid but not allowed now.
	CloseProtocolError = 1002
	// CloseInvalidFrame: a frame that does not decode; the reason is the
	// DecodeError.
	CloseInvalidFrame = 1007
	// ClosePolicyViolation: stdin past the credit limit.
	ClosePolicyViolation = 1008
	// CloseMessageTooBig: a message over its line limit.
	CloseMessageTooBig = 1009
	// CloseInternalError: a broken invariant of the server itself.
	CloseInternalError = 1011
	// CloseResumedElsewhere: the process is held by another connection now,
	// one that resumed it after this one, or one accepted before this
	// connection's resume or repeated open.
	CloseResumedElsewhere = 4001
)

// Close reasons PROTOCOL.md §7 states, with CloseResumedElsewhere.
const (
	// ReasonResumedElsewhere closes the connection a newer one took the
	// process from.
	ReasonResumedElsewhere = "resumed elsewhere"
	// ReasonAttachedToNewer refuses a resume or repeated open from a
	// connection accepted before the one holding the process.
	ReasonAttachedToNewer = "attached to a newer connection"
)

// MaxCloseReason is the longest close reason, in bytes (PROTOCOL.md §7:
// what fits a WebSocket close frame's 125-byte payload after the code).
const MaxCloseReason = 123
