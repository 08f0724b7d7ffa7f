// Package credit does the flow-control accounting of procwire's byte streams:
// stdin (the client sends, the server grants) and stdout (the server sends,
// the client acknowledges).
//
// All positions are absolute byte offsets from the start of a stream, as
// int64, so a repeated or reordered announcement is harmless: a limit is
// "you may send up to this offset", not "you may send n more bytes".
//
// The accounting types are small, pure and not safe for concurrent use: no
// goroutines, no I/O, no locks, modelled on x/net/http2's flow.go and
// quic-go's flow controller.
//
//   - Sender is the sending side: Take credit before sending, UpdateLimit when
//     the peer grants more, Reset (or the validating Resume) after a reconnect.
//   - Receiver is the receiving side: Receive counts bytes as they arrive and
//     refuses a peer's overrun with an *OverrunError; Consume counts bytes handed
//     on to the reader; Grant says when a new limit is worth announcing.
//
// Errors caused by the peer are typed and carry the numbers (*OverrunError,
// *OverflowError, *LimitError, *ResumeError; compare with errors.Is against
// ErrOverrun, ErrOverflow, ErrInvalidLimit, ErrBadResume). Misuse by the
// caller, such as a negative byte count, panics.
package credit
