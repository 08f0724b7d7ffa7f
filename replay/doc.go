// Package replay holds the output a procwire server has sent but the client
// has not yet acknowledged, so that a client that reconnects can resume
// without losing a byte.
//
// A Buffer is the lossless store for stdout. It is bounded by its capacity
// (the stdout window): the producer appends what fits (Append returns how
// much), stops reading the child's pipe while Room() is 0, and resumes when an
// Ack frees space. A sender reads from any offset it still holds with Slice
// (zero-copy) or CopyAt. Asking for bytes that were already freed is a
// *GapError, never a silent skip. CloseEOF records where the stream ended, so
// the end of stream is replayed like data.
//
// A Ring is the lossy store for stderr: it always accepts a write and drops
// the oldest bytes when full; a reader learns how much it missed from the
// offset Slice returns.
//
// Memory tracks what is held, with the capacity as a ceiling: a Buffer
// stores its bytes in fixed-size chunks from a shared pool (internal/chunk),
// taken as bytes arrive and given back as soon as they are all acknowledged,
// so an empty Buffer holds no storage whatever its capacity. A Ring grows its
// storage as bytes arrive, up to its capacity.
//
// All offsets are absolute byte offsets from the start of the stream. Neither
// type is safe for concurrent use (the owner holds a lock) and neither starts
// goroutines. In steady state appending, acknowledging and reading allocate
// nothing: chunks given back are reused.
package replay
