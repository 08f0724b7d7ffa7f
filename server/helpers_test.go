package server

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/frames"
	"github.com/procwire/procwire/internal/testkit/servertest"
)

// testTimeout bounds every wait in a test.
const testTimeout = time.Minute

const testToken = "s3cret-test-token"

// harness is a Server behind a loopback httptest.Server, with its events.
type harness struct {
	t      *testing.T
	srv    *Server
	ts     *httptest.Server
	url    string
	events chan event
}

// event is one test hook call.
type event struct {
	ev hookEvent
	id string
}

// newHarness starts a Server with cfg (Token defaults to testToken, Logger
// to the test's output) and stops it at the end of the test.
func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	if cfg.Token == "" {
		cfg.Token = testToken
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	srv, err := New(cfg)
	require.NoError(t, err)
	h := &harness{t: t, srv: srv, events: make(chan event, 1024)}
	srv.testHook = func(ev hookEvent, id string) {
		select {
		case h.events <- event{ev, id}:
		default:
			panic("test hook events overflow")
		}
	}
	h.ts = httptest.NewServer(srv)
	h.url = servertest.WSURL(h.ts)
	t.Cleanup(func() {
		require.NoError(t, srv.Close())
		h.ts.Close()
	})
	return h
}

// ctx returns a context bounded by testTimeout, ended with the test.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// waitEvent waits for hook event ev about process id.
func (h *harness) waitEvent(ev hookEvent, id string) {
	h.t.Helper()
	ctx := testCtx(h.t)
	for {
		select {
		case e := <-h.events:
			if e.ev == ev && e.id == id {
				return
			}
		case <-ctx.Done():
			h.t.Fatalf("no event %d for process %s", ev, id)
		}
	}
}

// process returns the live process id's stats.
func (h *harness) process(id string) ProcessStats {
	h.t.Helper()
	for _, p := range h.srv.Stats().Processes {
		if p.ProcessID == id {
			return p
		}
	}
	h.t.Fatalf("process %s not live", id)
	return ProcessStats{}
}

// peer is a raw procwire client: frames over coder/websocket, nothing else.
type peer struct {
	t       *testing.T
	ws      *websocket.Conn
	pending []frames.Frame // read by nextOf but not of the type it wanted
}

// dial connects with the test token and the subprotocol.
func (h *harness) dial() *peer {
	h.t.Helper()
	ws, _, err := h.dialWith(servertest.Bearer(testToken), []string{frames.Subprotocol})
	require.NoError(h.t, err)
	return &peer{t: h.t, ws: ws}
}

// dialWith connects with the given header and subprotocols.
func (h *harness) dialWith(header http.Header, subprotocols []string) (*websocket.Conn, *http.Response, error) {
	ws, resp, err := servertest.Dial(testCtx(h.t), h.url, &websocket.DialOptions{
		HTTPHeader:   header,
		Subprotocols: subprotocols,
	})
	if err != nil {
		return nil, resp, err
	}
	h.t.Cleanup(func() { ws.CloseNow() })
	return ws, resp, nil
}

// send writes one frame.
func (p *peer) send(f frames.Frame) {
	p.t.Helper()
	p.sendLine(string(frames.Append(nil, f)))
}

// sendLine writes one raw message.
func (p *peer) sendLine(line string) {
	p.t.Helper()
	require.NoError(p.t, p.ws.Write(testCtx(p.t), websocket.MessageText, []byte(line)))
}

// read reads one frame, or the error that ended the connection.
func (p *peer) read(ctx context.Context) (frames.Frame, error) {
	typ, b, err := p.ws.Read(ctx)
	if err != nil {
		return nil, err
	}
	if typ != websocket.MessageText {
		return nil, errors.New("binary message")
	}
	return frames.Decode(b)
}

// next returns the oldest pending frame or reads one, and fails the test
// if there is none.
func (p *peer) next() frames.Frame {
	p.t.Helper()
	if len(p.pending) > 0 {
		f := p.pending[0]
		p.pending = p.pending[1:]
		return f
	}
	f, err := p.read(testCtx(p.t))
	require.NoError(p.t, err)
	return f
}

// nextOf returns the first frame of type T, pending or read; the other
// frames read meanwhile stay pending, in order, except credits.
func nextOf[T frames.Frame](p *peer) T {
	p.t.Helper()
	for i, f := range p.pending {
		if t, ok := f.(T); ok {
			p.pending = append(p.pending[:i:i], p.pending[i+1:]...)
			return t
		}
	}
	for {
		f, err := p.read(testCtx(p.t))
		require.NoError(p.t, err, "waiting for %T", *new(T))
		if t, ok := f.(T); ok {
			return t
		}
		if _, ok := f.(*frames.Credit); !ok {
			p.pending = append(p.pending, f)
		}
	}
}

