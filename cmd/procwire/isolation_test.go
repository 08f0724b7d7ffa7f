//go:build linux

package main

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// attempts are what internal/testkit/isoprobe tries against a process.
var attempts = []string{"mem", "environ", "fd0", "signal", "ptrace"}

// isolationCase is one way of serving: who the server runs as, its flags,
// and what a child may still do to a sibling and to the server.
type isolationCase struct {
	name      string
	serveArgs []string
	serverAs  *syscall.Credential // nil: root, as the test
	// sibling and server say which attempts succeed when the target is in
	// the probe's PID namespace; none does otherwise.
	sibling, server map[string]bool
	// rootFiles: the child reads a file only root may (the token file,
	// mode 0600 in a directory of mode 0700).
	rootFiles bool
}

// TestIsolation runs a server each way this machine allows, starts a
// sibling (cat, with a secret in its environment) and a probe
// (internal/testkit/isoprobe) as two processes of that server, and checks what
// the probe can do to the sibling and to the server: read its memory,
// its environment, open its stdin through /proc, signal it, ptrace it;
// and whether it reads a file only root may read (the token file).
//
// Whatever the user, no child reads the server's memory or environment:
// it is non-dumpable and the children hold no capability. A child as
// root or as the shared --run-as user still reads a sibling's memory and
// environment (the same uid) and signals the server when it runs as root
// in the server's PID namespace; only --run-as-range keeps siblings
// apart. With the server running as a user that is not root and its
// children as the same user, non-dumpability is the only barrier, and
// this case fails without it.
func TestIsolation(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the isolation cases start servers as root and as nobody")
	}
	all := func(v bool) map[string]bool {
		m := map[string]bool{}
		for _, a := range attempts {
			m[a] = v
		}
		return m
	}
	sameUID := all(true) // what a capless process may do to a dumpable one of its uid
	rootServer := all(false)
	rootServer["signal"] = true // uid 0 signals uid 0, without CAP_KILL
	sharedNobody := all(true)
	sharedNobody["fd0"] = false
	nobody := &syscall.Credential{Uid: 65534, Gid: 65534}
	cases := []isolationCase{
		{name: "root", sibling: sameUID, server: rootServer, rootFiles: true},
		// fd0: the sibling's stdin is a pipe the server (root) made, mode
		// 0600: only root opens it again through /proc.
		{name: "run-as-nobody", serveArgs: []string{"--run-as", "nobody"}, sibling: sharedNobody, server: all(false)},
		{name: "run-as-range", serveArgs: []string{"--run-as-range", "100000-165535"}, sibling: all(false), server: all(false)},
		// The server as nobody, its children too: the same uid, no
		// capability on either side, and only non-dumpability between
		// them. signal: the same uid.
		{name: "server-as-nobody", serverAs: nobody, sibling: sameUID, server: map[string]bool{"signal": true}},
	}
	probe := buildProbe(t)
	worldReadable(t, filepath.Dir(binary))
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { runIsolationCase(t, c, probe) })
	}
}

