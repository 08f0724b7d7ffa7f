//go:build linux

package server

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/frames"
)

func TestAuth(t *testing.T) {
	h := newHarness(t, Config{})
	for _, tc := range []struct {
		name   string
		header http.Header
		ok     bool
	}{
		{"no token", nil, false},
		{"wrong token", http.Header{"Authorization": {"Bearer wrong"}}, false},
		{"token prefix", http.Header{"Authorization": {"Bearer " + testToken[:5]}}, false},
		{"token with suffix", http.Header{"Authorization": {"Bearer " + testToken + "x"}}, false},
		{"basic scheme", http.Header{"Authorization": {"Basic " + testToken}}, false},
		{"right token", http.Header{"Authorization": {"Bearer " + testToken}}, true},
		{"scheme in lower case", http.Header{"Authorization": {"bearer " + testToken}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws, resp, err := h.dialWith(tc.header, []string{frames.Subprotocol})
			if !tc.ok {
				require.Error(t, err)
				require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
				return
			}
			require.NoError(t, err)
			require.Equal(t, frames.Subprotocol, ws.Subprotocol())
			ws.Close(websocket.StatusNormalClosure, "")
		})
	}
}

func TestAuthorizedComparesInConstantTime(t *testing.T) {
	// authorized hashes both tokens and compares the digests with
	// crypto/subtle, so neither the length nor a common prefix shows.
	s, err := New(Config{Token: "abc"})
	require.NoError(t, err)
	for header, want := range map[string]bool{
		"Bearer abc": true, "BEARER abc": true, "Bearer ab": false, "Bearer abcd": false,
		"Bearer abd": false, "Bearer": false, "": false, "Bearer  abc": false,
	} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("Authorization", header)
		require.Equal(t, want, s.authorized(r), "%q", header)
	}
	require.True(t, tokenEqual("ab", "ab"))
	require.False(t, tokenEqual("ab", "ac"))
	require.False(t, tokenEqual("ab", "abc"))
}

func TestOrigin(t *testing.T) {
	h := newHarness(t, Config{OriginPatterns: []string{"*.trusted.example"}})
	auth := http.Header{"Authorization": {"Bearer " + testToken}}
	for _, tc := range []struct {
		origin string
		ok     bool
	}{
		{"", true},
		{"http://" + h.ts.Listener.Addr().String(), true}, // same host
		{"https://app.trusted.example", true},
		{"https://evil.example", false},
		{"https://trusted.example.evil.example", false},
	} {
		header := auth.Clone()
		if tc.origin != "" {
			header.Set("Origin", tc.origin)
		}
		ws, resp, err := h.dialWith(header, []string{frames.Subprotocol})
		if tc.ok {
			require.NoError(t, err, tc.origin)
			ws.Close(websocket.StatusNormalClosure, "")
			continue
		}
		require.Error(t, err, tc.origin)
		require.Equal(t, http.StatusForbidden, resp.StatusCode, tc.origin)
	}
}

func TestSubprotocolRequired(t *testing.T) {
	h := newHarness(t, Config{})
	for _, protos := range [][]string{nil, {"procwire.v0"}} {
		ws, _, err := h.dialWith(http.Header{"Authorization": {"Bearer " + testToken}}, protos)
		require.NoError(t, err)
		p := &peer{t: t, ws: ws}
		p.requireClosed(websocket.StatusProtocolError, "subprotocol procwire.v1 required")
	}
}

func TestCheckListenAddr(t *testing.T) {
	for _, tc := range []struct {
		addr, token string
		ok          bool
	}{
		{"127.0.0.1:8080", "", true},
		{"127.1.2.3:0", "", true},
		{"[::1]:8080", "", true},
		{"localhost:8080", "", true},
		{"LocalHost:1", "", true},
		{"[::ffff:127.0.0.1]:1", "", true},
		{":8080", "", false},
		{"0.0.0.0:8080", "", false},
		{"[::]:8080", "", false},
		{"192.168.1.10:8080", "", false},
		{"example.com:8080", "", false},
		{"[fe80::1%lo]:1", "", false},
		{":8080", "tok", true},
		{"0.0.0.0:8080", "tok", true},
		{"192.168.1.10:8080", "tok", true},
	} {
		err := CheckListenAddr(tc.addr, tc.token)
		if tc.ok {
			require.NoError(t, err, tc.addr)
		} else {
			require.ErrorIs(t, err, ErrInsecureListen, tc.addr)
		}
	}
	for _, bad := range []string{"127.0.0.1", "", "localhost"} {
		err := CheckListenAddr(bad, "tok")
		require.Error(t, err, bad)
		require.NotErrorIs(t, err, ErrInsecureListen)
	}
}

