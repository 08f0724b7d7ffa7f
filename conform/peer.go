package conform

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/procwire/procwire/frames"
)

// closedError is how a peer's read ends: the close code and reason the
// server sent, or code -1 when the connection ended without a close frame.
type closedError struct {
	code   websocket.StatusCode
	reason string
	err    error
}

func (e *closedError) Error() string {
	if e.code == -1 {
		return fmt.Sprintf("connection lost without a close frame (%v)", e.err)
	}
	return fmt.Sprintf("closed %d %q", int(e.code), e.reason)
}

func (e *closedError) Unwrap() error { return e.err }

// deviation is a frame the server should not have sent: it does not decode,
// or it breaks an invariant every connection keeps (contiguous stdout, one
// exit per connection, stdout within the window).
type deviation struct{ msg string }

func (e *deviation) Error() string { return e.msg }

// peer is the conformance run's own raw client: one WebSocket connection,
// frames encoded and decoded with package frames, and the invariants of
// every connection checked on every frame the server sends. It is not the
// procwire client: conformance observes the wire itself.
type peer struct {
	ws   *websocket.Conn
	resp *http.Response
	dec  frames.Decoder

	// The reader goroutine reads every message into in, so that pings are
	// answered even while a case writes and does not read; it ends when
	// the connection does (after its last message, the error) or when cut
	// closes done. A manual peer has none: it answers pings only while
	// next reads, which is how the heartbeat case plays a dead peer.
	in         chan message
	done       chan struct{}
	readerDone chan struct{}
	cutOnce    sync.Once
	readErr    error // the reader's final error, once in is closed

	// pings counts pings received from the server (the heartbeat case).
	pings *atomic.Int64

	// Stream state of this connection, kept by next.
	stdoutEnd   int64 // offset after the last stdout byte received here
	stdoutStart int64 // the first offset expected on this connection
	// anyStart: the first stdout may start anywhere (the case checks it);
	// cleared by that first stdout.
	anyStart   bool
	eof        *frames.StdoutEOF
	exit       *frames.Exit
	window     int64 // stdout window announced; 0 until opened
	acked      int64 // last ack sent
	limit      int64 // latest stdin limit announced
	maxLimit   int64 // the largest stdin limit ever announced here
	stdout     []byte
	stderr     []byte
	hello      frames.Frame // opened or resumed
	outEnc     string       // the output_enc opened chose ("" after a resume: unknown)
	asked      asked        // what the open or resume sent here asked for, kept by send
	compressed int          // stdout and stderr frames that arrived compressed
}

// asked is what the first frame sent on a connection asked for, which
// bounds what the server may answer on it.
type asked struct {
	pings bool // the open or resume asked for pings
	// open: an open was sent, listing exitReasons and carrying limits or
	// not; after a resume or a destroy the open is not known here.
	open        bool
	exitReasons string
	limits      bool
}

// dialOptions says how a peer connects.
type dialOptions struct {
	noToken      bool
	token        string // overrides the run's token when set
	subprotocols []string
	noSubproto   bool
	header       http.Header
	manual       bool // no reader goroutine: pings are answered only while next reads
}

// message is one read of the reader goroutine.
type message struct {
	typ websocket.MessageType
	b   []byte
	err error
}

// dial connects to the target. A refused upgrade returns the HTTP response
// (its body read and closed) with the error.
func (r *runner) dial(ctx context.Context, o dialOptions) (*peer, *http.Response, error) {
	h := http.Header{}
	for k, v := range r.cfg.Header {
		h[k] = append([]string(nil), v...)
	}
	for k, v := range o.header {
		h[k] = v
	}
	tok := r.cfg.Token
	if o.token != "" {
		tok = o.token
	}
	if tok != "" && !o.noToken {
		h.Set("Authorization", "Bearer "+tok)
	}
	sub := []string{frames.Subprotocol}
	if o.subprotocols != nil || o.noSubproto {
		sub = o.subprotocols
	}
	pings := new(atomic.Int64)
	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	ws, resp, err := websocket.Dial(dctx, r.cfg.URL, &websocket.DialOptions{
		HTTPClient:      r.cfg.HTTPClient,
		HTTPHeader:      h,
		Subprotocols:    sub,
		CompressionMode: websocket.CompressionDisabled,
		OnPingReceived: func(context.Context, []byte) bool {
			pings.Add(1)
			return true
		},
	})
	if resp != nil && resp.Body != nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		resp.Body.Close()
	}
	if err != nil {
		return nil, resp, fmt.Errorf("dial %s: %w", r.cfg.URL, err)
	}
	// A server frame longer than MaxLine is itself a deviation; one byte
	// more is read so that it is seen as such rather than cut.
	ws.SetReadLimit(frames.MaxLine + 1)
	p := &peer{ws: ws, resp: resp, pings: pings, dec: frames.Decoder{MaxLine: frames.MaxLine},
		done: make(chan struct{}), readerDone: make(chan struct{})}
	if o.manual {
		close(p.readerDone)
	} else {
		p.in = make(chan message, readQueue)
		go p.read()
	}
	r.track(p)
	return p, resp, nil
}

