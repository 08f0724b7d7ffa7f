package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"path"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/procwire/procwire/frames"
	"github.com/procwire/procwire/proc"
)

// Revision is this package's provider revision, reported in evidence when
// Config.ProviderRevision is empty.
const Revision = "0.1.0"

// Defaults taken by the zero fields of Config.
const (
	DefaultProvider        = "procwire"
	DefaultStdoutWindow    = 4 << 20
	DefaultMaxStdoutWindow = 64 << 20
	DefaultStdinWindow     = 1 << 20
	DefaultMaxStdinWindow  = 16 << 20
	DefaultStderrRing      = 64 << 10
	DefaultGrace           = 30 * time.Second
	DefaultHeartbeat       = 15 * time.Second
	DefaultExitWait        = time.Second
	DefaultDestroyWait     = 5 * time.Second
	DefaultTombstoneTTL    = 10 * time.Minute
	DefaultMaxTombstones   = 4096
	DefaultMaxFrameData    = 64 << 10
	DefaultMaxProcesses    = 1024
	DefaultFirstFrame      = 30 * time.Second
	DefaultMessageTimeout  = time.Minute

	// DefaultMaxMemoryShare: MaxMemory defaults to the machine's memory
	// (MemTotal) divided by this; DefaultMaxMemoryFallback when MemTotal
	// cannot be read.
	DefaultMaxMemoryShare    = 4
	DefaultMaxMemoryFallback = 1 << 30
)

// Window bounds of wire v1 (PROTOCOL.md §3, open).
const (
	minWindow = frames.MinWindow
	maxWindow = frames.MaxWindow
)