func runIsolationCase(t *testing.T, c isolationCase, probe string) {
	token := "isolation-token-" + randomHex(8)
	srv := binCmd(t, "", []string{"PROCWIRE_TOKEN=" + token}, append([]string{"serve", "--addr", "127.0.0.1:0"}, c.serveArgs...)...)
	srv.SysProcAttr = &syscall.SysProcAttr{Credential: c.serverAs}
	srv.Dir = "/"
	url, logs := startLogged(t, srv)
	tokenFile := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte(token), 0o600))
	flags := []string{"--token-file", tokenFile, "--cwd", "/"}

	// The sibling: sh and its cat, reading a stdin the test holds open,
	// with a secret in their environment; sh says when it runs, and stays
	// (an exec would leave a moment in which /proc/PID/environ is empty).
	secret := "SECRET=tenantA-" + randomHex(8)
	sib := binCmd(t, "", nil, execArgs(url, append(flags, "--env", secret), "sh", "-c", "echo ready; cat")...)
	sib.Stdin = nil
	sibIn, err := sib.StdinPipe()
	require.NoError(t, err)
	sibOut, err := sib.StdoutPipe()
	require.NoError(t, err)
	sib.Stderr = io.Discard
	require.NoError(t, sib.Start())
	defer func() {
		sibIn.Close() // cat ends
		_ = sib.Wait()
	}()
	ready, err := bufio.NewReader(sibOut).ReadString('\n')
	require.NoError(t, err, "server log:\n%s", logs())
	require.Equal(t, "ready\n", ready)
	sibPid := pidWithEnviron(t, secret)

	r := runBin(t, "", nil, execArgs(url, flags, probe, strconv.Itoa(sibPid), strconv.Itoa(srv.Process.Pid), "file:"+tokenFile)...)
	require.Equal(t, 0, r.code, "probe: %s\nserver log:\n%s", r.stderr, logs())
	got := map[string]string{}
	var probeNS string
	for line := range strings.Lines(r.stdout) {
		f := strings.Fields(line)
		if len(f) == 3 && f[0] == "self" {
			probeNS = strings.TrimPrefix(f[2], "pidns=")
			continue
		}
		if len(f) == 3 && f[0] == "file:"+tokenFile {
			require.Equal(t, c.rootFiles, f[2] == "ok", "reading the token file: %s", f[2])
			continue
		}
		require.Len(t, f, 3, "probe line %q", line)
		got[f[0]+" "+f[1]] = f[2]
	}
	require.NotEmpty(t, probeNS, r.stdout)
	require.Contains(t, r.stdout, "file:"+tokenFile+" read ")
	for _, target := range []struct {
		what  string
		pid   int
		allow map[string]bool
	}{{"sibling", sibPid, c.sibling}, {"server", srv.Process.Pid, c.server}} {
		ns, err := os.Readlink("/proc/" + strconv.Itoa(target.pid) + "/ns/pid")
		require.NoError(t, err)
		for _, a := range attempts {
			// In a PID namespace of its own the probe has a /proc of that
			// namespace, and signals and ptraces by its pids: a process
			// of another namespace is out of reach, whoever runs it.
			want := target.allow[a] && ns == probeNS
			res := got[strconv.Itoa(target.pid)+" "+a]
			require.NotEmpty(t, res, "no %s attempt against the %s in:\n%s", a, target.what, r.stdout)
			if want {
				require.Equal(t, "ok", res, "%s of the %s (pid ns %s, probe's %s)", a, target.what, ns, probeNS)
			} else {
				require.NotEqual(t, "ok", res, "%s of the %s succeeded (pid ns %s, probe's %s)", a, target.what, ns, probeNS)
			}
		}
	}
	t.Logf("%s: probe (pid ns %s):\n%s", c.name, probeNS, r.stdout)
	require.NoError(t, sibIn.Close())
	require.NoError(t, sib.Wait())
	require.NoError(t, srv.Process.Signal(syscall.SIGTERM))
	require.NoError(t, srv.Wait(), logs())
}

// pidWithEnviron returns the pid of the process whose environment holds
// kv.
func pidWithEnviron(t *testing.T, kv string) int {
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

// buildProbe builds internal/testkit/isoprobe where any user can run it.
func buildProbe(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	worldReadable(t, dir)
	probe := filepath.Join(dir, "isoprobe")
	out, err := exec.Command("go", "build", "-o", probe, "../../internal/testkit/isoprobe").CombinedOutput()
	require.NoError(t, err, "%s", out)
	return probe
}

// worldReadable lets every user walk to dir.
func worldReadable(t *testing.T, dir string) {
	t.Helper()
	for d := dir; d != filepath.Dir(d) && d != os.TempDir(); d = filepath.Dir(d) {
		require.NoError(t, os.Chmod(d, 0o755))
	}
}

// TestServeHardensChildren: a child of serve, as root, holds no
// capability, has no_new_privs, umask 0022 and the default limits, though
// serve itself runs with umask 0, unlimited core files and another open
// files limit; with --child-caps and --child-umask, what they say.
func TestServeHardensChildren(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a child's capabilities are only worth checking as root")
	}
	script := `grep -E '^(Umask|NoNewPrivs|CapInh|CapPrm|CapEff|CapBnd|CapAmb):' /proc/self/status; ulimit -c; ulimit -n`
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "Umask:\t0022\nCapInh:\t0000000000000000\nCapPrm:\t0000000000000000\nCapEff:\t0000000000000000\nCapBnd:\t0000000000000000\nCapAmb:\t0000000000000000\nNoNewPrivs:\t1\n0\n1024\n"},
		{[]string{"--child-caps", "CAP_NET_BIND_SERVICE", "--child-umask", "077"},
			"Umask:\t0077\nCapInh:\t0000000000000000\nCapPrm:\t0000000000000400\nCapEff:\t0000000000000400\nCapBnd:\t0000000000000400\nCapAmb:\t0000000000000000\nNoNewPrivs:\t1\n0\n1024\n"},
	} {
		// serve under a shell that gives it a umask and limits of its own.
		srv := exec.Command("sh", append([]string{"-c", `umask 0; ulimit -c unlimited; ulimit -n 2000; exec "$@"`, "sh",
			binary, "serve", "--addr", "127.0.0.1:0"}, c.args...)...)
		srv.Dir = "/"
		url, logs := startLogged(t, srv)
		r := runBin(t, "", nil, execArgs(url, []string{"--cwd", "/"}, "sh", "-c", script)...)
		require.Equal(t, 0, r.code, "%s\n%s", r.stderr, logs())
		require.Equal(t, c.want, r.stdout, "%v", c.args)
		require.NoError(t, srv.Process.Signal(syscall.SIGTERM))
		require.NoError(t, srv.Wait())
	}
}
