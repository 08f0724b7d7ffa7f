//go:build linux

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/user"
	"strconv"

	"github.com/procwire/procwire/bridge"
	"github.com/procwire/procwire/proc"
	"github.com/procwire/procwire/server"
)

// lookupRunAs resolves --run-as: a user name or numeric id, with its
// primary group and supplementary groups.
func lookupRunAs(name string) (*proc.User, error) {
	u, err := user.Lookup(name)
	if err != nil {
		var idErr error
		if u, idErr = user.LookupId(name); idErr != nil {
			return nil, fmt.Errorf("--run-as %q: %w", name, err)
		}
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("--run-as %q: uid %q: %w", name, u.Uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("--run-as %q: gid %q: %w", name, u.Gid, err)
	}
	r := &proc.User{UID: uint32(uid), GID: uint32(gid)}
	ids, _ := u.GroupIds() // none known: no supplementary group
	for _, id := range ids {
		if g, err := strconv.ParseUint(id, 10, 32); err == nil && uint32(g) != r.GID {
			r.Groups = append(r.Groups, uint32(g))
		}
	}
	return r, nil
}

// isolation holds serve's flags that keep the children apart from each
// other and from the server: --run-as, --run-as-range, --child-caps,
// --child-umask.
type isolation struct {
	runAs, runAsRange, childCaps string
	umask                        uint64
}

// addIsolationFlags defines them in fs.
func addIsolationFlags(fs *flag.FlagSet) *isolation {
	iso := &isolation{}
	fs.StringVar(&iso.runAs, "run-as", "", "run every child as `user` (a name or uid) and its groups; needs root")
	fs.StringVar(&iso.runAsRange, "run-as-range", "", "run each child as a uid and gid of its own, leased from `FIRST-LAST` (such as 100000-165535), which must hold no user or group of /etc/passwd or /etc/group; needs root")
	fs.StringVar(&iso.childCaps, "child-caps", "none", "capabilities every child keeps, a comma-separated `list` such as CAP_NET_BIND_SERVICE")
	fs.Func("child-umask", "every child's umask, in `octal` (default 0022)", func(s string) error {
		n, err := strconv.ParseUint(s, 8, 32)
		if err != nil || n > 0o777 {
			return errors.New("want an octal umask of at most 0777")
		}
		iso.umask = n
		return nil
	})
	iso.umask = 0o022
	return iso
}

// errRunAsBoth is the error of --run-as with --run-as-range.
var errRunAsBoth = errors.New("--run-as and --run-as-range exclude each other")

// configure makes this process non-dumpable, sets the children's
// hardening and their user in cfg, as the flags say.
func (iso *isolation) configure(cfg *server.Config) error {
	// Before anything of a child runs: no child, whatever its user, can
	// read the server's memory or environment (its token, other
	// processes' resume tokens).
	if err := bridge.SetNonDumpable(); err != nil {
		return err
	}
	h := bridge.DefaultHardening()
	caps, err := bridge.ParseCaps(iso.childCaps)
	if err != nil {
		return fmt.Errorf("--child-caps: %w", err)
	}
	h.KeepCaps, h.Umask = caps, int(iso.umask)
	if err := bridge.SetChildHardening(h); err != nil {
		return fmt.Errorf("--child-caps/--child-umask: %w", err)
	}
	if iso.runAs != "" && iso.runAsRange != "" {
		return errRunAsBoth
	}
	if iso.runAs != "" {
		if cfg.RunAs, err = lookupRunAs(iso.runAs); err != nil {
			return err
		}
	}
	if iso.runAsRange != "" {
		if os.Geteuid() != 0 {
			return errors.New("--run-as-range needs serve to run as root, to switch each child to its uid")
		}
		first, last, err := bridge.ParseUIDRange(iso.runAsRange)
		if err != nil {
			return fmt.Errorf("--run-as-range: %w", err)
		}
		pool, err := bridge.NewUIDPool(first, last)
		if err != nil {
			return fmt.Errorf("--run-as-range: %w", err)
		}
		cfg.Executor = rangeExecutor{pool: pool}
	}
	return nil
}

// warn logs, at WARN, what a server running as root without its own user
// for the children lets every child do.
func (iso *isolation) warn(log *slog.Logger) {
	if os.Geteuid() == 0 && iso.runAs == "" && iso.runAsRange == "" {
		log.Warn("serving as root without --run-as or --run-as-range: every child runs as root (without capabilities), " +
			"can read and write every file root owns, and can signal, ptrace and read the memory of every other child " +
			"and signal the server; give --run-as-range to run each child as a user of its own")
	}
}

// rangeExecutor starts each child in bridge.DefaultContainment as a uid
// and gid of its own, leased from pool until its Destroy succeeded.
// A terminal (the pty of the terminal issue) given to such a child must be
// chowned to its bridge.LeasedProcess.User before the child starts, so that it alone opens
// the slave.
type rangeExecutor struct {
	pool    *bridge.UIDPool
	contain *bridge.Containment // serve's, with its limits; nil: bridge.DefaultContainment()
}

// containment is the one each child starts in.
func (e rangeExecutor) containment() *bridge.Containment {
	if e.contain != nil {
		return e.contain
	}
	return bridge.DefaultContainment()
}

// withContainment starts the children in c (serve's --limit-*,
// --cgroup-parent, --child-oom-score-adj), still each as a leased uid.
func (e rangeExecutor) withContainment(c *bridge.Containment) server.Executor {
	e.contain = c
	return e
}

// Start starts the child as a leased uid.
func (e rangeExecutor) Start(_ context.Context, req proc.Request, cfg proc.Config) (server.Process, error) {
	p, err := e.pool.Start(e.containment(), req, &cfg)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// Limits are the limits in force on each child: it makes rangeExecutor
// a server.Limiter, for open.limits and evidence.limits.
func (e rangeExecutor) Limits() proc.Limits { return e.containment().Limits() }

// ContainmentName names the containment the children start in.
func (e rangeExecutor) ContainmentName() string { return e.containment().String() }
