package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
)

// metric is one row of the table.
type metric struct {
	name, unit string
	higher     bool // a rate: higher is better
	// values[round][peer]
	values [][]float64
	// before[round] is P's figure in the baseline's run of the round, NaN
	// when the baseline has no such metric (or no baseline runs).
	before []float64
	// beforeW[round] is W's figure in the same run of the baseline: P/W
	// before and after compare P's with less of the machine's drift
	// between the two runs.
	beforeW []float64
}

// The peers' columns, in the order bench.NewPeers starts them.
const (
	peerP = iota
	peerW
	peerS
)

// addRound makes room for a round's figures.
func (m *metric) addRound(peers int) {
	m.values = append(m.values, make([]float64, peers))
	m.before = append(m.before, math.NaN())
	m.beforeW = append(m.beforeW, math.NaN())
}

// median returns the median of v, NaN values left out (NaN if none is
// left).
func median(v []float64) float64 {
	s := slices.DeleteFunc(slices.Clone(v), math.IsNaN)
	if len(s) == 0 {
		return math.NaN()
	}
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
		c[r] = v[peerP] / v[peer]
	}
	return c
}

// diffs returns P's value minus the peer's, per round.
func (m *metric) diffs(peer int) []float64 {
	c := make([]float64, len(m.values))
	for r, v := range m.values {
		c[r] = v[peerP] - v[peer]
	}
	return c
}

func format(v float64) string {
	switch {
	case math.IsNaN(v):
		return "—"
	case math.Abs(v) >= 1000:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 100:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

// printTable prints the medians and the per-round ratios. A baseline
// report binary's table is read back by parseTable: its rows keep the
// format "| name | unit | P | W | S | P/W | P/S |".
func printTable(w io.Writer, title string, ms []*metric) {
	fmt.Fprintf(w, "P = procwire, W = raw coder/websocket, S = x/crypto/ssh exec; %s\n\n", title)
	fmt.Fprintln(w, "| workload | unit | P | W | S | P/W | P/S |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
	for _, m := range ms {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %.2f | %.2f |\n", m.name, m.unit,
			format(median(m.column(peerP))), format(median(m.column(peerW))), format(median(m.column(peerS))),
			median(m.ratios(peerW)), median(m.ratios(peerS)))
	}
	fmt.Fprintln(w, "\nper-round ratios (P/W; P/S):")
	for _, m := range ms {
		var b strings.Builder
		for _, peer := range []int{peerW, peerS} {
			if peer == peerS {
				b.WriteString(";")
			}
			for _, r := range m.ratios(peer) {
				fmt.Fprintf(&b, " %.2f", r)
			}
		}
		fmt.Fprintf(w, "  %-45s%s\n", m.name, b.String())
	}
}

// goal is a bound issue 22 sets on one of P's figures: P/peer (or P −
// peer when diff) at most limit for a time, at least limit for a rate, in
// the median over the rounds and, when share is set, in at least that
// share of the rounds.
type goal struct {
	m     *metric
	peer  int
	limit float64
	diff  bool
	share float64
}

// met reports whether v meets the goal.
func (g goal) met(v float64) bool {
	if g.m.higher {
		return v >= g.limit
	}
	return v <= g.limit
}

// String says the goal, such as "P/S ≤ 0.25" or "P − W ≤ 200 µs".
func (g goal) String() string {
	peer, op := []string{"P", "W", "S"}[g.peer], "≤"
	if g.m.higher {
		op = "≥"
	}
	if g.diff {
		return fmt.Sprintf("P − %s %s %s %s", peer, op, format(g.limit), g.m.unit)
	}
	s := fmt.Sprintf("P/%s %s %s", peer, op, format(g.limit))
	if g.share > 0 {
		s += fmt.Sprintf(", in ≥ %.0f%% of the rounds", 100*g.share)
	}
	return s
}

// check returns the median of the per-round figures, how many rounds met
// the goal, and whether it is met.
func (g goal) check() (figure float64, rounds int, ok bool) {
	per := g.m.ratios(g.peer)
	if g.diff {
		per = g.m.diffs(g.peer)
	}
	for _, v := range per {
		if g.met(v) {
			rounds++
		}
	}
	figure = median(per)
	ok = g.met(figure) && float64(rounds) >= g.share*float64(len(per))
	return figure, rounds, ok
}

// printGoals prints, for every goal of ws, the figure and whether it is met.
func printGoals(w io.Writer, ws []workload) {
	var gs []goal
	for _, wl := range ws {
		gs = append(gs, wl.goals...)
	}
	if len(gs) == 0 {
		return
	}
	fmt.Fprintln(w, "\nissue 22's goals (median of the per-round figures; rounds that met the goal):")
	fmt.Fprintln(w, "| workload | goal | figure | rounds | met |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	for _, g := range gs {
		figure, rounds, ok := g.check()
		verdict := "no"
		if ok {
			verdict = "yes"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %d of %d | %s |\n", g.m.name, g, format(figure), rounds, len(g.m.values), verdict)
	}
}
