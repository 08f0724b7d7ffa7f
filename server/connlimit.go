package server

import (
	"container/list"
	"net"
	"net/http"
	"sync"
)

// ConnLimiter bounds the connections of one or more http.Servers that
// have not yet been upgraded to a WebSocket (nor ended): connections
// before authentication, keep-alive connections idle between requests,
// health checks. Without a bound, idle connections exhaust the process's
// file descriptors and accept stops on every listener.
//
// Use it on every listener and server that share the descriptors:
// Listener wraps a listener, and ConnState must be the server's
// http.Server.ConnState. When a connection arrives with the bound
// reached, the connection idle the longest (no request yet, or between
// requests) is closed to make room; if every one is in a request, the new
// one is closed instead. Upgraded (hijacked) connections are not counted:
// Config.MaxConnections bounds those. Safe for concurrent use.
type ConnLimiter struct {
	max int

	mu    sync.Mutex
	conns map[net.Conn]*list.Element // pending connections
	idle  list.List                  // of net.Conn: the evictable ones, oldest first
	busy  map[net.Conn]bool          // pending connections in a request
	// evicted counts connections closed to make room (tests).
	evicted int
}

// NewConnLimiter returns a limiter of limit pending connections (at least
// 1).
func NewConnLimiter(limit int) *ConnLimiter {
	return &ConnLimiter{max: max(limit, 1), conns: make(map[net.Conn]*list.Element), busy: make(map[net.Conn]bool)}
}

// Listener returns ln counting its connections against l.
func (l *ConnLimiter) Listener(ln net.Listener) net.Listener {
	return &limitedListener{Listener: ln, l: l}
}

type limitedListener struct {
	net.Listener
	l *ConnLimiter
}

func (ll *limitedListener) Accept() (net.Conn, error) {
	c, err := ll.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if victim := ll.l.admit(c); victim != nil {
		victim.Close()
	}
	return c, nil
}

// admit counts c, and returns the connection to close to make room for it
// (c itself when none other can go), or nil.
func (l *ConnLimiter) admit(c net.Conn) (victim net.Conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.conns) >= l.max {
		front := l.idle.Front()
		if front == nil {
			l.evicted++
			return c // closed at once; net/http sees its read fail
		}
		victim = l.idle.Remove(front).(net.Conn)
		l.conns[victim] = nil // still counted until its StateClosed
		l.evicted++
	}
	l.conns[c] = l.idle.PushBack(c)
	return victim
}

// ConnState is the http.Server.ConnState hook that follows each
// connection: counted from accept until hijacked or closed, evictable
// while new or idle.
func (l *ConnLimiter) ConnState(c net.Conn, st http.ConnState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.conns[c]
	if !ok {
		return
	}
	switch st {
	case http.StateActive:
		if e != nil {
			l.idle.Remove(e)
			l.conns[c] = nil
		}
		l.busy[c] = true
	case http.StateIdle:
		if l.busy[c] {
			delete(l.busy, c)
			l.conns[c] = l.idle.PushBack(c)
		}
	case http.StateHijacked, http.StateClosed:
		if e != nil {
			l.idle.Remove(e)
		}
		delete(l.conns, c)
		delete(l.busy, c)
	}
}

// Pending returns how many connections are counted.
func (l *ConnLimiter) Pending() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}
