// Package link is what the server and the client share about carrying
// frames over one WebSocket connection, whichever end they are:
//
//   - Reader reads one message into a reused buffer and decodes it, and
//     ReadFailure, DecodeFailure and BinaryFailure are the one mapping
//     from a failed read or decode to the close it calls for.
//   - Heartbeat pings the peer every interval.
//   - Turn decides who writes the connection's stream frames: the
//     goroutine that produced them (a caller, without waiting on the
//     network), or the connection's writer goroutine. Its State replaces
//     flags.
//
// # Goroutines and locks
//
// The package starts no goroutine. Its users run these:
//
//   - the reader, the only one that calls Reader.Read (and the Guard's
//     hooks, from within it);
//   - the heartbeat, in Heartbeat, which writes pings (the WebSocket
//     library serialises them with the other writes);
//   - the writer, the connection's writer goroutine: it takes the Turn
//     with Lock or Begin, writes, and gives it back with Unlock or End;
//     Close ends the callers' writes for good;
//   - callers (a process's output pump, a client's Write): Turn.Kick
//     takes the Turn only if it is free (TryLock) and writes without
//     waiting; otherwise it leaves a mark (dirty) and wakes the writer.
//
// Turn's mutex is the only lock here. Whoever holds it owns the state and
// the connection's write buffer; under it, a user may take its own locks
// (the server's process buffers, the client's machine), never the other
// way round: no one may wait for the Turn while holding a lock a holder of
// the Turn takes. The coalescer's mutex (internal/coalesce) nests inside.
package link
