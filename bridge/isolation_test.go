//go:build linux

package bridge

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/procwire/procwire/proc"
)

// TestIsolationByUID starts a sibling (cat, a secret in its environment)
// and a probe (internal/testkit/isoprobe) in one PID namespace (the process group
// containment), so that only users and capabilities stand between them,
// and checks what the probe can do to the sibling and to this process,
// made non-dumpable as procwire serve makes itself: read memory and
// environment, open stdin through /proc, signal, ptrace.
//
//   - The same uid (RunAs nobody for both): everything but fd0 (the pipe
//     is this process's, root's, mode 0600) against the sibling; nothing
//     against this process.
//   - A uid of its own each (UIDPool): nothing, against either.
//   - Root without capabilities (the default): everything against the
//     sibling; against this process only a signal (uid 0 to uid 0).
func TestIsolationByUID(t *testing.T) {
	needRoot(t)
	probe := buildIsoprobe(t)
	ct, err := NewContainment(ContainOptions{Kind: ContainProcessGroup})
	require.NoError(t, err)
	require.NoError(t, SetNonDumpable())
	defer func() { _ = unix.Prctl(unix.PR_SET_DUMPABLE, 1, 0, 0, 0) }()

	pool, err := NewUIDPool(500000, 500099)
	require.NoError(t, err)
	nobody := nobodyCred(t)
	shared := &proc.Config{RunAs: &proc.User{UID: nobody.UID, GID: nobody.GID}}
	type starter func(req proc.Request) (*Process, func() error)
	plain := func(cfg *proc.Config) starter {
		return func(req proc.Request) (*Process, func() error) {
			p, err := ct.Start(req, cfg)
			require.NoError(t, err)
			return p, p.Destroy
		}
	}
	leased := func(req proc.Request) (*Process, func() error) {
		lp, err := pool.Start(ct, req, nil)
		require.NoError(t, err)
		return lp.Process, lp.Destroy
	}
	all := func(v bool) map[string]bool {
		m := map[string]bool{}
		for _, a := range []string{"mem", "environ", "fd0", "signal", "ptrace"} {
			m[a] = v
		}
		return m
	}
	sharedSibling := all(true)
	sharedSibling["fd0"] = false
	rootServer := all(false)
	rootServer["signal"] = true
	for _, c := range []struct {
		name            string
		start           starter
		sibling, server map[string]bool
	}{
		{"same-uid", plain(shared), sharedSibling, all(false)},
		{"uid-pool", leased, all(false), all(false)},
		{"root", plain(nil), all(true), rootServer},
	} {
		t.Run(c.name, func(t *testing.T) {
			secret := "SECRET=tenantA-" + strconv.Itoa(os.Getpid()) + "-" + c.name
			sibReq := proc.Request{Executable: "sh", Arguments: []string{"-c", "echo ready; cat"},
				WorkingDirectory: "/", Environment: map[string]string{"PATH": "/usr/bin:/bin", "SECRET": strings.TrimPrefix(secret, "SECRET=")}}
			sib, destroySib := c.start(sibReq)
			defer func() { require.NoError(t, destroySib()) }()
			var ready bytes.Buffer
			cs := newConsumer(t, sib, &ready)
			cs.until("the sibling's ready", func() bool { return strings.Contains(ready.String(), "ready\n") })
			sibPid := pidWithEnv(t, secret)

			pr, destroyProbe := c.start(proc.Request{Executable: probe, Arguments: []string{strconv.Itoa(sibPid), strconv.Itoa(os.Getpid())},
				WorkingDirectory: "/", Environment: map[string]string{}})
			defer func() { require.NoError(t, destroyProbe()) }()
			var out bytes.Buffer
			newConsumer(t, pr, &out).toEOF()
			require.Equal(t, 0, waitExit(t, pr).Code, out.String())
			got := map[string]string{}
			for line := range strings.Lines(out.String()) {
				if f := strings.Fields(line); len(f) == 3 && f[0] != "self" {
					got[f[0]+" "+f[1]] = f[2]
				}
			}
			for who, target := range map[string]struct {
				pid   int
				allow map[string]bool
			}{"sibling": {sibPid, c.sibling}, "server": {os.Getpid(), c.server}} {
				for a, want := range target.allow {
					res := got[strconv.Itoa(target.pid)+" "+a]
					require.NotEmpty(t, res, "no %s attempt against the %s:\n%s", a, who, out.String())
					if want {
						require.Equal(t, "ok", res, "%s of the %s", a, who)
					} else {
						require.NotEqual(t, "ok", res, "%s of the %s succeeded", a, who)
					}
				}
			}
			t.Logf("%s:\n%s", c.name, out.String())
		})
	}
}

// pidWithEnv returns the pid of the process whose environment holds kv.
func pidWithEnv(t *testing.T, kv string) int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	require.NoError(t, err)
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err == nil && bytes.Contains(append([]byte{0}, b...), []byte("\x00"+kv+"\x00")) {
			return pid
		}
	}
	t.Fatalf("no process has %s in its environment", kv)
	return 0
}

// buildIsoprobe builds internal/testkit/isoprobe where any user can run it.
func buildIsoprobe(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for d := dir; d != filepath.Dir(d) && d != os.TempDir(); d = filepath.Dir(d) {
		require.NoError(t, os.Chmod(d, 0o755))
	}
	probe := filepath.Join(dir, "isoprobe")
	out, err := exec.Command("go", "build", "-o", probe, "../internal/testkit/isoprobe").CombinedOutput()
	require.NoError(t, err, "%s", out)
	return probe
}
