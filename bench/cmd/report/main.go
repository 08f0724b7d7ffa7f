// Command report measures procwire side by side with a plain coder/websocket
// connection (W) and golang.org/x/crypto/ssh exec (S), in one process and
// one run, on loopback with real children: stdout bulk, stdin bulk, a 1-byte
// echo, ACP-shaped request/response lines and 200 concurrent sessions. It
// prints the medians over the rounds with the median per-round ratios P/W
// and P/S, each round's ratios, and writes an SVG bar chart.
//
//	go run ./bench/cmd/report -rounds 5 -svg bench/results.svg
//
// Ratios are P divided by the peer's figure whatever the unit, so above 1
// is better for a rate and worse for a time.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"html"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/procwire/procwire/bench"
)

// metric is one row of the table.
type metric struct {
	name, unit string
	higher     bool // a rate: higher is better
	// values[round][peer]
	values [][]float64
}

func main() {
	rounds := flag.Int("rounds", 3, "rounds; every workload runs once per peer per round")
	sizeMiB := flag.Int64("size", 256, "MiB moved by the stdout and stdin workloads")
	echoes := flag.Int("echo", 2000, "1-byte round trips per echo run")
	lines := flag.Int("lines", 2000, "2 KiB lines per request/response run")
	sessions := flag.Int("sessions", 200, "concurrent sessions")
	perSession := flag.Int("rt", 100, "64-byte round trips per session")
	svg := flag.String("svg", "bench/results.svg", "SVG chart to write (empty: none)")
	only := flag.String("only", "", "comma-separated workloads to run (stdout, stdin, echo, request/response, sessions); empty: all")
	flag.Parse()
	if _, err := bench.RaiseFDLimit(0); err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
	ms, err := run(*rounds, *sizeMiB<<20, *echoes, *lines, *sessions, *perSession, *only)
	if err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
	title := fmt.Sprintf("%d rounds, %d CPUs, %s; %d MiB bulk, %d echoes, %d lines, %d sessions × %d round trips",
		*rounds, runtime.NumCPU(), time.Now().UTC().Format("2006-01-02 15:04 MST"), *sizeMiB, *echoes, *lines, *sessions, *perSession)
	printTable(os.Stdout, title, ms)
	if *svg != "" {
		if err := os.WriteFile(*svg, []byte(chart(title, ms)), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "report:", err)
			os.Exit(1)
		}
	}
}

// workload runs once against one peer and records its figures into the
// metrics, at [round][peer].
type workload struct {
	name    string
	metrics []*metric // what it records
	run     func(ctx context.Context, p bench.Peer, round, peer int) error
	// all, instead of run, runs every peer at once, interleaved.
	all func(ctx context.Context, peers []bench.Peer, round int) error
}

