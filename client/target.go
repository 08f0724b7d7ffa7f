package client

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"runtime"
	"strings"
)

// SchemeUnix is the URL scheme of a server listening on a Unix socket:
// "ws+unix:///run/procwire.sock" dials the socket /run/procwire.sock and
// sends the upgrade as a request for ws://localhost/.
const SchemeUnix = "ws+unix"

// ErrInsecureToken is returned (wrapped) by Open and Attach for a token
// that would travel in clear text, over ws:// or http://, to a host that is
// not loopback, unless Options.AllowInsecureToken is set.
var ErrInsecureToken = errors.New("procwire: refusing to send the token in clear text to a host that is not loopback")

// target checks rawURL against o and returns the URL to dial; for a
// ws+unix URL it sets o.unixSocket and returns ws://localhost/.
func (o *Options) target(rawURL string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", fmt.Errorf("procwire: server URL: %w", err)
	}
	if u.User != nil {
		return "", errors.New("procwire: server URL: no user:password@; the token goes in Options.Token")
	}
	switch strings.ToLower(u.Scheme) {
	case "wss", "https":
		return rawURL, nil
	case "ws", "http":
		if o.Token != "" && !o.AllowInsecureToken && !loopbackHost(u.Hostname()) {
			return "", fmt.Errorf("%w: %s", ErrInsecureToken, u.Redacted())
		}
		return rawURL, nil
	case SchemeUnix:
		if runtime.GOOS == "js" {
			return "", errors.New("procwire: a browser cannot dial a ws+unix socket")
		}
		if u.Host != "" && u.Host != "localhost" {
			return "", fmt.Errorf("procwire: server URL %q: want ws+unix:///PATH/TO/SOCKET", rawURL)
		}
		if u.Path == "" {
			return "", fmt.Errorf("procwire: server URL %q: no socket path", rawURL)
		}
		if o.HTTPClient != nil {
			if _, ok := o.HTTPClient.Transport.(*http.Transport); !ok && o.HTTPClient.Transport != nil {
				return "", errors.New("procwire: a ws+unix URL needs Options.HTTPClient nil or with an *http.Transport")
			}
		}
		o.unixSocket = u.Path
		return "ws://localhost/", nil
	}
	return "", fmt.Errorf("procwire: server URL %q: want ws://, wss://, http://, https:// or ws+unix://", rawURL)
}

// loopbackHost reports whether host names this machine: "localhost" or a
// loopback address without a zone.
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Zone() == "" && ip.Unmap().IsLoopback()
}

// refuseRedirect is the CheckRedirect of every client that dials: an
// upgrade answered with a redirect is a failed dial, whose 3xx status the
// error names. Following it would send the token, and the stream, to
// wherever the answer points, over ws:// as readily as wss://.
func refuseRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