func TestConfig(t *testing.T) {
	s, err := New(Config{})
	require.NoError(t, err)
	c := s.cfg
	require.Equal(t, DefaultProvider, c.Provider)
	require.Equal(t, Revision, c.ProviderRevision)
	require.Equal(t, DefaultStdoutWindow, c.StdoutWindow)
	require.Equal(t, DefaultMaxStdoutWindow, c.MaxStdoutWindow)
	require.Equal(t, DefaultStdinWindow, c.StdinWindow)
	require.Equal(t, DefaultMaxStdinWindow, c.MaxStdinWindow)
	require.Equal(t, DefaultStderrRing, c.StderrRing)
	require.Equal(t, DefaultGrace, c.Grace)
	require.Equal(t, DefaultHeartbeat, c.Heartbeat)
	require.Equal(t, DefaultExitWait, c.ExitWait)
	require.Equal(t, DefaultDestroyWait, c.DestroyWait)
	require.Equal(t, DefaultTombstoneTTL, c.TombstoneTTL)
	require.Equal(t, DefaultMaxTombstones, c.MaxTombstones)
	require.Equal(t, DefaultMaxFrameData, c.MaxFrameData)
	require.Equal(t, DefaultMaxProcesses, c.MaxProcesses)
	require.Equal(t, DefaultFirstFrame, c.FirstFrameTimeout)
	require.IsType(t, BridgeExecutor{}, c.Executor)
	require.NotNil(t, c.Logger)

	s, err = New(Config{MaxStdoutWindow: 2048})
	require.NoError(t, err)
	require.Equal(t, 2048, s.cfg.StdoutWindow, "the default window is capped by the maximum")

	for name, bad := range map[string]Config{
		"small window":         {StdoutWindow: 100},
		"huge window":          {StdinWindow: 2 << 30},
		"window above max":     {StdinWindow: 4096, MaxStdinWindow: 2048},
		"negative ring":        {StderrRing: -1},
		"frame data above max": {MaxFrameData: frames.MaxData + 1},
		"negative grace":       {Grace: -time.Second},
		"negative tombstones":  {MaxTombstones: -1},
		"negative processes":   {MaxProcesses: -1},
		"bad origin pattern":   {OriginPatterns: []string{"["}},
	} {
		_, err := New(bad)
		require.Error(t, err, name)
	}
}

func TestClampWindow(t *testing.T) {
	require.Equal(t, 100, clampWindow(0, 100, 1000))
	require.Equal(t, 1024, clampWindow(1024, 100, 1000*1000))
	require.Equal(t, 1000, clampWindow(1<<30, 100, 1000))
}

