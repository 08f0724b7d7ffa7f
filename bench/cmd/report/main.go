// Command report measures procwire side by side with a plain coder/websocket
// connection (W) and golang.org/x/crypto/ssh exec (S), in one process and
// one run, on loopback with real children: stdout bulk, stdin bulk, a 1-byte
// echo, ACP-shaped request/response lines, 200 concurrent sessions and the
// time to the first byte of a child on a cold connection. It prints the
// medians over the rounds with the median per-round ratios P/W and P/S,
// each round's ratios and the goals, and writes an SVG bar chart.
//
//	go run ./bench/cmd/report -rounds 5 -svg bench/results.svg
//
// Ratios are P divided by the peer's figure whatever the unit, so above 1
// is better for a rate and worse for a time.
//
// With -baseline, every round also runs one round of the same workloads
// in a report binary built from an older commit, the two taking turns
// (the order alternating every round), and the report ends with a
// before/after table of P (baseline.go):
//
//	git worktree add /tmp/old a78d922 && (cd /tmp/old && go build -o /tmp/report-old ./bench/cmd/report)
//	go run ./bench/cmd/report -rounds 5 -baseline /tmp/report-old
//
// -json writes the figures as JSON, which a later report reads when this
// binary is its baseline.
//
// P's children start under procwire's init, as procwire serve starts them
// (bridge.MaybeRunInit): this binary is re-executed as the init of each.
// -init=false starts them directly, as reports before the cold workload
// did (a78d922 among them): the bulk workloads time their child's start,
// so only then does a before/after against such a baseline compare their
// figures like with like.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/procwire/procwire/bench"
)

// config is the command line.
type config struct {
	rounds                                    int
	size                                      int64 // bytes moved by the bulk workloads
	echoes, lines, sessions, perSession, cold int
	only                                      string
	svg, json, baseline                       string
	init                                      bool
}

func main() {
	cfg := parseFlags()
	if cfg.init {
		// A re-executed init has argv [procwire-init] alone, so its flags
		// are the defaults: -init is true and it runs here.
		maybeRunInit()
	}
	if err := report(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
}

func parseFlags() config {
	var c config
	flag.IntVar(&c.rounds, "rounds", 3, "rounds; every workload runs once per peer per round")
	sizeMiB := flag.Int64("size", 256, "MiB moved by the stdout and stdin workloads")
	flag.IntVar(&c.echoes, "echo", 2000, "1-byte round trips per echo run")
	flag.IntVar(&c.lines, "lines", 2000, "2 KiB lines per request/response run")
	flag.IntVar(&c.sessions, "sessions", 200, "concurrent sessions")
	flag.IntVar(&c.perSession, "rt", 100, "64-byte round trips per session")
	flag.IntVar(&c.cold, "ttfb", 1000, "cold runs (dial, start echo, first byte) per peer per round")
	flag.StringVar(&c.svg, "svg", "bench/results.svg", "SVG chart to write (empty: none)")
	flag.StringVar(&c.json, "json", "", "JSON file to write the figures to (empty: none)")
	flag.StringVar(&c.baseline, "baseline", "", "a report binary from an older commit to run one round of the same workloads per round, for a before/after table")
	flag.BoolVar(&c.init, "init", true, "start procwire's children under its init, as procwire serve does (false: directly, as reports without this flag did)")
	flag.StringVar(&c.only, "only", "", "comma-separated workloads to run ("+workloadNames+"); empty: all")
	flag.Parse()
	c.size = *sizeMiB << 20
	return c
}

// report runs the workloads the configuration selects and writes the
// table, the goals, the before/after table and the files asked for.
func report(cfg config) error {
	if cfg.rounds < 1 || cfg.cold < 1 {
		return fmt.Errorf("-rounds and -ttfb must be at least 1")
	}
	if _, err := bench.RaiseFDLimit(0); err != nil {
		return err
	}
	ws, err := selectWorkloads(newWorkloads(cfg), cfg.only)
	if err != nil {
		return err
	}
	var base *baseline
	if cfg.baseline != "" {
		if base, err = newBaseline(cfg, ws); err != nil {
			return err
		}
	}
	ms, err := run(cfg, ws, base)
	if err != nil {
		return err
	}
	title := fmt.Sprintf("%d rounds, %d CPUs, %s; %d MiB bulk, %d echoes, %d lines, %d sessions × %d round trips, %d cold runs",
		cfg.rounds, runtime.NumCPU(), time.Now().UTC().Format("2006-01-02 15:04 MST"), cfg.size>>20,
		cfg.echoes, cfg.lines, cfg.sessions, cfg.perSession, cfg.cold)
	if !cfg.init {
		title += "; P's children started directly"
	}
	printTable(os.Stdout, title, ms)
	printGoals(os.Stdout, ws)
	if base != nil {
		printBeforeAfter(os.Stdout, base, ms)
	}
	return writeFiles(cfg, title, ms)
}

// run starts the peers and runs every round: the workloads in turn and,
// with a baseline, one round of its own, before them in odd rounds and
// after them in even ones.
func run(cfg config, ws []workload, base *baseline) ([]*metric, error) {
	peers, err := bench.NewPeers()
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, p := range peers {
			_ = p.Close()
		}
	}()
	ms := metricsOf(ws)
	for r := range cfg.rounds {
		for _, m := range ms {
			m.addRound(len(peers))
		}
		if base != nil && r%2 == 1 {
			base.round(r, cfg.rounds, ms)
		}
		for _, w := range ws {
			if err := w.runRound(peers, r, cfg.rounds); err != nil {
				return nil, err
			}
		}
		if base != nil && r%2 == 0 {
			base.round(r, cfg.rounds, ms)
		}
	}
	return ms, nil
}

// writeFiles writes the SVG chart and the JSON figures asked for.
func writeFiles(cfg config, title string, ms []*metric) error {
	if cfg.svg != "" {
		if err := os.WriteFile(cfg.svg, []byte(chart(title, ms)), 0o644); err != nil {
			return err
		}
	}
	if cfg.json != "" {
		b, err := marshalReport(title, ms)
		if err != nil {
			return err
		}
		if err := os.WriteFile(cfg.json, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// workloadTimeout bounds one workload's run on one peer, or on all peers
// for an interleaved one.
const workloadTimeout = 10 * time.Minute

// runRound runs w once in round r: on every peer at once when it
// interleaves them, else on each peer back to back, in an order that
// rotates every round, so that a round's ratios compare figures taken
// under the same load.
func (w workload) runRound(peers []bench.Peer, r, rounds int) error {
	if w.all != nil {
		fmt.Fprintf(os.Stderr, "round %d/%d %-17s all peers, interleaved\n", r+1, rounds, w.name)
		ctx, cancel := context.WithTimeout(context.Background(), workloadTimeout)
		defer cancel()
		return w.all(ctx, peers, r)
	}
	for k := range peers {
		i := (k + r) % len(peers)
		fmt.Fprintf(os.Stderr, "round %d/%d %-17s %s\n", r+1, rounds, w.name, peers[i].Name())
		ctx, cancel := context.WithTimeout(context.Background(), workloadTimeout)
		err := w.run(ctx, peers[i], r, i)
		cancel()
		if err != nil {
			return err
		}
	}
	return nil
}
