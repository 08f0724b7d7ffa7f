package link

import (
	"context"
	"io"
	"slices"

	"github.com/coder/websocket"

	"github.com/procwire/procwire/frames"
)

// Guard watches the read of one message (the server bounds a message's
// time and its frames besides the payload). Reader calls Begin once the
// message's first header is read, Allow before each read of its payload
// with the bytes delivered so far and the room asked for, and End when
// the message is read. Failure maps a read error the guard caused to its
// close, or reports false.
type Guard interface {
	Begin()
	Allow(delivered, room int)
	End()
	Failure(err error) (Close, bool)
}

// Reader reads frames from a WebSocket, one message each, into a buffer it
// reuses. Only one goroutine may call Read.
type Reader struct {
	// Dec decodes the messages; its limits are the caller's to set.
	Dec   frames.Decoder
	ws    *websocket.Conn
	guard Guard // or nil
	buf   []byte
}

// Init makes r read ws, with guard (which may be nil) watching each
// message.
func (r *Reader) Init(ws *websocket.Conn, guard Guard) {
	r.ws, r.guard = ws, guard
}

// Read reads one message and decodes it. The frame's data is valid until
// the next Read. When ok is false, cl says how the connection ends.
func (r *Reader) Read(ctx context.Context) (f frames.Frame, cl Close, ok bool) {
	typ, msg, err := r.ws.Reader(ctx)
	if err != nil {
		return nil, ReadFailure(err), false
	}
	g := r.guard
	if g != nil {
		g.Begin()
	}
	buf := r.buf[:0]
	for {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, max(cap(buf), 512))
		}
		if g != nil {
			g.Allow(len(buf), cap(buf)-len(buf))
		}
		n, err := msg.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			r.buf = buf[:0]
			if g != nil {
				g.End()
				if cl, ok := g.Failure(err); ok {
					return nil, cl, false
				}
			}
			return nil, ReadFailure(err), false
		}
	}
	r.buf = buf[:0]
	if g != nil {
		g.End()
	}
	if typ != websocket.MessageText {
		return nil, BinaryFailure(), false
	}
	f, err = r.Dec.Decode(buf)
	if err != nil {
		return nil, DecodeFailure(err), false
	}
	return f, Close{}, true
}

// Reset gives r a fresh decoder, and drops its buffer when it grew past
// keep bytes, so that a big message's scratch space is not kept.
func (r *Reader) Reset(dec frames.Decoder, keep int) {
	r.Dec = dec
	if cap(r.buf) > keep {
		r.buf = nil
	}
}
