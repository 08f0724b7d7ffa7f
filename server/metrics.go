package server

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"
)

// Refusal reasons, the "reason" label of procwire_refusals_total and the
// "reason" attribute of the "refused" log line.
const (
	refuseUnauthorized = "unauthorized"     // missing or wrong bearer token (401)
	refuseNotLocal     = "not_local"        // no token and a request not from this machine (403)
	refuseOrigin       = "origin"           // a foreign Origin (403)
	refuseUpgrade      = "bad_upgrade"      // not a valid WebSocket upgrade
	refuseShutdown     = "server_shutdown"  // the server is shutting down
	refuseSubprotocol  = "no_subprotocol"   // procwire.v1 not negotiated (1002)
	refuseRouting      = "routing_mismatch" // routing header against the first frame (1002)
	refuseStale        = "stale_connection" // open or resume from a connection older than the attached one (4001)
	refuseConnections  = "max_connections"  // Config.MaxConnections reached (503)
)

// metrics are a Server's Prometheus instruments. A nil *metrics (no
// Config.Registerer) records nothing: every method is a no-op on nil, so
// the call sites stay one line each.
type metrics struct {
	opened, destroyed, expired prometheus.Counter

	stdinIn, stdoutOut, stderrOut prometheus.Counter
	stdoutReplayed                prometheus.Counter
	stderrDropped                 prometheus.Counter

	resumes, replayGaps prometheus.Counter
	refusals            *prometheus.CounterVec // reason, code
	closes              *prometheus.CounterVec // code

	destroySeconds prometheus.Histogram
	resumeSeconds  prometheus.Histogram
}

// newMetrics registers a Server's instruments with reg, or returns nil
// when reg is nil.
func newMetrics(reg prometheus.Registerer, s *Server) (*metrics, error) {
	if reg == nil {
		return nil, nil
	}
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "procwire", Name: name, Help: help})
	}
	bytes := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "procwire", Name: "stream_bytes_total",
		Help: "Stream bytes carried: stdin from clients (in), stdout and stderr to clients (out, replays included).",
	}, []string{"stream", "direction"})
	m := &metrics{
		opened:         counter("processes_opened_total", "Processes started by an open."),
		destroyed:      counter("processes_destroyed_total", "Processes destroyed by a destroy or by shutdown."),
		expired:        counter("processes_expired_total", "Processes destroyed because no resume came within the grace."),
		stdinIn:        bytes.WithLabelValues("stdin", "in"),
		stdoutOut:      bytes.WithLabelValues("stdout", "out"),
		stderrOut:      bytes.WithLabelValues("stderr", "out"),
		stdoutReplayed: counter("stdout_replayed_bytes_total", "Stdout bytes held at a resume that the resuming client had not received."),
		stderrDropped:  counter("stderr_dropped_bytes_total", "Stderr bytes a client never received because the lossy ring had overwritten them."),
		resumes:        counter("resumes_total", "Resumes that reattached a process (a resume, or an open repeated with its open_key)."),
		replayGaps:     counter("replay_gaps_total", "Resumes refused because stdout the client lacks is no longer held (replay_gap)."),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "procwire", Name: "refusals_total",
			Help: "Requests refused, by reason and by the HTTP status or WebSocket close code that ended them.",
		}, []string{"reason", "code"}),
		closes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "procwire", Name: "connections_closed_total",
			Help: "Upgraded connections ended, by WebSocket close code (1006: dropped without a close handshake; other: a code from the peer that RFC 6455 does not define).",
		}, []string{"code"}),
		destroySeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "procwire", Name: "destroy_seconds",
			Help:    "Time to destroy a process (signal the group, reap, drain), by destroy, expiry or shutdown.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
		}),
		resumeSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "procwire", Name: "resume_seconds",
			Help:    "Time a process spent detached before a resume reattached it (0 when its old connection was still attached).",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 14),
		}),
	}
	for _, c := range []prometheus.Collector{
		m.opened, m.destroyed, m.expired, bytes, m.stdoutReplayed, m.stderrDropped,
		m.resumes, m.replayGaps, m.refusals, m.closes, m.destroySeconds, m.resumeSeconds,
		stateCollector{s},
	} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("server: register metrics: %w", err)
		}
	}
	return m, nil
}

func (m *metrics) processOpened() {
	if m != nil {
		m.opened.Inc()
	}
}

func (m *metrics) processRetired(expired bool, took time.Duration) {
	if m == nil {
		return
	}
	if expired {
		m.expired.Inc()
	} else {
		m.destroyed.Inc()
	}
	m.destroySeconds.Observe(took.Seconds())
}

func (m *metrics) stdinReceived(n int) {
	if m != nil {
		m.stdinIn.Add(float64(n))
	}
}

