//go:build linux

package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/frames"
	"github.com/procwire/procwire/server"
)

const clientSecToken = "client-sec-token-0123456789abcdef"

// attach sends the token only to the server the handle was made for: a
// handle naming another URL (forged, or edited) is refused before any
// connection, unless --url names the server (issue 23, finding 6: a
// forged handle captured "Authorization: Bearer ...").
func TestAttachSendsTheTokenOnlyWhereTheHandleWasMade(t *testing.T) {
	s := newServer(t, server.Config{Token: clientSecToken})
	env := []string{"PROCWIRE_TOKEN=" + clientSecToken}
	r := runBin(t, "", env, execArgs(s.url, []string{"--detach"}, "sh", "-c", "echo hi; cat")...)
	require.Equal(t, 0, r.code, r.stderr)
	var h handleDoc
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &h))
	require.Equal(t, handleMAC(clientSecToken, h.URL, h.ProcessID), h.URLMAC)

	var captured atomic.Int32
	trap := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			captured.Add(1)
		}
		http.Error(w, "no", http.StatusTeapot)
	}))
	defer trap.Close()
	forged := h
	forged.URL = "ws" + strings.TrimPrefix(trap.URL, "http") + "/"
	b, err := json.Marshal(forged)
	require.NoError(t, err)
	r = runBin(t, "", env, "attach", string(b))
	require.Equal(t, exitFailure, r.code)
	require.Contains(t, r.stderr, "the handle was not made with this token")
	forged.URLMAC = ""
	b, err = json.Marshal(forged)
	require.NoError(t, err)
	r = runBin(t, "", env, "attach", string(b))
	require.Equal(t, exitFailure, r.code)
	require.Zero(t, captured.Load(), "the token went to the URL of a forged handle")

	// The genuine handle attaches; so does one whose server --url names.
	r = runBin(t, "there\n", env, "attach", "--url", s.url, string(b))
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "hi\nthere\n", r.stdout)
	s.requireNoProcess(t)
}

// exec follows no redirect: a 307 to ws:// would take the token around
// the no-token-over-ws:// rule (issue 23, finding 6).
func TestExecFollowsNoRedirect(t *testing.T) {
	var captured atomic.Int32
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		captured.Add(1)
		http.Error(w, "sink", http.StatusTeapot)
	}))
	defer sink.Close()
	redirector := httptest.NewServer(http.RedirectHandler(sink.URL+"/", http.StatusTemporaryRedirect))
	defer redirector.Close()
	r := runBin(t, "", []string{"PROCWIRE_TOKEN=" + clientSecToken}, execArgs("ws"+strings.TrimPrefix(redirector.URL, "http")+"/", nil, "true")...)
	require.Equal(t, exitFailure, r.code)
	require.Contains(t, r.stderr, "HTTP 307")
	require.Zero(t, captured.Load(), "the redirect was followed")
}

// A server's refusal body is printed with its control characters escaped
// (issue 23, finding 8: exec printed an HTTP refusal body raw).
func TestExecEscapesServerText(t *testing.T) {
	hostile := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "refused \x1b]0;pwned\x07\x1b[2J\rfake prompt", http.StatusForbidden)
	}))
	defer hostile.Close()
	r := runBin(t, "", nil, execArgs("ws"+strings.TrimPrefix(hostile.URL, "http")+"/", nil, "true")...)
	require.Equal(t, exitFailure, r.code)
	require.Equal(t, `procwire exec: the server refused the connection (HTTP 403): refused \x1b]0;pwned\x07\x1b[2J\x0dfake prompt`+"\n", r.stderr)
	require.Equal(t, `a\tb\x1b\u0085ü`, escapeControl("a\tb\x1b\u0085ü"))
}

