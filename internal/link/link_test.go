package link

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/procwire/procwire/frames"
	"github.com/procwire/procwire/internal/coalesce"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// pair returns both ends of a WebSocket over loopback TCP: near's writes
// go through co, far is the peer's end.
func pair(t *testing.T) (near *websocket.Conn, co *coalesce.Coalescer, far *websocket.Conn) {
	t.Helper()
	accepted := make(chan *websocket.Conn, 1)
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		accepted <- ws
		<-done // the handler's return would close the connection
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(done) })
	co = &coalesce.Coalescer{}
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return co.Wrap(c), nil
	}}
	t.Cleanup(tr.CloseIdleConnections)
	near, _, err := websocket.Dial(context.Background(), srv.URL, &websocket.DialOptions{HTTPClient: &http.Client{Transport: tr}})
	require.NoError(t, err)
	far = <-accepted
	t.Cleanup(func() { near.CloseNow(); far.CloseNow() })
	return near, co, far
}

func write(t *testing.T, ws *websocket.Conn, typ websocket.MessageType, msg string) {
	t.Helper()
	require.NoError(t, ws.Write(context.Background(), typ, []byte(msg)))
}

func newReader(ws *websocket.Conn, g Guard) *Reader {
	r := &Reader{Dec: frames.Decoder{MaxLine: frames.MaxLine}}
	r.Init(ws, g)
	return r
}

func TestReaderDecodesAndReusesItsBuffer(t *testing.T) {
	near, _, far := pair(t)
	r := newReader(far, nil)
	for id := int64(1); id <= 3; id++ {
		write(t, near, websocket.MessageText, string(frames.Append(nil, &frames.Ping{ID: id})))
		f, cl, ok := r.Read(context.Background())
		require.True(t, ok, "%+v", cl)
		require.Equal(t, &frames.Ping{ID: id}, f)
	}
	require.Positive(t, cap(r.buf))
	r.Reset(frames.Decoder{MaxLine: 10}, 0)
	require.Nil(t, r.buf)
	require.Equal(t, 10, r.Dec.MaxLine)
}

func TestReaderFailures(t *testing.T) {
	long := strings.Repeat("x", 200)
	for _, tc := range []struct {
		name   string
		send   func(near *websocket.Conn)
		limit  int64
		maxLn  int
		code   websocket.StatusCode
		reason string
		abrupt bool
	}{
		{name: "binary", send: func(ws *websocket.Conn) { write(t, ws, websocket.MessageBinary, "{}") },
			code: websocket.StatusProtocolError, reason: "frames are text messages, got a binary one"},
		{name: "undecodable", send: func(ws *websocket.Conn) { write(t, ws, websocket.MessageText, `{"type":"`+long+`"}`) },
			code: websocket.StatusInvalidFramePayloadData},
		{name: "line too long", maxLn: 16, send: func(ws *websocket.Conn) { write(t, ws, websocket.MessageText, `{"type":"ping","id":1}`) },
			code: websocket.StatusMessageTooBig},
		{name: "read limit", limit: 64, send: func(ws *websocket.Conn) { _ = ws.Write(context.Background(), websocket.MessageText, []byte(long)) },
			code: websocket.StatusMessageTooBig, reason: "message too big"},
		{name: "peer close", send: func(ws *websocket.Conn) { go ws.Close(4123, "bye") },
			code: 4123, reason: "closed by peer", abrupt: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			near, _, far := pair(t)
			r := newReader(far, nil)
			if tc.maxLn > 0 {
				r.Dec.MaxLine = tc.maxLn
			}
			if tc.limit > 0 {
				far.SetReadLimit(tc.limit)
			}
			go near.CloseRead(context.Background()) // takes the close handshake's answer
			tc.send(near)
			_, cl, ok := r.Read(context.Background())
			require.False(t, ok)
			require.Equal(t, tc.code, cl.Code)
			require.Equal(t, tc.abrupt, cl.Abrupt)
			require.Error(t, cl.Err)
			require.LessOrEqual(t, len(cl.Reason), MaxReason)
			if tc.reason != "" {
				require.Equal(t, tc.reason, cl.Reason)
			} else {
				require.Equal(t, Truncate(cl.Err.Error(), MaxReason), cl.Reason)
			}
		})
	}
}

func TestReadFailureOfALostConnection(t *testing.T) {
	err := errors.New(strings.Repeat("é", 100))
	cl := ReadFailure(err)
	require.Equal(t, websocket.StatusAbnormalClosure, cl.Code)
	require.True(t, cl.Abrupt)
	require.Len(t, cl.Reason, 122) // whole runes only
	require.Same(t, err, cl.Err)
	require.Equal(t, "abc", Truncate("abc", 5))
}

// hooks records a Guard's calls and fails reads with its own error.
type hooks struct {
	calls []string
	fail  error
}

func (h *hooks) Begin()            { h.calls = append(h.calls, "begin") }
func (h *hooks) Allow(d, room int) { h.calls = append(h.calls, "allow") }
func (h *hooks) End()              { h.calls = append(h.calls, "end") }
func (h *hooks) Failure(err error) (Close, bool) {
	if h.fail == nil {
		return Close{}, false
	}
	return Close{Code: websocket.StatusPolicyViolation, Reason: "guarded", Abrupt: true, Err: err}, true
}

func TestReaderCallsTheGuard(t *testing.T) {
	near, _, far := pair(t)
	h := &hooks{}
	r := newReader(far, h)
	write(t, near, websocket.MessageText, string(frames.Append(nil, &frames.Ping{ID: 1})))
	_, cl, ok := r.Read(context.Background())
	require.True(t, ok, "%+v", cl)
	require.Equal(t, "begin", h.calls[0])
	require.Equal(t, "allow", h.calls[1])
	require.Equal(t, "end", h.calls[len(h.calls)-1])

	// A message cut in its middle: the guard's Failure says how it ends.
	h.calls, h.fail = nil, errors.New("guard")
	w, err := near.Writer(context.Background(), websocket.MessageText)
	require.NoError(t, err)
	_, err = w.Write([]byte(`{"type":"ping","id":1` + strings.Repeat(" ", 16<<10))) // past the library's buffer: a frame goes out

	require.NoError(t, err)
	_ = near.CloseNow()
	_, cl, ok = r.Read(context.Background())
	require.False(t, ok)
	require.Equal(t, websocket.StatusPolicyViolation, cl.Code)
	require.Equal(t, "guarded", cl.Reason)
	require.Equal(t, "end", h.calls[len(h.calls)-1])
}
