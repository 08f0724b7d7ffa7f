package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"

	"github.com/coder/websocket"
	"github.com/procwire/procwire/frames"
	"github.com/procwire/procwire/internal/coalesce"
)

// wsConn is one WebSocket connection with its framing buffers.
type wsConn struct {
	ws      *websocket.Conn
	co      *coalesce.Coalescer // batches a message's writes; nil: not ours to batch
	cancel  context.CancelFunc  // ends the context the connection was dialled with
	dec     frames.Decoder
	rbuf    []byte // used by the one reader
	wbuf    []byte // used by whoever holds Process.wmu
	werr    error  // a write failed; guarded by Process.wmu
	tryable bool   // co.CanTry(), fixed once dialled
}

// dial opens a connection to the server. ctx bounds the handshake only.
// processID, when known, goes in the Procwire-Process header (resume and
// destroy), the instance in Procwire-Instance: a proxy can route on them.
func (p *Process) dial(ctx context.Context, processID string) (*wsConn, error) {
	h := http.Header{}
	for k, v := range p.opts.HTTPHeader {
		h[k] = append([]string(nil), v...)
	}
	if p.opts.Token != "" {
		h.Set("Authorization", "Bearer "+p.opts.Token)
	}
	if p.instanceID != "" {
		h.Set(frames.HeaderInstance, p.instanceID)
	}
	if processID != "" {
		h.Set(frames.HeaderProcess, processID)
	}
	// The connection outlives ctx: dial with a context of its own that ctx
	// cancels only while the handshake runs.
	connCtx, cancel := context.WithCancel(context.Background())
	stop := context.AfterFunc(ctx, cancel)
	dialCtx, opts, co := p.dialOptions(connCtx, h)
	var wrote atomic.Bool // the upgrade request reached a connection
	dialCtx = httptrace.WithClientTrace(dialCtx, &httptrace.ClientTrace{
		WroteRequest: func(i httptrace.WroteRequestInfo) { wrote.Store(i.Err == nil) },
	})
	ws, resp, err := websocket.Dial(dialCtx, p.url, opts)
	if !stop() && err == nil {
		ws.CloseNow()
		err = ctx.Err()
	}
	if err != nil {
		cancel()
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			return nil, &httpError{URL: p.url, Status: resp.Status, StatusCode: resp.StatusCode, Err: err}
		}
		if wrote.Load() && ctx.Err() == nil {
			// The server, or a hop, was reached and the connection then
			// cut within the upgrade's answer: a lost connection.
			return nil, fmt.Errorf("dial %s: %w: %w", p.url, errHandshakeLost, err)
		}
		return nil, fmt.Errorf("dial %s: %w", p.url, err)
	}
	if got := ws.Subprotocol(); got != frames.Subprotocol {
		ws.CloseNow()
		cancel()
		return nil, fmt.Errorf("dial %s: server chose subprotocol %q, want %q", p.url, got, frames.Subprotocol)
	}
	ws.SetReadLimit(frames.MaxLine)
	return &wsConn{ws: ws, co: co, tryable: co.CanTry(), cancel: cancel, dec: frames.Decoder{MaxLine: frames.MaxLine}}, nil
}

// errHandshakeLost marks a dial whose upgrade request was written and whose
// connection was then lost before a complete answer (a cut inside the
// response headers, a reset): the server was reachable, and the dial is
// worth repeating like any lost connection.
var errHandshakeLost = errors.New("connection lost during the upgrade")

// httpError is an upgrade the server answered without switching protocols.
type httpError struct {
	URL        string
	Status     string
	StatusCode int
	Err        error
}

func (e *httpError) Error() string {
	return fmt.Sprintf("dial %s: HTTP %s: %v", e.URL, e.Status, e.Err)
}
func (e *httpError) Unwrap() error { return e.Err }

func (w *wsConn) close() {
	w.ws.CloseNow()
	w.cancel()
}

// write sends f as one text message.
func (w *wsConn) write(ctx context.Context, f frames.Frame) error {
	w.wbuf = frames.Append(w.wbuf[:0], f)
	if err := w.ws.Write(ctx, websocket.MessageText, w.wbuf); err != nil {
		return fmt.Errorf("write %s: %w", f.Type(), err)
	}
	return nil
}

// writeMessage sends wbuf as one text message, in one write to the
// connection where the coalescer can make it so. It has no deadline: the
// held bytes are written after ws.Write returned, where a context could no
// longer end them; closing the connection does.
func (w *wsConn) writeMessage() error {
	w.co.Hold()
	err := w.ws.Write(context.Background(), websocket.MessageText, w.wbuf)
	if rerr := w.co.Release(); err == nil {
		err = rerr
	}
	return err
}

// writeMessageNoWait sends wbuf as one text message without waiting on the
// network: written false means part of it is pending in the coalescer
// (see coalesce.Coalescer.ReleaseNoWait). The coalescer must CanTry.
func (w *wsConn) writeMessageNoWait(ctx context.Context) (written bool, err error) {
	w.co.Hold()
	err = w.ws.Write(ctx, websocket.MessageText, w.wbuf)
	written, rerr := w.co.ReleaseNoWait()
	if err == nil {
		err = rerr
	}
	return written, err
}

// read returns the next frame. Its data is valid until the next read. A
// frame that does not decode is a *ProtocolError.
func (w *wsConn) read(ctx context.Context) (frames.Frame, error) {
	typ, r, err := w.ws.Reader(ctx)
	if err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	if typ != websocket.MessageText {
		return nil, protocolErrorf("", "binary message")
	}
	b := w.rbuf[:0]
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			w.rbuf = b
			if errors.Is(err, websocket.ErrMessageTooBig) {
				// The library has closed the connection with 1009; the
				// line was the server's to keep short (PROTOCOL.md §2).
				return nil, protocolErrorf("", "%s: a message over %d bytes", frames.KindLineTooLong, frames.MaxLine)
			}
			return nil, fmt.Errorf("read: %w", err)
		}
	}
	w.rbuf = b
	f, err := w.dec.Decode(b)
	if err != nil {
		pe := &ProtocolError{Operation: "open_process", Detail: err.Error()}
		var de *frames.DecodeError
		if errors.As(err, &de) {
			pe.Field = de.Frame
			if de.Frame != "" && de.Field != "" {
				pe.Field += "."
			}
			pe.Field += de.Field
		}
		return nil, pe
	}
	if f.Type().FromClient() {
		return nil, protocolErrorf(f.Type().String(), "a client frame from the server")
	}
	return f, nil
}

// exchange sends a connection's first frame and returns the answer. An
// error frame is returned as a *RemoteError.
func (w *wsConn) exchange(ctx context.Context, first frames.Frame) (frames.Frame, error) {
	if err := w.write(ctx, first); err != nil {
		return nil, err
	}
	f, err := w.read(ctx)
	if err != nil {
		return nil, err
	}
	if e, ok := f.(*frames.Error); ok {
		return nil, &RemoteError{Frame: *e}
	}
	return f, nil
}
