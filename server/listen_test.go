//go:build linux

package server

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// serveListener serves "ok" on ln until the test ends, with lim's hook
// when lim is not nil.
func serveListener(t *testing.T, ln net.Listener, lim *ConnLimiter) {
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })}
	if lim != nil {
		hs.ConnState = lim.ConnState
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		hs.Serve(ln)
	}()
	t.Cleanup(func() {
		hs.Close()
		<-done
	})
}

// get sends one request on c and returns the status line.
func get(t *testing.T, c net.Conn) string {
	t.Helper()
	require.NoError(t, c.SetDeadline(time.Now().Add(10*time.Second)))
	_, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
	require.NoError(t, err)
	line, err := bufio.NewReader(c).ReadString('\n')
	require.NoError(t, err)
	return strings.TrimSpace(line)
}

// PeerUIDListener serves the uids it lists and answers any other 403,
// on loopback TCP and on a Unix socket (whose file ListenUnix makes 0600).
func TestPeerUIDListener(t *testing.T) {
	me := uint32(os.Geteuid())
	sock := filepath.Join(t.TempDir(), "s.sock")
	unixLn, err := ListenUnix(sock, 0o600)
	require.NoError(t, err)
	fi, err := os.Stat(sock)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	for _, tc := range []struct {
		name    string
		listen  func() net.Listener
		network string
	}{
		{"tcp4", func() net.Listener { ln, err := net.Listen("tcp", "127.0.0.1:0"); require.NoError(t, err); return ln }, "tcp"},
		{"tcp6", func() net.Listener {
			ln, err := net.Listen("tcp", "[::1]:0")
			if err != nil {
				t.Skipf("no IPv6 loopback: %v", err)
			}
			return ln
		}, "tcp"},
		{"unix", func() net.Listener { return unixLn }, "unix"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln := tc.listen()
			serveListener(t, PeerUIDListener(ln, []uint32{me}, nil), nil)
			c, err := net.Dial(tc.network, ln.Addr().String())
			require.NoError(t, err)
			defer c.Close()
			require.Equal(t, "HTTP/1.1 200 OK", get(t, c))
		})
	}
	// A listener that serves another uid only refuses this one.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	serveListener(t, PeerUIDListener(ln, []uint32{me + 1}, nil), nil)
	c, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	require.Equal(t, "HTTP/1.1 403 Forbidden", get(t, c))
}

// A refused connection is answered only once its request's head has
// arrived: Go's net/http drops an answer that comes before its request
// as unsolicited and reports a lost connection instead (a CI run of
// cmd/procwire's TestTokenlessServerServesItsOwnUserOnly saw it). On a
// net.Pipe each write waits for the other end to read it, so an answer
// written first would leave the head unread until the answer's deadline.
func TestPeerRefusalWaitsForTheRequestHead(t *testing.T) {
	l := PeerUIDListener(nil, nil, nil).(*peerUIDListener)
	srv, cli := net.Pipe()
	defer cli.Close()
	l.refuse(srv)
	require.NoError(t, cli.SetDeadline(time.Now().Add(10*time.Second)))
	for _, part := range []string{"GET / HTTP/1.1\r\n", "Host: localhost\r\n", "Upgrade: websocket\r\n", "\r\n"} {
		_, err := io.WriteString(cli, part)
		require.NoError(t, err, "the answer came before the request's head")
	}
	resp, err := http.ReadResponse(bufio.NewReader(cli), nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
	require.NoError(t, err)
	require.Contains(t, string(body), "serves its own user only")
	cli.Close()
	l.wg.Wait()

	// And net/http's own client sees the 403 every time.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	serveListener(t, PeerUIDListener(ln, []uint32{uint32(os.Geteuid()) + 1}, nil), nil)
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	for range 50 {
		resp, err := hc.Get("http://" + ln.Addr().String() + "/")
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusForbidden, resp.StatusCode)
	}
}

// ConnLimiter closes the connection idle the longest to make room for a
// new one, and counts none once upgraded or closed.
func TestConnLimiterEvictsTheLongestIdle(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	lim := NewConnLimiter(2)
	serveListener(t, lim.Listener(ln), lim)
	dial := func() net.Conn {
		c, err := net.Dial("tcp", ln.Addr().String())
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		return c
	}
	// idle waits until the server has marked n connections idle: the
	// client can read an answer before the server's ConnState hook runs.
	idle := func(n int) {
		t.Helper()
		require.Eventually(t, func() bool {
			lim.mu.Lock()
			defer lim.mu.Unlock()
			return lim.idle.Len() == n
		}, 10*time.Second, time.Millisecond)
	}
	first := dial()
	require.Equal(t, "HTTP/1.1 200 OK", get(t, first)) // then idle
	idle(1)
	second := dial()
	require.Equal(t, "HTTP/1.1 200 OK", get(t, second))
	idle(2)
	third := dial()
	require.Equal(t, "HTTP/1.1 200 OK", get(t, third))
	// The first, idle the longest, was closed for the third.
	require.NoError(t, first.SetReadDeadline(time.Now().Add(10*time.Second)))
	_, err = first.Read(make([]byte, 1))
	require.ErrorIs(t, err, io.EOF)
	require.Eventually(t, func() bool { return lim.Pending() == 2 }, 10*time.Second, time.Millisecond)
}
