//go:build linux

package bridge

import (
	"fmt"
	"io"
)

// ioChunk bounds one read from stdout or stderr and one write to stdin, so
// that credit and output flow in steps the server can batch.
const ioChunk = 32 << 10

// testHookStdoutBlocked, when set before Start, is called by the stdout pump
// each time it finds the buffer full and is about to wait for room.
var testHookStdoutBlocked func()

// pumpStdout reads the child's stdout into the replay buffer, but only while
// the buffer has room: with a full window the pipe fills and the child blocks.
func (p *Process) pumpStdout() {
	defer close(p.stdoutDone)
	buf := make([]byte, ioChunk)
	for {
		p.outMu.Lock()
		for p.out.Room() == 0 && !p.outStop {
			if testHookStdoutBlocked != nil {
				testHookStdoutBlocked()
			}
			p.outCond.Wait()
		}
		if p.outStop {
			p.outMu.Unlock()
			return
		}
		room := p.out.Room()
		p.outMu.Unlock()

		n, err := p.stdoutR.Read(buf[:min(ioChunk, room)])
		if n > 0 || err == io.EOF {
			p.outMu.Lock()
			// Only this pump appends, and acks only add room, so all fits.
			if m := p.out.Append(buf[:n]); m != n {
				panic(fmt.Sprintf("bridge: stdout buffer took %d of %d bytes with %d room", m, n, room))
			}
			if err == io.EOF {
				p.out.CloseEOF()
			}
			p.outMu.Unlock()
			p.changed()
		}
		if err != nil {
			// io.EOF, or our own Close from Destroy.
			return
		}
	}
}

// pumpStderr drains the child's stderr into the lossy ring; it never waits
// for the consumer, so stderr never blocks the child.
func (p *Process) pumpStderr() {
	defer close(p.stderrDone)
	buf := make([]byte, ioChunk)
	for {
		n, err := p.stderrR.Read(buf)
		if n > 0 {
			p.errMu.Lock()
			_, _ = p.errRing.Write(buf[:n]) // never fails: overwrites the oldest
			p.errMu.Unlock()
			p.changed()
		}
		if err != nil {
			return
		}
	}
}

// pumpStdin writes the stdin queue to the child's pipe and closes the pipe
// after CloseStdin drained the queue. When a write fails (EPIPE: the child
// exited or closed its stdin), the queue is discarded and counted as
// consumed, and so is every later push.
func (p *Process) pumpStdin() {
	defer close(p.stdinDone)
	defer p.closeStdinW()
	buf := make([]byte, ioChunk)
	for {
		p.inMu.Lock()
		for p.inQ.len() == 0 && !p.inClosed && !p.inStop {
			p.inCond.Wait()
		}
		if p.inStop || p.inQ.len() == 0 {
			p.inMu.Unlock()
			return
		}
		n := p.inQ.peek(buf)
		p.inMu.Unlock()

		w, err := p.stdinW.Write(buf[:n])

		p.inMu.Lock()
		p.inQ.discard(w)
		p.inConsumed += int64(w)
		if err != nil {
			p.inBroken = true
			p.inConsumed += int64(p.inQ.len())
			p.inQ.discard(p.inQ.len())
		}
		p.inMu.Unlock()
		p.changed()
		if err != nil {
			return
		}
	}
}
