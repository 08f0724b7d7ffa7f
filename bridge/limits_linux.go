package bridge

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/procwire/procwire/bridge/internal/initproc"
	"github.com/procwire/procwire/proc"
)

// Limits bound each process's whole tree: proc.Limits.
type Limits = proc.Limits

// Mechanisms that enforce a limit, as LimitMechanisms names them.
const (
	MechCgroupV2    = "cgroup v2"       // pids.max, memory.max + memory.swap.max, cpu.max in the process's cgroup
	MechCgroupV1    = "cgroup v1"       // pids.max, memory.limit_in_bytes (+ memsw), cpu.cfs_quota_us in a v1 hierarchy
	MechRlimitAS    = "RLIMIT_AS"       // the last resort for Memory: allocations fail, no OOM kill
	MechUnavailable = "not enforceable" // refused by NewContainment
)

// ErrLimitUnavailable is wrapped by NewContainment's error when a limit
// asked for cannot be enforced on this machine; the error names it.
var ErrLimitUnavailable = errors.New("bridge: limit cannot be enforced")

// cgroupV1Period is the cfs period written with a CPU limit, in µs.
const cgroupV1Period = 100000

// limiter enforces Limits for a Containment: what each limit uses, and the
// v1 hierarchies (controller → the directory under which each process's
// cgroup is made).
type limiter struct {
	limits Limits
	mech   map[string]string // "pids", "memory", "cpu" → a Mech constant
	v2     bool              // some limit is a v2 controller of the process's cgroup
	v1     map[string]string // controller → parent directory
}

// v1Dirs finds the cgroup v1 hierarchies of this process: controller →
// the directory of this process's cgroup in it.
func v1Dirs() map[string]string {
	out := map[string]string{}
	mounts := map[string][2]string{} // controller → mount point, mount root
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return out
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		left, right, ok := strings.Cut(s.Text(), " - ")
		fl, fr := strings.Fields(left), strings.Fields(right)
		if !ok || len(fl) < 5 || len(fr) < 3 || fr[0] != "cgroup" {
			continue
		}
		for _, opt := range strings.Split(fr[2], ",") {
			if opt == "pids" || opt == "memory" || opt == "cpu" {
				mounts[opt] = [2]string{fl[4], fl[3]}
			}
		}
	}
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return out
	}
	for line := range strings.Lines(string(b)) {
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, ctl := range strings.Split(parts[1], ",") {
			if m, ok := mounts[ctl]; ok {
				rel, err := filepath.Rel(m[1], parts[2])
				if err != nil || strings.HasPrefix(rel, "..") {
					continue
				}
				out[ctl] = filepath.Join(m[0], rel)
			}
		}
	}
	return out
}

// v2Controllers lists the controllers enabled for the children of parent
// (its cgroup.subtree_control).
func v2Controllers(parent string) map[string]bool {
	b, _ := os.ReadFile(filepath.Join(parent, "cgroup.subtree_control"))
	out := map[string]bool{}
	for _, c := range strings.Fields(string(b)) {
		out[c] = true
	}
	return out
}

// delegate prepares parent, a cgroup delegated to this server (systemd's
// Delegate=), for the v2 controllers limits l need: those parent offers
// (cgroup.controllers) are enabled for its children
// (cgroup.subtree_control). A cgroup with controllers enabled for its
// children may hold no process of its own, so when the server is in
// parent itself (own), it first moves into a leaf, parent/serve. Nothing
// is done when no limit needs a controller parent offers.
func delegate(parent string, own bool, l Limits) error {
	b, err := os.ReadFile(filepath.Join(parent, "cgroup.controllers"))
	if err != nil {
		return nil // not a cgroup v2 directory: the v1 hierarchies may serve
	}
	offered := map[string]bool{}
	for _, c := range strings.Fields(string(b)) {
		offered[c] = true
	}
	enabled := v2Controllers(parent)
	var enable []string
	for _, c := range []struct {
		ctl  string
		want bool
	}{{"pids", l.Pids > 0}, {"memory", l.Memory > 0}, {"cpu", l.CPU > 0}} {
		if c.want && offered[c.ctl] && !enabled[c.ctl] {
			enable = append(enable, "+"+c.ctl)
		}
	}
	if len(enable) == 0 {
		return nil
	}
	if own {
		leaf := filepath.Join(parent, "serve")
		if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("delegated cgroup %s: %w", parent, err)
		}
		if err := os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte("0"), 0); err != nil {
			return fmt.Errorf("delegated cgroup %s: move into its leaf: %w", parent, err)
		}
	}
	if err := os.WriteFile(filepath.Join(parent, "cgroup.subtree_control"), []byte(strings.Join(enable, " ")), 0); err != nil {
		return fmt.Errorf("delegated cgroup %s: enable %s: %w", parent, strings.Join(enable, " "), err)
	}
	return nil
}

