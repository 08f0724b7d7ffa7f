//go:build linux

package server

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/frames"
)

// dialRouted connects with the test token and the given routing headers.
func (h *harness) dialRouted(instance, process string) *peer {
	h.t.Helper()
	hdr := http.Header{"Authorization": {"Bearer " + testToken}}
	if instance != "" {
		hdr.Set(frames.HeaderInstance, instance)
	}
	if process != "" {
		hdr.Set(frames.HeaderProcess, process)
	}
	ws, _, err := h.dialWith(hdr, []string{frames.Subprotocol})
	require.NoError(h.t, err)
	return &peer{t: h.t, ws: ws}
}

func TestRoutingHeadersAgreeingAreServed(t *testing.T) {
	h := newHarness(t, Config{})
	p := h.dialRouted("inst-route", "")
	p.send(openFrame("inst-route", "sleep", "300"))
	opened := nextOf[*frames.Opened](p)
	p.ws.CloseNow()
	h.waitEvent(hookDetached, opened.ProcessID)

	r := h.dialRouted("inst-route", opened.ProcessID)
	r.send(&frames.Resume{ProcessID: opened.ProcessID, Token: opened.Token})
	nextOf[*frames.Resumed](r)
	r.send(&frames.Destroy{})
	r.destroyedAnswer(opened.ProcessID)

	d := h.dialRouted("inst-route", opened.ProcessID)
	d.send(&frames.Destroy{ProcessID: opened.ProcessID, Token: opened.Token})
	d.destroyedAnswer(opened.ProcessID)
}

func TestRoutingHeaderMismatchIsAProtocolError(t *testing.T) {
	h := newHarness(t, Config{})
	_, opened := h.open(openFrame("inst-a", "sleep", "300"))
	other := strings.Repeat("0", 32)

	for _, tc := range []struct {
		name              string
		instance, process string
		first             frames.Frame
	}{
		{"open under another instance", "inst-b", "", openFrame("inst-a2", "sleep", "1")},
		{"resume of another process id", "", other, &frames.Resume{ProcessID: opened.ProcessID, Token: opened.Token}},
		{"resume of another instance's process", "inst-b", opened.ProcessID, &frames.Resume{ProcessID: opened.ProcessID, Token: opened.Token}},
		{"destroy of another process id", "", other, &frames.Destroy{ProcessID: opened.ProcessID, Token: opened.Token}},
		{"destroy of another instance's process", "inst-b", "", &frames.Destroy{ProcessID: opened.ProcessID, Token: opened.Token}},
		{"destroy by key of another instance", "inst-b", "", &frames.Destroy{InstanceID: "inst-a", OpenKey: strings.Repeat("c", 64)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := h.dialRouted(tc.instance, tc.process)
			p.send(tc.first)
			ce := p.closed()
			require.Equal(t, websocket.StatusProtocolError, ce.Code, ce.Reason)
		})
	}
	// None of them touched the process or started another.
	st := h.srv.Stats()
	require.Len(t, st.Processes, 1)
	require.Equal(t, opened.ProcessID, st.Processes[0].ProcessID)
}

func TestProcessNotFoundNamesMisrouting(t *testing.T) {
	h := newHarness(t, Config{})
	p := h.dialRouted("inst-x", strings.Repeat("a", 32))
	p.send(&frames.Resume{ProcessID: strings.Repeat("a", 32), Token: strings.Repeat("b", 64)})
	e := nextOf[*frames.Error](p)
	require.Equal(t, "process_not_found", e.Actual)
	require.Contains(t, e.Message, "routed to another server")
	require.Contains(t, e.Message, frames.HeaderInstance)
	require.NoError(t, frames.Validate(e))
}