// readQueue bounds the messages read ahead of the case.
const readQueue = 1024

// read is the reader goroutine.
func (p *peer) read() {
	defer close(p.readerDone)
	for {
		// cut's CloseNow ends a pending Read.
		typ, b, err := p.ws.Read(context.Background())
		select {
		case p.in <- message{typ, b, err}:
		case <-p.done:
			return
		}
		if err != nil {
			return
		}
	}
}

// dialTimeout bounds one WebSocket handshake.
const dialTimeout = 30 * time.Second

// writeTimeout bounds one write: a server that stops reading below the
// stdin limit makes a write hang, which is a deviation, not a hang of the
// run.
const writeTimeout = 30 * time.Second

// send encodes and writes one frame.
func (p *peer) send(ctx context.Context, f frames.Frame) error {
	switch f := f.(type) {
	case *frames.Ack:
		p.acked = f.Stdout
	case *frames.Open:
		p.asked = asked{pings: f.Pings, open: true, exitReasons: f.ExitReasons, limits: f.Limits != nil}
	case *frames.Resume:
		p.asked.pings = f.Pings
	}
	return p.sendRaw(ctx, frames.Append(nil, f))
}

// sendRaw writes one text message as it is.
func (p *peer) sendRaw(ctx context.Context, b []byte) error {
	ctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	if err := p.ws.Write(ctx, websocket.MessageText, b); err != nil {
		return fmt.Errorf("write %s: %w%s", quoteLine(b), err, p.closeCause())
	}
	return nil
}

// closeCause looks, briefly, for the close the server sent before a write
// failed, and names it.
func (p *peer) closeCause() string {
	if p.in == nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for {
		if _, _, err := p.readMessage(ctx); err == nil {
			continue
		} else if ce, ok := errors.AsType[websocket.CloseError](err); ok {
			return fmt.Sprintf(" (the server had closed %d %q)", int(ce.Code), ce.Reason)
		}
		return ""
	}
}

// cut drops the connection without a close handshake, as a network fault
// would, and waits for the reader goroutine.
func (p *peer) cut() {
	p.cutOnce.Do(func() { close(p.done) })
	_ = p.ws.CloseNow()
	<-p.readerDone
}

// readMessage returns the next message: from the reader goroutine, or read
// here for a manual peer. A ctx that ends does not end the connection of a
// peer with a reader.
func (p *peer) readMessage(ctx context.Context) (websocket.MessageType, []byte, error) {
	if p.in == nil {
		return p.ws.Read(ctx)
	}
	if p.readErr != nil {
		return 0, nil, p.readErr
	}
	select {
	case m := <-p.in:
		if m.err != nil {
			p.readErr = m.err
		}
		return m.typ, m.b, m.err
	case <-ctx.Done():
		return 0, nil, ctx.Err()
	}
}

// next reads the next frame. The connection's end is a *closedError; a
// frame that does not decode or breaks an invariant is a *deviation. The
// frame returned belongs to the caller.
func (p *peer) next(ctx context.Context) (frames.Frame, error) {
	typ, b, err := p.readMessage(ctx)
	if err != nil {
		if errors.Is(err, websocket.ErrMessageTooBig) {
			return nil, &deviation{fmt.Sprintf("the server sent a message over MaxLine (%d bytes)", frames.MaxLine)}
		}
		var ce websocket.CloseError
		if errors.As(err, &ce) {
			return nil, &closedError{code: ce.Code, reason: ce.Reason, err: err}
		}
		if ctx.Err() != nil {
			return nil, context.Cause(ctx) // a bounded wait says how long it waited
		}
		return nil, &closedError{code: -1, err: err}
	}
	if typ != websocket.MessageText {
		return nil, &deviation{fmt.Sprintf("the server sent a binary message (%d bytes); frames are text", len(b))}
	}
	f, err := frames.Decode(b)
	if err != nil {
		return nil, &deviation{fmt.Sprintf("the server sent a frame that does not decode (%v): %s", err, quoteLine(b))}
	}
	if err := p.observe(f); err != nil {
		return nil, err
	}
	return f, nil
}

