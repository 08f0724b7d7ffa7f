package server

import (
	"maps"

	"github.com/procwire/procwire/frames"
	"github.com/procwire/procwire/proc"
)

// Terminals (PROTOCOL.md §10): an open with tty runs its process on a
// pseudo-terminal, and resize sets its window size.

// RequirementTTY is the requirement a SandboxCapabilityUnavailable names
// when the server gives no terminals. The contract's set of requirements
// has no word for a terminal; this one is procwire's.
const RequirementTTY = "tty"

// TTYExecutor is implemented by an Executor that can start processes on a
// pseudo-terminal (proc.Config.TTY); the Process it returns for one
// implements TTYProcess. The server refuses an open with tty when its
// Executor does not implement it, or says false.
type TTYExecutor interface {
	SupportsTTY() bool
}

// TTYProcess is implemented by a Process that may run on a terminal.
type TTYProcess interface {
	// Resize sets the window size of the process's terminal.
	Resize(rows, cols, xpixel, ypixel uint16) error
}

// ttyRefusal returns the error an open with tty gets from this server, or
// nil when it gives terminals.
func (s *Server) ttyRefusal() *frames.Error {
	if s.cfg.NoTTY {
		return &frames.Error{Code: frames.CapabilityUnavailable, Requirement: RequirementTTY,
			Message: "this server gives no terminals (serve --no-tty); open without tty"}
	}
	if te, ok := s.cfg.Executor.(TTYExecutor); !ok || !te.SupportsTTY() {
		return &frames.Error{Code: frames.CapabilityUnavailable, Requirement: RequirementTTY,
			Message: "this server's executor gives no terminals; open without tty"}
	}
	return nil
}

// ttyConfig returns the terminal of an open's tty, or nil.
func ttyConfig(t *frames.TTY) *proc.TTY {
	if t == nil {
		return nil
	}
	return &proc.TTY{Rows: uint16(t.Rows), Cols: uint16(t.Cols), XPixel: uint16(t.XPixel), YPixel: uint16(t.YPixel)}
}

// ttyEnv returns the environment of a request with tty: TERM is tty.term
// unless the request sets TERM.
func ttyEnv(env map[string]string, t *frames.TTY) map[string]string {
	if t == nil || t.Term == "" {
		return env
	}
	if _, set := env["TERM"]; set {
		return env
	}
	e := maps.Clone(env)
	if e == nil {
		e = map[string]string{}
	}
	e["TERM"] = t.Term
	return e
}
