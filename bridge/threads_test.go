//go:build linux

package bridge

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/proc"
)

// threadCount returns this process's thread count from /proc/self/status.
func threadCount(t testing.TB) int {
	b, err := os.ReadFile("/proc/self/status")
	require.NoError(t, err)
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			require.NoError(t, err)
			return n
		}
	}
	t.Fatal("no Threads line in /proc/self/status")
	return 0
}

// childrenOf lists the pids whose parent is ppid, and how many of them are
// zombies.
func childrenOf(t testing.TB, ppid int) (pids []int, zombies int) {
	ents, err := os.ReadDir("/proc")
	require.NoError(t, err)
	want := strconv.Itoa(ppid)
	for _, e := range ents {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) < 2 || f[1] != want {
			continue
		}
		pid, _ := strconv.Atoi(e.Name())
		pids = append(pids, pid)
		if f[0] == "Z" {
			zombies++
		}
	}
	return pids, zombies
}

// TestNoThreadPerChild starts 1,000 children, all alive at once, and
// destroys them: waiting for their exits parks goroutines on the poller,
// not OS threads, so the thread count stays flat, and afterwards no child
// is left, not even a zombie, and every descriptor is closed.
func TestNoThreadPerChild(t *testing.T) {
	// Each child runs under an init, a copy of this binary: about 2 MB of
	// private memory each, 15 MB when built with -race. .ci/run also runs
	// this test without -race.
	n := 1000
	if raceEnabled {
		n = 100
	}
	if testing.Short() {
		t.Skip("starts 1,000 processes")
	}
	fds := fdCount(t)
	threads := threadCount(t)
	procs := make([]*Process, 0, n)
	for range n {
		p, err := Start(proc.Request{Executable: "sleep", Arguments: []string{"300"}, WorkingDirectory: "/"}, nil)
		require.NoError(t, err)
		procs = append(procs, p)
	}
	live := threadCount(t)
	kids, _ := childrenOf(t, os.Getpid())
	t.Logf("%d children (inits) alive", len(kids))
	require.GreaterOrEqual(t, len(kids), n)

	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range 8 {
		wg.Go(func() {
			for j := i; j < n; j += 8 {
				if err := procs[j].Destroy(); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	after := threadCount(t)
	t.Logf("threads: %d before, %d with %d children alive, %d after destroying them", threads, live, n, after)
	require.Less(t, live-threads, 64, "threads grew with the children")
	require.Less(t, after-threads, 64, "threads grew with the children")

	kids, zombies := childrenOf(t, os.Getpid())
	require.Zero(t, zombies, "zombies left")
	require.Empty(t, kids, "children left")
	require.Equal(t, fds, fdCount(t), "leaked file descriptors")
}