func TestNoTokenServesThisMachineOnly(t *testing.T) {
	s, err := New(Config{})
	require.NoError(t, err)
	for _, tc := range []struct {
		name, remote, host string
		header             http.Header
		ok                 bool
	}{
		{"remote IPv4", "10.1.2.3:5000", "127.0.0.1:80", nil, false},
		{"remote IPv6", "[2001:db8::1]:5000", "127.0.0.1:80", nil, false},
		{"loopback", "127.0.0.1:5000", "127.0.0.1:8080", nil, true},
		{"loopback IPv6", "[::1]:5000", "[::1]:8080", nil, true},
		{"mapped loopback", "[::ffff:127.0.0.1]:500", "127.0.0.2", nil, true},
		{"unix socket", "@", "localhost", nil, true},
		{"localhost", "127.0.0.1:5000", "localhost:8080", nil, true},
		{"LOCALHOST without port", "127.0.0.1:5000", "LOCALHOST", nil, true},
		{"IPv6 without port", "127.0.0.1:5000", "[::1]", nil, true},
		{"rebinding host", "127.0.0.1:5000", "rebind.example:8080", nil, false},
		{"rebinding host with matching origin", "127.0.0.1:5000", "rebind.example:8080",
			http.Header{"Origin": {"http://rebind.example:8080"}}, false},
		{"localhost subdomain", "127.0.0.1:5000", "localhost.evil.example", nil, false},
		{"non-loopback address host", "127.0.0.1:5000", "10.0.0.1:8080", nil, false},
		{"foreign origin", "127.0.0.1:5000", "127.0.0.1:8080",
			http.Header{"Origin": {"https://evil.example"}}, false},
		{"null origin", "127.0.0.1:5000", "127.0.0.1:8080",
			http.Header{"Origin": {"null"}}, false},
		{"loopback origin", "127.0.0.1:5000", "127.0.0.1:8080",
			http.Header{"Origin": {"http://127.0.0.1:8080"}}, true},
		{"Forwarded", "127.0.0.1:5000", "127.0.0.1:8080",
			http.Header{"Forwarded": {"for=192.0.2.60"}}, false},
		{"X-Forwarded-For", "127.0.0.1:5000", "127.0.0.1:8080",
			http.Header{"X-Forwarded-For": {"192.0.2.60"}}, false},
		{"X-Real-IP", "127.0.0.1:5000", "127.0.0.1:8080",
			http.Header{"X-Real-Ip": {"192.0.2.60"}}, false},
		{"empty X-Forwarded-For", "127.0.0.1:5000", "127.0.0.1:8080",
			http.Header{"X-Forwarded-For": {""}}, false},
	} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = tc.remote
		r.Host = tc.host
		for k, v := range tc.header {
			r.Header[k] = v
		}
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		if tc.ok {
			// Past the check: refused by the upgrade, not by the rule.
			require.NotEqual(t, http.StatusForbidden, w.Code, tc.name)
		} else {
			require.Equal(t, http.StatusForbidden, w.Code, tc.name)
		}
	}

	// With a token any address and Host may try; the Origin rule stays.
	s, err = New(Config{Token: "t"})
	require.NoError(t, err)
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "10.1.2.3:5000"
	r.Host = "procwire.example"
	r.Header.Set("Authorization", "Bearer t")
	r.Header.Set("X-Forwarded-For", "192.0.2.60")
	w := httptest.NewRecorder()
	s.ServeHTTP(w, r)
	require.NotEqual(t, http.StatusForbidden, w.Code)
}

// TestNoTokenOverLoopback dials a server without a token the way a local
// client does, then the ways a browser page or a proxy would.
func TestNoTokenOverLoopback(t *testing.T) {
	srv, err := New(Config{})
	require.NoError(t, err)
	ts := httptest.NewServer(srv)
	t.Cleanup(func() {
		require.NoError(t, srv.Close())
		ts.Close()
	})
	// A DNS-rebound name resolves to the server: dial the listener whatever
	// the URL's host.
	addr := ts.Listener.Addr().String()
	client := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
	}}
	t.Cleanup(client.CloseIdleConnections)
	dialHost := func(host string, header http.Header) (*websocket.Conn, *http.Response, error) {
		ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
		defer cancel()
		ws, resp, err := websocket.Dial(ctx, "ws://"+host+"/", &websocket.DialOptions{
			HTTPClient: client, HTTPHeader: header, Subprotocols: []string{frames.Subprotocol}})
		if resp != nil && resp.Body != nil {
			resp.Body.Close()
		}
		return ws, resp, err
	}
	dial := func(header http.Header) (*websocket.Conn, *http.Response, error) { return dialHost(addr, header) }

	ws, _, err := dial(nil)
	require.NoError(t, err)
	p := &peer{t: t, ws: ws}
	p.send(openFrame("inst-local", "echo", "local"))
	nextOf[*frames.Opened](p)
	require.Equal(t, "local\n", string(p.collect(true).stdout))
	ws.CloseNow()

	_, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	for _, tc := range []struct {
		name, host string
		header     http.Header
	}{
		{"rebinding Host", "rebind.example:" + port, nil},
		{"rebinding Host and Origin", "rebind.example:" + port, http.Header{"Origin": {"http://rebind.example:" + port}}},
		{"foreign Origin", addr, http.Header{"Origin": {"https://evil.example"}}},
		{"X-Forwarded-For", addr, http.Header{"X-Forwarded-For": {"192.0.2.60"}}},
		{"Forwarded", addr, http.Header{"Forwarded": {"for=192.0.2.60"}}},
		{"X-Real-IP", addr, http.Header{"X-Real-IP": {"192.0.2.60"}}},
	} {
		_, resp, err := dialHost(tc.host, tc.header)
		require.Error(t, err, tc.name)
		require.Equal(t, http.StatusForbidden, resp.StatusCode, tc.name)
	}
}
