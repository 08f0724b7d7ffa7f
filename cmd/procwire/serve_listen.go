//go:build linux

package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/procwire/procwire/server"
)

// unixPrefix marks a listen address that is a Unix socket's path.
const unixPrefix = "unix:"

// listenFlags are serve's flags about who may connect and for how long a
// connection may sit before it is upgraded.
type listenFlags struct {
	allowUIDs   uidList
	maxPending  int
	readTimeout time.Duration
	idleTimeout time.Duration
}

func addListenFlags(fs *flag.FlagSet) *listenFlags {
	lf := &listenFlags{readTimeout: 10 * time.Second, idleTimeout: 60 * time.Second}
	fs.Var(&lf.allowUIDs, "allow-uid", "without a token, serve this `uid` besides the server's own (repeatable; on a Unix socket, the socket is then mode 0666 and the peer's uid is the guard)")
	fs.Var(intRange{&lf.maxPending, 1, 1 << 20}, "max-pending-connections", "most connections, over both listeners, not yet upgraded to a WebSocket; the longest idle is closed to make room (default a quarter of the descriptor limit, 16..4096)")
	fs.Var(durationFlag{d: &lf.readTimeout}, "read-timeout", "how long a request (an upgrade, a /metrics scrape) may take to arrive")
	fs.Var(durationFlag{d: &lf.idleTimeout}, "idle-timeout", "how long a kept-alive connection may wait for its next request")
	return lf
}

// checkAddr checks --addr before anything listens: a Unix socket is
// always allowed; TCP without a token only on loopback.
func checkAddr(addr, token string) error {
	if path, ok := strings.CutPrefix(addr, unixPrefix); ok {
		if path == "" {
			return errors.New("--addr unix:PATH: no path")
		}
		return nil
	}
	if err := server.CheckListenAddr(addr, token); errors.Is(err, server.ErrInsecureListen) {
		return fmt.Errorf("--addr %s: without a token the server listens on loopback only (give --token-file)", addr)
	} else if err != nil {
		return fmt.Errorf("--addr: %w", err)
	}
	return nil
}

// limiter returns the pending-connection limiter both listeners share.
func (lf *listenFlags) limiter() *server.ConnLimiter {
	n := lf.maxPending
	if n == 0 {
		n = 1024
		var rl syscall.Rlimit
		if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err == nil {
			n = int(min(max(rl.Cur/4, 16), 4096))
		}
	}
	return server.NewConnLimiter(n)
}

// listen listens on addr (host:port, or unix:PATH) for the process
// endpoint. Without a token only the server's own user (and --allow-uid)
// is served, whatever the address: the peer's uid is checked on accept.
// With tlsConfig the listener speaks TLS. It returns the listener and the
// URL clients dial.
func (lf *listenFlags) listen(addr, token string, tlsConfig *tls.Config, lim *server.ConnLimiter, log *slog.Logger) (net.Listener, string, error) {
	var (
		ln  net.Listener
		url string
		err error
	)
	if path, ok := strings.CutPrefix(addr, unixPrefix); ok {
		perm := os.FileMode(0o600)
		if len(lf.allowUIDs) > 0 {
			perm = 0o666
		}
		ln, err = server.ListenUnix(path, perm)
		url = "ws+unix://" + path
	} else {
		ln, err = net.Listen("tcp", addr)
		if err == nil {
			url = "ws://" + ln.Addr().String() + "/"
		}
	}
	if err != nil {
		return nil, "", fmt.Errorf("--addr: %w", err)
	}
	if token == "" {
		uids := append([]uint32{uint32(os.Geteuid())}, lf.allowUIDs...)
		ln = server.PeerUIDListener(ln, uids, log)
	}
	if tlsConfig != nil {
		ln = tls.NewListener(ln, tlsConfig)
		url = strings.Replace(url, "ws", "wss", 1)
	}
	return lim.Listener(ln), url, nil
}

// httpServer returns the http.Server of one of serve's listeners.
func (lf *listenFlags) httpServer(h http.Handler, lim *server.ConnLimiter, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: lf.readTimeout,
		ReadTimeout:       lf.readTimeout,
		IdleTimeout:       lf.idleTimeout,
		ConnState:         lim.ConnState,
		// No h2: a WebSocket upgrade needs HTTP/1.1.
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){},
		ErrorLog:     slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

// loadCert reads the certificate and key, before anything listens, and
// reloads them on SIGHUP until ctx ends; stop waits for that.
func loadCert(ctx context.Context, certFile, keyFile string, log *slog.Logger) (cfg *tls.Config, stop func(), err error) {
	if certFile == "" {
		return nil, func() {}, nil
	}
	r, err := server.NewCertReloader(certFile, keyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("--tls-cert/--tls-key: %w", err)
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				if err := r.Reload(); err != nil {
					log.Error("SIGHUP: certificate not reloaded, the old one is served", "err", err)
				} else {
					log.Info("SIGHUP: certificate reloaded", "cert", certFile)
				}
			}
		}
	}()
	return r.TLSConfig(), func() {
		signal.Stop(hup)
		cancel()
		<-done
	}, nil
}

// uidList is a repeatable uid flag.
type uidList []uint32

func (l *uidList) String() string {
	s := make([]string, len(*l))
	for i, u := range *l {
		s[i] = strconv.FormatUint(uint64(u), 10)
	}
	return strings.Join(s, ",")
}

func (l *uidList) Set(v string) error {
	u, err := strconv.ParseUint(v, 10, 32)
	if err != nil {
		return errors.New("not a uid")
	}
	*l = append(*l, uint32(u))
	return nil
}
