package main

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/procwire/procwire/bench"
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

// A short cold workload fills its three metrics for every peer, and the
// chart draws them.
func TestColdWorkload(t *testing.T) {
	peers, err := bench.NewPeers()
	require.NoError(t, err)
	defer func() {
		for _, p := range peers {
			require.NoError(t, p.Close())
		}
	}()
	w := coldWorkload(4)
	for _, m := range w.metrics {
		m.addRound(len(peers))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, w.all(ctx, peers, 0))
	for _, m := range w.metrics {
		for p := range peers {
			require.Positive(t, m.values[0][p], "%s %s", m.name, peers[p].Name())
		}
	}
	require.LessOrEqual(t, w.metrics[0].values[0][peerP], w.metrics[1].values[0][peerP])
	svg := chart("title", w.metrics)
	require.Contains(t, svg, "cold first byte (dial, echo), p99")
}

// A baseline binary (here a script replaying a78d922's usage and table)
// runs with the workloads it has and the same sizes, and its P figures
// become the round's before; one that fails leaves the round without.
func TestBaselineRound(t *testing.T) {
	dir := t.TempDir()
	usage, err := filepath.Abs("testdata/old-usage.txt")
	require.NoError(t, err)
	table, err := filepath.Abs("testdata/old-report.txt")
	require.NoError(t, err)
	script := filepath.Join(dir, "report-old")
	require.NoError(t, os.WriteFile(script, []byte(`#!/bin/sh
if [ "$1" = -h ]; then cat `+usage+` >&2; exit 0; fi
echo "$@" > `+filepath.Join(dir, "args")+`
if [ -e `+filepath.Join(dir, "fail")+` ]; then exit 1; fi
cat `+table+`
`), 0o755))

	cfg := config{baseline: script, size: 4 << 20, echoes: 50, lines: 50, sessions: 8, perSession: 5, cold: 3, init: true}
	ws := newWorkloads(cfg)
	ws[1], ws[2] = ws[2], ws[1] // any order of the workloads
	base, err := newBaseline(cfg, ws)
	require.NoError(t, err)
	require.False(t, base.json)
	ms := metricsOf(ws)
	for _, m := range ms {
		m.addRound(3)
	}
	base.round(0, 1, ms)
	require.Zero(t, base.failed)
	args, err := os.ReadFile(filepath.Join(dir, "args"))
	require.NoError(t, err)
	require.Equal(t, "-rounds 1 -only stdout,echo,stdin,request/response,sessions -svg= -size 4 -echo 50 -lines 50 -sessions 8 -rt 5\n", string(args))
	before, beforeW := map[string]float64{}, map[string]float64{}
	for _, m := range ms {
		before[m.name], beforeW[m.name] = m.before[0], m.beforeW[0]
	}
	require.Equal(t, 137.8, before["stdout, head -c 4M /dev/zero"])
	require.Equal(t, 228.3, before["8 sessions, CPU per round trip"])
	require.Equal(t, 100.7, beforeW["8 sessions, CPU per round trip"])
	require.True(t, math.IsNaN(before["cold first byte (dial, echo), p50"]))

	require.NoError(t, os.WriteFile(filepath.Join(dir, "fail"), nil, 0o644))
	for _, m := range ms {
		m.addRound(3)
	}
	base.round(1, 2, ms)
	require.Equal(t, 1, base.failed)
	require.True(t, math.IsNaN(ms[0].before[1]))

	_, err = newBaseline(config{baseline: filepath.Join(dir, "missing")}, ws)
	require.Error(t, err)
}
