package client

import "time"

// SetBlockedHook sets a function called, with p's lock held, whenever a
// call of p is about to block: a read or Wait waiting for news, a write
// finding no credit, Signal and Destroy waiting for their answers.
func SetBlockedHook(p *Process, f func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.testHookBlocked = f
}

// Held is what a Process holds in memory for its streams, in bytes: the
// live bytes of each queue and the capacity behind them.
type Held struct {
	Stdout, StdoutCap int // stdout received and not yet read
	Stderr, StderrCap int // stderr received and not yet read
	Stdin, StdinCap   int // stdin kept until the server reports it received
}

// SetFrameHook sets a function called, with p's lock held, after each
// frame a session connection delivered was handled, with what p holds
// then.
func SetFrameHook(p *Process, f func(Held)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.testHookFrame = func() { f(p.heldLocked()) }
}

// HeldNow returns what p holds now.
func HeldNow(p *Process) Held {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.heldLocked()
}

func (p *Process) heldLocked() Held {
	return Held{
		Stdout: p.m.outBuf.len(), StdoutCap: cap(p.m.outBuf.buf),
		Stderr: p.m.errBuf.len(), StderrCap: cap(p.m.errBuf.buf),
		Stdin: p.m.inBuf.len(), StdinCap: cap(p.m.inBuf.buf),
	}
}

// Ended returns a channel closed once the handle of p has ended: every
// later call fails, Wait settles.
func Ended(p *Process) <-chan struct{} { return p.done }

// ProcessOf returns the process of s.
func ProcessOf(s *Stream) *Process { return s.p }

// LentReads returns how many frames p's Reads read themselves (the
// lending read).
func LentReads(p *Process) uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lentReads
}

// SetLendIdle sets how long p's read loop leaves a lent socket unread
// before it takes it back, at first.
func SetLendIdle(p *Process, d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lendIdle = d
}
