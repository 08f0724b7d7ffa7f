//go:build linux

package server

import (
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/frames"
)

// A flood of signals writes nothing at Info, and a flood of refusals
// writes one line a second per reason at Info, plus the count of the
// others (issue 23, finding 5: 20,000 SIGINTs in 0.4 s wrote 3 MB).
func TestSignalAndRefusalFloodsAreNotLoggedAtInfo(t *testing.T) {
	var logs syncBuffer
	h := newHarness(t, Config{Heartbeat: -1, Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	var clock atomic.Int64 // seconds
	clock.Store(1e9)
	h.srv.refusals.now = func() time.Time { return time.Unix(clock.Load(), 0) } // set before any refusal

	p, opened := h.sh("inst-flood", `trap "" INT; exec cat`)
	for id := int64(1); id <= 500; id++ {
		p.send(&frames.Signal{ID: id, Signal: frames.SIGINT})
	}
	for id := int64(1); id <= 500; id++ {
		require.Equal(t, id, nextOf[*frames.Signaled](p).ID)
	}
	require.False(t, strings.Contains(logs.String(), "msg=signal"), "a signal was logged at info")

	for range 50 {
		_, resp, err := h.dialWith(http.Header{"Authorization": {"Bearer wrong-token-0123456789"}}, []string{frames.Subprotocol})
		require.Error(t, err)
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	}
	require.Equal(t, 1, strings.Count(logs.String(), "msg=refused"), logs.String())
	clock.Add(2)
	_, _, err := h.dialWith(http.Header{"Authorization": {"Bearer wrong-token-0123456789"}}, []string{frames.Subprotocol})
	require.Error(t, err)
	out := logs.String()
	require.Equal(t, 2, strings.Count(out, "msg=refused"), out)
	require.Contains(t, out, `msg="lines logged at debug only" key=unauthorized suppressed=49`)
	p.send(&frames.Destroy{})
	p.destroyedAnswer(opened.ProcessID)
}
