package conform_test

import (
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/conform"
	"github.com/procwire/procwire/frames"
	"github.com/procwire/procwire/server"
)

var ttyCases = []string{"tty", "tty-replay"}

// TestTTYCases: the terminal cases pass against the real server, and are
// recorded skips against one that gives no terminals (NoTTY, as serve
// --no-tty) and against one that predates open.tty (1007 unknown_field).
func TestTTYCases(t *testing.T) {
	rep := runAgainst(t, localServer(t), ttyCases...)
	for _, c := range rep.Cases {
		require.Equal(t, conform.Pass, c.Outcome, "%s: %s", c.Name, c.Detail)
	}

	srv, err := server.New(server.Config{Token: testToken, NoTTY: true, Grace: 3 * time.Second, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	ts := httptest.NewServer(srv)
	t.Cleanup(func() {
		require.NoError(t, srv.Close())
		ts.Close()
	})
	rep = runAgainst(t, "ws"+strings.TrimPrefix(ts.URL, "http"), ttyCases...)
	require.True(t, rep.OK())
	for _, c := range rep.Cases {
		require.Equal(t, conform.Skip, c.Outcome, "%s: %s", c.Name, c.Detail)
		require.Contains(t, c.Detail, "gives no terminals")
	}

	earlier := brokenServer(t, fault{refuse: func(f frames.Frame) string {
		if o, ok := f.(*frames.Open); ok && o.TTY != nil {
			return "open.tty: unknown_field"
		}
		return ""
	}})
	rep = runAgainst(t, earlier, ttyCases...)
	require.True(t, rep.OK())
	for _, c := range rep.Cases {
		require.Equal(t, conform.Skip, c.Outcome, "%s: %s", c.Name, c.Detail)
		require.Contains(t, c.Detail, "does not implement open.tty")
	}
}
