//go:build linux

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/bridge"
)

// TestSystemdUnitVerifies: docs/procwire.service delegates its cgroup,
// passes serve only flags it knows, is copied whole into
// docs/operators.md, and systemd-analyze verify finds nothing wrong with
// it (with ExecStart pointed at the procwire binary built for the tests).
func TestSystemdUnitVerifies(t *testing.T) {
	unit, err := os.ReadFile("../../docs/procwire.service")
	require.NoError(t, err)
	require.Regexp(t, `(?m)^Delegate=yes$`, string(unit))

	doc, err := os.ReadFile("../../docs/operators.md")
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(doc), "<!-- procwire.service begins -->\n```ini\n")
	require.True(t, ok, "operators.md has no copy of the unit")
	copied, _, ok := strings.Cut(rest, "```\n<!-- procwire.service ends -->")
	require.True(t, ok)
	require.Equal(t, string(unit), copied, "operators.md's copy of the unit differs from docs/procwire.service")

	help := runBin(t, "", nil, "serve", "--help")
	require.Equal(t, 0, help.code)
	execStart := regexp.MustCompile(`(?ms)^ExecStart=(.*?[^\\])$`).FindStringSubmatch(string(unit))
	require.NotNil(t, execStart)
	for _, flag := range regexp.MustCompile(`--[a-z-]+`).FindAllString(execStart[1], -1) {
		require.Contains(t, help.stdout, "  "+flag+" ", "the unit passes %s, which serve does not know", flag)
	}

	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("systemd-analyze is missing; .ci/run installs systemd")
		}
		t.Skip("no systemd-analyze")
	}
	path := filepath.Join(t.TempDir(), "procwire.service")
	require.NoError(t, os.WriteFile(path, []byte(strings.ReplaceAll(string(unit), "/usr/local/bin/procwire", binary)), 0o644))
	out, err := exec.Command("systemd-analyze", "verify", path).CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Empty(t, strings.TrimSpace(string(out)), "systemd-analyze verify has something to say")
}

// TestSystemdUnitStarts runs serve with the unit's own flags (its token
// file and addresses replaced by the test's): the combination the unit
// names starts and serves.
func TestSystemdUnitStarts(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the unit's --run-as-range needs root")
	}
	unit, err := os.ReadFile("../../docs/procwire.service")
	require.NoError(t, err)
	execStart := regexp.MustCompile(`(?ms)^ExecStart=(.*?[^\\])$`).FindStringSubmatch(string(unit))
	require.NotNil(t, execStart)
	args := strings.Fields(strings.ReplaceAll(execStart[1], "\\\n", " "))
	require.Equal(t, "/usr/local/bin/procwire", args[0])
	token := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(token, []byte("unit-test-token-0123456789abcdef\n"), 0o600))
	for i := 1; i < len(args)-1; i++ {
		switch args[i] {
		case "--addr", "--metrics-addr":
			args[i+1] = "127.0.0.1:0"
		case "--token-file":
			args[i+1] = token
		}
	}
	// The unit's limits must be enforceable here.
	var l bridge.Limits
	for i := 1; i < len(args)-1; i++ {
		switch args[i] {
		case "--limit-pids":
			err = sizeFlag{&l.Pids, false}.Set(args[i+1])
		case "--limit-memory":
			err = sizeFlag{&l.Memory, true}.Set(args[i+1])
		case "--limit-cpu":
			l.CPU, err = strconv.ParseFloat(args[i+1], 64)
		}
		require.NoError(t, err)
	}
	if _, err := bridge.NewContainment(bridge.ContainOptions{Limits: l}); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the unit's limits cannot be enforced: %v", err)
		}
		t.Skipf("the unit's limits cannot be enforced here: %v", err)
	}
	url, logs := startLogged(t, exec.Command(binary, args[1:]...))
	require.NotEmpty(t, url)
	require.Contains(t, logs(), "enforced_by=")
}
