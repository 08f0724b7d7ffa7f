//go:build linux

package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/procwire/procwire/client"
)

// connFlags are the flags of every command that connects to a server.
type connFlags struct {
	tokenFile     string
	caFile        string
	serverName    string
	headers       headerFlags
	allowInsecure bool
	proxyFromEnv  bool
	firstAsMsg    bool
	logLevel      string
}

func (c *connFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&c.tokenFile, "token-file", "", "`file` holding the bearer token (default $"+tokenEnv+"; the file is preferred: an environment is easily inherited)")
	fs.StringVar(&c.caFile, "ca-file", "", "PEM `file` of certificates to trust for wss:// besides the system's (a self-signed server's own certificate)")
	fs.StringVar(&c.serverName, "server-name", "", "`name` the server's certificate must be valid for (default: the URL's host)")
	fs.Var(&c.headers, "header", "add `'Name: value'` to the WebSocket handshake (repeatable), for a proxy on the way")
	fs.BoolVar(&c.allowInsecure, "allow-insecure-token", false, "send the token over plain ws:// to a host that is not loopback")
	fs.BoolVar(&c.proxyFromEnv, "proxy-from-env", false, "dial through the proxy $HTTPS_PROXY, $HTTP_PROXY and $NO_PROXY name (by default none: a proxy would see the token over ws://)")
	fs.BoolVar(&c.firstAsMsg, "first-frame-as-message", false, "send the open (with its environment) and every resume (with its token) as a message after the WebSocket upgrade instead of in its Sec-WebSocket-Protocol header, for a proxy that logs or caps request headers (one round trip more per connection)")
	fs.StringVar(&c.logLevel, "log-level", "", "log connection events at `level` debug, info, warn or error on stderr (default: none)")
}

// connectTimeout bounds the first handshake with the server.
const connectTimeout = 30 * time.Second

// dialer is how a command reaches one server: the client options, and
// what the last handshake answered, to explain a failure.
type dialer struct {
	url   *url.URL
	token string
	opts  *client.Options
	log   *handshakeLog
}

// newDialer checks rawURL and the flags and builds the client options.
func (c *connFlags) newDialer(rawURL string, stderr io.Writer) (*dialer, error) {
	u, err := checkURL(rawURL)
	if err != nil {
		return nil, err
	}
	token, err := readToken(c.tokenFile)
	if err != nil {
		return nil, err
	}
	if token != "" && (u.Scheme == "ws" || u.Scheme == "http") && !loopbackHost(u.Hostname()) && !c.allowInsecure {
		return nil, fmt.Errorf("refusing to send the token in clear text over %s:// to %s, which is not loopback: use wss://, or --allow-insecure-token", u.Scheme, u.Hostname())
	}
	tc := &tls.Config{ServerName: c.serverName, NextProtos: []string{"http/1.1"}}
	if c.caFile != "" {
		pem, err := os.ReadFile(c.caFile)
		if err != nil {
			return nil, fmt.Errorf("--ca-file: %w", err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--ca-file %s: no PEM certificate in it", c.caFile)
		}
		tc.RootCAs = pool
	}
	logger := slog.New(slog.DiscardHandler)
	if c.logLevel != "" {
		var l slog.Level
		if err := l.UnmarshalText([]byte(c.logLevel)); err != nil {
			return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", c.logLevel)
		}
		logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: l}))
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tc
	tr.ForceAttemptHTTP2 = false
	tr.Proxy = nil
	if c.proxyFromEnv {
		tr.Proxy = http.ProxyFromEnvironment
	}
	if u.Scheme == client.SchemeUnix {
		var nd net.Dialer
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			return nd.DialContext(ctx, "unix", u.Path)
		}
	}
	hl := &handshakeLog{rt: tr}
	return &dialer{url: u, token: token, log: hl, opts: &client.Options{
		Token:      token,
		HTTPClient: &http.Client{Transport: hl},
		HTTPHeader: c.headers.h,
		Logger:     logger,
		// The first frame holds the environment or a resume token:
		// sent as a message, no request header carries it.
		FirstFrameAsMessage: c.firstAsMsg,
		// Every way out of exec destroys the process within this bound,
		// also when the server is gone.
		DestroyTimeout: destroyTimeout,
	}}, nil
}

// dialURL is the URL the client library dials: the server's, or for a
// Unix socket (which the dialer's transport dials) ws://localhost/.
func (d *dialer) dialURL() string {
	if d.url.Scheme == client.SchemeUnix {
		return "ws://localhost/"
	}
	return d.url.String()
}

// close frees the idle connections of the dialer's transport.
func (d *dialer) close() {
	d.log.rt.(*http.Transport).CloseIdleConnections()
}

