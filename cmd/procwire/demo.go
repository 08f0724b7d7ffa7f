package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"time"

	"github.com/procwire/procwire/client"
	"github.com/procwire/procwire/client/cutproxy"
	"github.com/procwire/procwire/frames"
	"github.com/procwire/procwire/server"
)

// demo is the one-command main job: an in-process server runs cat, the
// client streams seeded random bytes through it over a loopback TCP proxy
// that cuts the connection mid-stream, and what comes back must be
// identical. It exits 0 only if everything matched.
func demo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	size := fs.Int64("bytes", 32<<20, "how many `bytes` to stream")
	cuts := fs.Int("cuts", 1, "how many times to cut the connection, evenly spread")
	seed := fs.Uint64("seed", 1, "seed of the random bytes")
	if err := fs.Parse(args); err != nil {
		return usageError(err)
	}
	if fs.NArg() > 0 || *size < 1 || *cuts < 0 {
		fmt.Fprintln(stderr, "procwire demo: want --bytes >= 1, --cuts >= 0 and no arguments")
		return 2
	}
	if err := runDemo(ctx, *size, *cuts, *seed, stdout); err != nil {
		fmt.Fprintf(stdout, "FAIL: %v\n", err)
		return 1
	}
	return 0
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

	// Write the stream while reading it back.
	sent := sha256.New()
	werr := make(chan error, 1)
	go func() {
		rng := rand.NewChaCha8([32]byte{0: byte(seed), 1: byte(seed >> 8), 2: byte(seed >> 16), 3: byte(seed >> 24),
			4: byte(seed >> 32), 5: byte(seed >> 40), 6: byte(seed >> 48), 7: byte(seed >> 56)})
		buf := make([]byte, 256<<10)
		for left := size; left > 0; {
			b := buf[:min(left, int64(len(buf)))]
			rng.Read(b)
			sent.Write(b)
			if _, err := p.Stdin().WriteContext(ctx, b); err != nil {
				werr <- err
				return
			}
			left -= int64(len(b))
		}
		werr <- p.Stdin().CloseContext(ctx)
	}()
	got := sha256.New()
	var n int64
	next := 1
	buf := make([]byte, 256<<10)
	for {
		k, rerr := p.Stdout().ReadContext(ctx, buf)
		got.Write(buf[:k])
		n += int64(k)
		for next <= cuts && n >= size*int64(next)/int64(cuts+1) {
			c := px.CutAll()
			fmt.Fprintf(out, "  cut      at %s read: %d connection(s) reset\n", mib(n), c)
			next++
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
	case reconnects < cuts:
		return fmt.Errorf("%d reconnects for %d cuts", reconnects, cuts)
	}
	fmt.Fprintln(out, "OK: sha256 match, nothing lost or repeated across the cuts")
	return nil
}

// mib formats n bytes in MiB.
func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
