package main

import (
	"bufio"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestCommands drives the command over its stdin: a connection through the
// proxy is cut by cutall and by a count, and bad commands change nothing.
func TestCommands(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); c.Close() }() // echo
		}
	}()

	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan int, 1)
	go func() { done <- run([]string{"-target", ln.Addr().String()}, inR, outW, io.Discard); outW.Close() }()
	out := bufio.NewScanner(outR)
	say := func(cmd string) string {
		_, err := io.WriteString(inW, cmd+"\n")
		require.NoError(t, err)
		require.True(t, out.Scan())
		return out.Text()
	}
	require.True(t, out.Scan())
	addr, ok := strings.CutPrefix(out.Text(), "addr ")
	require.True(t, ok, out.Text())

	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	_, err = c.Write([]byte("ping"))
	require.NoError(t, err)
	buf := make([]byte, 4)
	_, err = io.ReadFull(c, buf)
	require.NoError(t, err)
	require.Equal(t, "accepted 1", say("accepted"))
	require.Equal(t, "cut 1", say("cutall"))
	_, err = c.Read(buf)
	require.Error(t, err, "the connection was cut")
	c.Close()

	require.Equal(t, "ok", say("cutat 3"))
	c, err = net.Dial("tcp", addr)
	require.NoError(t, err)
	_, err = c.Write([]byte("abcdef"))
	require.NoError(t, err)
	require.Equal(t, "cuts 2", say("wait 2"))
	c.Close()

	require.True(t, strings.HasPrefix(say("cutat -1"), "error"))
	require.True(t, strings.HasPrefix(say("refuse maybe"), "error"))
	require.True(t, strings.HasPrefix(say("fly"), "error"))
	require.Equal(t, "ok", say("refuse true"))
	require.Equal(t, "ok", say("drop false"))
	require.Equal(t, "cuts 2", say("cuts"))

	inW.Close()
	require.Equal(t, 0, <-done)
}
