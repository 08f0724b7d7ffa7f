//go:build linux

package bridge

import (
	"io"
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/procwire/procwire/internal/chunk"
	"github.com/procwire/procwire/proc"
)

// ioChunk bounds one read from stderr and one write to stdin, so that
// credit and output flow in steps the server can batch, and is the step by
// which a stdout read grows. It is the size of the pooled chunk a read or
// write borrows.
const ioChunk = chunk.Size

// pipeReader waits until a pipe is readable, then reads at most ioChunk
// bytes of it into a chunk borrowed from the pool only for that read and
// passes them to use. A pump waiting on an idle pipe so holds no buffer.
// One pump (stderr's) owns it; its method value is bound once, so a read
// allocates nothing.
type pipeReader struct {
	f    *os.File
	rc   syscall.RawConn
	use  func(b []byte)
	n    int
	err  error
	read func(fd uintptr) bool // r.readFd
}

func newPipeReader(f *os.File, use func(b []byte)) (*pipeReader, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	r := &pipeReader{f: f, rc: rc, use: use}
	r.read = r.readFd
	return r, nil
}

// next reads once. The end of the pipe is io.EOF; Destroy's Close ends the
// wait with an error.
func (r *pipeReader) next() error {
	if err := r.rc.Read(r.read); err != nil {
		return err
	}
	switch {
	case r.err != nil:
		return &os.PathError{Op: "read", Path: r.f.Name(), Err: r.err}
	case r.n == 0:
		return io.EOF
	}
	return nil
}

func (r *pipeReader) readFd(fd uintptr) bool {
	c := chunk.Get()
	defer chunk.Put(c)
	for {
		r.n, r.err = syscall.Read(int(fd), c[:])
		if r.err != syscall.EINTR {
			break
		}
	}
	if r.err == syscall.EAGAIN {
		return false // not ready: wait on the poller
	}
	if r.n > 0 {
		r.use(c[:r.n])
	}
	return true
}

// testHookStdoutBlocked, when set before Start, is called by the stdout pump
// each time it finds the buffer full and is about to wait for room.
var testHookStdoutBlocked func()

// stdoutRead bounds one read of the child's stdout: a frame's worth
// (frames.MaxData), so that a busy pipe (1 MiB, see growPipe) drains in few
// system calls.
const stdoutRead = 256 << 10

// stdoutReader reads the child's stdout straight into the replay buffer: it
// reserves room in the buffer under p.mu, reads into it with one readv
// without the lock, and commits what it read. A read that finds the pipe
// empty gives the room back before it waits, so a pump waiting on an idle
// pipe holds no storage. Each read asks for one chunk more than the last
// when that one filled all it asked for, and for one chunk again when it
// did not: a trickle holds one chunk at a time, a flood reads stdoutRead at
// once. One pump owns it; its method value is bound once.
//
// A chunk of output costs two reads: the one that takes it and the one that
// finds the pipe empty (EAGAIN) before the pump waits. Waiting on the poller
// straight after a read that took less than it asked for would save the
// second, and was tried: it loses the end of the pipe. A writer that writes
// and closes at once (echo bye; exec >&-) may raise one readiness for both;
// the pump, woken by it, reads "bye", and a wait then is for an event that
// already came: the end is never read, and the pump waits for good
// (TestStdoutEOFIsTheChilds caught it). Go's poller also forgets a readiness
// at each new RawConn.Read, so the saving would need the whole pump inside
// one callback. The socket's reads are Go's own, with the same second read,
// and SSH's make the same.
type stdoutReader struct {
	p    *Process
	rc   syscall.RawConn
	iov  [][]byte
	max  int // the most the next read asks for
	n    int
	full bool // the last read took all it asked for
	err  error
	read func(fd uintptr) bool // r.readFd
}

func (r *stdoutReader) readFd(fd uintptr) bool {
	p := r.p
	p.mu.Lock()
	r.iov = p.out.Reserve(r.max, r.iov[:0])
	p.mu.Unlock()
	asked := 0
	for _, v := range r.iov {
		asked += len(v)
	}
	for {
		r.n, r.err = unix.Readv(int(fd), r.iov)
		if r.err != unix.EINTR {
			break
		}
	}
	clear(r.iov) // hold no view of storage the buffer may give back
	p.mu.Lock()
	p.out.Commit(max(r.n, 0))
	p.mu.Unlock()
	if r.err == unix.EAGAIN {
		return false // not ready: wait on the poller, holding nothing
	}
	r.full = r.n == asked
	if r.full {
		r.max = min(r.max+ioChunk, stdoutRead)
	} else {
		r.max = ioChunk
	}
	return true
}

// next reads once, at most room bytes. The end of the pipe is io.EOF;
// Destroy's Close ends the wait with an error.
func (r *stdoutReader) next(room int) error {
	r.max = min(r.max, room)
	if err := r.rc.Read(r.read); err != nil {
		return err
	}
	switch {
	case r.err != nil:
		return &os.PathError{Op: "readv", Path: r.p.stdoutR.Name(), Err: r.err}
	case r.n == 0:
		return io.EOF
	}
	return nil
}

