//go:build linux

package bridge

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/procwire/procwire/bridge/internal/initproc"
	"github.com/procwire/procwire/proc"
)

// Hardening is what every child gets from the init that starts it (see
// MaybeRunInit), whatever user it runs as: no_new_privs, so that neither a
// setuid binary nor file capabilities give it more than it had; a
// capability bounding set, permitted, effective, inheritable and ambient
// set holding KeepCaps alone (none by default, for a child running as root
// too); a defined umask; and defined resource limits instead of the
// server's. SetChildHardening sets it for the whole program;
// DefaultHardening is what a program that never calls it gets.
//
// Hardening needs the init: a program that does not call MaybeRunInit
// starts its children directly, unhardened (Go cannot run prctl between
// fork and exec). Dropping the bounding set needs CAP_SETPCAP: a server
// that does not hold it (one not running as root) leaves the bounding set
// alone, and no_new_privs keeps its children from gaining anything on exec.
type Hardening struct {
	// Disabled starts children with the server's own privileges, umask
	// and limits, as before hardening existed.
	Disabled bool
	// KeepCaps are the capabilities (unix.CAP_* numbers) a child keeps:
	// in its bounding set, and in its permitted and effective sets (for a
	// child that is not root, through the ambient set). Empty means none.
	KeepCaps []uintptr
	// Umask is the child's umask, at most 0777.
	Umask int
	// SharedProc leaves a child in a PID namespace of its own (the cgroup
	// and pid_namespace containments) with the machine's /proc, where it
	// finds every process of the machine, instead of a /proc of its
	// namespace.
	SharedProc bool
	// Rlimits are the child's resource limits. A Max above the server's
	// own hard limit is lowered to it (raising one needs
	// CAP_SYS_RESOURCE); a Cur above Max is lowered to Max. Resources not
	// listed are inherited from the server.
	Rlimits []Rlimit
}

// Rlimit is one resource limit of Hardening.
type Rlimit struct {
	Resource int // unix.RLIMIT_*
	Cur, Max uint64
}

// DefaultHardening returns the hardening children get unless
// SetChildHardening says otherwise: no_new_privs, no capabilities, umask
// 022, no core dumps (RLIMIT_CORE 0) and RLIMIT_NOFILE 1024 soft, 524288
// hard (systemd's defaults), or the server's hard limit if lower.
func DefaultHardening() Hardening {
	return Hardening{
		Umask: 0o022,
		Rlimits: []Rlimit{
			{Resource: unix.RLIMIT_CORE, Cur: 0, Max: 0},
			{Resource: unix.RLIMIT_NOFILE, Cur: 1024, Max: 524288},
		},
	}
}

// ErrInvalidHardening is wrapped by SetChildHardening's error.
var ErrInvalidHardening = errors.New("bridge: invalid hardening")

var childHardening atomic.Pointer[Hardening]

// SetChildHardening sets the hardening of every child started from now on,
// by every Containment of this program. It returns an error wrapping
// ErrInvalidHardening for a capability or resource this kernel does not
// know, or a umask above 0777.
func SetChildHardening(h Hardening) error {
	last := initproc.CapLast()
	for _, c := range h.KeepCaps {
		if c > last {
			return fmt.Errorf("%w: capability %d (this kernel's last is %d)", ErrInvalidHardening, c, last)
		}
	}
	if h.Umask < 0 || h.Umask > 0o777 {
		return fmt.Errorf("%w: umask %#o", ErrInvalidHardening, h.Umask)
	}
	for _, r := range h.Rlimits {
		if r.Resource < 0 || r.Resource >= rlimNLimits {
			return fmt.Errorf("%w: resource %d", ErrInvalidHardening, r.Resource)
		}
	}
	h.KeepCaps = slices.Clone(h.KeepCaps)
	h.Rlimits = slices.Clone(h.Rlimits)
	childHardening.Store(&h)
	return nil
}

