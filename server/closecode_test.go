package server

import (
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

// A peer's close code outside the ones RFC 6455 defines is counted under
// one label, "other": a client cannot make a metrics series per code
// (issue 23, finding 8).
func TestUnknownCloseCodesShareOneLabel(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := newHarness(t, Config{Registerer: reg, Heartbeat: -1, FirstFrameTimeout: time.Minute})
	s := newScraper(t, reg)
	base := s.scrape()
	for _, code := range []websocket.StatusCode{4321, 4999, 3000} {
		p := h.dial()
		require.NoError(t, p.ws.Close(code, "bye"))
		h.waitEvent(hookConnCounted, "")
	}
	p := h.dial()
	require.NoError(t, p.ws.Close(websocket.StatusNormalClosure, ""))
	h.waitEvent(hookConnCounted, "")
	after := s.scrape()
	requireDelta(t, base, after, map[string]float64{
		`procwire_connections_closed_total{code="other"}`: 3,
		`procwire_connections_closed_total{code="1000"}`:  1,
	})
	for k := range delta(base, after) {
		require.NotContains(t, k, "4321")
	}
	require.Equal(t, "4001", closeCodeLabel(statusResumedElsewhere))
	require.Equal(t, "other", closeCodeLabel(1004))
}
