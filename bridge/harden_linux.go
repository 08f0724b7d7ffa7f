//go:build linux

package bridge

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

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
	last := capLast()
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

// hardenSpec is what the init applies, carried to it in its payload: the
// child's Hardening resolved for one process, and its user.
type hardenSpec struct {
	NoNewPrivs bool
	KeepCaps   []uintptr
	Umask      int
	Rlimits    []hardenRlimit
	Cred       *hardenCred // nil: the init's own user
	// PrivateProc: an init that is pid 1 of its PID namespace gives the
	// child a mount namespace of its own with a /proc of that PID
	// namespace, where no process of another namespace (the server, other
	// processes) has an entry.
	PrivateProc bool
}

// hardenRlimit is one resource limit of a hardenSpec.
type hardenRlimit struct {
	Resource int
	Cur, Max uint64
}

// hardenCred is the user a hardened child runs as. The init stays root
// until the fork (dropping the bounding set needs CAP_SETPCAP), and the
// forked child switches to this user before exec.
type hardenCred struct {
	UID, GID uint32
	Groups   []uint32
}

// hardenFor returns the spec of a child started with cfg, nil when
// hardening is disabled.
func hardenFor(cfg *proc.Config) *hardenSpec {
	h := ChildHardening()
	if h.Disabled {
		return nil
	}
	s := &hardenSpec{NoNewPrivs: true, KeepCaps: slices.Clone(h.KeepCaps), Umask: h.Umask, PrivateProc: !h.SharedProc}
	for _, r := range h.Rlimits {
		s.Rlimits = append(s.Rlimits, hardenRlimit{Resource: r.Resource, Cur: r.Cur, Max: r.Max})
	}
	if u := cfg.RunAs; u != nil {
		s.Cred = &hardenCred{UID: u.UID, GID: u.GID, Groups: slices.Clone(u.Groups)}
	}
	return s
}

// harden applies spec to the init, which then forks the child: everything
// it sets is inherited through fork and execve. The capability sets and
// no_new_privs belong to a thread, so harden locks the calling goroutine
// to its thread for good: the caller must fork the child (sysProcAttr,
// then syscall.ForkExec) from the same goroutine. It also makes the init
// non-dumpable, so that a child running as root cannot ptrace it. An error
// wraps the syscall.Errno that failed.
func harden(spec hardenSpec) error {
	runtime.LockOSThread()
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("harden: PR_SET_DUMPABLE: %w", err)
	}
	if spec.PrivateProc && os.Getpid() == 1 {
		if err := privateProc(); err != nil {
			return err
		}
	}
	syscall.Umask(spec.Umask)
	for _, r := range spec.Rlimits {
		var cur syscall.Rlimit
		if err := syscall.Getrlimit(r.Resource, &cur); err != nil {
			return fmt.Errorf("harden: getrlimit %d: %w", r.Resource, err)
		}
		lim := syscall.Rlimit{Cur: r.Cur, Max: min(r.Max, cur.Max)}
		lim.Cur = min(lim.Cur, lim.Max)
		// syscall.Setrlimit also stops Go from restoring its own start-up
		// RLIMIT_NOFILE in the children it forks.
		if err := syscall.Setrlimit(r.Resource, &lim); err != nil {
			return fmt.Errorf("harden: setrlimit %d: %w", r.Resource, err)
		}
	}
	caps, err := capGet()
	if err != nil {
		return fmt.Errorf("harden: capget: %w", err)
	}
	if caps.has(unix.CAP_SETPCAP, true) {
		for c := range capLast() + 1 {
			if slices.Contains(spec.KeepCaps, c) {
				continue
			}
			if err := unix.Prctl(unix.PR_CAPBSET_DROP, c, 0, 0, 0); err != nil && !errors.Is(err, syscall.EINVAL) {
				return fmt.Errorf("harden: PR_CAPBSET_DROP %d: %w", c, err)
			}
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("harden: PR_CAP_AMBIENT_CLEAR_ALL: %w", err)
	}
	// No inheritable capability: a root child's permitted set after exec
	// is then its bounding set alone (KeepCaps); a child of another user
	// gets KeepCaps through the ambient set (sysProcAttr). The init keeps
	// its effective set, which the fork needs to switch the child's user.
	caps.data[0].Inheritable, caps.data[1].Inheritable = 0, 0
	if err := capSet(caps); err != nil {
		return fmt.Errorf("harden: capset: %w", err)
	}
	if spec.NoNewPrivs {
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			return fmt.Errorf("harden: PR_SET_NO_NEW_PRIVS: %w", err)
		}
	}
	return nil
}

// privateProc moves the calling thread (and so the child it forks) to a
// mount namespace of its own, where /proc is a procfs of its PID
// namespace. Mounts made there do not reach the machine's namespace. A
// kernel or sandbox that refuses a mount namespace (EPERM, EINVAL) leaves
// the machine's /proc.
func privateProc() error {
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EINVAL) {
			return nil
		}
		return fmt.Errorf("harden: unshare CLONE_NEWNS: %w", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("harden: make / private: %w", err)
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("harden: mount /proc: %w", err)
	}
	return nil
}

// sysProcAttr sets the user of the child the init forks, and, for a
// child that is not root, the ambient capabilities that keep KeepCaps
// across its exec.
func (s *hardenSpec) sysProcAttr(sys *syscall.SysProcAttr) {
	if s.Cred == nil {
		return
	}
	sys.Credential = &syscall.Credential{Uid: s.Cred.UID, Gid: s.Cred.GID, Groups: slices.Clone(s.Cred.Groups)}
	if s.Cred.UID != 0 && len(s.KeepCaps) > 0 {
		sys.AmbientCaps = slices.Clone(s.KeepCaps)
	}
}

// capData is the version 3 capability sets of a thread.
type capData struct {
	hdr  unix.CapUserHeader
	data [2]unix.CapUserData
}

func capGet() (*capData, error) {
	c := &capData{hdr: unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}}
	if err := unix.Capget(&c.hdr, &c.data[0]); err != nil {
		return nil, err
	}
	return c, nil
}

func capSet(c *capData) error { return unix.Capset(&c.hdr, &c.data[0]) }

// has reports whether c holds capability n in its effective set
// (effective) or its permitted set.
func (c *capData) has(n uintptr, effective bool) bool {
	set := c.data[n/32].Permitted
	if effective {
		set = c.data[n/32].Effective
	}
	return set&(1<<(n%32)) != 0
}

// capLast returns the highest capability this kernel knows.
func capLast() uintptr {
	b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && n >= 0 {
			return uintptr(n)
		}
	}
	return unix.CAP_LAST_CAP
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
