//go:build linux

package server

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// peerUID returns the uid of the process at the other end of c.
func peerUID(c net.Conn) (uint32, error) {
	switch c := c.(type) {
	case *net.UnixConn:
		rc, err := c.SyscallConn()
		if err != nil {
			return 0, peerUIDError("%v", err)
		}
		var cred *syscall.Ucred
		var serr error
		if err := rc.Control(func(fd uintptr) {
			cred, serr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
		}); err != nil {
			return 0, peerUIDError("%v", err)
		}
		if serr != nil {
			return 0, peerUIDError("SO_PEERCRED: %v", serr)
		}
		return cred.Uid, nil
	case *net.TCPConn:
		local, lok := c.LocalAddr().(*net.TCPAddr)
		remote, rok := c.RemoteAddr().(*net.TCPAddr)
		if !lok || !rok {
			return 0, peerUIDError("not a TCP address")
		}
		l, r := local.AddrPort(), remote.AddrPort()
		if !r.Addr().Unmap().IsLoopback() {
			return 0, peerUIDError("peer %v is not on loopback", r)
		}
		// The peer's socket is the one whose local end is our remote.
		for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
			if uid, ok, err := socketOwner(table, r, l); err != nil {
				return 0, peerUIDError("%v", err)
			} else if ok {
				return uid, nil
			}
		}
		return 0, peerUIDError("no socket %v -> %v in /proc/net/tcp", r, l)
	}
	return 0, peerUIDError("a %T", c)
}

// socketOwner finds in table (/proc/net/tcp or tcp6) the socket from local
// to remote and returns its owner's uid.
func socketOwner(table string, local, remote netip.AddrPort) (uid uint32, found bool, err error) {
	f, err := os.Open(table)
	if err != nil {
		if os.IsNotExist(err) {
			return 0, false, nil
		}
		return 0, false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Scan() // the header line
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 8 {
			continue
		}
		l, lok := parseProcAddr(fields[1])
		r, rok := parseProcAddr(fields[2])
		if !lok || !rok || l != unmapPort(local) || r != unmapPort(remote) {
			continue
		}
		u, err := strconv.ParseUint(fields[7], 10, 32)
		if err != nil {
			return 0, false, err
		}
		return uint32(u), true, nil
	}
	return 0, false, sc.Err()
}

func unmapPort(ap netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

// parseProcAddr parses "0100007F:1F61" (IPv4) or 32 hex digits and a port
// (IPv6): the address's 32-bit words as printed in host byte order.
func parseProcAddr(s string) (netip.AddrPort, bool) {
	h, p, ok := strings.Cut(s, ":")
	if !ok {
		return netip.AddrPort{}, false
	}
	port, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return netip.AddrPort{}, false
	}
	raw, err := hex.DecodeString(h)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return netip.AddrPort{}, false
	}
	b := make([]byte, len(raw))
	for i := 0; i < len(raw); i += 4 {
		binary.NativeEndian.PutUint32(b[i:], binary.BigEndian.Uint32(raw[i:]))
	}
	a, _ := netip.AddrFromSlice(b)
	return netip.AddrPortFrom(a.Unmap(), uint16(port)), true
}
