//go:build linux

package bridge

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/procwire/procwire/bridge/internal/initproc"
	"golang.org/x/sys/unix"
)

// Kinds of containment, best first.
const (
	// ContainCgroup puts each process in a cgroup v2 of its own, created
	// under a cgroup the server may write. Every descendant is in it,
	// whatever it does to its process group or session; Destroy writes
	// cgroup.kill and waits for the kernel's "populated 0" event.
	ContainCgroup = "cgroup"
	// ContainPIDNamespace starts each process in a PID namespace of its own
	// under a minimal init (the server's binary re-executed through
	// MaybeRunInit) that forwards signals and reaps; Destroy kills the init
	// and the kernel kills every process of the namespace.
	ContainPIDNamespace = "pid_namespace"
	// ContainProcessGroup is the fallback: the init is a child subreaper
	// that ends its whole tree, found in /proc, at Destroy and when the
	// server dies. Without an init (no MaybeRunInit), it is the process
	// group the child leads, which a descendant that calls setsid or
	// setpgid leaves.
	ContainProcessGroup = "process_group"
)

// ContainOptions choose a Containment.
type ContainOptions struct {
	// Kind is one of the Contain constants; empty picks the best this
	// machine allows: ContainCgroup, else ContainPIDNamespace, else
	// ContainProcessGroup.
	Kind string
	// CgroupParent is the cgroup v2 directory in which each process's
	// cgroup is created (it must be writable, for example one delegated
	// to the server). Empty means the server's own cgroup: a cgroup
	// without controllers may hold processes and children at once.
	// NewContainment ends what servers that died left in it (Swept).
	CgroupParent string
	// Limits bound each process's tree; NewContainment refuses limits
	// this machine cannot enforce (ErrLimitUnavailable).
	Limits Limits
	// ChildOOMScoreAdj, when not nil, is each child's oom_score_adj;
	// nil means DefaultChildOOMScoreAdj.
	ChildOOMScoreAdj *int
	// WarmInit keeps the init of the next process started ahead, waiting
	// for its request, so that a Start skips the re-execution of the
	// server (a few milliseconds of a cold first byte; warm.go). It costs
	// one idle init process, its pipes and its cgroup, and needs Close.
	// It applies to processes without a terminal, in a program that calls
	// MaybeRunInit.
	WarmInit bool
	// WarmInits is how many warm inits may wait at once (with WarmInit);
	// 0 means 1. One more lets a start that follows the last sooner than
	// an init takes to start (milliseconds of CPU) still find one ready,
	// for one more idle init process.
	WarmInits int
}

// DefaultChildOOMScoreAdj is the oom_score_adj of every child unless
// ContainOptions say otherwise: the highest, so that the kernel's OOM
// killer takes a workload before the server.
const DefaultChildOOMScoreAdj = 1000

// Containment is how the processes it starts are held together, so that
// Destroy ends every descendant. Create it with NewContainment, or use
// DefaultContainment; it is safe for concurrent use.
type Containment struct {
	kind         string
	cgroupParent string // ContainCgroup
	owner        string // ContainCgroup: the prefix of this server's cgroups, ownerPrefix()
	swept        int    // ContainCgroup: cgroups of dead servers ended at creation
	pidnsOK      bool   // ContainCgroup: a PID namespace can be created too
	lim          *limiter
	childOOM     int
	direct       bool // start children without an init, as without MaybeRunInit (tests)
	warm         warmInit
}

// cgroupSeq numbers the cgroups of this server, across its containments,
// which share its owner prefix.
var cgroupSeq atomic.Uint64

// ErrContainmentUnavailable is wrapped by NewContainment's error when the
// kind asked for cannot be used here.
var ErrContainmentUnavailable = errors.New("bridge: containment unavailable")

var (
	defaultOnce sync.Once
	defaultC    *Containment
)

// DefaultContainment returns the best containment this machine allows,
// chosen once per process.
func DefaultContainment() *Containment {
	defaultOnce.Do(func() {
		c, err := NewContainment(ContainOptions{})
		if err != nil {
			// NewContainment with no Kind falls back to the process group,
			// which is always available.
			panic(err)
		}
		defaultC = c
	})
	return defaultC
}

