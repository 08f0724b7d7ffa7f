//go:build linux

package bridge

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/procwire/procwire/bridge/internal/initproc"
	"github.com/procwire/procwire/proc"
)

// The helper process of the hardening tests: the test binary re-executed,
// it does what the init does (harden, then fork and exec the workload from
// the same goroutine) and exits with the workload's status.
const (
	hardenSpecEnv = "PROCWIRE_TEST_HARDEN_SPEC"
	hardenArgvEnv = "PROCWIRE_TEST_HARDEN_ARGV"
)

func TestHardenHelperProcess(t *testing.T) {
	specJSON, argvJSON := os.Getenv(hardenSpecEnv), os.Getenv(hardenArgvEnv)
	if specJSON == "" {
		t.Skip("the helper of TestHarden*, run only by them")
	}
	var spec initproc.Harden
	var argv []string
	if json.Unmarshal([]byte(specJSON), &spec) != nil || json.Unmarshal([]byte(argvJSON), &argv) != nil {
		os.Exit(120)
	}
	if err := spec.Apply(); err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		os.Exit(121)
	}
	sys := &syscall.SysProcAttr{}
	spec.SysProcAttr(sys)
	pid, err := syscall.ForkExec(argv[0], argv, &syscall.ProcAttr{Env: []string{"PATH=/usr/bin:/bin"}, Files: []uintptr{0, 1, 2}, Sys: sys})
	if err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		os.Exit(122)
	}
	var ws syscall.WaitStatus
	if _, err := syscall.Wait4(pid, &ws, 0, nil); err != nil {
		os.Exit(123)
	}
	os.Exit(ws.ExitStatus())
}

// runHardened runs argv through the helper with spec and returns its
// stdout.
func runHardened(t *testing.T, spec *initproc.Harden, argv ...string) string {
	t.Helper()
	return runHardenedIn(t, nil, spec, argv...)
}

// runHardenedIn is runHardened with the helper started with sys.
func runHardenedIn(t *testing.T, sys *syscall.SysProcAttr, spec *initproc.Harden, argv ...string) string {
	t.Helper()
	s, err := json.Marshal(spec)
	require.NoError(t, err)
	a, err := json.Marshal(argv)
	require.NoError(t, err)
	cmd := exec.Command(os.Args[0], "-test.run=^TestHardenHelperProcess$", "-test.count=1")
	cmd.Env = []string{hardenSpecEnv + "=" + string(s), hardenArgvEnv + "=" + string(a)}
	cmd.SysProcAttr = sys
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "stderr: %s", stderr.String())
	return string(out)
}

// statusFields parses /proc/PID/status as the workload printed it.
func statusFields(out string) map[string]string {
	m := map[string]string{}
	for line := range strings.Lines(out) {
		if k, v, ok := strings.Cut(line, ":"); ok {
			m[k] = strings.TrimSpace(v)
		}
	}
	return m
}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("hardening a child's capabilities and user needs root")
	}
}

