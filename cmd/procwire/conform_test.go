//go:build linux

package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/conform"
	"github.com/procwire/procwire/server"
)

func TestConformCommand(t *testing.T) {
	const token = "conform-cmd-token"
	s := newServer(t, server.Config{Token: token, Grace: 2 * time.Second})
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte(token+"\n"), 0o600))
	report := filepath.Join(dir, "report.json")

	r := runBin(t, "", nil, "conform", "--token-file", tokenFile, "--json", report,
		"--case", "handshake-token", "--case", "open-evidence", "--case", "grace-expiry", "--case", "heartbeat", s.url)
	require.Equal(t, 0, r.code, "%s\n%s", r.stdout, r.stderr)
	require.Contains(t, r.stdout, "open-evidence")
	require.Contains(t, r.stdout, "3 passed, 0 failed, 1 skipped", "heartbeat is skipped: the default heartbeat is long")
	b, err := os.ReadFile(report)
	require.NoError(t, err)
	require.NoError(t, conform.VerifyReport(b))
	s.requireNoProcess(t)

	// A server without a token does not refuse an upgrade without one:
	// asking for the 401 check against it fails, exit status 1.
	open := newServer(t, server.Config{})
	r = runBin(t, "", nil, "conform", "--token-file", tokenFile, "--case", "handshake-token", open.url)
	require.Equal(t, 1, r.code, r.stdout)
	require.Contains(t, r.stdout, "FAIL")

	r = runBin(t, "", nil, "conform", "--case", "no-such-case", s.url)
	require.Equal(t, 2, r.code, r.stderr)
	require.Equal(t, 2, runBin(t, "", nil, "conform").code)
	r = runBin(t, "", nil, "conform", "--list")
	require.Equal(t, 0, r.code)
	require.Contains(t, r.stdout, "replay-gap")
}
