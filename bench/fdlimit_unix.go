//go:build unix

package bench

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// RaiseFDLimit sets this process's RLIMIT_NOFILE soft limit to at least
// need and no less than its hard limit, and returns the soft limit it
// leaves. Children started afterwards (the scale server) inherit it: the
// limit is set even when it does not change, so that Go does not give them
// the soft limit this process started with. When need is above the hard
// limit, the hard limit is raised too, as far as fs.nr_open allows, which
// takes root (CAP_SYS_RESOURCE); if that is not permitted, the soft limit
// is set to the hard one and err says why it stays below need.
func RaiseFDLimit(need uint64) (limit uint64, err error) {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0, fmt.Errorf("getrlimit: %w", err)
	}
	var raiseErr error
	if need > l.Max {
		want := need
		if open, err := nrOpen(); err != nil {
			raiseErr = err
		} else if want > open {
			want = open
			raiseErr = fmt.Errorf("RLIMIT_NOFILE: %d fds needed, fs.nr_open is %d", need, open)
		}
		if want > l.Max {
			err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: want, Max: want})
			if err == nil {
				return want, raiseErr
			}
			raiseErr = errors.Join(raiseErr, fmt.Errorf("raising RLIMIT_NOFILE's hard limit from %d to %d: %w", l.Max, want, err))
		}
	}
	l.Cur = l.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0, fmt.Errorf("setrlimit: %w", err)
	}
	return l.Cur, raiseErr
}

// nrOpen reads fs.nr_open, the ceiling of RLIMIT_NOFILE's hard limit.
func nrOpen() (uint64, error) {
	b, err := os.ReadFile("/proc/sys/fs/nr_open")
	if err != nil {
		return 0, fmt.Errorf("reading fs.nr_open: %w", err)
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parsing fs.nr_open: %w", err)
	}
	return n, nil
}
