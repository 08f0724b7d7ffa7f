package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// A baseline is a report binary built from an older commit: the "before"
// of a before/after comparison. Each round, it runs one round of the
// workloads both binaries have (-rounds 1 -only ...), with the same
// sizes, and its P figures become the round's "before". Older binaries
// only print their table, which parseTable reads; one with -json writes
// its figures to a file, which is read instead.

// baseline is the older report binary and what it can do.
type baseline struct {
	path   string
	args   []string // its flags but -json
	json   bool     // it has -json
	failed int      // rounds in which it failed
}

// round runs the baseline for round r (runRound). A failure leaves the
// round without a "before", said on stderr and counted, so that one
// failed round of the older binary does not lose the run.
func (b *baseline) round(r, rounds int, ms []*metric) {
	if err := b.runRound(r, rounds, ms); err != nil {
		b.failed++
		fmt.Fprintf(os.Stderr, "round %d/%d baseline failed, the round has no before: %v\n", r+1, rounds, err)
	}
}

// oldWorkloads are the workloads of a report binary whose usage does not
// list them: those before the cold runs.
var oldWorkloads = []string{"stdout", "stdin", "echo", "request/response", "sessions"}

// newBaseline reads the usage of the binary at cfg.baseline and prepares
// its command line for the workloads of ws it has.
func newBaseline(cfg config, ws []workload) (*baseline, error) {
	out, err := exec.Command(cfg.baseline, "-h").CombinedOutput()
	if len(out) == 0 && err != nil {
		return nil, fmt.Errorf("baseline %s: %w", cfg.baseline, err)
	}
	usage := string(out)
	has := func(name string) bool { return hasFlag(usage, name) }
	known := baselineWorkloads(usage)
	var only []string
	for _, w := range ws {
		if slices.Contains(known, w.name) {
			only = append(only, w.name)
		}
	}
	if len(only) == 0 {
		return nil, fmt.Errorf("baseline %s has none of the workloads to run", cfg.baseline)
	}
	args := []string{"-rounds", "1", "-only", strings.Join(only, ","), "-svg=",
		"-size", strconv.FormatInt(cfg.size>>20, 10), "-echo", strconv.Itoa(cfg.echoes),
		"-lines", strconv.Itoa(cfg.lines), "-sessions", strconv.Itoa(cfg.sessions), "-rt", strconv.Itoa(cfg.perSession)}
	if has("ttfb") {
		args = append(args, "-ttfb", strconv.Itoa(cfg.cold))
	}
	if has("init") {
		args = append(args, "-init="+strconv.FormatBool(cfg.init))
	}
	return &baseline{path: cfg.baseline, args: args, json: has("json")}, nil
}

// hasFlag reports whether a flag package usage text lists -name.
func hasFlag(usage, name string) bool {
	return regexp.MustCompile(`(?m)^  -` + regexp.QuoteMeta(name) + `\b`).MatchString(usage)
}

// onlyList finds the list of workloads in the usage of -only.
var onlyList = regexp.MustCompile(`workloads to run \(([^)]*)\)`)

// baselineWorkloads returns the workloads a report binary's usage lists
// for -only, or oldWorkloads when it lists none.
func baselineWorkloads(usage string) []string {
	m := onlyList.FindStringSubmatch(usage)
	if m == nil {
		return oldWorkloads
	}
	names := strings.Split(m[1], ",")
	for i, n := range names {
		names[i] = strings.TrimSpace(n)
	}
	return names
}

// runRound runs the baseline for one round and records its P figures as
// round r's "before" of the metrics of the same name.
func (b *baseline) runRound(r, rounds int, ms []*metric) error {
	fmt.Fprintf(os.Stderr, "round %d/%d baseline          %s %s\n", r+1, rounds, b.path, strings.Join(b.args, " "))
	args := slices.Clone(b.args)
	var jsonFile string
	if b.json {
		f, err := os.CreateTemp("", "report-baseline-*.json")
		if err != nil {
			return err
		}
		jsonFile = f.Name()
		f.Close()
		defer os.Remove(jsonFile)
		args = append(args, "-json", jsonFile)
	}
	var out bytes.Buffer
	cmd := exec.Command(b.path, args...)
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("baseline %s: %w", b.path, err)
	}
	var figures map[string]peerFigures
	var err error
	if b.json {
		figures, err = readJSONFigures(jsonFile)
	} else {
		figures, err = parseTable(&out)
	}
	if err != nil {
		return fmt.Errorf("baseline %s: %w", b.path, err)
	}
	for _, m := range ms {
		if f, ok := figures[m.name]; ok {
			m.before[r], m.beforeW[r] = f[peerP], f[peerW]
		}
	}
	return nil
}

// peerFigures are one metric's P, W and S.
type peerFigures [3]float64

