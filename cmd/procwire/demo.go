//go:build linux

package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
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

// runDemo streams size seeded random bytes through a remote cat, cutting
// the connection cuts times, and checks what comes back. Its steps: start
// the server behind the cutting proxy, open cat, write and read the stream
// (each part but the last followed by a cut), then check and report.
func runDemo(ctx context.Context, size int64, cuts int, seed uint64, out io.Writer) (err error) {
	ds, err := startDemoServer()
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, ds.shutdown(ctx)) }()

	fmt.Fprintf(out, "procwire demo: %s of seeded random bytes through a remote `cat`, cut %d time(s) mid-stream\n", mib(size), cuts)
	fmt.Fprintf(out, "  server   ws://%s/ (in process), reached through a cutting TCP proxy at %s\n", ds.ln.Addr(), ds.px.Addr())
	start := time.Now()
	p, err := client.Open(ctx, "ws://"+ds.px.Addr()+"/", "demo", frames.ProcessRequest{
		Executable:       "cat",
		WorkingDirectory: "/",
		Environment:      map[string]string{"PATH": "/usr/local/bin:/usr/bin:/bin"},
	}, &client.Options{ReconnectMin: 5 * time.Millisecond, ReconnectMax: 100 * time.Millisecond})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, p.Destroy(context.WithoutCancel(ctx))) }()
	fmt.Fprintf(out, "  process  %s on instance demo\n", p.ID())

	d := &demoStream{size: size, cuts: cuts, p: p, px: ds.px, out: out, sent: sha256.New(), got: sha256.New()}
	if err := d.run(ctx, seed); err != nil {
		return err
	}
	st, err := p.Wait(ctx)
	if err != nil {
		return err
	}
	return d.report(st, time.Since(start))
}

// demoServer is the demo's in-process server, served on ln and reached
// through the cutting proxy px.
type demoServer struct {
	srv    *server.Server
	ln     net.Listener
	hs     *http.Server
	served chan error // hs.Serve's result
	px     *cutproxy.Proxy
}

// startDemoServer starts the server on a loopback port and the cutting
// proxy in front of it.
func startDemoServer() (*demoServer, error) {
	srv, err := server.New(server.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	ds := &demoServer{srv: srv, ln: ln, hs: &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}, served: make(chan error, 1)}
	go func() { ds.served <- ds.hs.Serve(ln) }()
	ds.px, err = cutproxy.New(ln.Addr().String())
	if err != nil {
		ds.hs.Close()
		<-ds.served
		return nil, err
	}
	return ds, nil
}

// shutdown stops the server, the HTTP server and the proxy, and waits for
// serving to end.
func (ds *demoServer) shutdown(ctx context.Context) error {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	err := errors.Join(ds.srv.Shutdown(sctx), ds.hs.Shutdown(sctx), ds.px.Close())
	if serr := <-ds.served; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}

// demoStream is one run of the demo's stream through cat: written in
// cuts+1 equal parts while read back; the connection is cut once each part
// but the last has come back, so that the next part must cross a new
// connection.
type demoStream struct {
	size      int64
	cuts      int
	p         *client.Process
	px        *cutproxy.Proxy
	out       io.Writer
	sent, got hash.Hash // of the bytes written and read
	n         int64     // bytes read
	reset     int       // cuts that found a connection to cut
}

// segEnd is the offset where part i of the stream ends.
func (d *demoStream) segEnd(i int) int64 { return d.size * int64(i+1) / int64(d.cuts+1) }

// run writes the stream from a goroutine of its own while reading it back,
// and waits for the writer.
func (d *demoStream) run(ctx context.Context, seed uint64) error {
	proceed := make(chan struct{}, d.cuts)
	quit := make(chan struct{}) // the reader has given up
	werr := make(chan error, 1)
	go func() { werr <- d.write(ctx, seed, proceed, quit) }()
	if err := d.read(ctx, proceed); err != nil {
		close(quit)
		return err
	}
	return <-werr
}

// write writes the parts of the stream, each after the one before has been
// read back and cut (a receive on proceed), then closes stdin.
func (d *demoStream) write(ctx context.Context, seed uint64, proceed, quit <-chan struct{}) error {
	rng := rand.NewChaCha8([32]byte{0: byte(seed), 1: byte(seed >> 8), 2: byte(seed >> 16), 3: byte(seed >> 24),
		4: byte(seed >> 32), 5: byte(seed >> 40), 6: byte(seed >> 48), 7: byte(seed >> 56)})
	buf := make([]byte, 256<<10)
	var written int64
	for i := 0; i <= d.cuts; i++ {
		if i > 0 {
			select {
			case <-proceed:
			case <-quit:
				return errors.New("the reader gave up")
			}
		}
		for end := d.segEnd(i); written < end; {
			b := buf[:min(end-written, int64(len(buf)))]
			rng.Read(b)
			d.sent.Write(b)
			if _, err := d.p.Stdin().WriteContext(ctx, b); err != nil {
				return err
			}
			written += int64(len(b))
		}
	}
	return d.p.Stdin().CloseContext(ctx)
}

// read reads stdout to its end, cutting the connection as each part but
// the last has come back, and lets the writer proceed.
func (d *demoStream) read(ctx context.Context, proceed chan<- struct{}) error {
	next := 0
	buf := make([]byte, 256<<10)
	for {
		k, rerr := d.p.Stdout().ReadContext(ctx, buf)
		d.got.Write(buf[:k])
		d.n += int64(k)
		if next < d.cuts && d.n >= d.segEnd(next) {
			c := d.px.CutAll()
			if c > 0 {
				d.reset++
			}
			fmt.Fprintf(d.out, "  cut      at %s read: %d connection(s) reset\n", mib(d.n), c)
			next++
			proceed <- struct{}{}
		}
		if errors.Is(rerr, io.EOF) {
			return nil
		}
		if rerr != nil {
			return rerr
		}
	}
}

// report prints what the run sent and got back, and returns an error for
// anything that does not match.
func (d *demoStream) report(st client.ExitStatus, elapsed time.Duration) error {
	reconnects := d.px.Accepted() - 1
	sum, back := d.sent.Sum(nil), d.got.Sum(nil)
	fmt.Fprintf(d.out, "  resumed  %d reconnect(s)\n", reconnects)
	fmt.Fprintf(d.out, "  stdin    %d bytes  sha256 %x\n", d.size, sum)
	fmt.Fprintf(d.out, "  stdout   %d bytes  sha256 %x\n", d.n, back)
	fmt.Fprintf(d.out, "  exit     %v\n", st)
	fmt.Fprintf(d.out, "  time     %.2fs, %.1f MB/s through cat and back\n", elapsed.Seconds(), float64(d.size)/1e6/elapsed.Seconds())
	switch {
	case d.n != d.size:
		return fmt.Errorf("%d bytes came back, %d were sent", d.n, d.size)
	case string(sum) != string(back):
		return errors.New("sha256 mismatch")
	case !st.Success():
		return fmt.Errorf("cat ended with %v", st)
	case d.reset < d.cuts:
		return fmt.Errorf("%d of %d cuts found a connection to cut", d.reset, d.cuts)
	case reconnects < d.reset:
		return fmt.Errorf("%d reconnects for %d cuts", reconnects, d.reset)
	}
	fmt.Fprintln(d.out, "OK: sha256 match, nothing lost or repeated across the cuts")
	return nil
}

// mib formats n bytes in MiB.
func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