// NewContainment probes the machine for opts.Kind, or for the best kind
// when it is empty. A kind asked for that the machine does not allow is an
// error wrapping ErrContainmentUnavailable that says why.
func NewContainment(opts ContainOptions) (*Containment, error) {
	var whyNot []string
	try := func(kind string, probe func() error) (*Containment, bool) {
		if opts.Kind != "" && opts.Kind != kind {
			return nil, false
		}
		if err := probe(); err != nil {
			whyNot = append(whyNot, kind+": "+err.Error())
			return nil, false
		}
		return &Containment{kind: kind, cgroupParent: opts.CgroupParent}, true
	}
	if c, ok := try(ContainCgroup, func() error {
		dir, err := probeCgroup(opts.CgroupParent)
		opts.CgroupParent = dir
		return err
	}); ok {
		c.swept = sweepDeadServers(c.cgroupParent)
		c.pidnsOK = probeClone(&syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID}) == nil
		return c.withLimits(opts)
	}
	if c, ok := try(ContainPIDNamespace, probePIDNamespace); ok {
		return c.withLimits(opts)
	}
	if c, ok := try(ContainProcessGroup, func() error { return nil }); ok {
		return c.withLimits(opts)
	}
	if len(whyNot) == 0 {
		return nil, fmt.Errorf("%w: unknown kind %q", ErrContainmentUnavailable, opts.Kind)
	}
	return nil, fmt.Errorf("%w: %s", ErrContainmentUnavailable, strings.Join(whyNot, "; "))
}

// withLimits completes a new containment with the limits and the
// children's oom_score_adj of opts, and sweeps the v1 cgroups of servers
// that died.
func (c *Containment) withLimits(opts ContainOptions) (*Containment, error) {
	c.owner = ownerPrefix(os.Getpid())
	c.warm.on, c.warm.depth = opts.WarmInit, max(opts.WarmInits, 1)
	c.warm.made = sync.NewCond(&c.warm.mu)
	c.childOOM = DefaultChildOOMScoreAdj
	if opts.ChildOOMScoreAdj != nil {
		c.childOOM = *opts.ChildOOMScoreAdj
	}
	v2parent := ""
	if c.kind == ContainCgroup {
		v2parent = c.cgroupParent
		own, _ := ownCgroup()
		if err := delegate(v2parent, own == v2parent, opts.Limits); err != nil {
			return nil, err
		}
	}
	v1 := v1Dirs()
	lm, err := newLimiter(opts.Limits, v2parent, c.initMode() != "", v1)
	if err != nil {
		return nil, err
	}
	c.lim = lm
	c.swept += sweepV1(v1)
	return c, nil
}

// LimitMechanisms says what enforces each limit set ("pids", "memory",
// "cpu" → MechCgroupV2, MechCgroupV1 or MechRlimitAS), for serve's log.
func (c *Containment) LimitMechanisms() map[string]string {
	out := map[string]string{}
	if c.lim != nil {
		for k, v := range c.lim.mech {
			out[k] = v
		}
	}
	return out
}

// Limits returns the limits in force for every process.
func (c *Containment) Limits() Limits {
	if c.lim == nil {
		return Limits{}
	}
	return c.lim.limits
}

// Swept returns how many cgroups left by servers that died (their children
// cannot outlive them by Pdeathsig alone) NewContainment found under the
// cgroup parent and ended.
func (c *Containment) Swept() int { return c.swept }

// ownerPrefix names the cgroups of server pid: "procwire-PID.START", where
// START is the process's start time in clock ticks after boot (empty when
// pid is gone), so that a later process with the same pid is not mistaken
// for it.
func ownerPrefix(pid int) string {
	return "procwire-" + strconv.Itoa(pid) + "." + initproc.StartOf(pid)
}

