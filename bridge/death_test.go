//go:build linux

package bridge

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/bridge/internal/initproc"
	"github.com/procwire/procwire/proc"
	"github.com/procwire/procwire/replay"
)

// doomedEnv, in the environment of this test binary, makes TestMain run
// doomedServer instead of the tests: a server that the test kills.
const doomedEnv = "PROCWIRE_TEST_DOOMED_SERVER"

// doomedTrees are the trees a doomed server runs, each trying to outlive
// it in its own way; "stream" is in the middle of writing stdout.
var doomedTrees = map[string]string{
	"setsid":       escapes["setsid"],
	"double fork":  escapes["double fork"],
	"100 sleepers": `i=0; while [ $i -lt 100 ]; do sleep 300 & i=$((i+1)); done; echo started; wait`,
	"stream":       `echo started; while :; do echo 0123456789abcdefghijklmnopqrstuvwxyz; done`,
}

// doomedServer is the body of a server process the test kills with
// SIGKILL: it starts each of doomedTrees in the containment named by
// $PROCWIRE_TEST_DOOMED_SERVER, each tree marked with
// PROCWIRE_TEST_MARK=<$PROCWIRE_TEST_MARK>-<tree>, reads their stdout
// without end, and prints "ready" once every tree said "started".
func doomedServer() {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "doomed server:", err)
		os.Exit(2)
	}
	c, err := NewContainment(ContainOptions{Kind: os.Getenv(doomedEnv), WarmInit: true})
	if err != nil {
		fail(err)
	}
	refilled := make(chan struct{}, len(doomedTrees)+1)
	c.warm.onRefill = func() { refilled <- struct{}{} }
	names := make([]string, 0, len(doomedTrees))
	for name := range doomedTrees {
		names = append(names, name)
	}
	sort.Strings(names)
	started := make(chan struct{}, len(names))
	for _, name := range names {
		req := proc.Request{
			Executable:       "sh",
			Arguments:        []string{"-c", doomedTrees[name]},
			WorkingDirectory: "/",
			Environment: map[string]string{
				"PATH":               "/usr/bin:/bin",
				"PROCWIRE_TEST_MARK": os.Getenv("PROCWIRE_TEST_MARK") + "-" + strings.ReplaceAll(name, " ", "_"),
			},
		}
		p, err := c.Start(req, nil)
		if err != nil {
			fail(err)
		}
		go func() {
			buf := make([]byte, 64<<10)
			said := false
			for range p.Notify() {
				for {
					var n int
					p.Stdout(func(b *replay.Buffer) {
						n, _ = b.CopyAt(buf, b.Start())
						_ = b.Ack(b.Start() + int64(n))
					})
					if !said && strings.Contains(string(buf[:n]), "started") {
						said = true
						started <- struct{}{}
					}
					if n == 0 {
						break
					}
				}
			}
		}()
	}
	for range names {
		<-started
	}
	// The next process's warm init waits too: it must die with us.
	for _, ready := c.WarmInits(); !ready; _, ready = c.WarmInits() {
		<-refilled
	}
	c.warm.mu.Lock()
	fmt.Println("ready", c.warm.spares[0].pid)
	c.warm.mu.Unlock()
	select {}
}

// TestServerDeathEndsEveryTree kills a server (this test binary, running
// doomedServer) with SIGKILL while its trees run and one streams stdout,
// and checks that nothing of any tree is left within 1 s, under every
// containment; nor is the warm init that waited for the next process. It
// logs the time from the SIGKILL to the end of each tree,
// p50 and max; PROCWIRE_DEATH_ROUNDS sets the number of servers killed per
// containment (default 2; 5 gives 20 trees).
func TestServerDeathEndsEveryTree(t *testing.T) {
	rounds := 2
	if n, err := fmt.Sscan(os.Getenv("PROCWIRE_DEATH_ROUNDS"), &rounds); n != 1 || err != nil {
		rounds = 2
	}
	eachContainment(t, func(t *testing.T, c *Containment) {
		var took []time.Duration
		for range rounds {
			took = append(took, killServer(t, c.Kind())...)
		}
		slices.Sort(took)
		t.Logf("%s: SIGKILL of the server to nothing left, over %d trees: p50 %v, max %v",
			c.Kind(), len(took), took[len(took)/2], took[len(took)-1])
		if c.Kind() == ContainCgroup {
			// The dead servers' cgroups are empty; the next server sweeps them.
			require.Positive(t, sweepDeadServers(c.cgroupParent))
		}
	})
}

// killServer starts a doomed server in containment kind, SIGKILLs it once
// its trees run, and returns how long each tree outlived it.
func killServer(t *testing.T, kind string) []time.Duration {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	mark := hex.EncodeToString(b)
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), doomedEnv+"="+kind, "PROCWIRE_TEST_MARK="+mark)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	var warm int
	_, err = fmt.Sscanf(line, "ready %d\n", &warm)
	require.NoError(t, err, "%q", line)

	trees := map[string]string{} // name → mark
	for name := range doomedTrees {
		m := "PROCWIRE_TEST_MARK=" + mark + "-" + strings.ReplaceAll(name, " ", "_")
		trees[name] = m
		requireMarkedAlive(t, m, "tree %s does not run", name)
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	killed := time.Now()
	_ = cmd.Wait()

	warmAlive := func() bool {
		return len(initproc.ProcsWhere(func(pid int, _ []string) bool { return pid == warm })) > 0
	}
	var took []time.Duration
	for len(trees) > 0 || warmAlive() {
		for name, m := range trees {
			if len(markedAlive(m)) == 0 {
				took = append(took, time.Since(killed))
				delete(trees, name)
			}
		}
		if time.Since(killed) > testTimeout {
			break
		}
	}
	require.False(t, warmAlive(), "%s: the warm init %d outlived its server", kind, warm)
	// The bound; the kernel usually ends the trees in a few
	// milliseconds.
	for name, m := range trees {
		t.Errorf("%s: tree %q outlived its server by %v: %v", kind, name, testTimeout, markedAlive(m))
		for _, pid := range markedAlive(m) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	for _, d := range took {
		require.Less(t, d, time.Second, "%s: a tree outlived its server by more than 1 s", kind)
	}
	return took
}
