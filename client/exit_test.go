//go:build linux

package client_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/client"
	"github.com/procwire/procwire/frames"
	"github.com/procwire/procwire/server"
)

func TestExitCodes(t *testing.T) {
	e := newEnv(t, server.Config{})
	for _, code := range []int{0, 1, 255} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			c := ctx(t)
			p := open(t, e.url, sh(fmt.Sprintf("exit %d", code)), nil)
			st, err := p.Wait(c)
			require.NoError(t, err)
			require.Equal(t, client.ExitStatus{Code: code}, st)
			require.True(t, st.Exited())
			require.False(t, st.Signaled())
			for range 3 {
				again, err := p.Wait(c)
				require.NoError(t, err)
				require.Equal(t, st, again)
			}
			require.NoError(t, p.Destroy(c))
			again, err := p.Wait(c)
			require.NoError(t, err)
			require.Equal(t, st, again, "Destroy does not change a settled exit")
		})
	}
}

func TestDeathBySignal(t *testing.T) {
	e := newEnv(t, server.Config{})
	for _, sig := range []frames.SignalName{frames.SIGINT, frames.SIGTERM, frames.SIGKILL} {
		t.Run(string(sig), func(t *testing.T) {
			c := ctx(t)
			p := open(t, e.url, sh("echo ready; exec sleep 300"), nil)
			require.Equal(t, "ready\n", readLine(t, c, p.Stdout()))
			delivered, err := p.Signal(c, sig)
			require.NoError(t, err)
			require.True(t, delivered)
			st, err := p.Wait(c)
			require.NoError(t, err)
			require.Equal(t, client.ExitStatus{Signal: string(sig)}, st)
			require.True(t, st.Signaled())
			again, err := p.Wait(c)
			require.NoError(t, err)
			require.Equal(t, st, again)

			delivered, err = p.Signal(c, sig)
			require.NoError(t, err)
			require.False(t, delivered, "already exited")
		})
	}
}

func TestTrappedTermThenKill(t *testing.T) {
	e := newEnv(t, server.Config{})
	c := ctx(t)
	// The ignored SIGTERM is inherited by the whole group.
	p := open(t, e.url, sh(`trap "" TERM; echo ready; while read l; do echo "got $l"; done`), nil)
	require.Equal(t, "ready\n", readLine(t, c, p.Stdout()))
	delivered, err := p.Signal(c, frames.SIGTERM)
	require.NoError(t, err)
	require.True(t, delivered)
	// Still alive: it answers.
	_, err = p.Stdin().WriteContext(c, []byte("ping\n"))
	require.NoError(t, err)
	require.Equal(t, "got ping\n", readLine(t, c, p.Stdout()))

	delivered, err = p.Signal(c, frames.SIGKILL)
	require.NoError(t, err)
	require.True(t, delivered)
	st, err := p.Wait(c)
	require.NoError(t, err)
	require.Equal(t, client.ExitStatus{Signal: "SIGKILL"}, st)
}

func TestSignalRefusesOtherNames(t *testing.T) {
	e := newEnv(t, server.Config{})
	p := open(t, e.url, req("true"), nil)
	_, err := p.Signal(ctx(t), "SIGHUP")
	require.Error(t, err)
}
