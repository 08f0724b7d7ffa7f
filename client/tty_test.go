//go:build linux

package client_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/client"
	"github.com/procwire/procwire/server"
)

// Terminals (PROTOCOL.md §10) through the Go client.

func ttyOpts(rows, cols uint16, term string) *client.Options {
	o := fastOpts()
	o.TTY = &client.TTY{Rows: rows, Cols: cols, Term: term}
	return o
}

// TestTTY: a process opened with TTY runs on a terminal of that size with
// that TERM, Resize reaches it as SIGWINCH with the new size, and Stderr
// ends empty.
func TestTTY(t *testing.T) {
	e := newEnv(t, server.Config{})
	c := ctx(t)
	p := open(t, e.purl, sh(`trap 'stty size; exit 7' WINCH; stty size; echo "$TERM"; while :; do sleep 0.01; done`), ttyOpts(24, 80, "xterm-256color"))
	require.True(t, p.TTY())
	require.Equal(t, "24 80\r\n", readLine(t, c, p.Stdout()))
	require.Equal(t, "xterm-256color\r\n", readLine(t, c, p.Stdout()))
	require.NoError(t, p.Resize(c, 50, 132))
	require.Equal(t, "50 132\r\n", readAll(t, c, p.Stdout()))
	st, err := p.Wait(c)
	require.NoError(t, err)
	require.Equal(t, 7, st.Code)
	require.Equal(t, "", readAll(t, c, p.Stderr()))
}

// TestTTYResizeAcrossCut: a size asked for around a cut reaches the
// terminal: the latest size is sent again on the new connection.
func TestTTYResizeAcrossCut(t *testing.T) {
	e := newEnv(t, server.Config{})
	c := ctx(t)
	p := open(t, e.purl, sh(`stty -echo; echo ready; read x; stty size`), ttyOpts(24, 80, ""))
	require.Equal(t, "ready\r\n", readLine(t, c, p.Stdout()))
	require.NoError(t, p.Resize(c, 10, 20))
	require.Equal(t, 1, e.proxy.CutAll())
	require.NoError(t, p.Resize(c, 33, 99))
	_, err := p.Stdin().Write([]byte("go\r"))
	require.NoError(t, err)
	require.Equal(t, "33 99\r\n", readAll(t, c, p.Stdout()))
	st, err := p.Wait(c)
	require.NoError(t, err)
	require.Equal(t, 0, st.Code)
}

// TestTTYRefusedAndPipes: a server without terminals refuses the open with
// requirement "tty"; Resize on a process on pipes is ErrNoTTY.
func TestTTYRefusedAndPipes(t *testing.T) {
	e := newEnv(t, server.Config{NoTTY: true})
	c := ctx(t)
	_, err := client.Open(c, e.url, instanceID(t), sh("true"), ttyOpts(24, 80, ""))
	var re *client.RemoteError
	require.True(t, errors.As(err, &re), "%v", err)
	require.Equal(t, server.RequirementTTY, re.Frame.Requirement)

	p := open(t, e.url, sh(`tty || true`), nil)
	require.False(t, p.TTY())
	require.ErrorIs(t, p.Resize(c, 1, 1), client.ErrNoTTY)
	require.True(t, strings.HasPrefix(readAll(t, c, p.Stdout()), "not a tty"))
}
