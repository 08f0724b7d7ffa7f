package main

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/procwire/procwire/bench"
)

// workload runs once against one peer and records its figures into its
// metrics, at [round][peer].
type workload struct {
	name    string
	metrics []*metric // what it records
	goals   []goal    // what the issue asks of its figures
	run     func(ctx context.Context, p bench.Peer, round, peer int) error
	// all, instead of run, runs every peer at once, interleaved.
	all func(ctx context.Context, peers []bench.Peer, round int) error
}

// workloadNames lists the workloads in the order they run, as -only
// names them. A later report reads this list in a baseline's usage
// (baselineWorkloads), so its format stays "(a, b, c)".
const workloadNames = "stdout, stdin, echo, request/response, sessions, ttfb"

// newWorkloads returns every workload, in the order of workloadNames.
func newWorkloads(cfg config) []workload {
	return []workload{
		stdoutWorkload(cfg.size),
		stdinWorkload(cfg.size),
		echoWorkload(cfg.echoes),
		requestResponseWorkload(cfg.lines),
		sessionsWorkload(cfg.sessions, cfg.perSession),
		coldWorkload(cfg.cold),
	}
}

// selectWorkloads keeps the workloads only names (comma-separated), or
// all when it is empty.
func selectWorkloads(ws []workload, only string) ([]workload, error) {
	if only == "" {
		return ws, nil
	}
	keep := strings.Split(only, ",")
	ws = slices.DeleteFunc(ws, func(w workload) bool { return !slices.Contains(keep, w.name) })
	if len(ws) == 0 {
		return nil, fmt.Errorf("-only %q names no workload", only)
	}
	return ws, nil
}

// metricsOf returns the metrics of ws, in order.
func metricsOf(ws []workload) []*metric {
	var ms []*metric
	for _, w := range ws {
		ms = append(ms, w.metrics...)
	}
	return ms
}

// us returns d in microseconds.
func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

// interleave is how many round trips a latency workload makes on one peer
// before the next takes its turn.
const interleave = 50

// sessionBlock is how many round trips every session of a peer makes in
// one turn of the sessions workload.
const sessionBlock = 20

func stdoutWorkload(size int64) workload {
	mb, mib := float64(size)/1e6, float64(size)/(1<<20)
	rate := &metric{name: "stdout, head -c " + fmt.Sprint(size>>20) + "M /dev/zero", unit: "MB/s", higher: true}
	cpu := &metric{name: "stdout, CPU per MiB", unit: "µs"}
	return workload{name: "stdout", metrics: []*metric{rate, cpu},
		goals: []goal{{m: rate, peer: peerW, limit: 0.9, share: 7.0 / 9}},
		run: func(ctx context.Context, p bench.Peer, r, i int) error {
			c := bench.CPUTime()
			d, err := bench.StdoutBulk(ctx, p, size)
			rate.values[r][i], cpu.values[r][i] = mb/d.Seconds(), us(bench.CPUTime()-c)/mib
			return err
		}}
}

func stdinWorkload(size int64) workload {
	mb, mib := float64(size)/1e6, float64(size)/(1<<20)
	rate := &metric{name: "stdin, " + fmt.Sprint(size>>20) + " MiB into wc -c, 64 KiB writes", unit: "MB/s", higher: true}
	cpu := &metric{name: "stdin, CPU per MiB", unit: "µs"}
	return workload{name: "stdin", metrics: []*metric{rate, cpu},
		run: func(ctx context.Context, p bench.Peer, r, i int) error {
			c := bench.CPUTime()
			d, err := bench.StdinBulk(ctx, p, size)
			rate.values[r][i], cpu.values[r][i] = mb/d.Seconds(), us(bench.CPUTime()-c)/mib
			return err
		}}
}

// The latency workloads, the sessions and the cold runs interleave the
// peers (see bench.Interleaved, bench.SessionsInterleaved and
// bench.ColdInterleaved).

func echoWorkload(n int) workload {
	p50 := &metric{name: "echo 1 byte through cat, p50", unit: "µs"}
	p99 := &metric{name: "echo 1 byte through cat, p99", unit: "µs"}
	cpu := &metric{name: "echo, CPU per round trip", unit: "µs"}
	return workload{name: "echo", metrics: []*metric{p50, p99, cpu},
		goals: []goal{{m: p50, peer: peerS, limit: 1}},
		all: func(ctx context.Context, peers []bench.Peer, r int) error {
			samples, cpus, err := bench.Interleaved(ctx, peers, n, interleave, []byte{'x'})
			if err != nil {
				return err
			}
			for i, s := range samples {
				cpu.values[r][i] = us(cpus[i]) / float64(n)
				slices.Sort(s)
				p50.values[r][i] = us(bench.Percentile(s, 0.5))
				p99.values[r][i] = us(bench.Percentile(s, 0.99))
			}
			return nil
		}}
}