func run(rounds int, size int64, echoes, lines, sessions, perSession int, only string) ([]*metric, error) {
	peers, err := bench.NewPeers()
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, p := range peers {
			_ = p.Close()
		}
	}()
	mb, mib := float64(size)/1e6, float64(size)/(1<<20)
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
	stdout := &metric{name: "stdout, head -c " + fmt.Sprint(size>>20) + "M /dev/zero", unit: "MB/s", higher: true}
	stdoutCPU := &metric{name: "stdout, CPU per MiB", unit: "µs"}
	stdin := &metric{name: "stdin, " + fmt.Sprint(size>>20) + " MiB into wc -c, 64 KiB writes", unit: "MB/s", higher: true}
	stdinCPU := &metric{name: "stdin, CPU per MiB", unit: "µs"}
	p50 := &metric{name: "echo 1 byte through cat, p50", unit: "µs"}
	p99 := &metric{name: "echo 1 byte through cat, p99", unit: "µs"}
	echoCPU := &metric{name: "echo, CPU per round trip", unit: "µs"}
	acp := &metric{name: "ACP request/response, 2 KiB lines", unit: "lines/s", higher: true}
	acpCPU := &metric{name: "ACP, CPU per line", unit: "µs"}
	rts := &metric{name: fmt.Sprintf("%d sessions, 64-byte round trips", sessions), unit: "RT/s", higher: true}
	rtp99 := &metric{name: fmt.Sprintf("%d sessions, round trip p99", sessions), unit: "µs"}
	cpu := &metric{name: fmt.Sprintf("%d sessions, CPU per round trip", sessions), unit: "µs"}
	ms := []*metric{stdout, stdoutCPU, stdin, stdinCPU, p50, p99, echoCPU, acp, acpCPU, rts, rtp99, cpu}
	workloads := []workload{
		{name: "stdout", metrics: []*metric{stdout, stdoutCPU}, run: func(ctx context.Context, p bench.Peer, r, i int) error {
			c := bench.CPUTime()
			d, err := bench.StdoutBulk(ctx, p, size)
			stdout.values[r][i], stdoutCPU.values[r][i] = mb/d.Seconds(), us(bench.CPUTime()-c)/mib
			return err
		}},
		{name: "stdin", metrics: []*metric{stdin, stdinCPU}, run: func(ctx context.Context, p bench.Peer, r, i int) error {
			c := bench.CPUTime()
			d, err := bench.StdinBulk(ctx, p, size)
			stdin.values[r][i], stdinCPU.values[r][i] = mb/d.Seconds(), us(bench.CPUTime()-c)/mib
			return err
		}},
		// The latency workloads and the sessions interleave the peers in
		// blocks (see bench.Interleaved and bench.SessionsInterleaved).
		{name: "echo", metrics: []*metric{p50, p99, echoCPU}, all: func(ctx context.Context, peers []bench.Peer, r int) error {
			samples, cpus, err := bench.Interleaved(ctx, peers, echoes, interleave, []byte{'x'})
			if err != nil {
				return err
			}
			for i, s := range samples {
				echoCPU.values[r][i] = us(cpus[i]) / float64(echoes)
				slices.Sort(s)
				p50.values[r][i] = us(bench.Percentile(s, 0.5))
				p99.values[r][i] = us(bench.Percentile(s, 0.99))
			}
			return nil
		}},
		{name: "request/response", metrics: []*metric{acp, acpCPU}, all: func(ctx context.Context, peers []bench.Peer, r int) error {
			line := append(bytes.Repeat([]byte{'a'}, bench.LineSize-1), '\n')
			samples, cpus, err := bench.Interleaved(ctx, peers, lines, interleave, line)
			if err != nil {
				return err
			}
			for i, s := range samples {
				var total time.Duration
				for _, d := range s {
					total += d
				}
				acp.values[r][i], acpCPU.values[r][i] = float64(lines)/total.Seconds(), us(cpus[i])/float64(lines)
			}
			return nil
		}},
		{name: "sessions", metrics: []*metric{rts, rtp99, cpu}, all: func(ctx context.Context, peers []bench.Peer, r int) error {
			res, err := bench.SessionsInterleaved(ctx, peers, sessions, perSession, sessionBlock)
			if err != nil {
				return err
			}
			for i, res := range res {
				rts.values[r][i] = res.RTPerSecond()
				rtp99.values[r][i] = us(res.P99)
				cpu.values[r][i] = us(res.CPUPerRT())
			}
			return nil
		}},
	}
	if only != "" {
		keep := strings.Split(only, ",")
		workloads = slices.DeleteFunc(workloads, func(w workload) bool { return !slices.Contains(keep, w.name) })
		if len(workloads) == 0 {
			return nil, fmt.Errorf("-only %q names no workload", only)
		}
		ms = nil
		for _, w := range workloads {
			ms = append(ms, w.metrics...)
		}
	}
	// Each bulk workload runs on the three peers back to back, in an order
	// that rotates every round, so that a round's ratios compare figures
	// taken under the same load; the latency workloads and the sessions
	// interleave the peers within the round.
	for r := range rounds {
		for _, m := range ms {
			m.values = append(m.values, make([]float64, len(peers)))
		}
		for _, w := range workloads {
			if w.all != nil {
				fmt.Fprintf(os.Stderr, "round %d/%d %-17s all peers, interleaved\n", r+1, rounds, w.name)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
				err := w.all(ctx, peers, r)
				cancel()
				if err != nil {
					return nil, err
				}
				continue
			}
			for k := range peers {
				i := (k + r) % len(peers)
				p := peers[i]
				fmt.Fprintf(os.Stderr, "round %d/%d %-17s %s\n", r+1, rounds, w.name, p.Name())
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
				err := w.run(ctx, p, r, i)
				cancel()
				if err != nil {
					return nil, err
				}
			}
		}
	}
	return ms, nil
}