func nobodyCred(t *testing.T) *initproc.Cred {
	t.Helper()
	u, err := user.Lookup("nobody")
	if err != nil {
		t.Skipf("no user nobody: %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &initproc.Cred{UID: uint32(uid), GID: uint32(gid)}
}

// TestHardenRootChild: a child running as root gets no capability in any
// set, no_new_privs, umask 022 and the default limits, whatever the
// server had.
func TestHardenRootChild(t *testing.T) {
	needRoot(t)
	spec := hardenFor(&proc.Config{})
	require.NotNil(t, spec)
	out := runHardened(t, spec, "/bin/sh", "-c", "cat /proc/self/status; cat /proc/self/limits")
	st := statusFields(out)
	for _, k := range []string{"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"} {
		require.Equal(t, "0000000000000000", st[k], k)
	}
	require.Equal(t, "1", st["NoNewPrivs"])
	require.Equal(t, "0022", st["Umask"])
	require.Equal(t, "0", st["Uid"][:1])
	require.Regexp(t, `Max core file size\s+0\s+0\s`, out)
	require.Regexp(t, `Max open files\s+1024\s+\d+\s`, out)
}

// TestHardenKeepCaps: a kept capability is all a child holds, as root and
// as another user (through the ambient set).
func TestHardenKeepCaps(t *testing.T) {
	needRoot(t)
	const want = "0000000000000400" // CAP_NET_BIND_SERVICE
	for _, cred := range []*initproc.Cred{nil, nobodyCred(t)} {
		spec := &initproc.Harden{NoNewPrivs: true, KeepCaps: []uintptr{unix.CAP_NET_BIND_SERVICE}, Umask: 0o077, Cred: cred}
		st := statusFields(runHardened(t, spec, "/bin/cat", "/proc/self/status"))
		for _, k := range []string{"CapPrm", "CapEff", "CapBnd"} {
			require.Equal(t, want, st[k], "%s as %v", k, cred)
		}
		require.Equal(t, "0077", st["Umask"])
		if cred == nil {
			require.Equal(t, "0000000000000000", st["CapInh"])
		} else { // the ambient set is within the inheritable one
			require.Equal(t, want, st["CapInh"])
			require.Equal(t, want, st["CapAmb"])
			require.True(t, strings.HasPrefix(st["Uid"], strconv.Itoa(int(cred.UID))+"\t"), st["Uid"])
		}
	}
}

// TestHardenSetuidGainsNothing: a setuid-root copy of id, run by a child
// as nobody, prints nobody's uid under no_new_privs, and root's without
// (the control, which shows the setuid bit works where the test runs).
func TestHardenSetuidGainsNothing(t *testing.T) {
	needRoot(t)
	cred := nobodyCred(t)
	dir := t.TempDir()
	var sfs unix.Statfs_t
	require.NoError(t, unix.Statfs(dir, &sfs))
	if sfs.Flags&unix.ST_NOSUID != 0 {
		t.Skipf("%s is on a nosuid mount: a setuid binary cannot work there", dir)
	}
	for d := dir; d != filepath.Dir(d) && d != os.TempDir(); d = filepath.Dir(d) {
		require.NoError(t, os.Chmod(d, 0o755)) // nobody walks to it
	}
	idPath, err := exec.LookPath("id")
	require.NoError(t, err)
	suid := filepath.Join(dir, "id")
	src, err := os.Open(idPath)
	require.NoError(t, err)
	defer src.Close()
	dst, err := os.OpenFile(suid, os.O_CREATE|os.O_WRONLY, 0o755)
	require.NoError(t, err)
	_, err = io.Copy(dst, src)
	require.NoError(t, err)
	require.NoError(t, dst.Close())
	require.NoError(t, os.Chmod(suid, os.ModeSetuid|0o755))

	spec := hardenFor(&proc.Config{RunAs: &proc.User{UID: cred.UID, GID: cred.GID}})
	require.Equal(t, strconv.Itoa(int(cred.UID))+"\n", runHardened(t, spec, suid, "-u"))
	spec.NoNewPrivs = false
	require.Equal(t, "0\n", runHardened(t, spec, suid, "-u"), "control: the setuid bit works without no_new_privs")
}

// TestSetChildHardening checks what it refuses and that it is what
// hardenFor uses.
func TestSetChildHardening(t *testing.T) {
	defer childHardening.Store(nil)
	require.ErrorIs(t, SetChildHardening(Hardening{Umask: 0o1000}), ErrInvalidHardening)
	require.ErrorIs(t, SetChildHardening(Hardening{KeepCaps: []uintptr{initproc.CapLast() + 1}}), ErrInvalidHardening)
	require.ErrorIs(t, SetChildHardening(Hardening{Rlimits: []Rlimit{{Resource: 99}}}), ErrInvalidHardening)
	require.NoError(t, SetChildHardening(Hardening{Disabled: true}))
	require.Nil(t, hardenFor(&proc.Config{}))
	require.NoError(t, SetChildHardening(Hardening{Umask: 0o027, KeepCaps: []uintptr{unix.CAP_KILL}}))
	s := hardenFor(&proc.Config{RunAs: &proc.User{UID: 7, GID: 8, Groups: []uint32{9}}})
	require.Equal(t, &initproc.Harden{NoNewPrivs: true, KeepCaps: []uintptr{unix.CAP_KILL}, Umask: 0o027,
		Cred: &initproc.Cred{UID: 7, GID: 8, Groups: []uint32{9}}, PrivateProc: true}, s)
}

func TestParseCaps(t *testing.T) {
	for in, want := range map[string][]uintptr{
		"":                             nil,
		"none":                         nil,
		"CAP_NET_BIND_SERVICE":         {unix.CAP_NET_BIND_SERVICE},
		"net_bind_service, cap_kill,0": {unix.CAP_NET_BIND_SERVICE, unix.CAP_KILL, unix.CAP_CHOWN},
	} {
		got, err := ParseCaps(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	_, err := ParseCaps("cap_fly")
	require.ErrorIs(t, err, ErrInvalidHardening)
	require.Len(t, capNames, unix.CAP_LAST_CAP+1)
}

// TestHardenPrivateProc: the child of an init that is pid 1 of its PID
// namespace sees a /proc of that namespace alone — not this process, not
// the machine's pid 1's children — and the machine's mounts are untouched.
func TestHardenPrivateProc(t *testing.T) {
	needRoot(t)
	before, err := os.ReadFile("/proc/self/mountinfo")
	require.NoError(t, err)
	spec := hardenFor(&proc.Config{})
	require.True(t, spec.PrivateProc)
	script := `ls /proc | grep -E '^[0-9]+$' | tr '\n' ' '; test -e /proc/` + strconv.Itoa(os.Getpid()) + ` && echo sees-the-test || echo alone`
	out := runHardenedIn(t, &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID}, spec, "/bin/sh", "-c", script)
	pids := strings.Fields(out)
	require.Equal(t, "alone", pids[len(pids)-1], out)
	require.LessOrEqual(t, len(pids)-1, 8, "the init, sh and its pipeline: %s", out)
	after, err := os.ReadFile("/proc/self/mountinfo")
	require.NoError(t, err)
	require.Equal(t, string(before), string(after))

	// The control: without it, the child sees the machine's processes.
	spec.PrivateProc = false
	out = runHardenedIn(t, &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID}, spec, "/bin/sh", "-c", script)
	require.True(t, strings.HasSuffix(out, "sees-the-test\n"), out)
}

// BenchmarkStartHardened starts /bin/true and destroys it, hardened (the
// default) and not, in DefaultContainment.
func BenchmarkStartHardened(b *testing.B) {
	defer childHardening.Store(nil)
	for _, c := range []struct {
		name string
		h    Hardening
	}{{"hardened", DefaultHardening()}, {"unhardened", Hardening{Disabled: true}}} {
		b.Run(c.name, func(b *testing.B) {
			require.NoError(b, SetChildHardening(c.h))
			for b.Loop() {
				p, err := Start(proc.Request{Executable: "/bin/true", WorkingDirectory: "/"}, nil)
				if err != nil {
					b.Fatal(err)
				}
				<-p.Done()
				if err := p.Destroy(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
