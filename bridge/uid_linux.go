//go:build linux

package bridge

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/procwire/procwire/proc"
)

// UIDPool leases each process a user id and a group id of its own (the
// same number) from a range, like systemd's DynamicUser: no two live
// processes share a uid, so none can read another's memory or
// environment, open its descriptors through /proc, ptrace or signal it.
// A uid goes back to the pool only when the process's Destroy succeeded,
// which means its whole containment is empty and reaped; after a Destroy
// that left survivors the uid stays leased for good. Uids are handed out
// round-robin, so a released uid is reused as late as possible: files a
// process left in a world-writable directory (/tmp) belong to its uid and
// become the next holder's. A uid that some process on the machine still
// runs as (its effective uid or gid, which owns /proc/PID) is skipped,
// whoever started it.
//
// A terminal (pty) given to a process must have its slave owned by the
// process's leased uid, so that the process can open it and no other can.
//
// It is safe for concurrent use.
type UIDPool struct {
	first, last uint32

	mu     sync.Mutex
	next   uint32          // where the next lease looks first
	leased map[uint32]bool // uids held by a process

	// running reports whether a process runs as id; a test replaces it.
	running func(id uint32) bool
}

// ErrUIDRange is wrapped by NewUIDPool's error for a range it refuses.
var ErrUIDRange = errors.New("bridge: unusable uid range")

// ErrNoFreeUID is wrapped by Lease's error when every uid of the range is
// held.
var ErrNoFreeUID = errors.New("bridge: no free uid in the range")

// NewUIDPool returns a pool of the uids first to last. It refuses, with
// an error wrapping ErrUIDRange, a range that includes 0, is empty, or
// overlaps a user of /etc/passwd or a group of /etc/group: a process could
// otherwise run as, and read the files of, an account of the machine.
// Users known only to NSS (LDAP, sssd) are not seen: choose a range no
// directory uses (systemd's dynamic range is 61184-65519; 100000-165535
// is clear of the usual subordinate-uid ranges only if /etc/subuid says so).
func NewUIDPool(first, last uint32) (*UIDPool, error) {
	if first == 0 || first > last {
		return nil, fmt.Errorf("%w: %d-%d", ErrUIDRange, first, last)
	}
	for _, db := range []string{"/etc/passwd", "/etc/group"} {
		name, id, err := firstIDIn(db, first, last)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrUIDRange, err)
		}
		if name != "" {
			return nil, fmt.Errorf("%w: %d-%d holds %s of %s (%d)", ErrUIDRange, first, last, name, db, id)
		}
	}
	return &UIDPool{first: first, last: last, next: first, leased: map[uint32]bool{}, running: runningAs}, nil
}

// ParseUIDRange parses "FIRST-LAST", as --run-as-range takes it.
func ParseUIDRange(s string) (first, last uint32, err error) {
	a, b, ok := strings.Cut(s, "-")
	f, err1 := strconv.ParseUint(a, 10, 32)
	l, err2 := strconv.ParseUint(b, 10, 32)
	if !ok || err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("%w: %q is not FIRST-LAST", ErrUIDRange, s)
	}
	return uint32(f), uint32(l), nil
}

// firstIDIn returns the first entry of the passwd or group file db whose
// id (third field) is within first-last.
func firstIDIn(db string, first, last uint32) (string, uint32, error) {
	f, err := os.Open(db)
	if errors.Is(err, os.ErrNotExist) {
		return "", 0, nil
	}
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Split(s.Text(), ":")
		if len(fields) < 3 {
			continue
		}
		if id, err := strconv.ParseUint(fields[2], 10, 32); err == nil && uint32(id) >= first && uint32(id) <= last {
			return fields[0], uint32(id), nil
		}
	}
	return "", 0, s.Err()
}

// Size returns how many uids the range holds.
func (p *UIDPool) Size() int { return int(p.last-p.first) + 1 }

// Leased returns how many uids are leased now.
func (p *UIDPool) Leased() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.leased)
}

// Lease returns a user whose uid and gid (the same number) no live
// process of the pool holds and no process of the machine runs as, with
// no supplementary group. Give it back with Release once nothing runs as
// it any more.
func (p *UIDPool) Lease() (*proc.User, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for range p.Size() {
		id := p.next
		if p.next == p.last {
			p.next = p.first
		} else {
			p.next++
		}
		if p.leased[id] || p.running(id) {
			continue
		}
		p.leased[id] = true
		return &proc.User{UID: id, GID: id}, nil
	}
	return nil, fmt.Errorf("%w: %d-%d", ErrNoFreeUID, p.first, p.last)
}

// Release gives u's uid back to the pool.
func (p *UIDPool) Release(u *proc.User) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.leased, u.UID)
}

// Start starts req in ct as a uid of its own, which it keeps until the
// process's Destroy succeeds. cfg.RunAs is ignored.
func (p *UIDPool) Start(ct *Containment, req proc.Request, cfg *proc.Config) (*LeasedProcess, error) {
	u, err := p.Lease()
	if err != nil {
		return nil, startFailure(proc.ReasonStartFailed, err)
	}
	c := proc.DefaultConfig()
	if cfg != nil {
		c = new(proc.Config)
		*c = *cfg
	}
	c.RunAs = u
	proc, err := ct.Start(req, c)
	if err != nil {
		// Nothing was started, or what was is reaped.
		p.Release(u)
		return nil, err
	}
	return &LeasedProcess{Process: proc, pool: p, user: u}, nil
}

// LeasedProcess is a Process running as a uid leased from a UIDPool.
type LeasedProcess struct {
	*Process
	pool     *UIDPool
	user     *proc.User
	released sync.Once
}

// User returns the uid and gid the process runs as.
func (lp *LeasedProcess) User() *proc.User { return lp.user }

// Destroy is Process.Destroy; once it succeeded, the uid goes back to the
// pool.
func (lp *LeasedProcess) Destroy() error {
	err := lp.Process.Destroy()
	if err == nil {
		lp.released.Do(func() { lp.pool.Release(lp.user) })
	}
	return err
}

// runningAs reports whether a process of this machine runs with id as
// its effective user or group id: the owner of /proc/PID, one fstatat
// per process (reading each /proc/PID/status costs ten times more). A
// process that made itself non-dumpable shows as root and is not seen.
func runningAs(id uint32) bool {
	d, err := os.Open("/proc")
	if err != nil {
		return false
	}
	defer d.Close()
	fd := int(d.Fd())
	for {
		names, err := d.Readdirnames(256)
		for _, n := range names {
			if n[0] < '0' || n[0] > '9' {
				continue
			}
			var st unix.Stat_t
			if unix.Fstatat(fd, n, &st, 0) == nil && (st.Uid == id || st.Gid == id) {
				return true
			}
		}
		if err != nil { // io.EOF at the end, or /proc unreadable
			return false
		}
	}
}
