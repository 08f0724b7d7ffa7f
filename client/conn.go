package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync/atomic"

	"github.com/coder/websocket"
	"github.com/procwire/procwire/frames"
	"github.com/procwire/procwire/internal/coalesce"
	"github.com/procwire/procwire/internal/link"
)

// wsConn is one WebSocket connection with its framing buffers.
type wsConn struct {
	ws     *websocket.Conn
	co     *coalesce.Coalescer // batches a message's writes; nil: not ours to batch
	cancel context.CancelFunc  // ends the context the connection was dialled with
	rd     link.Reader         // used by whoever reads (reader)
	wbuf   []byte              // used by the holder of Process.turn
	// firstSent: the server took the first frame from the upgrade, and
	// exchange does not send it.
	firstSent bool

	// Who reads the connection: its read loop or a blocked Read (see
	// lend.go). Guarded by Process.mu.
	reader   readerState
	rerr     error         // what ended a lender's read (reader failed)
	uses     uint64        // frames lenders read, for the idle check
	loopWake chan struct{} // wakes the loop from its idle wait
}

// dial opens a connection to the server. ctx bounds the handshake only.
// processID, when known, goes in the Procwire-Process header (resume and
// destroy), the instance in Procwire-Instance: a proxy can route on them.
// first, when not nil, is the connection's first frame, offered in the
// upgrade (PROTOCOL.md §1) unless Options.FirstFrameAsMessage: when the
// server takes it, the connection's firstSent is set and exchange does not
// send it again.
func (p *Process) dial(ctx context.Context, processID string, first frames.Frame) (*wsConn, error) {
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
	sub := []string{frames.Subprotocol}
	if first != nil && !p.opts.FirstFrameAsMessage && !p.firstRefused.Load() && offersFirst(first) {
		if fs, ok := frames.FirstSubprotocol(frames.Append(nil, first)); ok {
			sub = append(sub, frames.SubprotocolFirst, fs)
		}
	}
	dialCtx, opts, co := p.dialOptions(connCtx, h, sub)
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
			if len(sub) > 1 && refusesFirst(resp.StatusCode) && ctx.Err() == nil {
				// A hop refused the request for its size: nothing was
				// served (only a 101 serves a first frame). Send this
				// frame, and every later one, as a message.
				p.firstRefused.Store(true)
				p.log.Warn("an upgrade carrying the first frame was refused; first frames go as messages from now on (Options.FirstFrameAsMessage avoids the refused request)",
					"status", resp.StatusCode)
				return p.dial(ctx, processID, first)
			}
			return nil, &httpError{URL: p.url, Status: resp.Status, StatusCode: resp.StatusCode, Err: err}
		}
		switch {
		case wrote.Load() && ctx.Err() == nil:
			// The server, or a hop, was reached and the connection then
			// cut within the upgrade's answer: a lost connection.
			err = fmt.Errorf("dial %s: %w: %w", p.url, errHandshakeLost, err)
		default:
			err = fmt.Errorf("dial %s: %w", p.url, err)
		}
		if len(sub) > 1 && !dialSaysWhy && ctx.Err() == nil {
			// A browser does not say why a dial failed: a hop may have
			// refused the request for its size. The next dial sends the
			// frame as a message.
			p.firstRefused.Store(true)
		}
		if wrote.Load() && len(sub) > 1 {
			// The first frame went with the request: it may be served.
			err = firstOfferedError{err}
		}
		return nil, err
	}
	got := ws.Subprotocol()
	firstSent := len(sub) > 1 && strings.EqualFold(got, frames.SubprotocolFirst)
	if got != frames.Subprotocol && !firstSent {
		ws.CloseNow()
		cancel()
		return nil, fmt.Errorf("dial %s: server chose subprotocol %q, want %q", p.url, got, frames.Subprotocol)
	}
	ws.SetReadLimit(frames.MaxLine)
	w := &wsConn{ws: ws, co: co, cancel: cancel, firstSent: firstSent}
	w.rd.Init(ws, nil)
	w.rd.Dec.MaxLine = frames.MaxLine
	return w, nil
}

// refusesFirst reports whether status, the answer to an upgrade that
// carried the first frame, is how a hop refuses a request for its headers'
// size: 431 (Go's net/http and so Caddy, Envoy) or 400 (nginx's "Request
// Header Or Cookie Too Large", HAProxy). Any other answer stands.
func refusesFirst(status int) bool {
	return status == http.StatusRequestHeaderFieldsTooLarge || status == http.StatusBadRequest
}

// errHandshakeLost marks a dial whose upgrade request was written and whose
// connection was then lost before a complete answer (a cut inside the
// response headers, a reset): the server was reachable, and the dial is
// worth repeating like any lost connection.
var errHandshakeLost = errors.New("connection lost during the upgrade")

// firstOfferedError is a failed dial whose upgrade request, with the first
// frame in it, was written: the server may have served the frame (an open
// may have started its process) although the dial failed.
type firstOfferedError struct{ error }

func (e firstOfferedError) Unwrap() error { return e.error }

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

// read returns the next frame. Its data is valid until the next read. A
// frame that does not decode is a *ProtocolError.
func (w *wsConn) read(ctx context.Context) (frames.Frame, error) {
	f, cl, ok := w.rd.Read(ctx)
	if !ok {
		return nil, readError(cl)
	}
	if f.Type().FromClient() {
		return nil, protocolErrorf(f.Type().String(), "a client frame from the server")
	}
	return f, nil
}

// readError is the client's error for a read that failed with cl (see
// link.Reader.Read): a *ProtocolError for what the server sent, or the
// failed read, wrapped.
func readError(cl link.Close) error {
	switch {
	case errors.Is(cl.Err, websocket.ErrMessageTooBig):
		// The library has closed the connection with 1009; the line was
		// the server's to keep short (PROTOCOL.md §2).
		return protocolErrorf("", "%s: a message over %d bytes", frames.KindLineTooLong, frames.MaxLine)
	case errors.Is(cl.Err, link.ErrBinary):
		return protocolErrorf("", "binary message")
	case cl.Abrupt:
		return fmt.Errorf("read: %w", cl.Err)
	}
	// Neither a failed read nor a binary message: one that did not decode.
	pe := &ProtocolError{Operation: "open_process", Detail: cl.Err.Error()}
	var de *frames.DecodeError
	if errors.As(cl.Err, &de) {
		pe.Field = de.Frame
		if de.Frame != "" && de.Field != "" {
			pe.Field += "."
		}
		pe.Field += de.Field
	}
	return pe
}

// exchange sends a connection's first frame and returns the answer. An
// error frame is returned as a *RemoteError.
func (w *wsConn) exchange(ctx context.Context, first frames.Frame) (frames.Frame, error) {
	if w.firstSent {
		w.firstSent = false
	} else if err := w.write(ctx, first); err != nil {
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