// parseTable reads the figures of the table printTable printed: the rows
// "| name | unit | P | W | S | P/W | P/S |" (the header and the rule
// aside), by name.
func parseTable(r io.Reader) (map[string]peerFigures, error) {
	text, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	figures := map[string]peerFigures{}
	for line := range strings.Lines(string(text)) {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "| ") || strings.HasPrefix(line, "| workload |") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) != 7 {
			return nil, fmt.Errorf("table row %q: %d cells, want 7", line, len(cells))
		}
		var f peerFigures
		for p := range f {
			if f[p], err = strconv.ParseFloat(strings.TrimSpace(cells[2+p]), 64); err != nil {
				return nil, fmt.Errorf("table row %q: %w", line, err)
			}
		}
		figures[strings.TrimSpace(cells[0])] = f
	}
	if len(figures) == 0 {
		return nil, fmt.Errorf("no table in its output")
	}
	return figures, nil
}

// jsonReport is what -json writes.
type jsonReport struct {
	Title   string       `json:"title"`
	Peers   []string     `json:"peers"` // the columns of values and median
	Metrics []jsonMetric `json:"metrics"`
}

type jsonMetric struct {
	Name   string      `json:"name"`
	Unit   string      `json:"unit"`
	Higher bool        `json:"higher"`           // a rate: higher is better
	Median []float64   `json:"median"`           // per peer, over the rounds
	Values [][]float64 `json:"values"`           // [round][peer]
	Before []*float64  `json:"before,omitempty"` // per round, P in the baseline's run; null: none
	// BeforeW is per round W in the baseline's run; null: none.
	BeforeW []*float64 `json:"before_w,omitempty"`
}

// marshalReport returns the figures of ms as JSON.
func marshalReport(title string, ms []*metric) ([]byte, error) {
	rep := jsonReport{Title: title, Peers: []string{"procwire", "raw-websocket", "ssh"}}
	for _, m := range ms {
		jm := jsonMetric{Name: m.name, Unit: m.unit, Higher: m.higher, Values: m.values}
		for p := range rep.Peers {
			jm.Median = append(jm.Median, median(m.column(p)))
		}
		if !math.IsNaN(median(m.before)) {
			jm.Before, jm.BeforeW = nullable(m.before), nullable(m.beforeW)
		}
		rep.Metrics = append(rep.Metrics, jm)
	}
	return json.MarshalIndent(rep, "", "  ")
}

// nullable returns v with NaN as nil, which JSON writes as null.
func nullable(v []float64) []*float64 {
	out := make([]*float64, len(v))
	for i, x := range v {
		if !math.IsNaN(x) {
			out[i] = &x
		}
	}
	return out
}

// readJSONFigures reads the medians of a file -json wrote, by name.
func readJSONFigures(path string) (map[string]peerFigures, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rep jsonReport
	if err := json.Unmarshal(b, &rep); err != nil {
		return nil, err
	}
	figures := map[string]peerFigures{}
	for _, m := range rep.Metrics {
		if len(m.Median) != 3 {
			return nil, fmt.Errorf("metric %q: %d medians, want 3", m.Name, len(m.Median))
		}
		figures[m.Name] = peerFigures(m.Median)
	}
	return figures, nil
}

// printBeforeAfter prints, for every metric the baseline measured, P's
// median before and after, the median of the per-round after/before
// ratios with their range, the same of P/W (each run's P over its own
// W), and each series' spread over the rounds: (max − min) / median. A
// change is "worse" when the ratio is worse than 1 by more than the
// larger of the two spreads.
func printBeforeAfter(w io.Writer, b *baseline, ms []*metric) {
	fmt.Fprintf(w, "\nbefore = P in %s (one round of it per round), after = P in this binary; the two alternate in every round\n", b.path)
	if b.failed > 0 {
		fmt.Fprintf(w, "(the baseline failed in %d rounds, which have no before)\n", b.failed)
	}
	fmt.Fprintln(w, "| workload | unit | before | after | after/before | per round | P/W after/before | spread before | spread after | worse |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|")
	for _, m := range ms {
		if math.IsNaN(median(m.before)) {
			continue
		}
		after := m.column(peerP)
		per, perW := make([]float64, len(after)), make([]float64, len(after))
		for r := range after {
			per[r] = after[r] / m.before[r]
			perW[r] = per[r] / (m.values[r][peerW] / m.beforeW[r])
		}
		ratio := median(per)
		sb, sa := spread(m.before), spread(after)
		worse := ratio-1 > max(sb, sa)
		if m.higher {
			worse = 1-ratio > max(sb, sa)
		}
		verdict := ""
		if worse {
			verdict = "worse"
		}
		lo, hi := minMax(per)
		fmt.Fprintf(w, "| %s | %s | %s | %s | %.2f | %.2f–%.2f | %.2f | %.0f%% | %.0f%% | %s |\n", m.name, m.unit,
			format(median(m.before)), format(median(after)), ratio, lo, hi, median(perW), 100*sb, 100*sa, verdict)
	}
}

// spread returns (max − min) / median of v, NaN values left out.
func spread(v []float64) float64 {
	lo, hi := minMax(v)
	return (hi - lo) / median(v)
}

// minMax returns the least and the greatest of v, NaN values left out.
func minMax(v []float64) (lo, hi float64) {
	s := slices.DeleteFunc(slices.Clone(v), math.IsNaN)
	if len(s) == 0 {
		return math.NaN(), math.NaN()
	}
	return slices.Min(s), slices.Max(s)
}
