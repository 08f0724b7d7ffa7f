package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/procwire/procwire/bridge"
	"github.com/procwire/procwire/server"
)

// limitFlags are serve's containment, limit and OOM flags.
type limitFlags struct {
	cgroupParent string
	limits       bridge.Limits
	oomScoreAdj  int
	childOOM     int
}

// DefaultServerOOMScoreAdj is serve's own oom_score_adj unless
// --oom-score-adj says otherwise: low, so that the kernel's OOM killer
// takes a workload (at 1000) long before the server.
const DefaultServerOOMScoreAdj = -900

func addLimitFlags(fs *flag.FlagSet) *limitFlags {
	l := &limitFlags{oomScoreAdj: DefaultServerOOMScoreAdj, childOOM: bridge.DefaultChildOOMScoreAdj}
	fs.StringVar(&l.cgroupParent, "cgroup-parent", "", "the cgroup v2 `directory` under which each process's cgroup is made, such as the one systemd delegates to the unit (default: serve's own cgroup)")
	fs.Var(sizeFlag{&l.limits.Pids, false}, "limit-pids", "most tasks each process's tree may hold, `N` (default none)")
	fs.Var(sizeFlag{&l.limits.Memory, true}, "limit-memory", "most memory each process's tree may use, in `bytes` with an optional unit: 256MiB, 4GiB (default none)")
	fs.Var(cpuFlag{&l.limits.CPU}, "limit-cpu", "most CPU time each process's tree may use, in `cores` (1.5; default none)")
	fs.Var(intRange{&l.oomScoreAdj, -1000, 1000}, "oom-score-adj", "serve's own oom_score_adj, -1000..1000 (lowering it needs CAP_SYS_RESOURCE)")
	fs.Var(intRange{&l.childOOM, -1000, 1000}, "child-oom-score-adj", "each child's oom_score_adj, -1000..1000")
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
	})
	if err != nil {
		return err
	}
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

// sizeFlag is a count, or with units a size in bytes: "256MiB", "4GiB",
// "64KiB", "1G" (powers of 1,000), or plain bytes.
// TODO(integrator): one size parser is being written in internal/ for
// every size flag; this one is local to the limit flags until then.
type sizeFlag struct {
	v     *int64
	units bool
}

func (f sizeFlag) String() string {
	if f.v == nil {
		return ""
	}
	return strconv.FormatInt(*f.v, 10)
}

func (f sizeFlag) Set(s string) error {
	n, err := parseSize(s, f.units)
	if err != nil {
		return err
	}
	if n <= 0 {
		return errors.New("must be positive")
	}
	*f.v = n
	return nil
}

// sizeUnits are the units parseSize knows.
var sizeUnits = map[string]int64{
	"": 1, "B": 1,
	"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40,
	"K": 1e3, "KB": 1e3, "M": 1e6, "MB": 1e6, "G": 1e9, "GB": 1e9, "T": 1e12, "TB": 1e12,
}

// parseSize parses an integer followed, when units is true, by one of
// sizeUnits.
func parseSize(s string, units bool) (int64, error) {
	i := strings.IndexFunc(s, func(r rune) bool { return r < '0' || r > '9' })
	num, unit := s, ""
	if i >= 0 {
		num, unit = s[:i], s[i:]
	}
	mul, ok := sizeUnits[unit]
	if !ok || (!units && unit != "") || num == "" {
		if units {
			return 0, fmt.Errorf("%q: want an integer with an optional unit (B, KiB, MiB, GiB, TiB, K, M, G, T)", s)
		}
		return 0, fmt.Errorf("%q: not an integer", s)
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n > math.MaxInt64/mul {
		return 0, fmt.Errorf("%q: out of range", s)
	}
	return n * mul, nil
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