func requestResponseWorkload(n int) workload {
	rate := &metric{name: "ACP request/response, 2 KiB lines", unit: "lines/s", higher: true}
	cpu := &metric{name: "ACP, CPU per line", unit: "µs"}
	return workload{name: "request/response", metrics: []*metric{rate, cpu},
		all: func(ctx context.Context, peers []bench.Peer, r int) error {
			line := append(bytes.Repeat([]byte{'a'}, bench.LineSize-1), '\n')
			samples, cpus, err := bench.Interleaved(ctx, peers, n, interleave, line)
			if err != nil {
				return err
			}
			for i, s := range samples {
				var total time.Duration
				for _, d := range s {
					total += d
				}
				rate.values[r][i], cpu.values[r][i] = float64(n)/total.Seconds(), us(cpus[i])/float64(n)
			}
			return nil
		}}
}

func sessionsWorkload(sessions, perSession int) workload {
	rts := &metric{name: fmt.Sprintf("%d sessions, 64-byte round trips", sessions), unit: "RT/s", higher: true}
	p99 := &metric{name: fmt.Sprintf("%d sessions, round trip p99", sessions), unit: "µs"}
	cpu := &metric{name: fmt.Sprintf("%d sessions, CPU per round trip", sessions), unit: "µs"}
	return workload{name: "sessions", metrics: []*metric{rts, p99, cpu},
		goals: []goal{{m: rts, peer: peerS, limit: 1}, {m: cpu, peer: peerS, limit: 1}},
		all: func(ctx context.Context, peers []bench.Peer, r int) error {
			res, err := bench.SessionsInterleaved(ctx, peers, sessions, perSession, sessionBlock)
			if err != nil {
				return err
			}
			for i, res := range res {
				rts.values[r][i] = res.RTPerSecond()
				p99.values[r][i] = us(res.P99)
				cpu.values[r][i] = us(res.CPUPerRT())
			}
			return nil
		}}
}

// coldWorkload is the time to first byte on a cold connection: n runs per
// peer, each a new connection that starts echo (bench.ColdFirstByte),
// the peers taking turns run by run; then n/4 runs of each peer back to
// back (bench.ColdBackToBack), which is what a client that starts one
// short command after another sees. Their CPU counts the processes they
// started (the child, and procwire's init), which only back-to-back runs
// can charge to their peer: a peer may reap its child after the close,
// in another peer's turn.
func coldWorkload(n int) workload {
	p50 := &metric{name: "cold first byte (dial, echo), p50", unit: "µs"}
	p99 := &metric{name: "cold first byte (dial, echo), p99", unit: "µs"}
	cpu := &metric{name: "cold run, CPU dial to close", unit: "µs"}
	b2bP50 := &metric{name: "cold runs back to back, first byte p50", unit: "µs"}
	b2bRate := &metric{name: "cold runs back to back, runs per second", unit: "runs/s", higher: true}
	b2bCPU := &metric{name: "cold runs back to back, CPU with the processes", unit: "µs"}
	return workload{name: "ttfb", metrics: []*metric{p50, p99, cpu, b2bP50, b2bRate, b2bCPU},
		goals: []goal{
			{m: p50, peer: peerS, limit: 0.25}, {m: p50, peer: peerW, limit: 200, diff: true},
			{m: p99, peer: peerS, limit: 0.25}, {m: p99, peer: peerW, limit: 200, diff: true},
		},
		all: func(ctx context.Context, peers []bench.Peer, r int) error {
			res, err := bench.ColdInterleaved(ctx, peers, n)
			if err != nil {
				return err
			}
			for i, c := range res {
				slices.Sort(c.Samples)
				p50.values[r][i] = us(bench.Percentile(c.Samples, 0.5))
				p99.values[r][i] = us(bench.Percentile(c.Samples, 0.99))
				cpu.values[r][i] = us(c.CPU) / float64(n)
			}
			m := max(1, n/4)
			if res, err = bench.ColdBackToBack(ctx, peers, m, r); err != nil {
				return err
			}
			for i, c := range res {
				slices.Sort(c.Samples)
				b2bP50.values[r][i] = us(bench.Percentile(c.Samples, 0.5))
				b2bRate.values[r][i] = float64(m) / c.Elapsed.Seconds()
				b2bCPU.values[r][i] = us(c.CPUAll) / float64(m)
			}
			return nil
		}}
}
