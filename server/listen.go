package server

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"sync"
	"time"
)

// ErrPeerUID is returned (wrapped) when the user a connection comes from
// cannot be told.
var ErrPeerUID = errors.New("server: cannot tell the user a connection comes from")

// PeerUIDListener returns a listener that accepts from ln only the
// connections whose peer process runs as one of uids; any other is
// answered 403 once its request's head has arrived (none of it is
// parsed), closed, and logged (at most once a
// second, with the number refused meanwhile). It is how a server without a
// token serves its own user only (PROTOCOL.md §1): on a Unix socket the
// peer's uid is the kernel's SO_PEERCRED; on loopback TCP it is the owner
// of the peer's socket, which Linux lists in /proc/net/tcp and tcp6. A
// connection whose user cannot be told (another address family, another
// system than Linux) is refused.
func PeerUIDListener(ln net.Listener, uids []uint32, log *slog.Logger) net.Listener {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &peerUIDListener{Listener: ln, uids: slices.Clone(uids), log: newRateLog(log, time.Second), refusing: make(chan struct{}, maxRefusing)}
}

type peerUIDListener struct {
	net.Listener
	uids []uint32
	log  *rateLog

	// refusing holds a slot per connection being answered 403; past
	// maxRefusing, a refused connection is closed without an answer.
	refusing chan struct{}
	wg       sync.WaitGroup
}

// maxRefusing bounds the refused connections answered at once.
const maxRefusing = 16

// peerRefusal is the answer to a connection from a user not served, so
// that the client says why rather than retrying a lost connection. It is
// written after the request's head has arrived: an HTTP client that gets
// an answer before it has sent its request drops it as unsolicited (Go's
// net/http does) and reports a lost connection instead.
const peerRefusal = "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\nContent-Length: 68\r\n\r\n" +
	"a server without a token serves its own user only (PROTOCOL.md §1)\n"

// Close closes the listener and waits for the refusals being answered.
func (l *peerUIDListener) Close() error {
	err := l.Listener.Close()
	l.wg.Wait()
	return err
}

// refuse answers c 403 and closes it, within a second, or closes it at
// once when maxRefusing refusals are under way.
func (l *peerUIDListener) refuse(c net.Conn) {
	select {
	case l.refusing <- struct{}{}:
	default:
		c.Close()
		return
	}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		defer func() { <-l.refusing }()
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(time.Second))
		awaitHead(c)
		if _, err := io.WriteString(c, peerRefusal); err != nil {
			return
		}
		if cw, ok := c.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		// Read what the client sent until it closes, so that closing
		// with its request unread does not reset the connection and
		// destroy the answer.
		_, _ = io.Copy(io.Discard, io.LimitReader(c, 64<<10))
	}()
}

// maxRefusedHead bounds what is read of a refused request before it is
// answered.
const maxRefusedHead = 16 << 10

// awaitHead reads from c until the blank line that ends an HTTP request's
// head, maxRefusedHead bytes, an error or c's deadline, whichever comes
// first. What it reads is not looked at otherwise.
func awaitHead(c net.Conn) {
	buf := make([]byte, 0, 4<<10)
	for len(buf) < maxRefusedHead {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, len(buf))
		}
		n, err := c.Read(buf[len(buf):cap(buf)])
		from := max(0, len(buf)-3)
		buf = buf[:len(buf)+n]
		if bytes.Contains(buf[from:], []byte("\r\n\r\n")) || err != nil {
			return
		}
	}
}

// Accept returns the next connection from an allowed user.
func (l *peerUIDListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		uid, err := peerUID(c)
		if err == nil && slices.Contains(l.uids, uid) {
			return c, nil
		}
		remote := c.RemoteAddr().String()
		l.refuse(c)
		if err != nil {
			l.log.Info("refused", "reason", refusePeerUser, "remote", remote, "err", err)
		} else {
			l.log.Info("refused", "reason", refusePeerUser, "remote", remote, "uid", uid)
		}
	}
}

// refusePeerUser is the reason logged for a connection from a user that a
// PeerUIDListener does not serve.
const refusePeerUser = "peer_user"

// peerUIDError wraps ErrPeerUID with why.
func peerUIDError(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrPeerUID}, args...)...)
}
