package conform_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/conform"
	"github.com/procwire/procwire/server"
)

// testTimeout bounds a whole run in a test; it bounds hangs, it times
// nothing.
const testTimeout = 5 * time.Minute

const testToken = "conform-test-token"

// localServer starts a procwire server on loopback with a short grace and
// heartbeat, so that the timer cases run, and with limits where this
// machine enforces them (limitedExecutor), and returns its ws:// URL.
func localServer(t *testing.T) string {
	t.Helper()
	e, _ := limitedExecutor(t)
	return localServerWith(t, e)
}

// localServerWith is localServer with executor e (nil: the default, no
// limits).
func localServerWith(t *testing.T, e server.Executor) string {
	t.Helper()
	srv, err := server.New(server.Config{
		Executor: e,
		Token:    testToken,
		// Short enough for the timer cases to run (at most
		// conform.SlowThreshold), long enough that a loaded CI machine
		// answers every ping in time, also while a case writes megabytes
		// of stdin without reading (a ping waits for its reader).
		Grace:     3 * time.Second,
		Heartbeat: 4 * time.Second,
		Logger:    slog.New(slog.DiscardHandler),
	})
	require.NoError(t, err)
	ts := httptest.NewServer(srv)
	t.Cleanup(func() {
		require.NoError(t, srv.Close())
		ts.Close()
	})
	return "ws" + strings.TrimPrefix(ts.URL, "http")
}

func runAgainst(t *testing.T, url string, cases ...string) *conform.Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	rep, err := conform.Run(ctx, conform.Config{URL: url, Token: testToken, Cases: cases})
	require.NoError(t, err)
	var b bytes.Buffer
	require.NoError(t, rep.WriteTable(&b))
	t.Log("\n" + b.String())
	return rep
}

func TestOwnServerPasses(t *testing.T) {
	e, limited := limitedExecutor(t)
	rep := runAgainst(t, localServerWith(t, e))
	for _, c := range rep.Cases {
		if c.Name == "limits" && !limited {
			require.Equal(t, conform.Skip, c.Outcome, "%s: %s", c.Name, c.Detail)
			continue
		}
		require.Equal(t, conform.Pass, c.Outcome, "%s: %s", c.Name, c.Detail)
	}
}

// TestServerWithoutLimitsSkips: a server enforcing no limits passes the
// limits case as a recorded skip, having refused every limit asked.
func TestServerWithoutLimitsSkips(t *testing.T) {
	rep := runAgainst(t, localServerWith(t, nil), "limits", "exit-reasons")
	require.Equal(t, conform.Skip, rep.Cases[0].Outcome, rep.Cases[0].Detail)
	require.Contains(t, rep.Cases[0].Detail, "enforces no limits")
	require.Equal(t, conform.Pass, rep.Cases[1].Outcome, rep.Cases[1].Detail)
}

// TestLimitsCases runs the cases of open.limits and exit_reasons against
// the real server with limits.
func TestLimitsCases(t *testing.T) {
	e, limited := limitedExecutor(t)
	if !limited {
		t.Skip("this machine cannot enforce the test server's limits")
	}
	rep := runAgainst(t, localServerWith(t, e), "limits", "exit-reasons")
	for _, c := range rep.Cases {
		require.Equal(t, conform.Pass, c.Outcome, "%s: %s", c.Name, c.Detail)
	}
}

// TestBrowserCases runs the cases of the browser mechanisms (bearer
// subprotocol, pings) against the real server on their own.
func TestBrowserCases(t *testing.T) {
	rep := runAgainst(t, localServer(t), "handshake-bearer-subprotocol", "pings")
	require.Len(t, rep.Cases, 2)
	for _, c := range rep.Cases {
		require.Equal(t, conform.Pass, c.Outcome, "%s: %s", c.Name, c.Detail)
	}
}
