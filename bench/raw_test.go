package bench

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"
)

// rawChunk is the read size of the baseline's pump, the same 32 KiB the
// bridge reads from a child's pipe.
const rawChunk = 32 << 10

// rawHandler is the baseline: it runs argv through exec (no shell), feeds
// the child's stdin from the binary messages it receives and sends the
// child's stdout back as binary messages of at most rawChunk bytes, on a
// plain coder/websocket connection, closing normally at the stdout's EOF.
// It has no framing, no flow control and no replay: the floor procwire's
// overhead is measured against.
func rawHandler(argv []string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		ctx := r.Context()
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		in, err := cmd.StdinPipe()
		if err != nil {
			return
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			return
		}
		if err := cmd.Start(); err != nil {
			return
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			buf := make([]byte, rawChunk)
			for {
				n, err := out.Read(buf)
				if n > 0 && c.Write(ctx, websocket.MessageBinary, buf[:n]) != nil {
					return
				}
				if err != nil {
					c.Close(websocket.StatusNormalClosure, "")
					return
				}
			}
		}()
		for {
			_, b, err := c.Read(ctx)
			if err != nil {
				break
			}
			if _, err := in.Write(b); err != nil {
				break
			}
		}
		in.Close()
		<-done
		_ = cmd.Wait()
	}
}

// readRaw reads binary messages until the server's normal close and
// returns the number of payload bytes received.
func readRaw(ctx context.Context, url string) (int64, error) {
	c, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		return 0, err
	}
	defer c.CloseNow()
	c.SetReadLimit(rawChunk)
	buf := make([]byte, rawChunk)
	var total int64
	for {
		_, r, err := c.Reader(ctx)
		if websocket.CloseStatus(err) == websocket.StatusNormalClosure {
			return total, nil
		}
		if err != nil {
			return total, err
		}
		for {
			n, err := r.Read(buf)
			total += int64(n)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return total, err
			}
		}
	}
}

func benchmarkRaw(b *testing.B, size int64) {
	srv := httptest.NewServer(rawHandler(headCmd(size)))
	defer srv.Close()
	url := "ws" + srv.URL[len("http"):]
	b.SetBytes(size)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		ctx, cancel := context.WithTimeout(context.Background(), benchTimeout)
		n, err := readRaw(ctx, url)
		cancel()
		require.NoError(b, err)
		require.Equal(b, size, n)
	}
}

func benchmarkRawEcho(b *testing.B) {
	srv := httptest.NewServer(rawHandler([]string{"cat"}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), benchTimeout)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+srv.URL[len("http"):], nil)
	require.NoError(b, err)
	defer c.CloseNow()
	one := []byte{'x'}
	samples := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		require.NoError(b, c.Write(ctx, websocket.MessageBinary, one))
		_, got, err := c.Read(ctx)
		require.NoError(b, err)
		require.Equal(b, one, got)
		samples = append(samples, time.Since(start))
	}
	b.StopTimer()
	reportPercentiles(b, samples)
	c.Close(websocket.StatusNormalClosure, "")
}
