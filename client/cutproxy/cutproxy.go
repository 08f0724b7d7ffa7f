// Package cutproxy is a loopback TCP proxy that can cut the connections
// passing through it, on demand or after a number of bytes, to exercise a
// client's reconnection with real connection losses. It is used by the
// client's tests and by "procwire demo".
package cutproxy

import (
	"net"
	"sync"
)

// Proxy forwards every connection accepted on its listener to a target
// address. Its methods are safe for concurrent use.
type Proxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup // the accept loop and every pump

	mu       sync.Mutex
	conns    map[net.Conn]struct{} // both sides of every live connection
	armed    bool                  // cut once left more bytes passed
	left     int64
	drop     bool // discard bytes from the target instead of forwarding them
	accepted int
	cuts     int
	closed   bool
}

// New listens on 127.0.0.1 on a free port and forwards to target
// ("host:port").
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: make(map[net.Conn]struct{})}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr returns the proxy's "host:port".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Accepted returns how many connections the proxy has accepted.
func (p *Proxy) Accepted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted
}

// Cuts returns how many connections were cut.
func (p *Proxy) Cuts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cuts
}

// CutAll cuts every live connection now, with a TCP reset on both sides,
// and returns how many it cut. New connections are still accepted.
func (p *Proxy) CutAll() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cutLocked()
}

// CutAfter arms a cut of every live connection once n more bytes (in
// either direction, counting from now) have passed: the byte that
// reaches n is forwarded, the next one is not. n must be positive.
func (p *Proxy) CutAfter(n int64) {
	if n <= 0 {
		panic("cutproxy: CutAfter needs n > 0")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed, p.left = true, n
}

// DropReplies makes the proxy discard (drop is true) or forward again
// (false) the bytes coming back from the target, so that requests arrive
// while their answers are lost.
func (p *Proxy) DropReplies(drop bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.drop = drop
}

// Close stops accepting, cuts every live connection and waits for the
// proxy's goroutines.
func (p *Proxy) Close() error {
	err := p.ln.Close()
	p.mu.Lock()
	p.closed = true
	p.cutLocked()
	p.mu.Unlock()
	p.wg.Wait()
	return err
}

func (p *Proxy) cutLocked() int {
	n := 0
	for c := range p.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetLinger(0) // reset, not an orderly close
		}
		c.Close()
		delete(p.conns, c)
		n++
	}
	p.cuts += n / 2
	return n / 2
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		down, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			down.Close()
			continue
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			down.Close()
			up.Close()
			return
		}
		p.accepted++
		p.conns[down], p.conns[up] = struct{}{}, struct{}{}
		p.wg.Add(2)
		p.mu.Unlock()
		go p.pump(up, down, false)
		go p.pump(down, up, true)
	}
}

// pump copies src to dst until either fails, then closes both.
func (p *Proxy) pump(dst, src net.Conn, reply bool) {
	defer p.wg.Done()
	defer func() {
		p.mu.Lock()
		delete(p.conns, dst)
		delete(p.conns, src)
		p.mu.Unlock()
		dst.Close()
		src.Close()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			k, cut := n, false
			if p.armed {
				if int64(n) >= p.left {
					k, cut = int(p.left), true
					p.armed = false
				} else {
					p.left -= int64(n)
				}
			}
			if reply && p.drop {
				k = 0
			}
			p.mu.Unlock()
			if k > 0 {
				if _, werr := dst.Write(buf[:k]); werr != nil {
					return
				}
			}
			if cut {
				p.CutAll()
				return
			}
		}
		if err != nil {
			return // an end in one direction ends the connection
		}
	}
}