// Config configures a Server. The zero value of every field means its
// default; New refuses values outside their bounds. New copies the Config:
// changing it afterwards has no effect. Admit and Executor are called
// concurrently, from the goroutines serving connections.
type Config struct {
	// Token is the bearer token every upgrade request must carry as
	// "Authorization: Bearer <Token>"; it is compared in constant time and a
	// missing or wrong token is answered 401 before the upgrade. Empty
	// disables authentication: then listen on loopback only
	// (CheckListenAddr), and only requests from this machine are served
	// (PROTOCOL.md §1): a peer address, Host or Origin that is not loopback,
	// or a Forwarded, X-Forwarded-For or X-Real-IP header, gets 403.
	// Loopback is every user of this machine: serve through
	// PeerUIDListener to serve one user only (procwire serve does).
	Token string

	// OriginPatterns are host patterns (path.Match syntax) whose Origin is
	// accepted besides the request's own host, as in
	// websocket.AcceptOptions. Requests without Origin (non-browser
	// clients) are always accepted.
	OriginPatterns []string

	// Provider and ProviderRevision name the provider in evidence.
	// Defaults: DefaultProvider and Revision.
	Provider         string
	ProviderRevision string

	// Admit decides, on every open, whether the instance may open a
	// process; a non-nil result is sent as the error answering the open
	// (typically SandboxInstanceNotFound). ctx ends if the connection is
	// lost or the server begins to shut down (the open is then answered
	// server_shutdown, whatever Admit returns). nil admits every instance.
	Admit func(ctx context.Context, instanceID string) *frames.Error

	// Executor starts children; nil means BridgeExecutor (Linux only).
	Executor Executor

	// RunAs, when set, is the user and groups every child runs as, so that
	// a workload can neither read the server's environment (its token) nor
	// signal it. Switching needs a server running as root. nil runs
	// children as the server's own user.
	RunAs *proc.User

	// StdoutWindow is the stdout window of an open that asks for none
	// (default min(DefaultStdoutWindow, MaxStdoutWindow)); MaxStdoutWindow
	// caps what an open may ask for (default DefaultMaxStdoutWindow). Both
	// in 1,024 ..= 1,073,741,824 bytes.
	StdoutWindow, MaxStdoutWindow int
	// StdinWindow and MaxStdinWindow are the same for stdin credit
	// (defaults DefaultStdinWindow, DefaultMaxStdinWindow).
	StdinWindow, MaxStdinWindow int
	// StderrRing is the size of each process's lossy stderr ring
	// (default DefaultStderrRing).
	StderrRing int

	// Grace is how long a detached process waits for a resume before it
	// is destroyed (default DefaultGrace).
	Grace time.Duration
	// Heartbeat is the ping interval and the deadline for its pong
	// (default DefaultHeartbeat); negative disables pings.
	Heartbeat time.Duration
	// ExitWait bounds how long an exit waits for stdout EOF
	// (default DefaultExitWait).
	ExitWait time.Duration
	// DestroyWait bounds the teardown of one process
	// (default DefaultDestroyWait).
	DestroyWait time.Duration

	// TombstoneTTL is how long a destroyed or expired process is
	// remembered, so that resume and destroy get a clear answer
	// (default DefaultTombstoneTTL; PROTOCOL.md asks for at least 10
	// minutes). MaxTombstones bounds how many are kept, the oldest
	// forgotten first (default DefaultMaxTombstones). It bounds the
	// tombstones of processes and, apart, those of open keys that a
	// destroy by key found nothing under (at most 64 of those per
	// instance), so that a flood of the latter never evicts the former.
	TombstoneTTL  time.Duration
	MaxTombstones int

	// MaxFrameData is the largest payload of one stdout or stderr frame and
	// of one stdin frame from the client, announced as max_data
	// (default DefaultMaxFrameData, at most frames.MaxData).
	MaxFrameData int

	// NoCompression refuses payload compression: opened never chooses an
	// encoding, whatever the open lists, and a compressed stdin frame is a
	// protocol error. By default the server chooses s2 for each direction
	// whose list in the open names it (PROTOCOL.md §5, "Compression"),
	// compressing stdout and stderr frames that shrink usefully.
	NoCompression bool

	// NoTTY refuses an open with tty (PROTOCOL.md §10) with
	// SandboxCapabilityUnavailable, requirement RequirementTTY, before
	// anything starts. By default the server gives terminals when its
	// Executor can (TTYExecutor).
	NoTTY bool

	// FirstFrameTimeout bounds the wait for a connection's first frame;
	// a peer silent that long is disconnected (default DefaultFirstFrame).
	FirstFrameTimeout time.Duration

	// MessageTimeout bounds the read of one WebSocket message from its
	// first frame to its last: a peer that begins a message and does not
	// end it in time (a trickle, empty continuation frames) is
	// disconnected with 1008 (default DefaultMessageTimeout). Frames
	// besides the payload are bounded too: a message in more than about
	// 2,700 frames is closed the same way.
	MessageTimeout time.Duration

	// MaxProcesses bounds the processes the server holds at once, live or
	// detached (an instance reservation counts from open to destroy); an
	// open beyond it is refused with SandboxCapabilityUnavailable
	// {requirement: "resources"} (default DefaultMaxProcesses).
	MaxProcesses int

	// MaxMemory bounds, in bytes, what the server promises: the windows
	// granted to the processes it holds (each process's stdout window,
	// stdin window and stderr ring, the most its buffers can take) plus
	// what the first frames being read cost (twice their bytes: the bytes
	// as they arrive and the copy the decoder reads). It does not set the
	// Go runtime's memory limit: a program that embeds the server does
	// (debug.SetMemoryLimit), as serve does. An open whose windows do
	// not fit is refused with SandboxCapabilityUnavailable{requirement:
	// "resources"}, and so is a first frame whose bytes do not fit, as
	// they arrive (the connection then closes normally). Buffers take
	// memory only as bytes arrive, so a server's memory is usually far
	// below it. Default: a quarter of the machine's memory
	// (DefaultMaxMemoryShare); it must fit at least one process with the
	// default windows.
	MaxMemory int64

	// MaxConnections bounds the WebSocket connections served at once;
	// an upgrade beyond it is answered 503 before the upgrade (default
	// 2 × MaxProcesses + 64: every process attached, and as many again
	// opening, resuming or destroying).
	MaxConnections int

	// Logger receives connection and process events; nil discards them.
	// Every refusal is logged at Info with its reason. Tokens are never
	// logged.
	Logger *slog.Logger

	// Registerer, when set, receives the server's Prometheus metrics
	// (procwire_*); nil records none. Register one Server per Registerer.
	Registerer prometheus.Registerer

	// TrustedProxies are the proxies whose Forwarded or X-Forwarded-For
	// header names the client: a connection from one of them is logged
	// with the address the headers give (and the proxy's as "peer").
	// Those headers from any other peer are ignored. A server without a
	// token refuses every forwarded request whatever this says.
	TrustedProxies []netip.Prefix
}

// withDefaults returns a copy of c with defaults filled in, or an error for
// a value out of bounds. It checks, in order, what names the server and
// how it runs (identity), the windows, the durations and the bounds.
func (c Config) withDefaults() (Config, error) {
	for _, fill := range []func() error{c.identityDefaults, c.windowDefaults, c.durationDefaults, c.boundDefaults} {
		if err := fill(); err != nil {
			return c, err
		}
	}
	return c, nil
}

