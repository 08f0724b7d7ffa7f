//go:build linux

package bridge

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/proc"
)

func TestNewUIDPoolRefuses(t *testing.T) {
	for _, r := range [][2]uint32{{0, 10}, {10, 9}, {65000, 66000}} { // 65534 is nobody on Debian
		_, err := NewUIDPool(r[0], r[1])
		require.ErrorIs(t, err, ErrUIDRange, "%v", r)
	}
	_, err := NewUIDPool(0, 0) // root, whatever /etc/passwd says
	require.ErrorIs(t, err, ErrUIDRange)
	p, err := NewUIDPool(100000, 165535)
	require.NoError(t, err)
	require.Equal(t, 65536, p.Size())

	for in, want := range map[string][2]uint32{"100000-165535": {100000, 165535}, "5-5": {5, 5}} {
		f, l, err := ParseUIDRange(in)
		require.NoError(t, err)
		require.Equal(t, want, [2]uint32{f, l})
	}
	for _, in := range []string{"", "100000", "a-b", "1-", "-1", "1-99999999999"} {
		_, _, err := ParseUIDRange(in)
		require.ErrorIs(t, err, ErrUIDRange, in)
	}
}

// TestUIDPoolLeases: no two live leases share a uid, a uid some process
// runs as is skipped, a full pool refuses, and a released uid comes back
// last.
func TestUIDPoolLeases(t *testing.T) {
	p, err := NewUIDPool(200000, 200003)
	require.NoError(t, err)
	p.running = func(id uint32) bool { return id == 200001 }
	lease := func() uint32 {
		t.Helper()
		u, err := p.Lease()
		require.NoError(t, err)
		require.Equal(t, u.UID, u.GID)
		require.Empty(t, u.Groups)
		return u.UID
	}
	require.Equal(t, uint32(200000), lease())
	require.Equal(t, uint32(200002), lease(), "200001 is some process's")
	p.Release(&proc.User{UID: 200000})
	require.Equal(t, uint32(200003), lease(), "round-robin: the released uid comes back last")
	require.Equal(t, uint32(200000), lease())
	_, err = p.Lease()
	require.ErrorIs(t, err, ErrNoFreeUID)
	require.Equal(t, 3, p.Leased())

	// Concurrent leases never share a uid.
	big, err := NewUIDPool(300000, 300999)
	require.NoError(t, err)
	big.running = func(uint32) bool { return false }
	var mu sync.Mutex
	seen := map[uint32]bool{}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				u, err := big.Lease()
				require.NoError(t, err)
				mu.Lock()
				require.False(t, seen[u.UID], "uid %d leased twice", u.UID)
				seen[u.UID] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.Len(t, seen, 800)
}

func TestRunningAs(t *testing.T) {
	require.True(t, runningAs(uint32(os.Getuid())), "this test runs as its own uid")
	require.False(t, runningAs(4000000000))
	if os.Geteuid() != 0 {
		return
	}
	// cat as uid 4000000001 until its stdin closes.
	cmd := exec.Command("cat")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 4000000001, Gid: 4000000001}}
	in, err := cmd.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	require.True(t, runningAs(4000000001))
	in.Close()
	require.NoError(t, cmd.Wait())
	require.False(t, runningAs(4000000001))
}

// TestUIDPoolStart: each process runs as its own uid and gid, with no
// other group; the uid goes back to the pool once Destroy succeeded.
func TestUIDPoolStart(t *testing.T) {
	needRoot(t)
	p, err := NewUIDPool(400000, 400009)
	require.NoError(t, err)
	req := shReq(t, `id -u; id -g; id -G`)
	for d := req.WorkingDirectory; d != filepath.Dir(d) && d != os.TempDir(); d = filepath.Dir(d) {
		require.NoError(t, os.Chmod(d, 0o755)) // the leased uid may enter it
	}
	var procs []*LeasedProcess
	for range 2 {
		lp, err := p.Start(DefaultContainment(), req, nil)
		require.NoError(t, err)
		procs = append(procs, lp)
	}
	require.Equal(t, 2, p.Leased())
	for _, lp := range procs {
		var out bytes.Buffer
		newConsumer(t, lp.Process, &out).toEOF()
		id := strconv.Itoa(int(lp.User().UID))
		require.Equal(t, id+"\n"+id+"\n"+id+"\n", out.String())
		require.Equal(t, 0, waitExit(t, lp.Process).Code)
	}
	require.NotEqual(t, procs[0].User().UID, procs[1].User().UID)
	require.NoError(t, procs[0].Destroy())
	require.Equal(t, 1, p.Leased())
	require.NoError(t, procs[0].Destroy()) // once only
	require.Equal(t, 1, p.Leased())
	require.NoError(t, procs[1].Destroy())
	require.Equal(t, 0, p.Leased())

	// A working directory the leased uid may not enter is refused as one
	// that is not there (the checks run as the uid, so that the refusal
	// tells nothing the uid could not see), and the uid goes back.
	locked := t.TempDir()
	require.NoError(t, os.Chmod(locked, 0o700)) // root's
	_, err = p.Start(DefaultContainment(), proc.Request{Executable: "/bin/true", WorkingDirectory: locked}, nil)
	var se *proc.StartError
	require.ErrorAs(t, err, &se)
	require.Equal(t, proc.ReasonWorkingDirectoryInvalid, se.Reason, "%v", err)
	require.Equal(t, 0, p.Leased())
}

// BenchmarkUIDPoolLease is a lease and its release, with the scan of /proc
// for a process running as the uid.
func BenchmarkUIDPoolLease(b *testing.B) {
	p, err := NewUIDPool(600000, 665535)
	require.NoError(b, err)
	for b.Loop() {
		u, err := p.Lease()
		if err != nil {
			b.Fatal(err)
		}
		p.Release(u)
	}
}