// probeV1 checks that a cgroup can be made under dir and ctl's limit file
// written in it.
func probeV1(dir, ctl string) error {
	probe := filepath.Join(dir, fmt.Sprintf("procwire-probe-%d-%d", os.Getpid(), time.Now().UnixNano()))
	if err := os.Mkdir(probe, 0o755); err != nil {
		return err
	}
	defer os.Remove(probe)
	_, err := os.Stat(filepath.Join(probe, v1File[ctl]))
	return err
}

// v1File is the limit file of each v1 controller.
var v1File = map[string]string{"pids": "pids.max", "memory": "memory.limit_in_bytes", "cpu": "cpu.cfs_quota_us"}

// newLimiter chooses, for each limit of l, the best mechanism: the v2
// controller of the process's cgroup (v2parent, when the containment
// makes one and the controller is enabled for its children), else a
// writable v1 hierarchy, else for Memory RLIMIT_AS when an init can set it
// (withInit). A limit none can enforce is an error naming it.
func newLimiter(l Limits, v2parent string, withInit bool, v1 map[string]string) (*limiter, error) {
	lm := &limiter{limits: l, mech: map[string]string{}, v1: map[string]string{}}
	var v2 map[string]bool
	if v2parent != "" {
		v2 = v2Controllers(v2parent)
	}
	var refused []string
	for _, c := range []struct {
		ctl  string
		want bool
		why  string
	}{
		{"pids", l.Pids > 0, fmt.Sprintf("--limit-pids %d", l.Pids)},
		{"memory", l.Memory > 0, fmt.Sprintf("--limit-memory %d", l.Memory)},
		{"cpu", l.CPU > 0, fmt.Sprintf("--limit-cpu %g", l.CPU)},
	} {
		switch {
		case !c.want:
		case v2[c.ctl]:
			lm.mech[c.ctl], lm.v2 = MechCgroupV2, true
		case v1[c.ctl] != "" && probeV1(v1[c.ctl], c.ctl) == nil:
			lm.mech[c.ctl], lm.v1[c.ctl] = MechCgroupV1, v1[c.ctl]
		case c.ctl == "memory" && withInit:
			lm.mech[c.ctl] = MechRlimitAS
		default:
			lm.mech[c.ctl] = MechUnavailable
			refused = append(refused, c.why+" (no delegated cgroup v2 "+c.ctl+" controller, no writable cgroup v1 "+c.ctl+" hierarchy)")
		}
	}
	if len(refused) > 0 {
		return nil, fmt.Errorf("%w: %s", ErrLimitUnavailable, strings.Join(refused, "; "))
	}
	return lm, nil
}

// active reports whether any limit is set.
func (lm *limiter) active() bool { return lm != nil && len(lm.mech) > 0 }

// writeV2 writes the v2 limits l into dir, a process's cgroup, before
// its first process enters it.
func (lm *limiter) writeV2(dir string, l Limits) error {
	var files [][2]string
	if lm.mech["pids"] == MechCgroupV2 {
		files = append(files, [2]string{"pids.max", strconv.FormatInt(l.Pids, 10)})
	}
	if lm.mech["memory"] == MechCgroupV2 {
		files = append(files, [2]string{"memory.max", strconv.FormatInt(l.Memory, 10)})
		if _, err := os.Stat(filepath.Join(dir, "memory.swap.max")); err == nil {
			files = append(files, [2]string{"memory.swap.max", "0"})
		}
	}
	if lm.mech["cpu"] == MechCgroupV2 {
		files = append(files, [2]string{"cpu.max", fmt.Sprintf("%d %d", int64(l.CPU*cgroupV1Period), cgroupV1Period)})
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f[0]), []byte(f[1]), 0); err != nil {
			return fmt.Errorf("limit %s: %w", f[0], err)
		}
	}
	return nil
}

// v1Group is a process's cgroups in the v1 hierarchies.
type v1Group struct {
	dirs map[string]string // controller → directory
}

