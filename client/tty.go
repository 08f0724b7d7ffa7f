package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/procwire/procwire/frames"
)

// TTY asks for the process to run on a pseudo-terminal (PROTOCOL.md §10):
// its stdout is everything the terminal writes (stdout and stderr merged,
// with the line discipline's \r\n and echo), its Stderr ends empty, and
// what is written to its stdin are keystrokes (0x03 is ^C, 0x04 is ^D). A
// server that gives no terminals refuses the open with a *RemoteError
// SandboxCapabilityUnavailable, requirement "tty".
type TTY struct {
	// Rows and Cols are the window size in characters, at least 1.
	Rows, Cols uint16
	// Term becomes the process's TERM unless the request's environment
	// sets TERM; empty: none.
	Term string
}

// ErrNoTTY is returned by Resize on a process without a terminal.
var ErrNoTTY = errors.New("procwire: the process has no terminal")

// ttyFrame returns open's tty for t, or nil.
func ttyFrame(t *TTY) *frames.TTY {
	if t == nil {
		return nil
	}
	return &frames.TTY{Rows: int(t.Rows), Cols: int(t.Cols), Term: t.Term}
}

// TTY reports whether the process runs on a terminal: it was opened with
// Options.TTY, or, for an attached process, the server said so.
func (p *Process) TTY() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.m.tty
}

// Resize sets the window size of the process's terminal; the kernel sends
// SIGWINCH to its foreground job. It is not answered: it returns once the
// size is queued to be sent, after the acks and before the signals and
// stdin written later. Only the latest size is sent, and it is sent again
// on every new connection after a cut, so the terminal ends at the last
// size asked for. It returns ErrNoTTY on a process without a terminal,
// and the handle's error once it ended.
func (p *Process) Resize(ctx context.Context, rows, cols uint16) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("procwire: resize: %w", err)
	}
	if rows == 0 || cols == 0 {
		return fmt.Errorf("procwire: resize: %d rows and %d columns: both must be at least 1", rows, cols)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.m.tty {
		return ErrNoTTY
	}
	if err := p.m.usable(); err != nil {
		return err
	}
	p.m.sizeGen++
	p.m.size = frames.Resize{Rows: int(rows), Cols: int(cols)}
	p.applyLocked(evSend)
	return nil
}
