// Package cutproxy is a loopback TCP proxy that cuts the connections passing
// through it, on demand or at chosen byte counts, to exercise a client's
// reconnection with real connection losses. The client's tests and
// "procwire demo" use it.
package cutproxy

import (
	"context"
	"net"
	"slices"
	"sync"
)

// Proxy forwards every connection accepted on its listener to a target
// address. Its methods are safe for concurrent use.
type Proxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup // the accept loop and every pump

	mu        sync.Mutex
	conns     map[net.Conn]struct{} // both sides of every live connection
	forwarded int64                 // bytes forwarded, both directions
	points    []int64               // pending cut points (values of forwarded), ascending
	holds     []int64               // pending hold points, ascending
	held      map[net.Conn]bool     // connections held: what they send is lost
	holdsDone int
	drop      bool // discard bytes from the target
	refuse    bool // close new connections at once
	accepted  int
	cuts      int
	changed   chan struct{} // closed and replaced when cuts grows
	closed    bool
}

// New listens on 127.0.0.1 on a free port and forwards to target
// ("host:port").
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: make(map[net.Conn]struct{}), held: make(map[net.Conn]bool), changed: make(chan struct{})}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr returns the proxy's "host:port".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Accepted returns how many connections the proxy has accepted and
// forwarded.
func (p *Proxy) Accepted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted
}

// Cuts returns how many cuts were made: every count of CutAt reached, and
// every CutAll that found a live connection.
func (p *Proxy) Cuts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cuts
}

// WaitCuts waits until Cuts() >= n or ctx ends.
func (p *Proxy) WaitCuts(ctx context.Context, n int) error {
	return p.waitFor(ctx, func() bool { return p.cuts >= n })
}

// waitFor waits until done, called with p.mu held, reports true, or ctx
// ends; every change to the proxy's counts closes p.changed.
func (p *Proxy) waitFor(ctx context.Context, done func() bool) error {
	for {
		p.mu.Lock()
		ok, ch := done(), p.changed
		p.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// CutAll cuts every live connection now, with a TCP reset on both sides,
// and returns how many it cut. New connections are still accepted.
func (p *Proxy) CutAll() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := p.cutLocked()
	if n > 0 {
		p.countCutLocked()
	}
	return n
}

// CutAt arms cuts of every live connection after each of the given byte
// counts, counted from now over all connections and both directions: the
// byte reaching a count is forwarded, the next one is not. Counts must be
// positive; they are cumulative, not relative to each other.
func (p *Proxy) CutAt(counts ...int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, n := range counts {
		if n <= 0 {
			panic("cutproxy: CutAt needs positive counts")
		}
		p.points = append(p.points, p.forwarded+n)
	}
	slices.Sort(p.points)
}

// Forwarded returns how many bytes the proxy has forwarded, both
// directions, over all connections.
func (p *Proxy) Forwarded() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.forwarded
}

// HoldAt arms holds of every live connection after each of the given byte
// counts, counted as CutAt counts: the byte reaching a count is forwarded,
// and from then on nothing more of those connections (either direction)
// is, as if the network stalled, until they are cut. Connections accepted
// later are forwarded as usual.
func (p *Proxy) HoldAt(counts ...int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, n := range counts {
		if n <= 0 {
			panic("cutproxy: HoldAt needs positive counts")
		}
		p.holds = append(p.holds, p.forwarded+n)
	}
	slices.Sort(p.holds)
}

// WaitHolds waits until n counts of HoldAt were reached, or ctx ends.
func (p *Proxy) WaitHolds(ctx context.Context, n int) error {
	return p.waitFor(ctx, func() bool { return p.holdsDone >= n })
}

// DropReplies makes the proxy discard (true) or forward again (false) the
// bytes coming back from the target, so that requests arrive while their
// answers are lost.
func (p *Proxy) DropReplies(drop bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.drop = drop
}

// Refuse makes the proxy close (true) or forward again (false) the
// connections it accepts, as a server that cannot be reached.
func (p *Proxy) Refuse(refuse bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refuse = refuse
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
			tc.SetLinger(0) // a reset, not an orderly close
		}
		c.Close()
		delete(p.conns, c)
		delete(p.held, c)
		n++
	}
	return n / 2
}

func (p *Proxy) countCutLocked() {
	p.cuts++
	p.changedLocked()
}

func (p *Proxy) changedLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		down, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		refuse := p.refuse || p.closed
		p.mu.Unlock()
		if refuse {
			down.Close()
			continue
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
		delete(p.held, dst)
		delete(p.held, src)
		p.mu.Unlock()
		dst.Close()
		src.Close()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			if p.held[src] {
				p.mu.Unlock()
				if err != nil {
					return
				}
				continue // stalled: lost
			}
			k, cut := int64(n), false
			if len(p.holds) > 0 && p.forwarded+k >= p.holds[0] {
				k = p.holds[0] - p.forwarded
				for len(p.holds) > 0 && p.holds[0] <= p.forwarded+k {
					p.holds = p.holds[1:]
				}
				for c := range p.conns {
					p.held[c] = true
				}
				p.holdsDone++
				p.changedLocked()
			}
			if len(p.points) > 0 && p.forwarded+k >= p.points[0] {
				k, cut = p.points[0]-p.forwarded, true
				for len(p.points) > 0 && p.points[0] <= p.forwarded+k {
					p.points = p.points[1:]
				}
			}
			p.forwarded += k
			if reply && p.drop {
				k = 0
			}
			p.mu.Unlock()
			var werr error
			if k > 0 {
				_, werr = dst.Write(buf[:k])
			}
			if cut {
				// Counted even if the write failed because the other
				// direction cut first: this count was reached.
				p.mu.Lock()
				p.cutLocked()
				p.countCutLocked()
				p.mu.Unlock()
				return
			}
			if werr != nil {
				return
			}
		}
		if err != nil {
			return // an end in one direction ends the connection
		}
	}
}