// destroyedAnswer reads the answer to a destroy: frames up to destroyed,
// with exactly one exit among them, and the normal close. It returns the
// exit.
func (p *peer) destroyedAnswer(processID string) *frames.Exit {
	p.t.Helper()
	var exit *frames.Exit
	for {
		switch f := p.next().(type) {
		case *frames.Exit:
			require.Nil(p.t, exit, "second exit")
			exit = f
		case *frames.Destroyed:
			require.Equal(p.t, processID, f.ProcessID)
			require.NotNil(p.t, exit, "destroyed without exit")
			p.requireClosed(websocket.StatusNormalClosure, "")
			return exit
		case *frames.Stdout, *frames.StdoutEOF, *frames.Stderr, *frames.Credit, *frames.Signaled:
		default:
			p.t.Fatalf("unexpected %s %+v", f.Type(), f)
		}
	}
}

// closed reads until the connection ends and returns its close status.
func (p *peer) closed() websocket.CloseError {
	p.t.Helper()
	ctx := testCtx(p.t)
	for {
		_, err := p.read(ctx)
		if err == nil {
			continue
		}
		var ce websocket.CloseError
		require.ErrorAs(p.t, err, &ce, "connection ended without a close frame")
		return ce
	}
}

// requireClosed reads until the connection ends and checks the status.
func (p *peer) requireClosed(code websocket.StatusCode, reason string) {
	p.t.Helper()
	ce := p.closed()
	require.Equal(p.t, code, ce.Code, "close reason %q", ce.Reason)
	require.Equal(p.t, reason, ce.Reason)
}

// requireError reads the next frame, an error equal to want, and the normal
// close that follows it.
func (p *peer) requireError(want *frames.Error) {
	p.t.Helper()
	f := p.next()
	require.Equal(p.t, want, f)
	p.requireClosed(websocket.StatusNormalClosure, "")
}

// testEnv is the environment of test children.
var testEnv = map[string]string{"PATH": "/usr/bin:/bin"}

// openFrame asks for exe with args on instance inst.
func openFrame(inst, exe string, args ...string) *frames.Open {
	return &frames.Open{
		InstanceID: inst,
		Request: frames.ProcessRequest{
			Executable:       exe,
			Arguments:        args,
			WorkingDirectory: "/",
			Environment:      testEnv,
		},
	}
}

// open sends f on a new connection and returns the peer and opened.
func (h *harness) open(f *frames.Open) (*peer, *frames.Opened) {
	h.t.Helper()
	p := h.dial()
	p.send(f)
	return p, nextOf[*frames.Opened](p)
}

// sh opens sh -c script on instance inst.
func (h *harness) sh(inst, script string) (*peer, *frames.Opened) {
	h.t.Helper()
	return h.open(openFrame(inst, "sh", "-c", script))
}

// output is what a peer read from a process until its exit.
type output struct {
	stdout    []byte
	stderr    []byte
	stderrEnd int64 // offset after the last stderr byte
	eof       int64 // -1 until stdout_eof
	exit      *frames.Exit
	order     []frames.Type // stdout_eof and exit, in arrival order
}

// collect reads frames, acking stdout as it arrives, until both stdout_eof
// and exit arrived (or only exit, with untilExit).
func (p *peer) collect(untilExit bool) output {
	p.t.Helper()
	return p.collectFrom(0, untilExit)
}

// collectFrom is collect for a peer that already read stdout up to off.
func (p *peer) collectFrom(off int64, untilExit bool) output {
	p.t.Helper()
	out := output{eof: -1}
	for out.exit == nil || (!untilExit && out.eof < 0) {
		switch f := p.next().(type) {
		case *frames.Stdout:
			require.Equal(p.t, off+int64(len(out.stdout)), f.Off, "stdout offset")
			out.stdout = append(out.stdout, f.Data...)
			p.send(&frames.Ack{Stdout: off + int64(len(out.stdout))})
		case *frames.Stderr:
			out.addStderr(p.t, f)
		case *frames.StdoutEOF:
			require.Equal(p.t, off+int64(len(out.stdout)), f.Off)
			out.eof = f.Off
			out.order = append(out.order, f.Type())
		case *frames.Exit:
			require.Nil(p.t, out.exit, "second exit")
			out.exit = f
			out.order = append(out.order, f.Type())
		case *frames.Credit:
		default:
			p.t.Fatalf("unexpected %s %+v", f.Type(), f)
		}
	}
	return out
}

// addStderr appends a stderr frame, which must not overlap what was held.
func (o *output) addStderr(t *testing.T, f *frames.Stderr) {
	require.GreaterOrEqual(t, f.Off, o.stderrEnd, "stderr offset")
	o.stderr = append(o.stderr, f.Data...)
	o.stderrEnd = f.Off + int64(len(f.Data))
}

// stderrUntil reads frames until o holds stderr up to offset end: stderr
// is not ordered with the exit.
func (p *peer) stderrUntil(o *output, end int64) {
	p.t.Helper()
	for o.stderrEnd < end {
		o.addStderr(p.t, nextOf[*frames.Stderr](p))
	}
}
