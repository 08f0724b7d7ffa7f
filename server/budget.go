package server

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/coder/websocket"

	"github.com/procwire/procwire/frames"
	"github.com/procwire/procwire/internal/chunk"
	"github.com/procwire/procwire/internal/link"
)

// budget is the memory the server has promised (Config.MaxMemory): the
// windows granted to the processes it holds (stdout window + stdin window +
// stderr ring each, the most their buffers can take) plus what the first
// frames being read cost (firstFrameCost times their bytes). A promise that would exceed it is refused, never
// waited for, so nothing can deadlock on it. Safe for concurrent use.
type budget struct {
	limit int64

	mu   sync.Mutex
	used int64
	peak int64 // the most ever used, for tests

	// bigFirst bounds the first frames read past firstSmall bytes at once,
	// so that a few big ones complete instead of all starving each other.
	bigFirst chan struct{}
}

// firstSmall is how much of a first frame is read without a bigFirst slot:
// an open with a few arguments fits.
const firstSmall = 2 * chunk.Size

// firstFrameCost is what a first frame costs per byte read, the multiple
// taken from the budget as its bytes arrive: its bytes twice, in chunks as
// they arrive and in the one slice of their size the decoder reads (the
// chunks are dropped as they are copied, but only the collector frees
// them). Its decoded values fit in what that leaves: the frame's limits
// bound them to 17 MiB (256 arguments of 64 KiB and a 1 MiB environment),
// and a line holding that many bytes is at least as long.
const firstFrameCost = 2

func newBudget(limit int64) *budget {
	// As many big first frames at once as the budget takes at their real
	// cost with room to spare for the small beginnings of the others (a
	// budget of exactly one big frame's cost fits one only when nothing
	// else is read).
	slots := max(1, (limit-1)/(firstFrameCost*frames.MaxFirstLine))
	return &budget{limit: limit, bigFirst: make(chan struct{}, slots)}
}

// take promises n more bytes, or reports false when they do not fit.
func (b *budget) take(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n > b.limit-b.used {
		return false
	}
	b.used += n
	b.peak = max(b.peak, b.used)
	return true
}

// give releases n bytes promised by take.
func (b *budget) give(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
	if b.used < 0 {
		panic("server: memory budget released more than it promised")
	}
}

// usage returns the bytes promised now and the most ever promised.
func (b *budget) usage() (used, peak int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used, b.peak
}

// processCost is what a process's buffers may hold at most: the budget it
// takes from open to destroy.
func processCost(stdoutWindow, stdinWindow, stderrRing int) int64 {
	return int64(stdoutWindow) + int64(stdinWindow) + int64(stderrRing)
}

// resourcesError answers a first frame that the server's memory budget or
// connection bound cannot take.
func resourcesError(op, message string) *frames.Error {
	return &frames.Error{Code: frames.CapabilityUnavailable, Operation: op, Requirement: "resources", Message: message}
}

// errBudget ends the read of a first frame whose bytes the budget cannot
// take.
var errBudget = errors.New("server: first frame over the memory budget")

// firstMessage is a first frame's bytes as they arrive, in chunks, each
// counted against the budget at firstFrameCost times its size; held is
// what it has taken.
type firstMessage struct {
	b      *budget
	chunks []*[chunk.Size]byte
	n      int
	held   int64
	big    bool // holds a bigFirst slot
}

