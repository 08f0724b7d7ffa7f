//go:build linux

package initproc

import (
	"errors"
	"os"
	"runtime"
	"slices"
	"strconv"
	"syscall"
	"unsafe"
)

// Harden is what the init applies to itself before it forks the child,
// carried in its payload: the child's hardening resolved for one process,
// and its user.
type Harden struct {
	NoNewPrivs bool
	KeepCaps   []uintptr
	Umask      int
	Rlimits    []Rlimit
	Cred       *Cred // nil: the init's own user
	// PrivateProc: an init that is pid 1 of its PID namespace gives the
	// child a mount namespace of its own with a /proc of that PID
	// namespace, where no process of another namespace (the server, other
	// processes) has an entry.
	PrivateProc bool
}

// Cred is the user a hardened child runs as. The init stays root until
// the fork (dropping the bounding set needs CAP_SETPCAP), and the forked
// child switches to this user before exec.
type Cred struct {
	UID, GID uint32
	Groups   []uint32
}

// HardenError is a step of Apply that failed.
type HardenError struct {
	Step string
	Err  error // a syscall.Errno
}

func (e *HardenError) Error() string { return "harden: " + e.Step + ": " + e.Err.Error() }
func (e *HardenError) Unwrap() error { return e.Err }

// Apply applies h to the calling process, which then forks the child:
// everything it sets is inherited through fork and execve. The capability
// sets and no_new_privs belong to a thread, so Apply locks the calling
// goroutine to its thread for good: the caller must fork the child
// (SysProcAttr, then syscall.ForkExec) from the same goroutine. It also
// makes the process non-dumpable, so that a child running as root cannot
// ptrace it. An error is a *HardenError.
func (h *Harden) Apply() error {
	runtime.LockOSThread()
	if err := prctl(prSetDumpable, 0); err != nil {
		return &HardenError{"PR_SET_DUMPABLE", err}
	}
	if h.PrivateProc && os.Getpid() == 1 {
		if err := privateProc(); err != nil {
			return err
		}
	}
	syscall.Umask(h.Umask)
	for _, r := range h.Rlimits {
		var cur syscall.Rlimit
		if err := syscall.Getrlimit(r.Resource, &cur); err != nil {
			return &HardenError{"getrlimit " + strconv.Itoa(r.Resource), err}
		}
		lim := syscall.Rlimit{Cur: r.Cur, Max: min(r.Max, cur.Max)}
		lim.Cur = min(lim.Cur, lim.Max)
		// syscall.Setrlimit also stops Go from restoring its own start-up
		// RLIMIT_NOFILE in the children it forks.
		if err := syscall.Setrlimit(r.Resource, &lim); err != nil {
			return &HardenError{"setrlimit " + strconv.Itoa(r.Resource), err}
		}
	}
	caps, err := capGet()
	if err != nil {
		return &HardenError{"capget", err}
	}
	if caps.has(capSetpcap, true) {
		for c := range CapLast() + 1 {
			if slices.Contains(h.KeepCaps, c) {
				continue
			}
			if err := prctl(prCapbsetDrop, c); err != nil && !errors.Is(err, syscall.EINVAL) {
				return &HardenError{"PR_CAPBSET_DROP " + strconv.Itoa(int(c)), err}
			}
		}
	}
	if err := prctl(prCapAmbient, prCapAmbientClearAll); err != nil {
		return &HardenError{"PR_CAP_AMBIENT_CLEAR_ALL", err}
	}
	// No inheritable capability: a root child's permitted set after exec
	// is then its bounding set alone (KeepCaps); a child of another user
	// gets KeepCaps through the ambient set (SysProcAttr). The init keeps
	// its effective set, which the fork needs to switch the child's user.
	caps.data[0].inheritable, caps.data[1].inheritable = 0, 0
	if err := caps.set(); err != nil {
		return &HardenError{"capset", err}
	}
	if h.NoNewPrivs {
		if err := prctl(prSetNoNewPrivs, 1); err != nil {
			return &HardenError{"PR_SET_NO_NEW_PRIVS", err}
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
	if err := syscall.Unshare(syscall.CLONE_NEWNS); err != nil {
		if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EINVAL) {
			return nil
		}
		return &HardenError{"unshare CLONE_NEWNS", err}
	}
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return &HardenError{"make / private", err}
	}
	if err := syscall.Mount("proc", "/proc", "proc", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, ""); err != nil {
		return &HardenError{"mount /proc", err}
	}
	return nil
}

// SysProcAttr sets the user of the child the init forks, and, for a child
// that is not root, the ambient capabilities that keep KeepCaps across its
// exec.
func (h *Harden) SysProcAttr(sys *syscall.SysProcAttr) {
	if h.Cred == nil {
		return
	}
	sys.Credential = &syscall.Credential{Uid: h.Cred.UID, Gid: h.Cred.GID, Groups: slices.Clone(h.Cred.Groups)}
	if h.Cred.UID != 0 && len(h.KeepCaps) > 0 {
		sys.AmbientCaps = slices.Clone(h.KeepCaps)
	}
}

// Capabilities, as capget(2) and capabilities(7) know them.
const (
	capVersion3 = 0x20080522
	capSetpcap  = 8
	// capLastKnown is the highest capability this package knows by name
	// (CAP_CHECKPOINT_RESTORE), for a kernel that does not say its own.
	capLastKnown = 40
)

// caps is the version 3 capability sets of a thread.
type caps struct {
	hdr  struct{ version, pid uint32 }
	data [2]struct{ effective, permitted, inheritable uint32 }
}

func capGet() (*caps, error) {
	c := &caps{}
	c.hdr.version = capVersion3
	if _, _, e := syscall.RawSyscall(syscall.SYS_CAPGET, uintptr(unsafe.Pointer(&c.hdr)), uintptr(unsafe.Pointer(&c.data[0])), 0); e != 0 {
		return nil, e
	}
	return c, nil
}

func (c *caps) set() error {
	if _, _, e := syscall.RawSyscall(syscall.SYS_CAPSET, uintptr(unsafe.Pointer(&c.hdr)), uintptr(unsafe.Pointer(&c.data[0])), 0); e != 0 {
		return e
	}
	return nil
}

// has reports whether c holds capability n in its effective set
// (effective) or its permitted set.
func (c *caps) has(n uintptr, effective bool) bool {
	set := c.data[n/32].permitted
	if effective {
		set = c.data[n/32].effective
	}
	return set&(1<<(n%32)) != 0
}

// CapLast returns the highest capability this kernel knows.
func CapLast() uintptr {
	b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err == nil {
		if n, err := strconv.Atoi(string(trimNewline(b))); err == nil && n >= 0 {
			return uintptr(n)
		}
	}
	return capLastKnown
}
