// Command gopeer is the Go side of the TypeScript client's benchmark
// (js/bench/bench.mjs, `npm run bench`): it serves bench's raw-WebSocket
// baseline (the peer bench/ calls raw-websocket, "W") for a raw `ws`
// client, and runs the Go client's workloads, so that one run compares the
// TypeScript client, the Go client and a raw client against the same
// servers, children and machine.
//
//	gopeer raw                 serves W on loopback, prints its URL, stops at stdin's EOF
//	gopeer stream URL BYTES    Go client: head -c BYTES /dev/zero, prints MB/s from open to EOF
//	gopeer echo URL COUNT      Go client: COUNT 1-byte echoes through cat, prints each in µs
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/procwire/procwire/bench"
	"github.com/procwire/procwire/client"
	"github.com/procwire/procwire/frames"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "gopeer:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 1 && args[0] == "raw" {
		return serveRaw()
	}
	if len(args) != 3 {
		return errors.New("usage: gopeer raw | stream URL BYTES | echo URL COUNT")
	}
	n, err := strconv.Atoi(args[2])
	if err != nil || n <= 0 {
		return fmt.Errorf("bad count %q", args[2])
	}
	switch args[0] {
	case "stream":
		return stream(args[1], n)
	case "echo":
		return echo(args[1], n)
	}
	return fmt.Errorf("unknown workload %q", args[0])
}

// serveRaw serves bench.RawHandler, the baseline bench/ measures procwire
// against, on loopback, and prints its URL.
func serveRaw() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: bench.RawHandler(), ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(ln) //nolint:errcheck // ErrServerClosed after Close
	defer hs.Close()
	fmt.Printf("ws://%s/\n", ln.Addr())
	_, err = io.Copy(io.Discard, os.Stdin)
	return err
}

func request(argv ...string) frames.ProcessRequest {
	return frames.ProcessRequest{
		Executable:       argv[0],
		Arguments:        argv[1:],
		WorkingDirectory: os.TempDir(),
		Environment:      map[string]string{"PATH": "/usr/local/bin:/usr/bin:/bin"},
	}
}

func stream(url string, size int) error {
	ctx := context.Background()
	p, err := client.Open(ctx, url, fmt.Sprintf("gopeer-%d", os.Getpid()), request("head", "-c", strconv.Itoa(size), "/dev/zero"), nil)
	if err != nil {
		return err
	}
	start := time.Now()
	n, err := io.CopyBuffer(io.Discard, p.Stdout(), make([]byte, 256<<10))
	elapsed := time.Since(start)
	if err != nil {
		return err
	}
	if n != int64(size) {
		return fmt.Errorf("read %d bytes, want %d", n, size)
	}
	if _, err := p.Wait(ctx); err != nil {
		return err
	}
	if err := p.Destroy(ctx); err != nil {
		return err
	}
	fmt.Printf("%.1f\n", float64(n)/1e6/elapsed.Seconds())
	return nil
}

func echo(url string, count int) error {
	ctx := context.Background()
	p, err := client.Open(ctx, url, fmt.Sprintf("gopeer-echo-%d", os.Getpid()), request("cat"), nil)
	if err != nil {
		return err
	}
	one := []byte{'a'}
	buf := make([]byte, 16)
	for range count {
		start := time.Now()
		if _, err := p.Stdin().Write(one); err != nil {
			return err
		}
		if _, err := io.ReadFull(p.Stdout(), buf[:1]); err != nil {
			return err
		}
		fmt.Printf("%.1f\n", float64(time.Since(start).Nanoseconds())/1e3)
	}
	return p.Destroy(ctx)
}
