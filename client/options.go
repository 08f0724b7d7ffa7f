package client

import (
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/procwire/procwire/frames"
)

// Options configure Open. A nil *Options means all defaults.
type Options struct {
	// Token is sent as "Authorization: Bearer <Token>" on every connection
	// (on js/wasm, where no header can be set, as the subprotocol
	// "procwire.bearer.<base64url>", PROTOCOL.md §1).
	// Empty sends no Authorization header. It is sent over ws:// or http://
	// only to a loopback host (localhost, 127.0.0.0/8, ::1) or a ws+unix
	// socket: Open and Attach refuse any other with ErrInsecureToken unless
	// AllowInsecureToken is set. Redirects are never followed, so the
	// token goes nowhere else than the URL given.
	Token string
	// AllowInsecureToken lets Token travel in clear text, over ws:// or
	// http://, to a host that is not loopback (a private network the
	// caller trusts).
	AllowInsecureToken bool
	// HTTPClient dials the WebSocket connections; nil uses a client like
	// http.DefaultClient without a proxy (see ProxyFromEnvironment).
	// Its CheckRedirect is replaced: an upgrade answered with a redirect
	// fails, and its status is in the error. When its Transport is an
	// *http.Transport, that transport's Proxy is used as it is.
	HTTPClient *http.Client
	// ProxyFromEnvironment, with a nil HTTPClient, dials through the proxy
	// HTTPS_PROXY, HTTP_PROXY and NO_PROXY name (http.ProxyFromEnvironment).
	// By default no proxy is used: the environment of a program is easily
	// inherited, and a proxy it names would see the token of every ws://
	// connection.
	ProxyFromEnvironment bool
	// HTTPHeader is added to every handshake request.
	HTTPHeader http.Header
	// FirstFrameAsMessage sends every connection's first frame (the open,
	// with its environment; a resume, with its token) as a message after
	// the upgrade instead of in it (PROTOCOL.md §1, "The first frame in
	// the upgrade"): for a proxy on the way that logs request headers, or
	// caps them below the 4 KiB the frame may take. It costs one round
	// trip per connection. Without it, a hop that refuses the upgrade for
	// its size (431, or nginx's 400) costs one refused request: the dial
	// is made again without the frame, and the process's later first
	// frames go as messages.
	FirstFrameAsMessage bool
	// StdoutWindow and StdinWindow ask the server for window sizes in bytes
	// (1,024 ..= 1,073,741,824); 0 takes the server's default. They also
	// bound what the client accepts: a server that announces a larger
	// window (or, for 0, one over 64 MiB of stdout or 16 MiB of stdin)
	// breaks the protocol, and the process is destroyed. The client holds
	// at most one window of each.
	StdoutWindow, StdinWindow int64
	// StderrBuffer bounds the stderr bytes held for a reader that is not
	// keeping up; older bytes are dropped first. 0 means the server's
	// stderr window, up to 4 MiB.
	StderrBuffer int
	// ReconnectMin and ReconnectMax bound the jittered exponential backoff
	// between reconnection attempts. 0 means 50ms and 2s.
	ReconnectMin, ReconnectMax time.Duration
	// ResumeBudget is how many resumes in a row may reach the server and
	// fail without an answer (closed, reset) before the handle ends with
	// ErrConnectionLost naming the last cause. A successful resume resets
	// the count. 0 means 8 (with the default backoff: 3.6–7.2 s after the
	// loss); dials that reach no server count only against the grace.
	ResumeBudget int
	// DestroyTimeout bounds Destroy (and the destroy the client makes on
	// its own after a failure), whatever its context. 0 means 10s: the
	// server's 5 s destroy wait and room for the network.
	DestroyTimeout time.Duration
	// Compress asks the server to compress stdout and stderr payloads with
	// s2, and offers to compress stdin the same way (PROTOCOL.md §5,
	// "Compression"). A frame is sent compressed only when that shrinks it
	// by an eighth or more, so incompressible output costs only the
	// attempt; offsets, windows and max_data still count raw bytes. It pays
	// on links of tens of Mbit/s; on loopback it only spends CPU. A server
	// that refuses compression (or predates it: then the open fails with
	// 1007 open.output_enc: unknown_field) is answered as usual.
	Compress bool
	// Limits, when not nil, asks the server for limits on the process's
	// tree tighter than its own (PROTOCOL.md §3, open.limits); Evidence
	// then says the limits in force. A server that cannot give them
	// refuses the open (SandboxCapabilityUnavailable, requirement
	// "resources").
	Limits *frames.Limits
	// TTY, when set, runs the process on a pseudo-terminal of that size
	// (see TTY); nil: pipes.
	TTY *TTY
	// Logger receives connection events (losses, resumes); nil discards
	// them.
	Logger *slog.Logger

	unixSocket string // the socket of a ws+unix URL, set by target
}

const (
	defaultReconnectMin = 50 * time.Millisecond
	defaultReconnectMax = 2 * time.Second
	defaultResumeBudget = 8
	defaultDestroy      = 10 * time.Second
	defaultStdoutCap    = 64 << 20 // the server's default MaxStdoutWindow
	defaultStdinCap     = 16 << 20 // the server's default MaxStdinWindow
	defaultStderrCap    = 4 << 20
	// For Attach, which learns no session parameters: the server's
	// defaults.
	defaultGrace     = 30 * time.Second
	defaultHeartbeat = 15 * time.Second
	defaultMaxData   = 64 << 10
	minWindow        = frames.MinWindow
	maxWindow        = frames.MaxWindow
)

// withDefaults returns a copy of o with every zero field defaulted, or an
// error for a value the server would refuse.
func (o *Options) withDefaults() (Options, error) {
	var c Options
	if o != nil {
		c = *o
	}
	for _, w := range [...]struct {
		name string
		v    int64
	}{{"StdoutWindow", c.StdoutWindow}, {"StdinWindow", c.StdinWindow}} {
		if w.v != 0 && (w.v < minWindow || w.v > maxWindow) {
			return c, fmt.Errorf("procwire: Options.%s %d outside %d..%d", w.name, w.v, minWindow, maxWindow)
		}
	}
	if c.StderrBuffer < 0 || c.ReconnectMin < 0 || c.ReconnectMax < 0 || c.ResumeBudget < 0 || c.DestroyTimeout < 0 {
		return c, fmt.Errorf("procwire: negative Options value")
	}
	if c.ResumeBudget == 0 {
		c.ResumeBudget = defaultResumeBudget
	}
	if c.DestroyTimeout == 0 {
		c.DestroyTimeout = defaultDestroy
	}
	if c.ReconnectMin == 0 {
		c.ReconnectMin = defaultReconnectMin
	}
	if c.ReconnectMax == 0 {
		c.ReconnectMax = max(defaultReconnectMax, c.ReconnectMin)
	}
	if c.ReconnectMax < c.ReconnectMin {
		return c, fmt.Errorf("procwire: Options.ReconnectMax %v below ReconnectMin %v", c.ReconnectMax, c.ReconnectMin)
	}
	if err := checkPlatform(&c); err != nil {
		return c, err
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}