// sweepDeadServers ends the cgroups under parent that a server which is no
// longer running left behind ("procwire-PID.START-N" whose PID is gone or
// started at another time): cgroup.kill, a bounded wait, rmdir. It returns
// how many it found.
func sweepDeadServers(parent string) int {
	ents, err := os.ReadDir(parent)
	if err != nil {
		return 0
	}
	var stale []*cgroup
	for _, e := range ents {
		if !e.IsDir() || !deadServerCgroup(e.Name()) {
			continue // not ours, or its server runs
		}
		g := &cgroup{dir: filepath.Join(parent, e.Name())}
		_ = g.kill()
		stale = append(stale, g)
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, g := range stale {
		if empty, _ := g.waitEmpty(deadline); empty {
			_ = g.remove()
		}
	}
	return len(stale)
}

// initMode says how a process of this containment runs under an init of
// ours (initproc.ModePIDNamespace or initproc.ModeGuardian), or "" when it cannot, because
// the program does not call MaybeRunInit: then the child is started
// directly, with Pdeathsig SIGKILL, and a descendant may outlive a server
// that dies (README, "Containment").
//
// Under a cgroup, the init is pid 1 of a PID namespace inside the cgroup,
// with Pdeathsig SIGKILL: the kernel ends the namespace when the server
// dies, and Destroy's cgroup.kill ends it while the server lives. Under a
// process group, it is a guardian: a child subreaper that ends its tree
// when the server closes its control pipe or dies.
func (c *Containment) initMode() string {
	if !initHooked.Load() || c.direct {
		return ""
	}
	switch {
	case c.kind == ContainPIDNamespace, c.kind == ContainCgroup && c.pidnsOK:
		return initproc.ModePIDNamespace
	}
	return initproc.ModeGuardian
}

// deadServerCgroup reports whether name is a process's cgroup
// ("procwire-PID.START-N") whose server is no longer running: PID is gone
// or started at another time.
func deadServerCgroup(name string) bool {
	rest, ok := strings.CutPrefix(name, "procwire-")
	if !ok {
		return false
	}
	owner, _, ok := strings.Cut(rest, "-")
	pidStr, start, ok2 := strings.Cut(owner, ".")
	pid, err := strconv.Atoi(pidStr)
	return ok && ok2 && err == nil && "procwire-"+pidStr+"."+start != ownerPrefix(pid)
}

// Kind returns one of the Contain constants.
func (c *Containment) Kind() string { return c.kind }

// String describes the containment for a log: "cgroup under
// /sys/fs/cgroup/procwire.service", "pid_namespace", "process_group".
func (c *Containment) String() string {
	if c.kind == ContainCgroup {
		return c.kind + " under " + c.cgroupParent
	}
	return c.kind
}

// cgroup2Mount returns where the cgroup v2 hierarchy is mounted.
func cgroup2Mount() (string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		// id parent major:minor root mountpoint options ... - fstype source ...
		left, right, ok := strings.Cut(s.Text(), " - ")
		if !ok {
			continue
		}
		if fs := strings.Fields(right); len(fs) > 0 && fs[0] == "cgroup2" {
			if f := strings.Fields(left); len(f) >= 5 && f[3] == "/" {
				return f[4], nil
			}
		}
	}
	if err := s.Err(); err != nil {
		return "", err
	}
	return "", errors.New("no cgroup2 mount")
}

// ownCgroup returns the directory of this process's cgroup v2.
func ownCgroup() (string, error) {
	mount, err := cgroup2Mount()
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "0::"); ok {
			return filepath.Join(mount, rest), nil
		}
	}
	return "", errors.New("not in a cgroup v2")
}

// probeCgroup checks that a cgroup with cgroup.kill can be created under
// parent (the server's own cgroup when empty) and a child started in it,
// and returns the parent.
func probeCgroup(parent string) (string, error) {
	if parent == "" {
		var err error
		if parent, err = ownCgroup(); err != nil {
			return "", err
		}
	}
	dir := filepath.Join(parent, fmt.Sprintf("procwire-probe-%d-%d", os.Getpid(), time.Now().UnixNano()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return parent, fmt.Errorf("cannot create a cgroup: %w", err)
	}
	defer os.Remove(dir)
	if _, err := os.Stat(filepath.Join(dir, "cgroup.kill")); err != nil {
		return parent, fmt.Errorf("no cgroup.kill (Linux 5.14): %w", err)
	}
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return parent, err
	}
	defer syscall.Close(fd)
	// An executable that does not exist: the clone into the cgroup
	// succeeded when the exec is what fails.
	if err := probeClone(&syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}); err != nil {
		return parent, fmt.Errorf("cannot start a child in a cgroup: %w", err)
	}
	return parent, nil
}

// initHooked is set by MaybeRunInit: only a binary that calls it can be
// re-executed as a PID namespace's init.
var initHooked atomic.Bool

// probePIDNamespace checks that a child can be started in a new PID
// namespace and that this binary can serve as its init.
func probePIDNamespace() error {
	if !initHooked.Load() {
		return errors.New("this program does not call bridge.MaybeRunInit first in main")
	}
	if err := probeClone(&syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID}); err != nil {
		return fmt.Errorf("cannot create a PID namespace: %w", err)
	}
	return nil
}

// probeClone forks with sys and execs a path that does not exist: ENOENT
// means the fork itself worked.
func probeClone(sys *syscall.SysProcAttr) error {
	_, err := syscall.ForkExec("/nonexistent/procwire-probe", []string{"probe"},
		&syscall.ProcAttr{Env: []string{}, Sys: sys})
	if errors.Is(err, syscall.ENOENT) {
		return nil
	}
	if err == nil {
		return errors.New("a path that does not exist was executed")
	}
	return err
}

// cgroup is a process's own cgroup.
type cgroup struct {
	dir string
}

