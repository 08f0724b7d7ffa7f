package link

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/coder/websocket"

	"github.com/procwire/procwire/internal/coalesce"
)

// State is who may write a connection's stream frames now. It is guarded
// by the Turn's mutex.
type State uint8

const (
	// Starting: the writer has not written the connection's first frame
	// (the server's opened or resumed); callers leave their frames to it.
	Starting State = iota
	// Idle: no one writes; a caller may.
	Idle
	// WriterOwns: the writer goroutine writes, waiting as long as the
	// connection does.
	WriterOwns
	// CallerWriting: a caller writes from its own goroutine and must not
	// wait on the network (Write holds each message and sends what the
	// socket takes now).
	CallerWriting
	// Stalled: a caller met a socket that did not take a message whole,
	// or a backlog (Stall); the rest is pending in the coalescer and the
	// writer sends it. The caller stops (what it writes meanwhile is held
	// without waiting too) and wakes the writer.
	Stalled
	// Failed: a caller's write failed; Begin returns the error to the
	// writer, which ends the connection.
	Failed
	// Closed: the writer is closing (Close); it alone writes from now on.
	Closed
)

var stateNames = [...]string{"starting", "idle", "writer owns", "caller writing", "stalled", "failed", "closed"}

func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "state?"
}

// Turn is "write it from the caller, else hand it to the writer": it
// decides whether a goroutine that has frames to send (a process's output
// pump, a client's Write) sends them itself, sparing the hand-off to the
// writer goroutine (a wakeup, a third of a round trip for an interactive
// child), or leaves them to the writer. A caller writes only when no one
// else does and the socket takes its messages without waiting; what the
// socket does not take stays pending in the coalescer, and the writer,
// woken, sends it.
//
// One wait remains for a caller: behind a ping or pong that another
// goroutine is writing to a stalled connection, which the heartbeat
// bounds.
//
// The zero Turn is not ready: Init it. It is meant to be a field of the
// connection, so that it costs no allocation.
type Turn struct {
	mu      sync.Mutex
	dirty   atomic.Bool // asks the holder to look again
	state   State       // guarded by mu
	err     error       // a caller's failed write (Failed); guarded by mu
	co      *coalesce.Coalescer
	tryable bool          // co.CanTry(), fixed at Init
	batch   bool          // the writer holds each message and writes it in one write
	wake    chan struct{} // capacity 1: the writer has something to do
}

// Init readies t for a connection whose writes go through co (nil: the
// connection is not one the coalescer wraps, and callers never write).
// With batch, the writer holds each message it writes and writes it in
// one write (coalesce.Coalescer.Release); otherwise it writes through.
func (t *Turn) Init(co *coalesce.Coalescer, batch bool) {
	t.co, t.tryable, t.batch = co, co.CanTry(), batch
	t.wake = make(chan struct{}, 1)
	t.state = Starting
}

// Wake wakes the writer. It never blocks.
func (t *Turn) Wake() {
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// Woken is the channel on which the writer waits for Wake.
func (t *Turn) Woken() <-chan struct{} { return t.wake }

// Lock takes the turn for the writer, waiting for a caller that holds it.
func (t *Turn) Lock() {
	t.mu.Lock()
	if t.state == Idle {
		t.state = WriterOwns
	}
}

// Unlock gives back the turn Lock took.
func (t *Turn) Unlock() {
	if t.state == WriterOwns {
		t.state = Idle
	}
	t.mu.Unlock()
}

// Begin takes the turn for a round of the writer: it clears the mark
// callers leave, and sends what a caller left pending. An error (a
// caller's failed write, or the pending write's) ends the connection; the
// turn is held all the same, and End gives it back.
func (t *Turn) Begin() error {
	t.Lock()
	t.dirty.Store(false)
	if t.err != nil {
		return t.err
	}
	return t.co.FlushPending()
}

// End gives back the turn Begin took and reports whether a caller came
// meanwhile and left its frames to the writer: it should look again.
func (t *Turn) End() (again bool) {
	t.Unlock()
	return t.dirty.Load()
}

// Opened records that the writer, holding the turn, wrote the
// connection's first frame: callers may write from now on.
func (t *Turn) Opened() {
	if t.state == Starting {
		t.state = WriterOwns
	}
}

// Close ends the callers' writes for good: the writer alone writes from
// now on, without the turn.
func (t *Turn) Close() {
	t.mu.Lock()
	t.state = Closed
	t.mu.Unlock()
}

// CallersWrite reports whether callers may write from their own
// goroutines at all: the connection's socket takes non-blocking writes
// (coalesce.Coalescer.CanTry), fixed at Init and Reset. When it does not,
// the writer goroutine sends everything.
func (t *Turn) CallersWrite() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.tryable
}

