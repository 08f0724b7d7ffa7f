package main

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// TestMain is also the init of procwire's children, as main is, and fails
// the run if a test leaves a goroutine behind.
func TestMain(m *testing.M) {
	maybeRunInit()
	goleak.VerifyTestMain(m)
}

// The table of a report from before -json (a78d922, captured in
// testdata) is read back by name, P, W and S, the header and rule aside.
func TestParseOldTable(t *testing.T) {
	f, err := os.Open("testdata/old-report.txt")
	require.NoError(t, err)
	defer f.Close()
	figures, err := parseTable(f)
	require.NoError(t, err)
	require.Len(t, figures, 12)
	require.Equal(t, peerFigures{137.8, 90.62, 31.37}, figures["stdout, head -c 4M /dev/zero"])
	require.Equal(t, peerFigures{2629, 6848, 8990}, figures["8 sessions, 64-byte round trips"])
	require.Equal(t, peerFigures{228.3, 100.7, 111.1}, figures["8 sessions, CPU per round trip"])

	_, err = parseTable(strings.NewReader("report: no peers\n"))
	require.Error(t, err)
	_, err = parseTable(strings.NewReader("| a | µs | 1 | 2 |\n"))
	require.Error(t, err)
}

// What this binary prints, parseTable reads back: the medians, by name.
func TestParseOwnTable(t *testing.T) {
	ms := sampleMetrics()
	var out bytes.Buffer
	printTable(&out, "title", ms)
	figures, err := parseTable(&out)
	require.NoError(t, err)
	require.Equal(t, peerFigures{1500, 1000, 500}, figures[ms[0].name])
	require.Equal(t, peerFigures{3000, 2000, 12000}, figures[ms[1].name])
}

// The old usage lists the five workloads before the cold runs and neither
// -json nor -ttfb; this binary's lists all six and both.
func TestBaselineUsage(t *testing.T) {
	old, err := os.ReadFile("testdata/old-usage.txt")
	require.NoError(t, err)
	require.Equal(t, oldWorkloads, baselineWorkloads(string(old)))
	require.True(t, hasFlag(string(old), "rt"))
	require.True(t, hasFlag(string(old), "svg"))
	require.False(t, hasFlag(string(old), "json"))
	require.False(t, hasFlag(string(old), "ttfb"))
	require.False(t, hasFlag(string(old), "r"))

	require.Equal(t, strings.Split(workloadNames, ", "), baselineWorkloads("workloads to run ("+workloadNames+"); empty: all"))
	require.Equal(t, oldWorkloads, baselineWorkloads("no list"))
}

// -json writes what readJSONFigures reads: the medians, by name, and the
// rounds' before where a baseline ran.
func TestJSONRoundTrip(t *testing.T) {
	ms := sampleMetrics()
	ms[0].before = []float64{1400, math.NaN()}
	ms[0].beforeW = []float64{900, math.NaN()}
	b, err := marshalReport("title", ms)
	require.NoError(t, err)
	require.Contains(t, string(b), "\"before\": [\n        1400,\n        null\n      ],")
	require.Contains(t, string(b), "\"before_w\": [\n        900,\n        null\n      ]")
	path := filepath.Join(t.TempDir(), "r.json")
	require.NoError(t, os.WriteFile(path, b, 0o644))
	figures, err := readJSONFigures(path)
	require.NoError(t, err)
	require.Equal(t, peerFigures{1500, 1000, 500}, figures[ms[0].name])
	require.Equal(t, peerFigures{3000, 2000, 12000}, figures[ms[1].name])
}

// A goal holds in the median and, with a share, in enough rounds; a
// difference is P minus the peer.
func TestGoals(t *testing.T) {
	ms := sampleMetrics()
	rate, cold := ms[0], ms[1]
	ok := func(g goal) bool { _, _, met := g.check(); return met }
	require.True(t, ok(goal{m: rate, peer: peerW, limit: 0.9}))
	require.True(t, ok(goal{m: rate, peer: peerW, limit: 0.9, share: 1}))
	require.False(t, ok(goal{m: rate, peer: peerW, limit: 1.6}))
	require.True(t, ok(goal{m: cold, peer: peerS, limit: 0.25}))
	require.False(t, ok(goal{m: cold, peer: peerW, limit: 200, diff: true}))
	require.True(t, ok(goal{m: cold, peer: peerW, limit: 1000, diff: true}))
	figure, rounds, _ := goal{m: cold, peer: peerW, limit: 200, diff: true}.check()
	require.Equal(t, 1000.0, figure)
	require.Equal(t, 0, rounds)
	require.Equal(t, "P − W ≤ 200.0 µs", goal{m: cold, peer: peerW, limit: 200, diff: true}.String())
}

// The before/after table compares P with the baseline's P per round and
// says "worse" only beyond the rounds' own spread.
func TestBeforeAfter(t *testing.T) {
	ms := sampleMetrics()
	ms[0].before = []float64{1500, 1500} // the same
	ms[0].beforeW = []float64{1000, 1000}
	ms[1].before = []float64{1000, 1000}  // cold was 3× faster before
	ms[1].beforeW = []float64{1000, 1000} // and W twice as fast
	var out bytes.Buffer
	printBeforeAfter(&out, &baseline{path: "old"}, ms)
	rows := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, rows, 5)
	require.True(t, strings.HasSuffix(rows[3], "| 1500 | 1500 | 1.00 | 0.93–1.07 | 1.00 | 0% | 13% |  |"), rows[3])
	require.True(t, strings.HasSuffix(rows[4], "| 1000 | 3000 | 3.00 | 3.00–3.00 | 1.50 | 0% | 0% | worse |"), rows[4])
}

// sampleMetrics returns a rate and a time over two rounds.
func sampleMetrics() []*metric {
	rate := &metric{name: "stdout, head -c 1M /dev/zero", unit: "MB/s", higher: true}
	cold := &metric{name: "cold first byte (dial, echo), p50", unit: "µs"}
	for range 2 {
		rate.addRound(3)
		cold.addRound(3)
	}
	rate.values = [][]float64{{1400, 1000, 500}, {1600, 1000, 500}}
	cold.values = [][]float64{{3000, 2000, 12000}, {3000, 2000, 12000}}
	return []*metric{rate, cold}
}