// --handle-file and --exit-status-file replace what is at their path
// rather than follow it: a symlink planted there is replaced, and the file
// it points to is left alone (issue 23, finding 8).
func TestExecFilesDoNotFollowPlantedSymlinks(t *testing.T) {
	s := newServer(t, server.Config{})
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	require.NoError(t, os.WriteFile(victim, []byte("precious\n"), 0o644))
	handle, status := filepath.Join(dir, "handle"), filepath.Join(dir, "status")
	require.NoError(t, os.Symlink(victim, handle))
	require.NoError(t, os.Symlink(victim, status))

	r := runBin(t, "", nil, execArgs(s.url, []string{"--exit-status-file", status}, "sh", "-c", "exit 4")...)
	require.Equal(t, 4, r.code, r.stderr)
	r = runBin(t, "", nil, execArgs(s.url, []string{"--detach", "--handle-file", handle}, "cat")...)
	require.Equal(t, 0, r.code, r.stderr)

	b, err := os.ReadFile(victim)
	require.NoError(t, err)
	require.Equal(t, "precious\n", string(b), "a planted symlink was followed")
	for _, p := range []string{handle, status} {
		fi, err := os.Lstat(p)
		require.NoError(t, err)
		require.True(t, fi.Mode().IsRegular(), "%s: %v", p, fi.Mode())
	}
	b, err = os.ReadFile(status)
	require.NoError(t, err)
	require.Equal(t, "exit 4\n", string(b))
	fi, err := os.Stat(handle)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	r = runBin(t, "", nil, "attach", "--handle-file", handle)
	require.Equal(t, 0, r.code, r.stderr)
	s.requireNoProcess(t)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 3, "no temporary file is left behind")
}

// exec dials through the proxy the environment names only with
// --proxy-from-env (issue 23, finding 6).
func TestExecUsesTheEnvironmentsProxyOnlyWhenAsked(t *testing.T) {
	var proxied atomic.Int32
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxied.Add(1)
		http.Error(w, "proxy", http.StatusBadGateway)
	}))
	defer proxy.Close()
	env := []string{"HTTP_PROXY=" + proxy.URL, "http_proxy=" + proxy.URL, "NO_PROXY=", "no_proxy="}
	r := runBin(t, "", env, execArgs("ws://procwire-proxy-test.invalid/", nil, "true")...)
	require.Equal(t, exitFailure, r.code)
	require.Zero(t, proxied.Load(), "the environment's proxy was used unasked: %s", r.stderr)
	r = runBin(t, "", env, execArgs("ws://procwire-proxy-test.invalid/", []string{"--proxy-from-env"}, "true")...)
	require.Equal(t, exitFailure, r.code)
	require.Equal(t, "procwire exec: the server refused the connection (HTTP 502): proxy\n", r.stderr)
	require.Equal(t, int32(1), proxied.Load())
}

// exec offers its open in the upgrade's Sec-WebSocket-Protocol header
// unless --first-frame-as-message, for a proxy that logs request headers:
// the open holds the environment.
func TestExecFirstFrameAsMessage(t *testing.T) {
	var mu sync.Mutex
	var offers []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		offers = append(offers, strings.Join(r.Header.Values("Sec-WebSocket-Protocol"), ", "))
		mu.Unlock()
		http.Error(w, "no", http.StatusBadGateway)
	}))
	defer srv.Close()
	url := "ws" + strings.TrimPrefix(srv.URL, "http") + "/"
	r := runBin(t, "", nil, execArgs(url, []string{"--env", "SECRET=s3cr3t"}, "true")...)
	require.Equal(t, exitFailure, r.code)
	r = runBin(t, "", nil, execArgs(url, []string{"--env", "SECRET=s3cr3t", "--first-frame-as-message"}, "true")...)
	require.Equal(t, exitFailure, r.code)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, offers, 2)
	require.Contains(t, offers[0], frames.FirstSubprotocolPrefix, "the open in the upgrade")
	require.NotContains(t, offers[1], frames.FirstSubprotocolPrefix)
	require.NotContains(t, offers[1], frames.SubprotocolFirst)
}
