package client_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/frames"
	"github.com/procwire/procwire/server"
)

// Write then Signal: the signal reaches the child after the line, every
// time. The child (this test binary, see signalOrderChild) checks, when the
// signal comes, that the line is already in its stdin pipe.
func TestSignalAfterStdin(t *testing.T) {
	t.Parallel()
	e := newEnv(t, server.Config{})
	c := ctx(t)
	self, err := os.Executable()
	require.NoError(t, err)
	r := req(self)
	r.Environment[childEnv] = "signal-order"
	p := open(t, e.url, r, nil)
	require.Equal(t, "ready\n", readLine(t, c, p.Stdout()))
	for i := range 1000 {
		_, err := p.Stdin().Write([]byte("quit\n"))
		require.NoError(t, err)
		ok, err := p.Signal(c, frames.SIGINT)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, "first quit\n", readLine(t, c, p.Stdout()), "run %d", i)
	}
	require.NoError(t, p.Destroy(c))
}
