//go:build linux

package server

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/frames"
)

// TestMetricsFollowAStreamWithACut streams through a remote cat, cuts the
// connection, resumes, is refused in four ways, destroys, and lets a
// second process expire, scraping the metrics endpoint at each step: every
// counter moves by exactly what happened and the gauges tell the state.
func TestMetricsFollowAStreamWithACut(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := newHarness(t, Config{Registerer: reg, Grace: 3 * time.Second, StderrRing: 1 << 10, Heartbeat: -1})
	s := newScraper(t, reg)
	base := s.scrape()
	require.Equal(t, 0.0, base["procwire_processes_live"])

	// A stream: 3,000 bytes through cat, 2,000 of them acknowledged, and
	// 5,000 bytes of stderr through a 1 KiB ring.
	p, opened := h.sh("inst-m", "head -c 5000 /dev/zero >&2; exec cat")
	chunk := bytes.Repeat([]byte("x"), 1000)
	var got, errEnd, errBytes int64
	// read reads until stdout reaches n, acknowledging it when ack.
	read := func(n int64, ack bool) {
		for got < n {
			switch f := p.next().(type) {
			case *frames.Stdout:
				got += int64(len(f.Data))
				if ack {
					p.send(&frames.Ack{Stdout: got})
				}
			case *frames.Stderr:
				errBytes += int64(len(f.Data))
				errEnd = f.Off + int64(len(f.Data))
			case *frames.Credit:
			default:
				t.Fatalf("unexpected %s", f.Type())
			}
		}
	}
	p.send(&frames.Stdin{Off: 0, Data: chunk})
	p.send(&frames.Stdin{Off: 1000, Data: chunk})
	read(2000, true)
	// The server reads in order: the last stdin is served after the acks,
	// so its echo proves them counted.
	p.send(&frames.Stdin{Off: 2000, Data: chunk})
	read(3000, false)
	for errEnd < 5000 {
		f := nextOf[*frames.Stderr](p)
		errBytes += int64(len(f.Data))
		errEnd = f.Off + int64(len(f.Data))
	}
	require.Equal(t, int64(3000), got)
	mid := s.scrape()
	requireDelta(t, base, mid, map[string]float64{
		"procwire_processes_opened_total":                              1,
		`procwire_stream_bytes_total{direction="in",stream="stdin"}`:   3000,
		`procwire_stream_bytes_total{direction="out",stream="stdout"}`: 3000,
		`procwire_stream_bytes_total{direction="out",stream="stderr"}`: float64(errBytes),
		"procwire_stderr_dropped_bytes_total":                          float64(5000 - errBytes),
	})
	require.Equal(t, 1.0, mid["procwire_processes_live"])
	require.Equal(t, 0.0, mid["procwire_processes_detached"])
	require.Equal(t, 1.0, mid["procwire_connections"])
	require.Equal(t, float64(opened.StdoutWindow), mid["procwire_stdout_window_bytes"])

	// The cut: the connection drops without a close handshake.
	p.ws.CloseNow()
	h.waitEvent(hookDetached, opened.ProcessID)
	cut := s.scrape()
	requireDelta(t, mid, cut, map[string]float64{`procwire_connections_closed_total{code="1006"}`: 1})
	require.Equal(t, 1.0, cut["procwire_processes_detached"])
	require.Equal(t, 1000.0, cut["procwire_stdout_held_bytes"], "the unacknowledged stdout is held")

	// Refusals: a wrong bearer token, a resume with a wrong token, a
	// resume of stdout no longer held, a routing header that disagrees.
	_, resp, err := h.dialWith(http.Header{"Authorization": {"Bearer nope"}}, []string{frames.Subprotocol})
	require.Error(t, err)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	w := h.dial()
	w.send(&frames.Resume{ProcessID: opened.ProcessID, Token: opened.Token[:63] + flip(opened.Token[63])})
	w.requireError(notFoundError(opResume))
	g := h.dial()
	g.send(&frames.Resume{ProcessID: opened.ProcessID, Token: opened.Token, StdoutReceived: 1000})
	require.Equal(t, "replay_gap", nextOf[*frames.Error](g).Reason)
	g.requireClosed(websocket.StatusNormalClosure, "")
	m := h.dialRouted("", strings.Repeat("0", 32))
	m.send(&frames.Resume{ProcessID: opened.ProcessID, Token: opened.Token})
	require.Equal(t, websocket.StatusProtocolError, m.closed().Code)
	for range 3 { // the three refused connections are counted
		h.waitEvent(hookConnCounted, "")
	}

	// The resume replays the 1,000 bytes not acknowledged.
	r := h.dial()
	r.send(&frames.Resume{ProcessID: opened.ProcessID, Token: opened.Token, StdoutReceived: 2000, StderrReceived: 5000})
	nextOf[*frames.Resumed](r)
	replayed := nextOf[*frames.Stdout](r)
	require.Equal(t, int64(2000), replayed.Off)
	require.Len(t, replayed.Data, 1000)
	r.send(&frames.Ack{Stdout: 3000})
	r.send(&frames.Stdin{Off: 3000, Data: chunk[:200]})
	require.Len(t, nextOf[*frames.Stdout](r).Data, 200)
	resumed := s.scrape()
	requireDelta(t, cut, resumed, map[string]float64{
		"procwire_resumes_total":                                          1,
		"procwire_stdout_replayed_bytes_total":                            1000,
		"procwire_replay_gaps_total":                                      1,
		"procwire_resume_seconds_count":                                   1,
		`procwire_stream_bytes_total{direction="in",stream="stdin"}`:      200,
		`procwire_stream_bytes_total{direction="out",stream="stdout"}`:    1200,
		`procwire_refusals_total{code="401",reason="unauthorized"}`:       1,
		`procwire_refusals_total{code="1000",reason="process_not_found"}`: 1,
		`procwire_refusals_total{code="1000",reason="replay_gap"}`:        1,
		`procwire_refusals_total{code="1002",reason="routing_mismatch"}`:  1,
		`procwire_connections_closed_total{code="1000"}`:                  2,
		`procwire_connections_closed_total{code="1002"}`:                  1,
	})
	require.Equal(t, 0.0, resumed["procwire_processes_detached"])

	// Destroy, then a second process that expires.
	r.send(&frames.Destroy{})
	r.destroyedAnswer(opened.ProcessID)
	e, expiring := h.open(openFrame("inst-e", "sleep", "300"))
	e.ws.CloseNow()
	h.waitEvent(hookExpired, expiring.ProcessID)
	end := s.scrape()
	requireDelta(t, resumed, end, map[string]float64{
		"procwire_processes_opened_total":    1,
		"procwire_processes_destroyed_total": 1,
		"procwire_processes_expired_total":   1,
		"procwire_destroy_seconds_count":     2,
	})
	require.Equal(t, 0.0, end["procwire_processes_live"])
}

func TestMetricsNilRegistererAndDoubleRegistration(t *testing.T) {
	srv, err := New(Config{})
	require.NoError(t, err)
	require.Nil(t, srv.m)
	require.NoError(t, srv.Close())

	reg := prometheus.NewRegistry()
	a, err := New(Config{Registerer: reg})
	require.NoError(t, err)
	defer a.Close()
	_, err = New(Config{Registerer: reg})
	var are prometheus.AlreadyRegisteredError
	require.ErrorAs(t, err, &are)
}

func TestHealthHandler(t *testing.T) {
	srv, err := New(Config{})
	require.NoError(t, err)
	ts := httptest.NewServer(srv.HealthHandler())
	defer ts.Close()
	get := func() int {
		resp, err := http.Get(ts.URL)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, http.StatusOK, get())
	require.NoError(t, srv.Close())
	require.Equal(t, http.StatusServiceUnavailable, get())
}
