//go:build linux

package bridge

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/procwire/procwire/bridge/internal/initproc"
	"github.com/stretchr/testify/require"
)

// TestNothingSecretOnACommandLine: /proc/PID/cmdline is readable by every
// local user (ps shows it), so the request's environment, and its program
// and arguments, never appear on the command line of the init that starts
// it; they reach the init over its control pipe. The test reads every
// /proc/*/cmdline while a process with a secret in its environment runs.
func TestNothingSecretOnACommandLine(t *testing.T) {
	eachContainment(t, func(t *testing.T, c *Containment) {
		req, mark := marked(t, `echo started; exec sleep 300`)
		req.Environment["API_KEY"] = "hunter2-" + strings.TrimPrefix(mark, "PROCWIRE_TEST_MARK=")
		p, err := c.Start(req, nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = p.Destroy() })
		var out bytes.Buffer
		newConsumer(t, p, &out).until("started", func() bool { return strings.Contains(out.String(), "started") })
		requireMarkedAlive(t, mark, "the process runs")

		paths, err := filepath.Glob("/proc/[0-9]*/cmdline")
		require.NoError(t, err)
		require.NotEmpty(t, paths)
		for _, path := range paths {
			b, err := os.ReadFile(path)
			if err != nil {
				continue // exited meanwhile
			}
			require.NotContains(t, string(b), req.Environment["API_KEY"], path)
			require.NotContains(t, string(b), mark, path)
		}
		if c.initMode() != "" {
			// The init's command line is its name alone.
			b, err := os.ReadFile("/proc/" + itoa(p.Pid()) + "/cmdline")
			require.NoError(t, err)
			require.Equal(t, initproc.Arg0+"\x00", string(b))
		}
		require.NoError(t, p.Destroy())
	})
}