// State returns the state; only the holder of the turn may call it.
func (t *Turn) State() State { return t.state }

// Calling reports whether a caller holds the turn (and must not wait on
// the network), stalled or not; only the holder of the turn may call it.
func (t *Turn) Calling() bool { return t.state == CallerWriting || t.state == Stalled }

// Stall records, in a caller's turn, a backlog for the writer: the caller
// stops and wakes the writer. Outside a caller's turn it does nothing.
func (t *Turn) Stall() {
	if t.state == CallerWriting {
		t.state = Stalled
	}
}

// Stalled reports whether a caller's turn stalled; only the holder of the
// turn may call it.
func (t *Turn) Stalled() bool { return t.state == Stalled }

// Kick sends from the calling goroutine, holding no lock of the
// connection's, when the turn is free: it calls send until send reports
// no progress, fails or stalls the turn (Stall, or a Write the socket did
// not take whole), and then wakes the writer if there is anything left to
// it. When the turn is taken, or callers may not write (Starting, Failed,
// Closed, a connection the coalescer cannot try), it leaves a mark that
// the holder looks at again, and wakes the writer.
//
// send must be bound once (a method value kept in a field), not a closure
// made per call, which would allocate on every message.
func (t *Turn) Kick(send func() (progressed bool, err error)) {
	t.dirty.Store(true)
	for t.dirty.Load() && t.mu.TryLock() {
		t.dirty.Store(false)
		if t.state != Idle || !t.tryable {
			t.mu.Unlock()
			t.Wake()
			return
		}
		t.state = CallerWriting
		var err error
		for progressed := true; progressed && err == nil && t.state == CallerWriting; {
			progressed, err = send()
		}
		stalled := t.state == Stalled
		if err != nil {
			t.state, t.err = Failed, err // the writer returns it
		} else {
			t.state = Idle
		}
		t.mu.Unlock()
		if err != nil || stalled {
			t.Wake()
			return
		}
	}
}

// Write sends msg as one text message. In a caller's turn it never waits
// on the network: the message is held and written, in one write, as far
// as the socket takes it, and written is false when the rest stays
// pending (the turn is then Stalled; msg may be reused, the coalescer
// holds its own copy). Otherwise it writes after anything pending,
// waiting as long as the connection does (through or in one write, as
// Init's batch says), and written is true.
//
// ctx bounds the write; the server passes context.Background() and
// closes the connection instead (a context with a Done channel costs an
// allocation and a registration per message).
func (t *Turn) Write(ctx context.Context, ws *websocket.Conn, msg []byte) (written bool, err error) {
	switch {
	case t.Calling():
		t.co.Hold()
		err = ws.Write(ctx, websocket.MessageText, msg)
		written, rerr := t.co.ReleaseNoWait()
		if !written {
			t.state = Stalled
		}
		if err == nil {
			err = rerr
		}
		return written, err
	case t.batch:
		t.co.Hold()
		err = ws.Write(ctx, websocket.MessageText, msg)
		if rerr := t.co.Release(); err == nil {
			err = rerr
		}
		return true, err
	default:
		return true, ws.Write(ctx, websocket.MessageText, msg)
	}
}

// FlushPending writes what a caller left pending, waiting as long as the
// connection does: for the writer, in its turn or once the turn is closed.
func (t *Turn) FlushPending() error { return t.co.FlushPending() }

// Reset, in the writer's turn (Lock), makes t serve a new connection
// whose writes go through co (nil: none now): Starting again, with no
// failure kept. It is for an end that outlives its connections (the
// client's process, which resumes on a new one); the wake channel stays.
func (t *Turn) Reset(co *coalesce.Coalescer) {
	t.co, t.tryable, t.err = co, co.CanTry(), nil
	t.state = Starting
}
