// Package linkproxy is a loopback TCP proxy shaped like a wide-area link:
// each direction is limited to a bit rate (a token bucket of Burst bytes
// on a virtual clock) and delayed by a fixed one-way latency, with a
// bounded queue in between (what a router on a slow path holds). Benchmarks put it between a procwire client and
// server to see what a Runner in one region driving a sandbox in another
// sees, on one machine.
package linkproxy

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// Config shapes both directions of every connection the same way.
type Config struct {
	// BitsPerSecond is the link's rate, in each direction (20e6 for a
	// 20 Mbit/s link). It must be positive.
	BitsPerSecond float64
	// Latency is added one way: a byte arrives Latency after the token
	// bucket let it through, so a round trip gains twice Latency.
	Latency time.Duration
	// Burst is the token bucket's depth in bytes; 0 means 16 KiB.
	Burst int
}

// Proxy accepts connections on a loopback port and relays each to Target
// through the shaped link.
type Proxy struct {
	cfg    Config
	target string
	ln     net.Listener

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// Start listens on 127.0.0.1 and relays to target (host:port).
func Start(target string, cfg Config) (*Proxy, error) {
	if cfg.BitsPerSecond <= 0 {
		return nil, errors.New("linkproxy: BitsPerSecond must be positive")
	}
	if cfg.Burst <= 0 {
		cfg.Burst = 16 << 10
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{cfg: cfg, target: target, ln: ln, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr returns the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Close stops accepting, cuts every relayed connection and waits for the
// relays to end.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	err := p.ln.Close()
	p.wg.Wait()
	return err
}

// track registers c, or closes it if the proxy is closing.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_ = c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(in) {
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.relay(in)
		}()
	}
}

func (p *Proxy) relay(in net.Conn) {
	out, err := net.Dial("tcp", p.target)
	if err != nil || !p.track(out) {
		_ = in.Close()
		return
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.shape(out, in) }()
	go func() { defer wg.Done(); p.shape(in, out) }()
	wg.Wait()
	p.mu.Lock()
	delete(p.conns, in)
	delete(p.conns, out)
	p.mu.Unlock()
	_ = in.Close()
	_ = out.Close()
}

// chunk is bytes in flight, deliverable at due.
type chunk struct {
	b   []byte
	due time.Time
}

// queueChunks bounds what one direction holds in flight.
const queueChunks = 256

// shape copies src to dst through the token bucket and the delay line. It
// returns when either side fails; the other copy then fails too, as both
// connections are closed.
func (p *Proxy) shape(dst, src net.Conn) {
	q := make(chan chunk, queueChunks)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTimer(0)
		defer t.Stop()
		for c := range q {
			if d := time.Until(c.due); d > 0 {
				t.Reset(d)
				<-t.C
			}
			if _, err := dst.Write(c.b); err != nil {
				_ = src.Close()
				for range q { //nolint:revive // drain so the reader is never stuck
				}
				return
			}
		}
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
	}()
	// The bucket runs on a virtual clock: a chunk leaves the bucket when
	// the link has sent everything before it (free), whenever the reader
	// happened to wake, so a late timer never slows the link down.
	rate := p.cfg.BitsPerSecond / 8 // bytes per second
	var free time.Time
	for {
		buf := make([]byte, p.cfg.Burst)
		n, err := src.Read(buf)
		if n > 0 {
			now := time.Now()
			if free.Before(now) {
				free = now
			}
			free = free.Add(time.Duration(float64(n) / rate * float64(time.Second)))
			q <- chunk{b: buf[:n], due: free.Add(p.cfg.Latency)}
		}
		if err != nil {
			close(q)
			<-done
			if !errors.Is(err, io.EOF) {
				_ = dst.Close()
			}
			return
		}
	}
}
