package server

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/stretchr/testify/require"
)

// scraper reads a metrics endpoint over HTTP, as Prometheus would.
type scraper struct {
	t   *testing.T
	url string
}

func newScraper(t *testing.T, reg *prometheus.Registry) *scraper {
	ts := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(ts.Close)
	return &scraper{t: t, url: ts.URL}
}

// scrape returns every sample of the text exposition format, keyed by
// "name{labels}" as exposed (labels in the exposition's sorted order).
func (s *scraper) scrape() map[string]float64 {
	s.t.Helper()
	resp, err := http.Get(s.url)
	require.NoError(s.t, err)
	defer resp.Body.Close()
	require.Equal(s.t, http.StatusOK, resp.StatusCode)
	b, err := io.ReadAll(resp.Body)
	require.NoError(s.t, err)
	return parseExposition(s.t, b)
}

func parseExposition(t *testing.T, b []byte) map[string]float64 {
	samples := make(map[string]float64)
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		require.Positive(t, i, "sample line %q", line)
		v, err := strconv.ParseFloat(line[i+1:], 64)
		require.NoError(t, err, "sample line %q", line)
		samples[line[:i]] = v
	}
	return samples
}

// delta returns after-before for every series in after that changed.
func delta(before, after map[string]float64) map[string]float64 {
	d := make(map[string]float64)
	for k, v := range after {
		if v != before[k] {
			d[k] = v - before[k]
		}
	}
	return d
}

// requireDelta checks that the counters named in want moved by exactly
// want between two scrapes; gauges are checked by value elsewhere.
func requireDelta(t *testing.T, before, after map[string]float64, want map[string]float64) {
	t.Helper()
	d := delta(before, after)
	for k, v := range want {
		require.Equal(t, v, d[k], "%s moved by %v", k, d[k])
	}
}