// interleave is how many round trips a latency workload makes on one peer
// before the next takes its turn.
const interleave = 50

// sessionBlock is how many round trips every session of a peer makes in
// one turn of the sessions workload.
const sessionBlock = 20

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// column returns the peer's value in every round.
func (m *metric) column(peer int) []float64 {
	c := make([]float64, len(m.values))
	for r, v := range m.values {
		c[r] = v[peer]
	}
	return c
}

// ratios returns P's value over the peer's, per round.
func (m *metric) ratios(peer int) []float64 {
	c := make([]float64, len(m.values))
	for r, v := range m.values {
		c[r] = v[0] / v[peer]
	}
	return c
}

func format(v float64) string {
	switch {
	case v >= 1000:
		return fmt.Sprintf("%.0f", v)
	case v >= 100:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

func printTable(w io.Writer, title string, ms []*metric) {
	fmt.Fprintf(w, "P = procwire, W = raw coder/websocket, S = x/crypto/ssh exec; %s\n\n", title)
	fmt.Fprintln(w, "| workload | unit | P | W | S | P/W | P/S |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
	for _, m := range ms {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %.2f | %.2f |\n", m.name, m.unit,
			format(median(m.column(0))), format(median(m.column(1))), format(median(m.column(2))),
			median(m.ratios(1)), median(m.ratios(2)))
	}
	fmt.Fprintln(w, "\nper-round ratios (P/W; P/S):")
	for _, m := range ms {
		var b strings.Builder
		for _, peer := range []int{1, 2} {
			if peer == 2 {
				b.WriteString(";")
			}
			for _, r := range m.ratios(peer) {
				fmt.Fprintf(&b, " %.2f", r)
			}
		}
		fmt.Fprintf(w, "  %-45s%s\n", m.name, b.String())
	}
}

// chart draws, for each metric, the three peers' medians as horizontal
// bars relative to the raw WebSocket (W = 1), each labelled with its value.
func chart(title string, ms []*metric) string {
	const (
		left, barH, gap, groupGap = 300, 14, 2, 16
		width, scaleW             = 900, 480
	)
	colors := []string{"#2b6cb0", "#a0aec0", "#dd6b20"}
	names := []string{"procwire", "raw WebSocket", "SSH"}
	var maxRel float64
	for _, m := range ms {
		for p := range 3 {
			maxRel = max(maxRel, median(m.column(p))/median(m.column(1)))
		}
	}
	maxRel = min(maxRel, 3) // a longer bar is cut at the edge, its label still exact
	groupH := 3*(barH+gap) + groupGap
	height := 70 + len(ms)*groupH + 20
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="10" y="20" font-size="14" font-weight="bold">procwire vs raw WebSocket vs SSH (bar length relative to raw WebSocket)</text>`+"\n")
	fmt.Fprintf(&b, `<text x="10" y="38" font-size="11">%s</text>`+"\n", html.EscapeString(title))
	for p := range 3 {
		x := 10 + p*150
		fmt.Fprintf(&b, `<rect x="%d" y="48" width="12" height="12" fill="%s"/><text x="%d" y="58">%s</text>`+"\n", x, colors[p], x+16, names[p])
	}
	y := 70
	oneX := left + int(scaleW/maxRel)
	for _, m := range ms {
		dir := "lower is better"
		if m.higher {
			dir = "higher is better"
		}
		fmt.Fprintf(&b, `<text x="10" y="%d">%s</text>`+"\n", y+barH+2, html.EscapeString(m.name))
		fmt.Fprintf(&b, `<text x="10" y="%d" font-size="10" fill="#555">%s, %s</text>`+"\n", y+2*barH+6, html.EscapeString(m.unit), dir)
		w := median(m.column(1))
		for p := range 3 {
			v := median(m.column(p))
			bw := min(int(scaleW*(v/w)/maxRel), scaleW)
			fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="%s"/>`, left, y, bw, barH, colors[p])
			fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="11">%s</text>`+"\n", left+bw+4, y+barH-3, format(v))
			y += barH + gap
		}
		y += groupGap
	}
	fmt.Fprintf(&b, `<line x1="%d" y1="66" x2="%d" y2="%d" stroke="#333" stroke-dasharray="3,3"/>`+"\n", oneX, oneX, y)
	b.WriteString("</svg>\n")
	return b.String()
}