// ChildHardening returns the hardening children get now.
func ChildHardening() Hardening {
	if h := childHardening.Load(); h != nil {
		return *h
	}
	return DefaultHardening()
}

// SetNonDumpable makes this process non-dumpable (prctl PR_SET_DUMPABLE 0):
// no process of another user, and none without CAP_SYS_PTRACE, can read
// its memory or environment (/proc/PID/mem, /proc/PID/environ), open its
// file descriptors through /proc/PID/fd, or ptrace it; and it writes no
// core file. A server whose children may run untrusted code should call it
// first thing: a child running as the server's own user (root, by
// default) could otherwise read every token and every other process's
// resume token out of the server's memory. procwire serve calls it.
//
// The init that starts each child is re-executed from /proc/self/exe,
// which a non-dumpable process still may: /proc/self is always its own.
func SetNonDumpable() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl PR_SET_DUMPABLE 0: %w", err)
	}
	return nil
}

// hardenFor returns the spec of a child started with cfg, nil when
// hardening is disabled.
func hardenFor(cfg *proc.Config) *initproc.Harden {
	h := ChildHardening()
	if h.Disabled {
		return nil
	}
	s := &initproc.Harden{NoNewPrivs: true, KeepCaps: slices.Clone(h.KeepCaps), Umask: h.Umask, PrivateProc: !h.SharedProc}
	for _, r := range h.Rlimits {
		s.Rlimits = append(s.Rlimits, initproc.Rlimit{Resource: r.Resource, Cur: r.Cur, Max: r.Max})
	}
	if u := cfg.RunAs; u != nil {
		s.Cred = &initproc.Cred{UID: u.UID, GID: u.GID, Groups: slices.Clone(u.Groups)}
	}
	return s
}

// capNames are the capabilities by number, as capabilities(7) names them.
var capNames = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER",
	"CAP_FSETID", "CAP_KILL", "CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP",
	"CAP_LINUX_IMMUTABLE", "CAP_NET_BIND_SERVICE", "CAP_NET_BROADCAST",
	"CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_IPC_LOCK", "CAP_IPC_OWNER",
	"CAP_SYS_MODULE", "CAP_SYS_RAWIO", "CAP_SYS_CHROOT", "CAP_SYS_PTRACE",
	"CAP_SYS_PACCT", "CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE",
	"CAP_SYS_RESOURCE", "CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG", "CAP_MKNOD",
	"CAP_LEASE", "CAP_AUDIT_WRITE", "CAP_AUDIT_CONTROL", "CAP_SETFCAP",
	"CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN", "CAP_SYSLOG", "CAP_WAKE_ALARM",
	"CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ", "CAP_PERFMON", "CAP_BPF",
	"CAP_CHECKPOINT_RESTORE",
}

// ParseCaps parses a comma-separated list of capabilities, by name
// (CAP_NET_BIND_SERVICE or net_bind_service, in any case) or number, for
// Hardening.KeepCaps. An empty string or "none" is no capability.
func ParseCaps(list string) ([]uintptr, error) {
	var caps []uintptr
	if s := strings.TrimSpace(list); s == "" || strings.EqualFold(s, "none") {
		return nil, nil
	}
	for _, f := range strings.Split(list, ",") {
		name := strings.ToUpper(strings.TrimSpace(f))
		if n, err := strconv.ParseUint(name, 10, 8); err == nil {
			caps = append(caps, uintptr(n))
			continue
		}
		if !strings.HasPrefix(name, "CAP_") {
			name = "CAP_" + name
		}
		i := slices.Index(capNames, name)
		if i < 0 {
			return nil, fmt.Errorf("%w: unknown capability %q", ErrInvalidHardening, strings.TrimSpace(f))
		}
		caps = append(caps, uintptr(i))
	}
	return caps, nil
}

// rlimNLimits is the number of resource limits Linux knows (RLIM_NLIMITS).
const rlimNLimits = 16
