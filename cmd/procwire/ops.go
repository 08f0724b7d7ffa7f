//go:build linux

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/procwire/procwire/server"
)

// opsFlags are serve's operator flags: the metrics listener and the
// trusted proxies.
type opsFlags struct {
	metricsAddr string
	trusted     prefixList
}

func addOpsFlags(fs *flag.FlagSet) *opsFlags {
	o := &opsFlags{}
	fs.StringVar(&o.metricsAddr, "metrics-addr", "", "serve /metrics (Prometheus) and /healthz on this `address`, apart from the process endpoint")
	fs.Var(&o.trusted, "trusted-proxy", "a proxy `CIDR` whose Forwarded/X-Forwarded-For names the client (repeatable)")
	return o
}

// configure sets the server configuration's operator fields and returns
// the registry the metrics go to, or nil without --metrics-addr.
func (o *opsFlags) configure(cfg *server.Config) *prometheus.Registry {
	cfg.TrustedProxies = o.trusted
	if o.metricsAddr == "" {
		return nil
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	cfg.Registerer = reg
	return reg
}

// opsServer serves /metrics and /healthz.
type opsServer struct {
	hs   *http.Server
	errc chan error
}

// start listens on --metrics-addr and serves reg's metrics and srv's
// health there; it returns nil without --metrics-addr. The metrics carry
// no instance, process or token, so any address may be used.
func (o *opsFlags) start(reg *prometheus.Registry, srv *server.Server, lf *listenFlags, lim *server.ConnLimiter, log *slog.Logger) (*opsServer, error) {
	if o.metricsAddr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", o.metricsAddr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}))
	mux.Handle("GET /healthz", srv.HealthHandler())
	s := &opsServer{hs: lf.httpServer(mux, lim, log), errc: make(chan error, 1)}
	go func() { s.errc <- s.hs.Serve(lim.Listener(ln)) }()
	log.Info("metrics listening", "addr", ln.Addr().String())
	return s, nil
}

// shutdown stops the metrics listener; nil-safe.
func (s *opsServer) shutdown(ctx context.Context) error {
	if s == nil {
		return nil
	}
	err := s.hs.Shutdown(ctx)
	if serr := <-s.errc; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}

// prefixList is a repeatable CIDR flag; a bare address is its own /32 or
// /128.
type prefixList []netip.Prefix

func (l *prefixList) String() string {
	s := make([]string, len(*l))
	for i, p := range *l {
		s[i] = p.String()
	}
	return strings.Join(s, ",")
}

func (l *prefixList) Set(v string) error {
	for part := range strings.SplitSeq(v, ",") {
		part = strings.TrimSpace(part)
		p, err := netip.ParsePrefix(part)
		if err != nil {
			ip, aerr := netip.ParseAddr(part)
			if aerr != nil {
				return fmt.Errorf("not a CIDR or address: %q", part)
			}
			p = netip.PrefixFrom(ip, ip.BitLen())
		}
		*l = append(*l, p.Masked())
	}
	return nil
}