func TestClientAddr(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	for _, tc := range []struct {
		name    string
		remote  string
		trusted []netip.Prefix
		header  http.Header
		want    string
	}{
		{"no trusted proxies", "10.1.1.1:5000", nil, http.Header{"X-Forwarded-For": {"1.2.3.4"}}, "10.1.1.1:5000"},
		{"untrusted peer", "192.0.2.9:5000", trusted, http.Header{"X-Forwarded-For": {"1.2.3.4"}}, "192.0.2.9:5000"},
		{"trusted peer, no header", "10.1.1.1:5000", trusted, nil, "10.1.1.1:5000"},
		{"x-forwarded-for", "10.1.1.1:5000", trusted, http.Header{"X-Forwarded-For": {"1.2.3.4"}}, "1.2.3.4"},
		{"spoofed hop before the client", "10.1.1.1:5000", trusted, http.Header{"X-Forwarded-For": {"6.6.6.6, 1.2.3.4"}}, "1.2.3.4"},
		{"chain of trusted proxies", "10.1.1.1:5000", trusted, http.Header{"X-Forwarded-For": {"1.2.3.4, 10.2.2.2", "10.3.3.3"}}, "1.2.3.4"},
		{"forwarded wins", "10.1.1.1:5000", trusted, http.Header{
			"Forwarded":       {`for=192.0.2.60;proto=http, for="[2001:db8::1]:4711"`},
			"X-Forwarded-For": {"1.2.3.4"},
		}, "[2001:db8::1]:4711"},
		{"unknown hop stops the walk", "10.1.1.1:5000", trusted, http.Header{"Forwarded": {"for=1.2.3.4, for=unknown"}}, "10.1.1.1:5000"},
		{"ipv6 loopback proxy", "[::1]:5000", trusted, http.Header{"X-Forwarded-For": {"1.2.3.4"}}, "1.2.3.4"},
		// A zone is free text: it would reach the log as the address
		// (issue 23, finding 8).
		{"zoned x-forwarded-for", "10.1.1.1:5000", trusted, http.Header{"X-Forwarded-For": {"fe80::1%eth0 level=ERROR msg=forged"}}, "10.1.1.1:5000"},
		{"zoned forwarded", "10.1.1.1:5000", trusted, http.Header{"Forwarded": {`for="[fe80::1%25x]:80"`}}, "10.1.1.1:5000"},
		{"zoned hop before a client", "10.1.1.1:5000", trusted, http.Header{"X-Forwarded-For": {"1.2.3.4, fe80::2%lo"}}, "10.1.1.1:5000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &http.Request{RemoteAddr: tc.remote, Header: tc.header}
			require.Equal(t, tc.want, clientAddr(r, tc.trusted))
		})
	}
}

// syncBuffer is a bytes.Buffer safe for the concurrent writes of a logger.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestTokensNeverLogged drives every path that handles a token (a refused
// bearer token, open, resume with the right and a wrong resume token,
// destroy by token, a routing refusal) with a debug logger, and checks that
// no token appears in any log line.
func TestTokensNeverLogged(t *testing.T) {
	var logs syncBuffer
	h := newHarness(t, Config{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	const wrongBearer = "wrong-bearer-0123456789abcdef"

	_, resp, err := h.dialWith(http.Header{"Authorization": {"Bearer " + wrongBearer}}, []string{frames.Subprotocol})
	require.Error(t, err)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)

	p, opened := h.sh("inst-logs", "echo out; echo err >&2; exec cat")
	p.ws.CloseNow()
	h.waitEvent(hookDetached, opened.ProcessID)

	wrongResume := opened.Token[:63] + flip(opened.Token[63])
	w := h.dial()
	w.send(&frames.Resume{ProcessID: opened.ProcessID, Token: wrongResume})
	w.requireError(notFoundError(opResume))

	m := h.dialRouted("inst-other", "")
	m.send(&frames.Resume{ProcessID: opened.ProcessID, Token: opened.Token})
	require.Equal(t, websocket.StatusProtocolError, m.closed().Code)

	r := h.dial()
	r.send(&frames.Resume{ProcessID: opened.ProcessID, Token: opened.Token})
	nextOf[*frames.Resumed](r)
	r.ws.CloseNow()
	h.waitEvent(hookDetached, opened.ProcessID)

	d := h.dial()
	d.send(&frames.Destroy{ProcessID: opened.ProcessID, Token: opened.Token})
	d.destroyedAnswer(opened.ProcessID)

	// An open refused, and a foreign Origin.
	o := h.dial()
	o.send(openFrame("inst-logs-2", "/nonexistent/executable"))
	require.Equal(t, "executable_not_found", nextOf[*frames.Error](o).Reason)
	_, resp, err = h.dialWith(http.Header{"Authorization": {"Bearer " + testToken}, "Origin": {"https://evil.example"}}, []string{frames.Subprotocol})
	require.Error(t, err)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)

	out := logs.String()
	// Every refusal is logged at info with its reason.
	for _, reason := range []string{"unauthorized", "process_not_found", "routing_mismatch", "executable_not_found", "origin"} {
		require.Contains(t, out, "level=INFO msg=refused", reason)
		require.Contains(t, out, "reason="+reason)
	}
	require.Contains(t, out, opened.ProcessID, "the process was logged")
	for _, secret := range []string{testToken, wrongBearer, opened.Token, wrongResume} {
		require.NotContains(t, out, secret)
	}
}
