//go:build unix

package main

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

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
