//go:build linux

package bridge

import (
	"bytes"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/proc"
)

// BenchmarkStdoutHeadC streams 64 MiB from head -c through the stdout pump
// and the replay buffer to a consumer that acks as it goes, child start and
// teardown included: go test -run '^$' -bench StdoutHeadC ./bridge
func BenchmarkStdoutHeadC(b *testing.B) {
	const size = 64 << 20
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		p, err := Start(proc.Request{
			Executable:       "head",
			Arguments:        []string{"-c", "64M", "/dev/zero"},
			WorkingDirectory: "/",
		}, nil)
		require.NoError(b, err)
		c := newConsumer(b, p, nil)
		c.toEOF()
		require.Equal(b, int64(size), c.n)
		require.NoError(b, p.Destroy())
	}
}

// BenchmarkDestroyTree measures, per containment, the time from Destroy to
// "nothing left" (Destroy's return, which waits for it) for a tree of 10
// processes (a shell and 9 sleepers), and reports its median as
// p50-destroy-ns: go test -run '^$' -bench DestroyTree -benchtime 100x ./bridge
func BenchmarkDestroyTree(b *testing.B) {
	benchDestroy(b, ContainOptions{}, func(c *Containment) *Process {
		req := shReq(b, `i=0; while [ $i -lt 9 ]; do sleep 300 & i=$((i+1)); done; echo started; wait`)
		p, err := c.Start(req, nil)
		require.NoError(b, err)
		var out bytes.Buffer
		newConsumer(b, p, &out).until("started", func() bool { return out.Len() > 0 })
		return p
	})
}

// BenchmarkDestroyExited measures, per containment, Destroy of a process
// that has already exited by itself (true, its stdout read to EOF and its
// exit published), as a client that runs one command to its end and then
// lets it go does, and reports its median as p50-destroy-ns: go test
// -run '^$' -bench DestroyExited -benchtime 100x ./bridge
func BenchmarkDestroyExited(b *testing.B) {
	benchDestroy(b, ContainOptions{WarmInit: true}, func(c *Containment) *Process {
		p, err := c.Start(proc.Request{Executable: "true", WorkingDirectory: "/"}, nil)
		require.NoError(b, err)
		newConsumer(b, p, nil).toEOF()
		waitExit(b, p)
		return p
	})
}

// benchDestroy has ready bring a process of each containment (opts with
// its Kind) to the state to measure, untimed, then times its Destroy, and
// reports the median as p50-destroy-ns.
func benchDestroy(b *testing.B, opts ContainOptions, ready func(c *Containment) *Process) {
	for _, kind := range []string{ContainCgroup, ContainPIDNamespace, ContainProcessGroup} {
		b.Run(kind, func(b *testing.B) {
			opts := opts
			opts.Kind = kind
			c, err := NewContainment(opts)
			if err != nil {
				b.Skipf("this machine does not allow it: %v", err)
			}
			defer func() { require.NoError(b, c.Close()) }()
			var times []time.Duration
			for b.Loop() {
				b.StopTimer()
				p := ready(c)
				b.StartTimer()
				t0 := time.Now()
				require.NoError(b, p.Destroy())
				times = append(times, time.Since(t0))
			}
			slices.Sort(times)
			b.ReportMetric(float64(times[len(times)/2].Nanoseconds()), "p50-destroy-ns")
		})
	}
}