// checkURL parses a server URL, saying what is wrong with a malformed one.
func checkURL(raw string) (*url.URL, error) {
	want := fmt.Sprintf("URL %q: want ws://HOST:PORT/, wss://HOST:PORT/ or ws+unix:///PATH", raw)
	u, err := url.Parse(raw)
	if err != nil || u.Opaque != "" {
		return nil, errors.New(want)
	}
	switch u.Scheme {
	case client.SchemeUnix:
		if (u.Host != "" && u.Host != "localhost") || u.Path == "" || u.User != nil {
			return nil, fmt.Errorf("%s (a Unix socket's URL is ws+unix:// and its absolute path)", want)
		}
		return u, nil
	case "ws", "wss", "http", "https":
	case "":
		return nil, fmt.Errorf("%s (no scheme)", want)
	default:
		return nil, fmt.Errorf("%s (scheme %q)", want, u.Scheme)
	}
	if u.Host == "" || u.Hostname() == "" {
		return nil, fmt.Errorf("%s (no host)", want)
	}
	if u.User != nil {
		return nil, fmt.Errorf("%s (no user:password@; the token goes in --token-file)", want)
	}
	return u, nil
}

// loopbackHost reports whether host names this machine.
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// explain turns a failed connection into one line naming its cause: a
// missing or wrong token, TLS spoken to a plain server or the reverse, an
// untrusted certificate, nothing listening, or the server's own word.
func (d *dialer) explain(err error) error {
	status, body := d.log.last()
	host := d.url.Host
	secure := d.url.Scheme == "wss" || d.url.Scheme == "https"
	var (
		unknownCA x509.UnknownAuthorityError
		hostErr   x509.HostnameError
		certErr   x509.CertificateInvalidError
		recErr    tls.RecordHeaderError
		dnsErr    *net.DNSError
	)
	switch {
	case status == http.StatusUnauthorized && d.token == "":
		return errors.New("the server wants a token (HTTP 401): give --token-file FILE or set $" + tokenEnv)
	case status == http.StatusUnauthorized:
		return errors.New("the server refused the token (HTTP 401): wrong token")
	case status == http.StatusBadRequest && !secure && speaksTLS(host):
		return fmt.Errorf("%s speaks TLS: use %s", host, d.withScheme("wss"))
	case status != 0:
		reason := strings.TrimSpace(body)
		if i := strings.IndexByte(reason, '\n'); i >= 0 {
			reason = reason[:i]
		}
		if reason == "" {
			reason = http.StatusText(status)
		}
		return fmt.Errorf("the server refused the connection (HTTP %d): %s", status, reason)
	case errors.Is(err, http.ErrSchemeMismatch) || errors.As(err, &recErr):
		return fmt.Errorf("%s does not speak TLS: use %s", host, d.withScheme("ws"))
	case errors.As(err, &unknownCA):
		return fmt.Errorf("%s's certificate is signed by an unknown authority: trust it with --ca-file PEM", host)
	case errors.As(err, &hostErr):
		return fmt.Errorf("%s's certificate is not valid for %s: name the one it is for with --server-name", host, hostErr.Host)
	case errors.As(err, &certErr):
		return fmt.Errorf("%s's certificate is not valid: %v", host, certErr)
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("nothing listens at %s (connection refused)", host)
	case errors.As(err, &dnsErr):
		return fmt.Errorf("cannot resolve %s: %v", d.url.Hostname(), dnsErr.Err)
	}
	return fmt.Errorf("cannot reach %s: %w", d.url.Redacted(), err)
}

// withScheme returns the dialer's URL with scheme instead of its own.
func (d *dialer) withScheme(scheme string) string {
	u := *d.url
	u.Scheme = scheme
	return u.Redacted()
}

// speaksTLS reports whether a TLS handshake with addr succeeds, to explain
// a plain request refused by a TLS server. Nothing is sent over it.
func speaksTLS(addr string) bool {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", addr,
		&tls.Config{InsecureSkipVerify: true}) //nolint:gosec // only asks whether TLS is spoken
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// handshakeLog is an http.RoundTripper that remembers the status and the
// start of the body of the last handshake answer other than 101.
type handshakeLog struct {
	rt     http.RoundTripper
	mu     sync.Mutex
	status int
	body   string
}

// RoundTrip implements http.RoundTripper.
func (h *handshakeLog) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := h.rt.RoundTrip(r)
	if err != nil || resp.StatusCode == http.StatusSwitchingProtocols {
		return resp, err
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(b), resp.Body), resp.Body}
	h.mu.Lock()
	h.status, h.body = resp.StatusCode, string(b)
	h.mu.Unlock()
	return resp, nil
}

func (h *handshakeLog) last() (int, string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.status, h.body
}