// identityDefaults fills in and checks the provider, the executor, the
// logger and the origin patterns.
func (c *Config) identityDefaults() error {
	if c.Provider == "" {
		c.Provider = DefaultProvider
	}
	if c.ProviderRevision == "" {
		c.ProviderRevision = Revision
	}
	if c.Executor == nil {
		e, err := defaultExecutor()
		if err != nil {
			return err
		}
		c.Executor = e
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	for _, p := range c.OriginPatterns {
		if _, err := path.Match(p, ""); err != nil {
			return fmt.Errorf("server: origin pattern %q: %w", p, err)
		}
	}
	if len(c.Provider) > frames.MaxStringBytes || len(c.ProviderRevision) > frames.MaxStringBytes {
		return errors.New("server: Provider or ProviderRevision longer than 4096 bytes")
	}
	return nil
}

// windowDefaults fills in and checks the stdout and stdin windows and
// their maxima, the stderr ring and MaxFrameData.
func (c *Config) windowDefaults() error {
	type window struct {
		name        string
		v, max      *int
		def, defMax int
		maxName     string
	}
	for _, w := range []window{
		{"StdoutWindow", &c.StdoutWindow, &c.MaxStdoutWindow, DefaultStdoutWindow, DefaultMaxStdoutWindow, "MaxStdoutWindow"},
		{"StdinWindow", &c.StdinWindow, &c.MaxStdinWindow, DefaultStdinWindow, DefaultMaxStdinWindow, "MaxStdinWindow"},
	} {
		if *w.max == 0 {
			*w.max = max(w.defMax, *w.v)
		}
		if *w.v == 0 {
			*w.v = min(w.def, *w.max)
		}
		if err := checkWindow(w.name, *w.v); err != nil {
			return err
		}
		if err := checkWindow(w.maxName, *w.max); err != nil {
			return err
		}
		if *w.v > *w.max {
			return fmt.Errorf("server: %s %d above %s %d", w.name, *w.v, w.maxName, *w.max)
		}
	}
	if c.StderrRing == 0 {
		c.StderrRing = DefaultStderrRing
	}
	if c.StderrRing < 1 || c.StderrRing > maxWindow {
		return fmt.Errorf("server: StderrRing %d outside 1..%d", c.StderrRing, maxWindow)
	}
	if c.MaxFrameData == 0 {
		c.MaxFrameData = DefaultMaxFrameData
	}
	if c.MaxFrameData < 1 || c.MaxFrameData > frames.MaxData {
		return fmt.Errorf("server: MaxFrameData %d outside 1..%d", c.MaxFrameData, frames.MaxData)
	}
	return nil
}

// durationDefaults fills in and checks the durations.
func (c *Config) durationDefaults() error {
	for _, d := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"Grace", &c.Grace, DefaultGrace},
		{"ExitWait", &c.ExitWait, DefaultExitWait},
		{"DestroyWait", &c.DestroyWait, DefaultDestroyWait},
		{"TombstoneTTL", &c.TombstoneTTL, DefaultTombstoneTTL},
		{"FirstFrameTimeout", &c.FirstFrameTimeout, DefaultFirstFrame},
		{"MessageTimeout", &c.MessageTimeout, DefaultMessageTimeout},
	} {
		if *d.v < 0 {
			return fmt.Errorf("server: %s is negative (%v)", d.name, *d.v)
		}
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	if c.Heartbeat == 0 {
		c.Heartbeat = DefaultHeartbeat
	}
	return nil
}

// boundDefaults fills in and checks the server's bounds: tombstones,
// processes, memory (after the windows: it must hold one process's) and
// connections.
func (c *Config) boundDefaults() error {
	if c.MaxTombstones == 0 {
		c.MaxTombstones = DefaultMaxTombstones
	}
	if c.MaxTombstones < 0 {
		return fmt.Errorf("server: MaxTombstones is negative (%d)", c.MaxTombstones)
	}
	if c.MaxProcesses == 0 {
		c.MaxProcesses = DefaultMaxProcesses
	}
	if c.MaxProcesses < 0 {
		return fmt.Errorf("server: MaxProcesses is negative (%d)", c.MaxProcesses)
	}
	if c.MaxMemory == 0 {
		c.MaxMemory = defaultMaxMemory()
	}
	if least := processCost(c.StdoutWindow, c.StdinWindow, c.StderrRing); c.MaxMemory < least {
		return fmt.Errorf("server: MaxMemory %d below one process's default windows (%d)", c.MaxMemory, least)
	}
	if c.MaxConnections == 0 {
		c.MaxConnections = 2*c.MaxProcesses + 64
	}
	if c.MaxConnections < 0 {
		return fmt.Errorf("server: MaxConnections is negative (%d)", c.MaxConnections)
	}
	return nil
}

func checkWindow(name string, v int) error {
	if v < minWindow || v > maxWindow {
		return fmt.Errorf("server: %s %d outside %d..%d", name, v, minWindow, maxWindow)
	}
	return nil
}

// clampWindow returns the window granted for a request: def when the open
// asked for none, else the request capped at maxW.
func clampWindow(requested int64, def, maxW int) int {
	if requested <= 0 {
		return def
	}
	return int(min(requested, int64(maxW)))
}

// ErrInsecureListen is returned (wrapped) by CheckListenAddr for a
// non-loopback address without a token.
var ErrInsecureListen = errors.New("server: without a token the server must listen on loopback only")

// CheckListenAddr checks a "host:port" listen address before listening.
// Without a token, only loopback is allowed: "localhost", 127.0.0.0/8 and
// ::1; an empty host (every interface) and any other address are refused
// with an error wrapping ErrInsecureListen. With a token every well-formed
// address is allowed.
func CheckListenAddr(addr, token string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("server: listen address %q: %w", addr, err)
	}
	if token != "" || strings.EqualFold(host, "localhost") {
		return nil
	}
	if ip, err := netip.ParseAddr(host); err == nil && ip.Zone() == "" && ip.Unmap().IsLoopback() {
		return nil
	}
	return fmt.Errorf("%w: %q", ErrInsecureListen, addr)
}
