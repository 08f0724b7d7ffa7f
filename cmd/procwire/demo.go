//go:build linux

package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"time"

	"github.com/procwire/procwire/client"
	"github.com/procwire/procwire/frames"
	"github.com/procwire/procwire/internal/testkit/cutproxy"
	"github.com/procwire/procwire/server"
)

// demo is the one-command main job: an in-process server runs cat, the
// client streams seeded random bytes through it over a loopback TCP proxy
// that cuts the connection mid-stream, and what comes back must be
// identical. It exits 0 only if everything matched.
func demo(ctx context.Context, args []string, io *stdio) int {
	c := lookup("demo")
	fs := newFlags(c)
	size := 32 << 20
	cuts := 1
	fs.Var(sizeRange[int]{&size, 1, 1 << 40}, "bytes", "how many bytes to stream, a `size` (bytes, or with KiB, MiB, GiB)")
	fs.Var(intRange{&cuts, 0, 1000}, "cuts", "how many times to cut the connection, evenly spread")
	seed := fs.Uint64("seed", 1, "seed of the random bytes")
	pos, _, status, ok := parse(c, fs, args, -1, io, 2)
	if !ok {
		return status
	}
	if len(pos) > 0 {
		status, _ := usageFailure(c, io, 2, "unexpected argument %q", pos[0])
		return status
	}
	if size <= cuts {
		status, _ := usageFailure(c, io, 2, "--bytes %d: want more bytes than --cuts %d", size, cuts)
		return status
	}
	if err := runDemo(ctx, int64(size), cuts, *seed, io.out); err != nil {
		fmt.Fprintf(io.out, "FAIL: %v\n", err)
		return 1
	}
	return 0
}

func init() {
	register(&command{
		name:    "demo",
		args:    "[flags]",
		summary: "stream data through a remote cat over a connection cut mid-stream",
		help: `The one-command main job: an in-process server runs cat, the client streams
seeded random bytes through it over a loopback TCP proxy that cuts the
connection mid-stream (after each equal part of the data has come back), and
what comes back must be identical. It exits 0 only if everything matched.`,
		run: demo,
	})
}

func runDemo(ctx context.Context, size int64, cuts int, seed uint64, out io.Writer) (err error) {
	srv, err := server.New(server.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	px, err := cutproxy.New(ln.Addr().String())
	if err != nil {
		hs.Close()
		<-served
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
		defer cancel()
		err = errors.Join(err, srv.Shutdown(sctx), hs.Shutdown(sctx), px.Close())
		if serr := <-served; !errors.Is(serr, http.ErrServerClosed) {
			err = errors.Join(err, serr)
		}
	}()

	fmt.Fprintf(out, "procwire demo: %s of seeded random bytes through a remote `cat`, cut %d time(s) mid-stream\n", mib(size), cuts)
	fmt.Fprintf(out, "  server   ws://%s/ (in process), reached through a cutting TCP proxy at %s\n", ln.Addr(), px.Addr())
	start := time.Now()
	p, err := client.Open(ctx, "ws://"+px.Addr()+"/", "demo", frames.ProcessRequest{
		Executable:       "cat",
		WorkingDirectory: "/",
		Environment:      map[string]string{"PATH": "/usr/local/bin:/usr/bin:/bin"},
	}, &client.Options{ReconnectMin: 5 * time.Millisecond, ReconnectMax: 100 * time.Millisecond})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, p.Destroy(context.WithoutCancel(ctx))) }()
	fmt.Fprintf(out, "  process  %s on instance demo\n", p.ID())

	// Write the stream in cuts+1 equal parts while reading it back; the
	// connection is cut once each part but the last has come back, so that
	// the next part must cross a new connection.
	segEnd := func(i int) int64 { return size * int64(i+1) / int64(cuts+1) }
	proceed := make(chan struct{}, cuts)
	quit := make(chan struct{}) // the reader has given up
	defer close(quit)
	sent := sha256.New()
	werr := make(chan error, 1)
	go func() {
		rng := rand.NewChaCha8([32]byte{0: byte(seed), 1: byte(seed >> 8), 2: byte(seed >> 16), 3: byte(seed >> 24),
			4: byte(seed >> 32), 5: byte(seed >> 40), 6: byte(seed >> 48), 7: byte(seed >> 56)})
		buf := make([]byte, 256<<10)
		var written int64
		for i := 0; i <= cuts; i++ {
			if i > 0 {
				select {
				case <-proceed:
				case <-quit:
					werr <- errors.New("the reader gave up")
					return
				}
			}
			for end := segEnd(i); written < end; {
				b := buf[:min(end-written, int64(len(buf)))]
				rng.Read(b)
				sent.Write(b)
				if _, err := p.Stdin().WriteContext(ctx, b); err != nil {
					werr <- err
					return
				}
				written += int64(len(b))
			}
		}
		werr <- p.Stdin().CloseContext(ctx)
	}()
	got := sha256.New()
	var n int64
	next, reset := 0, 0
	buf := make([]byte, 256<<10)
	for {
		k, rerr := p.Stdout().ReadContext(ctx, buf)
		got.Write(buf[:k])
		n += int64(k)
		if next < cuts && n >= segEnd(next) {
			c := px.CutAll()
			if c > 0 {
				reset++
			}
			fmt.Fprintf(out, "  cut      at %s read: %d connection(s) reset\n", mib(n), c)
			next++
			proceed <- struct{}{}
		}
		if errors.Is(rerr, io.EOF) {
			break
		}
		if rerr != nil {
			return rerr
		}
	}
	if err := <-werr; err != nil {
		return err
	}
	st, err := p.Wait(ctx)
	if err != nil {
		return err
	}
	elapsed := time.Since(start)
	reconnects := px.Accepted() - 1

	sum, back := sent.Sum(nil), got.Sum(nil)
	fmt.Fprintf(out, "  resumed  %d reconnect(s)\n", reconnects)
	fmt.Fprintf(out, "  stdin    %d bytes  sha256 %x\n", size, sum)
	fmt.Fprintf(out, "  stdout   %d bytes  sha256 %x\n", n, back)
	fmt.Fprintf(out, "  exit     %v\n", st)
	fmt.Fprintf(out, "  time     %.2fs, %.1f MB/s through cat and back\n", elapsed.Seconds(), float64(size)/1e6/elapsed.Seconds())
	switch {
	case n != size:
		return fmt.Errorf("%d bytes came back, %d were sent", n, size)
	case string(sum) != string(back):
		return errors.New("sha256 mismatch")
	case !st.Success():
		return fmt.Errorf("cat ended with %v", st)
	case reset < cuts:
		return fmt.Errorf("%d of %d cuts found a connection to cut", reset, cuts)
	case reconnects < reset:
		return fmt.Errorf("%d reconnects for %d cuts", reconnects, reset)
	}
	fmt.Fprintln(out, "OK: sha256 match, nothing lost or repeated across the cuts")
	return nil
}

// mib formats n bytes in MiB.
func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