// newV1 makes the process's v1 cgroups, named name, with limits l.
func (lm *limiter) newV1(name string, l Limits) (*v1Group, error) {
	g := &v1Group{dirs: map[string]string{}}
	for ctl, parent := range lm.v1 {
		dir := filepath.Join(parent, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			g.remove()
			return nil, fmt.Errorf("create cgroup v1 %s: %w", ctl, err)
		}
		g.dirs[ctl] = dir
		var err error
		switch ctl {
		case "pids":
			err = writeKernFile(filepath.Join(dir, "pids.max"), []byte(strconv.FormatInt(l.Pids, 10)))
		case "memory":
			err = writeKernFile(filepath.Join(dir, "memory.limit_in_bytes"), []byte(strconv.FormatInt(l.Memory, 10)))
			if err == nil {
				// Without swap: memory+swap at the same bound, where the
				// kernel accounts swap.
				if e := writeKernFile(filepath.Join(dir, "memory.memsw.limit_in_bytes"), []byte(strconv.FormatInt(l.Memory, 10))); e != nil && !errors.Is(e, os.ErrNotExist) {
					err = e
				}
			}
		case "cpu":
			if err = writeKernFile(filepath.Join(dir, "cpu.cfs_period_us"), []byte(strconv.Itoa(cgroupV1Period))); err == nil {
				err = writeKernFile(filepath.Join(dir, "cpu.cfs_quota_us"), []byte(strconv.FormatInt(int64(l.CPU*cgroupV1Period), 10)))
			}
		}
		if err != nil {
			g.remove()
			return nil, fmt.Errorf("limit in cgroup v1 %s: %w", ctl, err)
		}
	}
	return g, nil
}

// join moves pid into every v1 cgroup of the group.
func (g *v1Group) join(pid int) error {
	for ctl, dir := range g.dirs {
		if err := writeKernFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid))); err != nil {
			return fmt.Errorf("enter cgroup v1 %s: %w", ctl, err)
		}
	}
	return nil
}

// stopForks sets the v1 pids cgroup's limit to 0, so that no process of
// it forks again: a destroy's kill then ends a tree that cannot refill
// the slots it frees, as a fork bomb at its limit otherwise does faster
// than a guardian init's sweeps of /proc kill it (a cgroup v2's
// cgroup.kill and a PID namespace's end are atomic; a process group's
// sweep is not).
func (g *v1Group) stopForks() {
	if g == nil || g.dirs["pids"] == "" {
		return
	}
	_ = writeKernFile(filepath.Join(g.dirs["pids"], "pids.max"), []byte("0"))
}

// remove removes the v1 cgroups; it fails while a process is left in one.
func (g *v1Group) remove() error {
	if g == nil {
		return nil
	}
	var err error
	for ctl, dir := range g.dirs {
		if e := removeDir(dir); e != nil && !errors.Is(e, os.ErrNotExist) {
			err = errors.Join(err, e)
		} else {
			delete(g.dirs, ctl)
		}
	}
	return err
}

// oomKilled reports whether the kernel's OOM killer killed a process of
// the process's cgroup: the oom_kill count of memory.events (v2) or of
// memory.oom_control (v1).
func oomKilled(v2dir string, v1 *v1Group) bool {
	if v2dir != "" && oomKillCount(filepath.Join(v2dir, "memory.events")) > 0 {
		return true
	}
	if v1 != nil && v1.dirs["memory"] != "" {
		return oomKillCount(filepath.Join(v1.dirs["memory"], "memory.oom_control")) > 0
	}
	return false
}

// oomKillCount reads the "oom_kill N" line of a memory.events or
// memory.oom_control file; 0 when there is none.
func oomKillCount(path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "oom_kill "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}

// rlimits are the rlimit settings of limits l that an init enforces.
func (lm *limiter) rlimits(l Limits) []initproc.Rlimit {
	if lm.active() && lm.mech["memory"] == MechRlimitAS {
		m := uint64(l.Memory)
		return []initproc.Rlimit{{Resource: unix.RLIMIT_AS, Cur: m, Max: m}}
	}
	return nil
}

// sweepV1 removes the v1 cgroups under each parent that servers no longer
// running left, once empty (their processes died with their servers).
func sweepV1(parents map[string]string) int {
	n := 0
	for _, parent := range parents {
		ents, _ := os.ReadDir(parent)
		for _, e := range ents {
			if e.IsDir() && deadServerCgroup(e.Name()) && os.Remove(filepath.Join(parent, e.Name())) == nil {
				n++
			}
		}
	}
	return n
}
