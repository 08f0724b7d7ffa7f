package linkproxy

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echoServer echoes every connection until EOF.
func echoServer(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	t.Cleanup(func() { _ = ln.Close(); <-done })
	return ln.Addr().String()
}

// The link delivers every byte in order, no faster than its rate, and a
// round trip takes at least twice the latency.
func TestShapedEcho(t *testing.T) {
	const rate = 8e6 // 1 MB/s
	p, err := Start(echoServer(t), Config{BitsPerSecond: rate, Latency: 5 * time.Millisecond})
	require.NoError(t, err)
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	defer c.Close()

	start := time.Now()
	_, err = c.Write([]byte("x"))
	require.NoError(t, err)
	one := make([]byte, 1)
	_, err = io.ReadFull(c, one)
	require.NoError(t, err)
	require.GreaterOrEqual(t, time.Since(start), 10*time.Millisecond, "two one-way latencies")

	payload := make([]byte, 512<<10)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	start = time.Now()
	go func() { _, _ = c.Write(payload) }()
	got := make([]byte, len(payload))
	_, err = io.ReadFull(c, got)
	require.NoError(t, err)
	require.Equal(t, payload, got)
	// 512 KiB at 1 MB/s, less one burst of 16 KiB per direction.
	require.GreaterOrEqual(t, time.Since(start), 450*time.Millisecond, "limited to the rate")
}

func TestStartRefusesZeroRate(t *testing.T) {
	_, err := Start("127.0.0.1:1", Config{})
	require.Error(t, err)
}