// pumpStdout reads the child's stdout into the replay buffer, but only while
// the buffer has room: with a full window the pipe fills and the child blocks.
func (p *Process) pumpStdout() {
	defer close(p.stdoutDone)
	defer p.firstOutput()
	rc, err := p.stdoutR.SyscallConn()
	if err != nil {
		return // only a nil *os.File has none
	}
	r := &stdoutReader{p: p, rc: rc, max: ioChunk}
	r.read = r.readFd
	for first := true; ; first = false {
		p.mu.Lock()
		for p.out.Room() == 0 && p.destroy == destroyNone {
			if testHookStdoutBlocked != nil {
				testHookStdoutBlocked()
			}
			p.outCond.Wait()
		}
		if p.destroy != destroyNone {
			p.mu.Unlock()
			return
		}
		room := p.out.Room()
		p.mu.Unlock()

		err := r.next(room)
		if p.ttyEOF(err) {
			err = io.EOF // no process holds the terminal's slave any more
		}
		switch {
		case err == nil && r.full:
			p.changed(proc.ChangeOutput | proc.ChangeMoreOutput)
		case err == nil:
			p.changed(proc.ChangeOutput)
		case err == io.EOF:
			p.mu.Lock()
			stopped := p.destroy != destroyNone
			if !stopped {
				// Not once Destroy began: its kill, not the child,
				// may have closed the pipe, and a destroyed stream
				// has no EOF.
				p.out.CloseEOF()
			}
			p.mu.Unlock()
			if !stopped {
				p.changed(proc.ChangeOutput)
			}
		}
		if first {
			p.firstOutput()
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
	r, err := newPipeReader(p.stderrR, func(b []byte) {
		p.errMu.Lock()
		_, _ = p.errRing.Write(b) // never fails: overwrites the oldest
		p.errMu.Unlock()
		p.changed(proc.ChangeOutput)
	})
	if err != nil {
		return // only a nil *os.File has none
	}
	for r.next() == nil {
	}
}

// pumpStdin writes the stdin queue to the child's pipe and closes the pipe
// after CloseStdin drained the queue. It writes without blocking, so that
// every byte counts as consumed as soon as the pipe took it and a full pipe
// shows (StdinBlocked) while the pump waits for the child to read. When a
// write fails (EPIPE: the child exited or closed its stdin), the queue is
// discarded and counted as consumed, and so is every later push.
func (p *Process) pumpStdin() {
	defer close(p.stdinDone)
	defer p.closeStdinW()
	rc, err := p.stdinW.SyscallConn()
	if err != nil {
		return // only a nil *os.File has none
	}
	w := &pipeWriter{p: p}
	write := w.writeFd
	for {
		p.inMu.Lock()
		for p.inQ.len() == 0 && p.inEnd == stdinOpen {
			p.inCond.Wait()
		}
		if p.inEnd == stdinStopped || p.inQ.len() == 0 {
			p.inMu.Unlock()
			return
		}
		// A chunk borrowed for this write only: a pump with nothing to
		// write holds none.
		buf := chunk.Get()
		n := p.inQ.peek(buf[:])
		p.inMu.Unlock()

		w.buf, w.err = buf[:n], nil
		err := rc.Write(write)
		if err == nil {
			err = w.err
		}
		w.buf = nil
		chunk.Put(buf)
		if err != nil {
			p.inMu.Lock()
			p.inPipe = pipeBroken
			p.inConsumed += int64(p.inQ.len())
			p.inQ.discard(p.inQ.len())
			p.inMu.Unlock()
			p.changed(proc.ChangeStdin)
			return
		}
	}
}

// pipeWriter writes a peeked part of the stdin queue to the pipe without
// blocking, counting each write as it happens. One pump owns it.
type pipeWriter struct {
	p   *Process
	buf []byte // what is left to write
	err error
}

// writeFd is the RawConn.Write callback: it returns false to wait until
// the pipe is writable again.
func (w *pipeWriter) writeFd(fd uintptr) bool {
	for len(w.buf) > 0 {
		n, err := syscall.Write(int(fd), w.buf)
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			w.p.stdinWrote(0, true)
			return false
		case err != nil:
			w.err = &os.PathError{Op: "write", Path: w.p.stdinW.Name(), Err: err}
			return true
		}
		w.buf = w.buf[n:]
		w.p.stdinWrote(n, false)
	}
	return true
}

// stdinWrote counts n bytes taken by the pipe and records whether the pipe
// is full, telling the consumer.
func (p *Process) stdinWrote(n int, full bool) {
	p.inMu.Lock()
	changed := n > 0 || (p.inPipe == pipeFull) != full
	p.inQ.discard(n)
	p.inConsumed += int64(n)
	p.inPipe = pipeTaking
	if full {
		p.inPipe = pipeFull
	}
	p.inMu.Unlock()
	if changed {
		p.changed(proc.ChangeStdin)
	}
}