func (m *metrics) stdoutSent(n int) {
	if m != nil {
		m.stdoutOut.Add(float64(n))
	}
}

func (m *metrics) stderrSent(n int) {
	if m != nil {
		m.stderrOut.Add(float64(n))
	}
}

// stderrSkipped counts stderr bytes skipped over: the ring no longer held
// them when a connection was due to send them.
func (m *metrics) stderrSkipped(n int64) {
	if m != nil && n > 0 {
		m.stderrDropped.Add(float64(n))
	}
}

// resumed counts a resume that will replay replayed stdout bytes, after the
// process was detached for detached.
func (m *metrics) resumed(replayed int64, detached time.Duration) {
	if m == nil {
		return
	}
	m.resumes.Inc()
	m.stdoutReplayed.Add(float64(max(replayed, 0)))
	m.resumeSeconds.Observe(detached.Seconds())
}

func (m *metrics) replayGap() {
	if m != nil {
		m.replayGaps.Inc()
	}
}

// refused counts a refusal for reason ended by code, an HTTP status or a
// WebSocket close code.
func (m *metrics) refused(reason string, code int) {
	if m != nil {
		m.refusals.WithLabelValues(reason, strconv.Itoa(code)).Inc()
	}
}

// closed counts a connection that ended with st: the code sent, or the
// one received from the peer, or 1006 for a connection dropped.
func (m *metrics) closed(st closeStatus) {
	if m != nil {
		m.closes.WithLabelValues(closeCodeLabel(st.code)).Inc()
	}
}

// closeCodeLabel is the metrics label of a close code: the code itself for
// the codes RFC 6455 defines and the ones this server sends, and
// closeCodeOther for any other code a peer chose, so that peers cannot
// make a label per value (about 2,000 are possible).
func closeCodeLabel(code websocket.StatusCode) string {
	switch code {
	case websocket.StatusNormalClosure, websocket.StatusGoingAway, websocket.StatusProtocolError,
		websocket.StatusUnsupportedData, websocket.StatusNoStatusRcvd, websocket.StatusAbnormalClosure,
		websocket.StatusInvalidFramePayloadData, websocket.StatusPolicyViolation, websocket.StatusMessageTooBig,
		websocket.StatusMandatoryExtension, websocket.StatusInternalError, websocket.StatusServiceRestart,
		websocket.StatusTryAgainLater, websocket.StatusBadGateway, websocket.StatusTLSHandshake,
		statusResumedElsewhere:
		return strconv.Itoa(int(code))
	}
	return closeCodeOther
}

// closeCodeOther labels every close code closeCodeLabel does not name.
const closeCodeOther = "other"

// stateCollector reports the gauges taken from a snapshot of the server
// at scrape time, so they can never drift from the state itself.
type stateCollector struct{ s *Server }

var (
	descLive = prometheus.NewDesc("procwire_processes_live",
		"Processes held: running or exited but not destroyed, attached or detached.", nil, nil)
	descDetached = prometheus.NewDesc("procwire_processes_detached",
		"Processes held with no connection attached, waiting for a resume within the grace.", nil, nil)
	descConns = prometheus.NewDesc("procwire_connections",
		"Upgraded connections being served.", nil, nil)
	descHeld = prometheus.NewDesc("procwire_stdout_held_bytes",
		"Stdout bytes held unacknowledged, over all processes.", nil, nil)
	descWindow = prometheus.NewDesc("procwire_stdout_window_bytes",
		"Stdout windows granted, over all processes: held/window is the occupancy.", nil, nil)
	descFull = prometheus.NewDesc("procwire_stdout_window_full_processes",
		"Processes whose stdout window is full: their child blocks on its stdout pipe until the client acknowledges.", nil, nil)
)

func (c stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLive, descDetached, descConns, descHeld, descWindow, descFull} {
		ch <- d
	}
}

func (c stateCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.s.Stats()
	var detached, held, window, full int
	for _, p := range st.Processes {
		if !p.Attached {
			detached++
		}
		held += p.StdoutHeld
		window += p.StdoutWindow
		if p.StdoutHeld >= p.StdoutWindow {
			full++
		}
	}
	gauge := func(d *prometheus.Desc, v int) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v))
	}
	gauge(descLive, len(st.Processes))
	gauge(descDetached, detached)
	gauge(descConns, st.Connections)
	gauge(descHeld, held)
	gauge(descWindow, window)
	gauge(descFull, full)
}

// HealthHandler answers a load balancer's health check: 200 "ok" while the
// server accepts connections, 503 once Drain, Shutdown or Close has begun. Serve
// it beside the metrics, on a listener apart from the process endpoint.
func (s *Server) HealthHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		if s.isClosing() {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte("shutting down\n"))
			return
		}
		if s.isDraining() {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte("draining\n"))
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
}