// newCgroup creates the cgroup of a new process and opens it for
// clone(CLONE_INTO_CGROUP).
func (c *Containment) newCgroup(name string, l Limits) (*cgroup, int, error) {
	dir := filepath.Join(c.cgroupParent, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, -1, fmt.Errorf("create cgroup: %w", err)
	}
	if c.lim.active() && c.lim.v2 {
		if err := c.lim.writeV2(dir, l); err != nil {
			os.Remove(dir)
			return nil, -1, err
		}
	}
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		os.Remove(dir)
		return nil, -1, fmt.Errorf("open cgroup: %w", err)
	}
	return &cgroup{dir: dir}, fd, nil
}

// kill SIGKILLs every process of the cgroup and of its descendants.
func (g *cgroup) kill() error {
	return writeKernFile(filepath.Join(g.dir, "cgroup.kill"), []byte("1"))
}

// populated reads cgroup.events.
func (g *cgroup) populated() (bool, error) {
	var buf [128]byte // "populated 0\nfrozen 0\n"
	b, err := readKernFile(filepath.Join(g.dir, "cgroup.events"), buf[:])
	if err != nil {
		return false, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "populated "); ok {
			return v != "0", nil
		}
	}
	return false, errors.New("cgroup.events without populated")
}

// waitEmpty waits until the cgroup holds no process, until deadline, and
// reports whether it is empty. It wakes on the inotify event the kernel
// raises when cgroup.events changes; since the kernel delivers that event
// through a work queue and rate-limits it (tens of milliseconds on a busy
// machine), it also re-reads the file after 1, 2, 4 … 64 ms. Without an
// inotify instance (fs.inotify.max_user_instances, 128 by default, is
// reached when many destroys run at once) it re-reads on that backoff
// alone: a destroy never fails for want of a notification.
func (g *cgroup) waitEmpty(deadline time.Time) (bool, error) {
	// Most often it is empty already (a process destroyed after its
	// exit): one read, before a watch is set up.
	if pop, err := g.populated(); err != nil || !pop {
		return !pop, err
	}
	var f *os.File // nil: poll
	if in, err := inotifyInit(unix.IN_NONBLOCK | unix.IN_CLOEXEC); err == nil {
		f = os.NewFile(uintptr(in), "inotify") // on the poller
		defer f.Close()
		if _, err := unix.InotifyAddWatch(in, filepath.Join(g.dir, "cgroup.events"), unix.IN_MODIFY); err != nil {
			f.Close()
			f = nil
		}
	}
	var timer *time.Timer
	if f == nil {
		timer = time.NewTimer(time.Hour)
		defer timer.Stop()
	}
	buf := make([]byte, 4096)
	for backoff := time.Millisecond; ; backoff = min(2*backoff, 64*time.Millisecond) {
		// Read after the watch is set, so no change is missed.
		pop, err := g.populated()
		if err != nil || !pop {
			return !pop, err
		}
		if !time.Now().Before(deadline) {
			return false, nil
		}
		wake := time.Now().Add(backoff)
		if deadline.Before(wake) {
			wake = deadline
		}
		if f == nil {
			timer.Reset(time.Until(wake))
			<-timer.C
			continue
		}
		if err := f.SetReadDeadline(wake); err != nil {
			return false, err
		}
		if _, err := f.Read(buf); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			return false, err
		}
	}
}

// inotifyInit is unix.InotifyInit1; a test makes it fail as when the
// instances run out.
var inotifyInit = unix.InotifyInit1

// remove removes the cgroup and any cgroup its processes created in it,
// deepest first. It fails while a process is left in one.
func (g *cgroup) remove() error {
	// Most often no process made a cgroup in it: one rmdir.
	if err := removeDir(g.dir); err == nil || errors.Is(err, os.ErrNotExist) {
		return nil
	}
	var dirs []string
	_ = filepath.WalkDir(g.dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, path)
		}
		return nil
	})
	var err error
	for i := len(dirs) - 1; i >= 0; i-- {
		if e := removeDir(dirs[i]); e != nil && !errors.Is(e, os.ErrNotExist) {
			err = errors.Join(err, e)
		}
	}
	return err
}

// members lists the processes of the cgroup and its descendants.
func (g *cgroup) members() []int {
	var pids []int
	_ = filepath.WalkDir(g.dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		b, _ := os.ReadFile(filepath.Join(path, "cgroup.procs"))
		for _, f := range bytes.Fields(b) {
			if pid, err := strconv.Atoi(string(f)); err == nil {
				pids = append(pids, pid)
			}
		}
		return nil
	})
	return pids
}
