package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/procwire/procwire/frames"
)

// open runs the opening handshake of open: it dials, sends open and takes
// opened, repeating the handshake with the same open key when a
// connection is lost before the answer. What it may have started and not
// handed over (a cancelled ctx, a loss the retries did not overcome) is
// destroyed by the key.
func (p *Process) open(ctx context.Context, open *frames.Open, req *frames.ProcessRequest) (*wsConn, error) {
	open.OpenKey = newOpenKey()
	b := p.newBackoff()
	sent := false // an open may have reached the server
	failed := 0
	draining := 0 // failures that were a draining server's refusal
	for {
		ws, err := p.dial(ctx, "", open)
		if errors.As(err, new(firstOfferedError)) {
			sent = true // the open went in the upgrade request
		}
		if err == nil {
			sent = true
			var f frames.Frame
			f, err = ws.exchange(ctx, open)
			if err == nil {
				if err = p.opened(f, req); err == nil {
					return ws, nil
				}
			}
			var pe *ProtocolError
			if errors.As(err, &pe) {
				// Fail closed: a process may run, but not as asked for.
				return nil, p.failOpen(ws, err)
			}
			ws.close()
		}
		var re *RemoteError
		switch {
		case errors.Is(err, ErrServerDraining):
			// That server started nothing and takes no new process: the
			// next connection may reach another one (a load balancer
			// routes it elsewhere), like an open whose answer was lost.
			draining++
		case errors.As(err, &re):
			// A refusal starts nothing; one after a lost answer may be about
			// the process the lost one started.
			if sent && failed > 0 {
				p.destroyByKey(open)
			}
			return nil, err
		case !sent && !errors.Is(err, errHandshakeLost):
			// The server was never reached: an address or a server that
			// is wrong, not a connection lost.
			return nil, fmt.Errorf("procwire: open: %w", err)
		}
		failed++
		if failed >= p.opts.ResumeBudget || !b.wait(ctx, nil) {
			if draining < failed { // an attempt may have started it
				p.destroyByKey(open)
			}
			if ctx.Err() != nil {
				err = fmt.Errorf("%w (last: %w)", ctx.Err(), err)
			}
			return nil, fmt.Errorf("procwire: open: %d attempts: %w", failed, err)
		}
		p.log.Debug("open lost, repeating it", "attempt", failed, "err", err)
	}
}

// opened takes the answer f to open.
func (p *Process) opened(f frames.Frame, req *frames.ProcessRequest) error {
	o, ok := f.(*frames.Opened)
	if !ok {
		return protocolErrorf(f.Type().String(), "unexpected answer to open")
	}
	m, err := newMachine(o, p.instanceID, req, p.opts.limits())
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		// destroyOn checks the destroyed against the id.
		p.m = &machine{id: o.ProcessID}
		return err
	}
	p.m = m
	return nil
}

// failOpen destroys, on ws, the process an open started that the client
// cannot vouch for, and returns err with the destroy's failure if any.
func (p *Process) failOpen(ws *wsConn, err error) error {
	defer ws.close()
	ctx, cancel := context.WithTimeout(context.Background(), p.opts.DestroyTimeout)
	defer cancel()
	if derr := p.destroyOn(ctx, ws, &frames.Destroy{}); derr != nil {
		return errors.Join(err, fmt.Errorf("procwire: destroy after failed open: %w", derr))
	}
	return err
}

// destroyByKey destroys what open may have started, on connections of its
// own, within DestroyTimeout; the server refuses a later open with the key.
func (p *Process) destroyByKey(open *frames.Open) {
	ctx, cancel := context.WithTimeout(context.Background(), p.opts.DestroyTimeout)
	defer cancel()
	b := p.newBackoff()
	for {
		ws, err := p.dial(ctx, "", nil)
		if err == nil {
			err = p.destroyOn(ctx, ws, &frames.Destroy{InstanceID: open.InstanceID, OpenKey: open.OpenKey})
			ws.close()
			if err == nil || isFinal(err) {
				return
			}
		}
		p.log.Debug("destroy by open key failed", "err", err)
		if !b.wait(ctx, nil) {
			p.log.Warn("destroy by open key gave up", "err", err, "after", p.opts.DestroyTimeout)
			return
		}
	}
}
