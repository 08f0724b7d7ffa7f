//go:build linux

package client_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/client"
	"github.com/procwire/procwire/server"
)

func TestEchoHalfClose(t *testing.T) {
	e := newEnv(t, server.Config{})
	c := ctx(t)
	p := open(t, e.url, req("wc", "-c"), nil)
	n, err := p.Stdin().WriteContext(c, []byte("hello, world\n"))
	require.NoError(t, err)
	require.Equal(t, 13, n)
	require.NoError(t, p.Stdin().CloseContext(c))
	require.Equal(t, "13\n", readAll(t, c, p.Stdout()))
	st, err := p.Wait(c)
	require.NoError(t, err)
	require.Equal(t, client.ExitStatus{}, st)
	require.NoError(t, p.Destroy(c))
	st2, err := p.Wait(c)
	require.NoError(t, err)
	require.Equal(t, st, st2)
}
