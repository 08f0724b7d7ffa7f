//go:build linux

package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/server"
)

// exec -t with a stdin that is not a terminal warns and goes on with
// pipes, as ssh -t does; -T forces pipes without a word.
func TestExecTTYWithoutATerminal(t *testing.T) {
	s := newServer(t, server.Config{})
	probe := []string{"sh", "-c", "if test -t 0; then echo terminal; else echo pipes; fi; cat"}
	r := runBin(t, "in\n", nil, execArgs(s.url, []string{"-t"}, probe...)...)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "pipes\nin\n", r.stdout)
	require.Equal(t, "procwire exec: warning: stdin is not a terminal: no remote terminal, pipes instead (-t)\n", r.stderr)

	r = runBin(t, "in\n", nil, execArgs(s.url, []string{"-t", "-T"}, probe...)...)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "pipes\nin\n", r.stdout)
	require.Empty(t, r.stderr)
	s.requireNoProcess(t)
}

// A server started with --no-tty refuses exec -t --detach (which needs no
// local terminal) naming the requirement, and runs pipes as before.
func TestServeNoTTY(t *testing.T) {
	url := startServe(t, "--no-tty")
	r := runBin(t, "", nil, execArgs(url, []string{"-t", "--detach"}, "true")...)
	require.Equal(t, exitFailure, r.code, r.stderr)
	require.Contains(t, r.stderr, "SandboxCapabilityUnavailable")
	require.Contains(t, r.stderr, "tty")
	r = runBin(t, "", nil, execArgs(url, nil, "echo", "pipes")...)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "pipes\n", r.stdout)
}