// read reads the message from r, taking a chunk (and a bigFirst slot past
// firstSmall bytes) as bytes arrive.
func (m *firstMessage) read(ctx context.Context, r io.Reader) error {
	for {
		if m.n == len(m.chunks)*chunk.Size {
			if !m.big && m.n >= firstSmall {
				select {
				case m.b.bigFirst <- struct{}{}:
					m.big = true
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			if !m.b.take(firstFrameCost * chunk.Size) {
				return errBudget
			}
			m.held += firstFrameCost * chunk.Size
			if m.n < firstSmall {
				m.chunks = append(m.chunks, chunk.Get())
			} else {
				// Past firstSmall the chunks are the frame's own: bytes
				// drops them for the collector rather than keeping a big
				// frame's worth in the pool.
				m.chunks = append(m.chunks, new([chunk.Size]byte))
			}
		}
		c := m.chunks[len(m.chunks)-1]
		k, err := r.Read(c[m.n%chunk.Size:])
		m.n += k
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// bytes returns the message as one slice of exactly its size: its only
// chunk, or a copy whose bytes replace the chunks as they are copied (the
// pooled ones given back, the others dropped), so that the message is held
// about once.
func (m *firstMessage) bytes() []byte {
	if len(m.chunks) == 1 {
		return m.chunks[0][:m.n]
	}
	buf := make([]byte, m.n)
	for i, c := range m.chunks {
		copy(buf[i*chunk.Size:], c[:])
		if i*chunk.Size < firstSmall {
			chunk.Put(c)
		}
		m.chunks[i] = nil
	}
	m.chunks = m.chunks[:0]
	return buf
}

// release gives back the chunks, the budget and the slot.
func (m *firstMessage) release() {
	for i, c := range m.chunks {
		if i*chunk.Size < firstSmall {
			chunk.Put(c)
		}
	}
	m.chunks = nil
	m.b.give(m.held)
	m.held = 0
	if m.big {
		<-m.b.bigFirst
		m.big = false
	}
}

// readFirstFrame reads and decodes a connection's first frame, its bytes
// counted against the memory budget until release is called (after the
// frame is served: its decoded values live until then); release is
// idempotent. A frame the budget
// cannot take is answered SandboxCapabilityUnavailable{requirement:
// "resources"} and the connection closes normally.
func (c *conn) readFirstFrame(ctx context.Context) (f frames.Frame, st closeStatus, ok bool, release func()) {
	m := &firstMessage{b: c.srv.budget}
	release = m.release
	typ, r, err := c.firstReader(ctx)
	if err != nil {
		return nil, linkStatus(link.ReadFailure(err)), false, release
	}
	switch err := m.read(ctx, r); {
	case errors.Is(err, errBudget):
		m.release()
		return nil, c.refuse(resourcesError("", "the first frame does not fit the server's memory budget")), false, release
	case err != nil:
		return nil, linkStatus(link.ReadFailure(err)), false, release
	}
	if typ != websocket.MessageText {
		return nil, linkStatus(link.BinaryFailure()), false, release
	}
	f, err = c.rd.Dec.Decode(m.bytes())
	if err != nil {
		return nil, linkStatus(link.DecodeFailure(err)), false, release
	}
	if m.n <= firstSmall {
		// A small frame's values are small: its chunk goes back now, so
		// that the open it carries is measured against its windows alone.
		m.release()
	}
	return f, closeStatus{}, true, release
}

// firstReader returns the first message's reader: the message the upgrade
// carried (at most frames.MaxFirstSubprotocol), once, read as if it had
// come over the connection, within the same budget and limits; else the
// connection's first message.
func (c *conn) firstReader(ctx context.Context) (websocket.MessageType, io.Reader, error) {
	if msg := c.first; msg != nil {
		c.first = nil
		return websocket.MessageText, bytes.NewReader(msg), nil
	}
	return c.ws.Reader(ctx)
}

// defaultMaxMemory is DefaultMaxMemoryShare of the machine's memory
// (MemTotal in /proc/meminfo), or DefaultMaxMemoryFallback when it cannot
// be read.
func defaultMaxMemory() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return DefaultMaxMemoryFallback
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			f := strings.Fields(rest)
			if len(f) == 2 && f[1] == "kB" {
				if kb, err := strconv.ParseInt(f[0], 10, 64); err == nil && kb > 0 {
					return kb << 10 / DefaultMaxMemoryShare
				}
			}
		}
	}
	return DefaultMaxMemoryFallback
}