// observe checks f against the invariants of one connection and records
// the stream state.
func (p *peer) observe(f frames.Frame) error {
	switch f := f.(type) {
	case *frames.Opened:
		if p.hello != nil {
			return &deviation{"a second opened on one connection: " + show(f)}
		}
		if f.Pings && !p.asked.pings {
			return &deviation{"opened says pings: true, but the open did not ask for pings: " + show(f)}
		}
		if f.Evidence.Limits != nil && p.asked.open && !p.asked.limits {
			return &deviation{"opened's evidence carries limits, but the open carried none (PROTOCOL.md §6): " + show(f)}
		}
		p.hello = f
		p.window, p.limit, p.maxLimit = f.StdoutWindow, f.StdinLimit, f.StdinLimit
		p.outEnc = f.OutputEnc
	case *frames.Resumed:
		if p.hello != nil {
			return &deviation{"a second resumed on one connection: " + show(f)}
		}
		if f.Pings && !p.asked.pings {
			return &deviation{"resumed says pings: true, but the resume did not ask for pings: " + show(f)}
		}
		p.hello = f
		p.limit, p.maxLimit = f.StdinLimit, f.StdinLimit
	case *frames.Pong:
		if !p.asked.pings {
			return &deviation{"a pong on a connection that did not negotiate pings: " + show(f)}
		}
	case *frames.Stdout:
		if p.anyStart {
			p.stdoutStart, p.stdoutEnd, p.acked = f.Off, f.Off, f.Off
		}
		switch {
		case p.eof != nil:
			return &deviation{fmt.Sprintf("stdout after stdout_eof %d: %s", p.eof.Off, show(f))}
		case f.Off != p.stdoutEnd:
			what := "a hole"
			if f.Off < p.stdoutEnd {
				what = "an overlap"
			}
			return &deviation{fmt.Sprintf("stdout not contiguous (%s): expected off %d, got %s", what, p.stdoutEnd, show(f))}
		case p.window > 0 && f.Off+int64(len(f.Data)) > p.acked+p.window:
			return &deviation{fmt.Sprintf("stdout past the window: acked %d + stdout_window %d < %d after %s",
				p.acked, p.window, f.Off+int64(len(f.Data)), show(f))}
		}
		if d := p.checkEnc(f.Enc, f); d != nil {
			return d
		}
		p.anyStart = false
		p.stdoutEnd += int64(len(f.Data))
		p.stdout = append(p.stdout, f.Data...)
	case *frames.StdoutEOF:
		switch {
		case p.eof != nil:
			return &deviation{fmt.Sprintf("a second stdout_eof on one connection: %s after %s", show(f), show(p.eof))}
		case f.Off != p.stdoutEnd:
			return &deviation{fmt.Sprintf("stdout_eof at %d, but stdout received on this connection ends at %d: %s", f.Off, p.stdoutEnd, show(f))}
		}
		p.eof = f
	case *frames.Stderr:
		if d := p.checkEnc(f.Enc, f); d != nil {
			return d
		}
		p.stderr = append(p.stderr, f.Data...)
	case *frames.Exit:
		if p.exit != nil {
			return &deviation{fmt.Sprintf("a second exit on one connection: %s after %s", show(f), show(p.exit))}
		}
		if f.Reason != "" && p.asked.open && !frames.EncListHas(p.asked.exitReasons, f.Reason) {
			return &deviation{fmt.Sprintf("exit.reason %q, but the open listed exit_reasons %q: %s", f.Reason, p.asked.exitReasons, show(f))}
		}
		p.exit = f
	case *frames.Credit:
		p.limit = max(p.limit, f.StdinLimit)
		p.maxLimit = max(p.maxLimit, f.StdinLimit)
	}
	if f.Type().FromClient() {
		return &deviation{"the server sent a client frame: " + show(f)}
	}
	return nil
}

// checkEnc counts a compressed output frame, which is a deviation when the
// opened of this connection chose no output encoding (PROTOCOL.md §9).
func (p *peer) checkEnc(enc string, f frames.Frame) *deviation {
	if enc == "" {
		return nil
	}
	p.compressed++
	if _, opened := p.hello.(*frames.Opened); opened && p.outEnc != enc {
		return &deviation{fmt.Sprintf("%s payload in %s, but opened chose output_enc %q", f.Type(), enc, p.outEnc)}
	}
	return nil
}

// expectFrom sets the offset the first stdout of this connection must
// start at (what a resume asked for).
// The server holds at most a window past its last ack, which is at most
// off, so stdout up to off + window is within bounds.
func (p *peer) expectFrom(off, window int64) {
	p.stdoutStart, p.stdoutEnd, p.acked, p.window = off, off, off, window
}

// show renders a frame canonically for a deviation message, data cut short.
func show(f frames.Frame) string {
	switch d := f.(type) {
	case *frames.Stdout:
		if len(d.Data) > 24 {
			return fmt.Sprintf(`{"type":"stdout","off":%d,"data":<%d bytes>}`, d.Off, len(d.Data))
		}
	case *frames.Stderr:
		if len(d.Data) > 24 {
			return fmt.Sprintf(`{"type":"stderr","off":%d,"data":<%d bytes>}`, d.Off, len(d.Data))
		}
	case *frames.Stdin:
		if len(d.Data) > 24 {
			return fmt.Sprintf(`{"type":"stdin","off":%d,"data":<%d bytes>}`, d.Off, len(d.Data))
		}
	}
	return quoteLine(frames.Append(nil, f))
}

// quoteLine shows a line, at most 300 bytes of it, without its '\n'.
func quoteLine(b []byte) string {
	b = bytes.TrimSuffix(b, []byte("\n"))
	if len(b) > 300 {
		return string(b[:300]) + fmt.Sprintf("…(%d bytes)", len(b))
	}
	return string(b)
}
