// Package frames is the wire format of procwire v1 (PROTOCOL.md): a Go type
// for every frame, a canonical encoder and a strict decoder.
//
// A frame is one JSON object on one line. Append encodes a frame to its
// canonical bytes; Decoder.Decode (or Decode) turns one line back into a
// typed frame, or refuses it with a *DecodeError naming the frame type, the
// field and the rule broken (PROTOCOL.md §8). The same codec serves both
// framings: one frame per WebSocket message (Decode the message) and NDJSON
// over any byte stream (Reader and Writer).
//
//	var w = frames.NewWriter(conn)
//	err := w.WriteFrame(&frames.Stdout{Off: 0, Data: []byte("hello\n")})
//
//	r := frames.NewReader(conn, frames.MaxFirstLine)
//	first, err := r.Next()
//	r.SetMaxLine(frames.MaxLine)
//	for {
//		f, err := r.Next()
//		...
//		switch f := f.(type) {
//		case *frames.Stdin: // f and f.Data are valid until the next call
//		}
//	}
//
// The decoder has its own JSON scanner, because encoding/json accepts
// duplicate keys and matches keys regardless of case. It refuses anything
// but the documented shape: unknown types and fields, wrong JSON types,
// out-of-range integers, bad base64, and the contract's bounds. When a line
// breaks several rules, the first met reading from the left is reported,
// after the frame type has been resolved from the "type" member wherever it
// stands; within one value the order is syntax, JSON type, then the value's
// own rules. The golden vectors in testdata/golden pin every case.
//
// The wire's constants are defined here once: the bounds (MaxData, MaxLine,
// MinWindow, ...), the WebSocket close codes of PROTOCOL.md §7 (Close*,
// equal to coder/websocket's where the WebSocket defines them) and the
// reasons of CloseResumedElsewhere. testdata/golden/constants.json carries
// them as data for clients in other languages (the TypeScript client's
// test reads it).
//
// Data frames (stdin, stdout, stderr) take a fast path in both directions:
// no reflection and no allocation per frame once buffers have grown. The
// decoder recognises the canonical prefix of a data frame and falls back to
// the general strict path for anything else; both give the same results.
//
// Validate applies the decoder's rules to a frame built in Go. Frames of the
// hot types returned by a Decoder or Reader are reused by the next call;
// copy what must outlive it.
package frames
