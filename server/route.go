package server

import (
	"net/http"
	"net/netip"
	"strings"

	"github.com/procwire/procwire/frames"
)

// routeHeaders are the routing headers of an upgrade request
// (frames.HeaderInstance, frames.HeaderProcess); empty when absent.
type routeHeaders struct {
	instance, process string
}

func routeFrom(r *http.Request) routeHeaders {
	return routeHeaders{
		instance: r.Header.Get(frames.HeaderInstance),
		process:  r.Header.Get(frames.HeaderProcess),
	}
}

// check reports whether the routing headers disagree with the first frame
// f: a proxy may have routed the connection on a value the frame
// contradicts, so the connection is closed with 1002 (PROTOCOL.md §1). An
// absent header is not checked. A resume carries no instance id; its
// header is checked against the process's own once it is found
// (checkInstance).
func (h routeHeaders) check(f frames.Frame) (st closeStatus, bad bool) {
	var instance, process string
	switch f := f.(type) {
	case *frames.Open:
		instance = f.InstanceID
	case *frames.Resume:
		process = f.ProcessID
	case *frames.Destroy:
		instance, process = f.InstanceID, f.ProcessID
	}
	if h.instance != "" && instance != "" && h.instance != instance {
		return protocolError("%s header disagrees with the %s frame's instance_id", frames.HeaderInstance, f.Type()), true
	}
	if h.process != "" && process != "" && h.process != process {
		return protocolError("%s header disagrees with the %s frame's process_id", frames.HeaderProcess, f.Type()), true
	}
	return closeStatus{}, false
}

// checkInstance reports whether the instance header disagrees with the
// instance of the process a resume or destroy found.
func (h routeHeaders) checkInstance(instanceID string) (st closeStatus, bad bool) {
	if h.instance != "" && h.instance != instanceID {
		return protocolError("%s header names another instance than the process's", frames.HeaderInstance), true
	}
	return closeStatus{}, false
}

// clientAddr returns the address of the client behind r: r.RemoteAddr,
// unless the peer is one of the trusted proxies, in which case the
// rightmost address of Forwarded (for=) or else X-Forwarded-For that is not
// itself a trusted proxy. Headers from an untrusted peer are ignored: any
// client can write them.
func clientAddr(r *http.Request, trusted []netip.Prefix) string {
	if len(trusted) == 0 {
		return r.RemoteAddr
	}
	peer, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil || !trustedAddr(peer.Addr(), trusted) {
		return r.RemoteAddr
	}
	hops := forwardedFor(r.Header.Values("Forwarded"))
	if hops == nil {
		for _, v := range r.Header.Values("X-Forwarded-For") {
			for h := range strings.SplitSeq(v, ",") {
				hops = append(hops, strings.TrimSpace(h))
			}
		}
	}
	// Walk from the nearest hop back: each trusted proxy vouches for the
	// hop before it; the first untrusted one is the client.
	addr := r.RemoteAddr
	for i := len(hops) - 1; i >= 0; i-- {
		ip, ok := parseHop(hops[i])
		if !ok {
			break // unparseable ("unknown", an obfuscated id): stop trusting
		}
		addr = hops[i]
		if !trustedAddr(ip, trusted) {
			break
		}
	}
	return addr
}

// forwardedFor returns the for= values of RFC 7239 Forwarded headers, in
// order, or nil if there are none.
func forwardedFor(values []string) []string {
	var hops []string
	for _, v := range values {
		for elem := range strings.SplitSeq(v, ",") {
			for pair := range strings.SplitSeq(elem, ";") {
				k, val, ok := strings.Cut(strings.TrimSpace(pair), "=")
				if ok && strings.EqualFold(k, "for") {
					hops = append(hops, strings.Trim(val, `"`))
				}
			}
		}
	}
	return hops
}

// parseHop parses a forwarded address: "ip", "ip:port", "[v6]" or
// "[v6]:port". A zoned IPv6 address ("fe80::1%eth0") is refused: its zone
// is free text that would reach the log as the client's address, and a
// zone names an interface of the proxy, not where the client is.
func parseHop(s string) (netip.Addr, bool) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		if ap.Addr().Zone() != "" {
			return netip.Addr{}, false
		}
		return ap.Addr().Unmap(), true
	}
	ip, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"))
	if err != nil || ip.Zone() != "" {
		return netip.Addr{}, false
	}
	return ip.Unmap(), true
}

func trustedAddr(ip netip.Addr, trusted []netip.Prefix) bool {
	ip = ip.Unmap()
	for _, p := range trusted {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}
