//go:build linux

package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/procwire/procwire/bridge"
	"github.com/procwire/procwire/internal/size"
	"github.com/procwire/procwire/server"
)

// limitFlags are serve's containment, limit and OOM flags.
type limitFlags struct {
	cgroupParent string
	limits       bridge.Limits
	oomScoreAdj  int
	childOOM     int
	warmInit     bool
	warmInits    int
	contain      *bridge.Containment // made by configure; close ends its warm init
}

// DefaultWarmInits is how many inits serve keeps started ahead unless
// --warm-inits says otherwise: two, so that opens that follow each other
// sooner than an init takes to start (milliseconds of CPU) still find one
// ready.
const DefaultWarmInits = 2

// DefaultServerOOMScoreAdj is serve's own oom_score_adj unless
// --oom-score-adj says otherwise: low, so that the kernel's OOM killer
// takes a workload (at 1000) long before the server.
const DefaultServerOOMScoreAdj = -900

func addLimitFlags(fs *flag.FlagSet) *limitFlags {
	l := &limitFlags{oomScoreAdj: DefaultServerOOMScoreAdj, childOOM: bridge.DefaultChildOOMScoreAdj, warmInit: true, warmInits: DefaultWarmInits}
	fs.StringVar(&l.cgroupParent, "cgroup-parent", "", "the cgroup v2 `directory` under which each process's cgroup is made, such as the one systemd delegates to the unit (default: serve's own cgroup)")
	fs.Var(sizeFlag{&l.limits.Pids, false}, "limit-pids", "most tasks each process's tree may hold, `N` (default none)")
	fs.Var(sizeFlag{&l.limits.Memory, true}, "limit-memory", "most memory each process's tree may use, a `size` (bytes, or with KiB, MiB, GiB, TiB: 256MiB, 1.5GiB; default none)")
	fs.Var(cpuFlag{&l.limits.CPU}, "limit-cpu", "most CPU time each process's tree may use, in `cores` (1.5; default none)")
	fs.Var(intRange{&l.oomScoreAdj, -1000, 1000}, "oom-score-adj", "serve's own oom_score_adj, -1000..1000 (lowering it needs CAP_SYS_RESOURCE)")
	fs.Var(intRange{&l.childOOM, -1000, 1000}, "child-oom-score-adj", "each child's oom_score_adj, -1000..1000")
	fs.BoolVar(&l.warmInit, "warm-init", true, "keep the next processes' inits started ahead, so that an open does not wait for serve to re-execute itself (an idle process each)")
	fs.Var(intRange{&l.warmInits, 1, 64}, "warm-inits", "how many inits --warm-init keeps started ahead, 1..64")
	return l
}

// containmentUser is an executor that can start its processes in a given
// containment (the uid range's).
type containmentUser interface {
	withContainment(c *bridge.Containment) server.Executor
}

// configure sets serve's oom_score_adj, makes the containment with its
// limits (refusing limits this machine cannot enforce, by name), makes
// cfg's executor use it, and logs what enforces what and what was swept of
// servers that died.
func (l *limitFlags) configure(cfg *server.Config, log *slog.Logger, reg *prometheus.Registry) error {
	if err := os.WriteFile("/proc/self/oom_score_adj", []byte(strconv.Itoa(l.oomScoreAdj)), 0); err != nil {
		log.Warn("cannot set serve's oom_score_adj", "oom_score_adj", l.oomScoreAdj, "err", err)
	}
	c, err := bridge.NewContainment(bridge.ContainOptions{
		CgroupParent:     l.cgroupParent,
		Limits:           l.limits,
		ChildOOMScoreAdj: &l.childOOM,
		WarmInit:         l.warmInit,
		WarmInits:        l.warmInits,
	})
	if err != nil {
		return err
	}
	l.contain = c
	switch e := cfg.Executor.(type) {
	case nil:
		cfg.Executor = server.BridgeExecutor{Containment: c}
	case containmentUser:
		cfg.Executor = e.withContainment(c)
	default:
		if l.cgroupParent != "" || l.limits != (bridge.Limits{}) || l.childOOM != bridge.DefaultChildOOMScoreAdj {
			return fmt.Errorf("executor %T cannot take serve's containment: --cgroup-parent, --limit-* and --child-oom-score-adj do not apply to it", e)
		}
	}
	mech := c.LimitMechanisms()
	names := make([]string, 0, len(mech))
	for k := range mech {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		log.Info("limit", "limit", k, "value", limitValue(l.limits, k), "enforced_by", mech[k])
	}
	if n := c.Swept(); n > 0 {
		log.Warn("swept the processes of servers that died", "cgroups", n)
	}
	if reg != nil {
		swept := prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "procwire", Name: "swept_cgroups_total",
			Help: "Cgroups left by servers that died, whose processes this server ended and whose cgroups it removed at start.",
		})
		swept.Add(float64(c.Swept()))
		if err := reg.Register(swept); err != nil {
			return fmt.Errorf("register metrics: %w", err)
		}
	}
	return nil
}

// limitValue formats limit k of l for the log.
func limitValue(l bridge.Limits, k string) string {
	switch k {
	case "pids":
		return strconv.FormatInt(l.Pids, 10)
	case "memory":
		return strconv.FormatInt(l.Memory, 10)
	}
	return strconv.FormatFloat(l.CPU, 'g', -1, 64)
}

// sizeFlag is a count (--limit-pids: a plain integer), or with units a
// size in bytes as every size flag takes it (internal/size: plain bytes,
// or KiB, MiB, GiB, TiB: "256MiB", "1.5GiB"), over 0.
type sizeFlag struct {
	v     *int64
	units bool
}

func (f sizeFlag) String() string {
	if f.v == nil {
		return ""
	}
	if f.units && *f.v > 0 {
		return size.Format(*f.v)
	}
	return strconv.FormatInt(*f.v, 10)
}

func (f sizeFlag) Set(s string) error {
	var n int64
	var err error
	if f.units {
		n, err = size.Parse(s)
	} else if n, err = strconv.ParseInt(s, 10, 64); err != nil {
		err = fmt.Errorf("%q: want an integer", s)
	}
	if err != nil {
		return err
	}
	if n <= 0 {
		return errors.New("must be positive")
	}
	*f.v = n
	return nil
}

// cpuFlag is a number of cores, over 0.
type cpuFlag struct{ v *float64 }

func (f cpuFlag) String() string {
	if f.v == nil {
		return ""
	}
	return strconv.FormatFloat(*f.v, 'g', -1, 64)
}

func (f cpuFlag) Set(s string) error {
	n, err := strconv.ParseFloat(s, 64)
	if err != nil || !(n >= 0.01 && n <= 1<<20) {
		return fmt.Errorf("%q: want a number of cores, 0.01 or more", s)
	}
	*f.v = n
	return nil
}

// close ends the containment's warm init, once serve has shut down.
func (l *limitFlags) close() {
	if l.contain != nil {
		_ = l.contain.Close()
	}
}
