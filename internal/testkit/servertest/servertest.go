// Package servertest holds the platform-neutral helpers that the server's
// tests and the fuzz harnesses share: a server behind loopback HTTP and a
// raw procwire.v1 WebSocket to it. It must not import package server, whose
// internal tests use it; the executor they share is package fakeexec.
package servertest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"

	"github.com/coder/websocket"

	"github.com/procwire/procwire/frames"
)

// Loopback is a handler served over loopback HTTP, with the count of its
// ServeHTTP calls in progress.
type Loopback struct {
	// HTTP is the test server.
	HTTP *httptest.Server
	// URL is its ws:// address.
	URL string
	// Handlers has one count per ServeHTTP call in progress.
	Handlers sync.WaitGroup
}

// Serve serves h over loopback HTTP; wrap, when not nil, runs around each
// request (it must call next). Close it with Loopback.HTTP.Close.
func Serve(h http.Handler, wrap func(w http.ResponseWriter, r *http.Request, next http.Handler)) *Loopback {
	l := &Loopback{}
	l.HTTP = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.Handlers.Add(1)
		defer l.Handlers.Done()
		if wrap != nil {
			wrap(w, r, h)
			return
		}
		h.ServeHTTP(w, r)
	}))
	l.URL = WSURL(l.HTTP)
	return l
}

// WSURL returns the ws:// address of ts.
func WSURL(ts *httptest.Server) string { return "ws" + strings.TrimPrefix(ts.URL, "http") }

// Bearer returns a header carrying token as a bearer token.
func Bearer(token string) http.Header {
	return http.Header{"Authorization": {"Bearer " + token}}
}

// Dial connects to url with opts (nil: the procwire.v1 subprotocol and no
// header), closes the handshake's response body, and lets the connection
// read a message as long as a frame's longest line.
func Dial(ctx context.Context, url string, opts *websocket.DialOptions) (*websocket.Conn, *http.Response, error) {
	if opts == nil {
		opts = &websocket.DialOptions{Subprotocols: []string{frames.Subprotocol}}
	}
	ws, resp, err := websocket.Dial(ctx, url, opts)
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if err != nil {
		return nil, resp, err
	}
	ws.SetReadLimit(frames.MaxLine)
	return ws, resp, nil
}
