//go:build linux

package client_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/client"
	"github.com/procwire/procwire/frames"
	"github.com/procwire/procwire/server"
)

func TestCompressedEcho(t *testing.T) {
	e := newEnv(t, server.Config{})
	c := ctx(t)
	opts := fastOpts()
	opts.Compress = true
	p := open(t, e.url, req("cat"), opts)
	h := p.Handle()
	require.Equal(t, frames.EncS2, h.OutputEnc, "the server chose s2")
	require.Equal(t, frames.EncS2, h.StdinEnc)
	var in bytes.Buffer
	for i := 0; in.Len() < 300<<10; i++ {
		fmt.Fprintf(&in, `{"jsonrpc":"2.0","method":"session/update","params":{"n":%d}}`+"\n", i)
	}
	go func() {
		_, _ = p.Stdin().WriteContext(c, in.Bytes())
		_ = p.Stdin().CloseContext(c)
	}()
	require.Equal(t, in.String(), readAll(t, c, p.Stdout()))
	_, err := p.Wait(c)
	require.NoError(t, err)
}

func TestCompressionNotAskedFor(t *testing.T) {
	for _, tc := range []struct {
		name   string
		script func(fc *fakeConn, o *frames.Open)
		field  string
	}{
		{"opened chooses s2", func(fc *fakeConn, o *frames.Open) {
			op := opened(o)
			op.OutputEnc = frames.EncS2
			fc.send(op)
		}, "opened.output_enc"},
		{"stdout compressed", func(fc *fakeConn, o *frames.Open) {
			fc.send(opened(o))
			fc.send(&frames.Stdout{Data: bytes.Repeat([]byte("abcd"), 100), Enc: frames.EncS2})
		}, "stdout.enc"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, func(fc *fakeConn, first frames.Frame) {
				if o, ok := first.(*frames.Open); ok {
					require.Empty(t, o.OutputEnc, "a client without Compress lists no encoding")
					tc.script(fc, o)
					answerDestroy(fc)
				}
			})
			c := ctx(t)
			p, err := client.Open(c, f.url, "inst-1", req("cat"), fastOpts())
			if err == nil {
				_, err = p.Stdout().ReadContext(c, make([]byte, 10))
				_ = p.Destroy(c)
			}
			var pe *client.ProtocolError
			require.True(t, errors.As(err, &pe), "%v", err)
			require.Equal(t, tc.field, pe.Field)
		})
	}
}
