package server

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/procwire/procwire/internal/link"
)

// maxMessageHeaderBytes bounds the bytes of one message read besides its
// payload: frame headers (2 to 14 bytes each; a client's, masked, at
// least 6) and any control frame between them. A client sends a message
// as one frame; a message in more than about 2,700 frames (empty
// continuation frames keeping it open) ends the connection.
const maxMessageHeaderBytes = 16 << 10

// guardSlack covers what the reads beneath the WebSocket had buffered
// when a message began (net/http's 4 KiB reader) and the message's first
// header.
const guardSlack = 8 << 10

// errTooManyFrames is the read error of a message whose frames carry more
// than maxMessageHeaderBytes besides their payload.
var errTooManyFrames = errors.New("message in too many frames")

// msgGuard is the connection beneath a WebSocket, watching the message
// being read: it must end within Config.MessageTimeout from its first
// frame, by a read deadline, and its reads may not pass limit, the
// payload delivered so far plus maxMessageHeaderBytes. Between messages
// (limit 0) it reads freely: idleness is the heartbeat's business. Only
// the connection's reading goroutine calls begin, allow and end.
//
// The deadline is set only when the open message needs a read of the
// socket: a message that arrived whole with its header (every interactive
// frame) is read from the buffer above and never sets one. Setting and
// clearing a deadline per message costs two timer updates, and a timer
// that becomes the earliest wakes the runtime's network poller.
type msgGuard struct {
	net.Conn
	read  atomic.Int64 // bytes read from Conn
	limit atomic.Int64 // read may not pass it; 0: no message open
	due   atomic.Int64 // when the open message must end (Unix ns); 0: no bound
	armed atomic.Bool  // the read deadline is set, to due
	start int64        // read when the message began
}

// WritesTo is the connection beneath: the guard watches reads only, so a
// non-blocking write (conn.kick) may go straight to its socket.
func (g *msgGuard) WritesTo() net.Conn { return g.Conn }

func (g *msgGuard) Read(p []byte) (int, error) {
	if lim := g.limit.Load(); lim > 0 && g.read.Load() > lim {
		return 0, errTooManyFrames
	}
	if due := g.due.Load(); due != 0 && !g.armed.Load() {
		g.armed.Store(true)
		_ = g.Conn.SetReadDeadline(time.Unix(0, due))
	}
	n, err := g.Conn.Read(p)
	g.read.Add(int64(n))
	return n, err
}

// begin starts watching a message whose first frame header was just read.
func (g *msgGuard) begin(timeout time.Duration) {
	if g == nil {
		return
	}
	g.start = g.read.Load()
	if timeout > 0 {
		g.due.Store(time.Now().Add(timeout).UnixNano())
	}
}

// allow lets the reads go on with delivered payload bytes read and up to
// room more asked for.
func (g *msgGuard) allow(delivered, room int) {
	if g != nil {
		g.limit.Store(g.start + int64(delivered+room) + maxMessageHeaderBytes + guardSlack)
	}
}

// end stops watching: the message was read.
func (g *msgGuard) end() {
	if g == nil {
		return
	}
	g.limit.Store(0)
	g.due.Store(0)
	if g.armed.Load() {
		g.armed.Store(false)
		_ = g.Conn.SetReadDeadline(time.Time{})
	}
}

// guardFailure describes a read the guard ended, or reports false.
func guardFailure(err error, timeout time.Duration) (link.Close, bool) {
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return link.Close{Code: websocket.StatusPolicyViolation, Reason: fmt.Sprintf("message not complete within %v", timeout), Abrupt: true, Err: err}, true
	case errors.Is(err, errTooManyFrames):
		return link.Close{Code: websocket.StatusPolicyViolation, Reason: errTooManyFrames.Error(), Abrupt: true, Err: err}, true
	}
	return link.Close{}, false
}

// readGuard is a connection's msgGuard (nil in tests that dial no socket)
// as its link.Reader's Guard: from its first frame, a message has
// MessageTimeout to end, and frames besides its payload are bounded.
type readGuard struct{ c *conn }

func (g readGuard) Begin()                    { g.c.guard.begin(g.c.srv.cfg.MessageTimeout) }
func (g readGuard) Allow(delivered, room int) { g.c.guard.allow(delivered, room) }
func (g readGuard) End()                      { g.c.guard.end() }
func (g readGuard) Failure(err error) (link.Close, bool) {
	return guardFailure(err, g.c.srv.cfg.MessageTimeout)
}
