package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/procwire/procwire/client"
	"github.com/procwire/procwire/frames"
	"github.com/procwire/procwire/server"
)

// ServerEnv, when set in the environment of a program that calls
// MaybeServeScale, makes it a scale server: its value is the server's
// MaxProcesses.
const ServerEnv = "PROCWIRE_SCALE_SERVER"

// ServerStats is what a scale server reports about itself.
type ServerStats struct {
	RSS        int64 `json:"rss"`        // resident set size, bytes (VmRSS)
	HeapInUse  int64 `json:"heap_inuse"` // heap spans in use, bytes (objects + unused slots)
	HeapLive   int64 `json:"heap_live"`  // heap marked live by the last GC, bytes
	Threads    int   `json:"threads"`    // OS threads of the server process
	FDs        int   `json:"fds"`        // open file descriptors
	Goroutines int   `json:"goroutines"` // goroutines
}

// ScaleConfig describes one scale run.
type ScaleConfig struct {
	N        int           // concurrent processes (cat), one connection each
	Interval time.Duration // each process echoes a line this often
	Duration time.Duration // how long the echo phase lasts
	// URL and StatsURL name a running scale server (ws://…/ and
	// http://…/stats); StartScaleServer returns them.
	URL, StatsURL string
}

// ScaleResult is the outcome of one scale run.
type ScaleResult struct {
	N        int
	OpenAll  time.Duration // opening all N processes, concurrently
	Echoes   int           // round trips measured
	EchoP50  time.Duration
	EchoP99  time.Duration
	EchoMax  time.Duration
	Idle     ServerStats // the server before the first open
	Loaded   ServerStats // the server with N live processes, at the end of the echo phase
	Released ServerStats // the server after all N were destroyed
}

// String formats the result as one line per phase.
func (r ScaleResult) String() string {
	mib := func(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
	st := func(s ServerStats) string {
		return fmt.Sprintf("rss %s, heap in use %s (live %s), threads %d, fds %d, goroutines %d",
			mib(s.RSS), mib(s.HeapInUse), mib(s.HeapLive), s.Threads, s.FDs, s.Goroutines)
	}
	return fmt.Sprintf("N=%d: open all %v; %d echoes p50 %v p99 %v max %v\n  idle:     %s\n  loaded:   %s\n  released: %s",
		r.N, r.OpenAll.Round(time.Millisecond), r.Echoes, r.EchoP50.Round(time.Microsecond),
		r.EchoP99.Round(time.Microsecond), r.EchoMax.Round(time.Microsecond), st(r.Idle), st(r.Loaded), st(r.Released))
}

// ScaleFDs is about how many fds a scale run of n processes needs, in the
// server and in the process running the clients alike: a process costs the
// server about five (its socket, three pipes and a pidfd) and the clients
// one.
func ScaleFDs(n int) uint64 { return uint64(5*n + 100) }

// MaybeServeScale runs a scale server and exits if ServerEnv is set, and
// returns at once otherwise. Call it first in main or TestMain, so that
// StartScaleServer can run the same binary as the server.
func MaybeServeScale() {
	v, ok := os.LookupEnv(ServerEnv)
	if !ok {
		return
	}
	maxProcs, err := strconv.Atoi(v)
	if err == nil {
		err = serveScale(maxProcs, os.Stdin, os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "scale server:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// serveScale serves procwire on a loopback port, and its own ServerStats as
// JSON under /stats, until stdin ends; it first prints "URL STATSURL\n".
func serveScale(maxProcs int, stdin io.Reader, stdout io.Writer) error {
	need := ScaleFDs(maxProcs)
	if limit, err := RaiseFDLimit(need); limit < need {
		return fmt.Errorf("RLIMIT_NOFILE is %d, %d processes need about %d: %w", limit, maxProcs, need, err)
	}
	// MaxMemory promises every process its default windows, as a server
	// sized for maxProcs would; what the buffers take is far less, and
	// that is what the run measures.
	perProcess := int64(server.DefaultStdoutWindow + server.DefaultStdinWindow + server.DefaultStderrRing)
	srv, err := server.New(server.Config{MaxProcesses: maxProcs, MaxMemory: int64(maxProcs) * perProcess,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/stats", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("gc") != "" {
			runtime.GC()
		}
		st, err := selfStats()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		_ = json.NewEncoder(w).Encode(st)
	})
	mux.Handle("/", srv)
	hs := &http.Server{Handler: mux}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	fmt.Fprintf(stdout, "ws://%s/ http://%s/stats\n", ln.Addr(), ln.Addr())
	_, _ = io.Copy(io.Discard, stdin)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = srv.Shutdown(ctx)
	_ = hs.Shutdown(ctx)
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// selfStats measures this process.
func selfStats() (ServerStats, error) {
	var st ServerStats
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return st, err
	}
	for line := range strings.Lines(string(status)) {
		k, v, _ := strings.Cut(line, ":")
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		n, _ := strconv.ParseInt(f[0], 10, 64)
		switch k {
		case "VmRSS":
			st.RSS = n << 10
		case "Threads":
			st.Threads = int(n)
		}
	}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return st, err
	}
	st.FDs = len(fds)
	samples := []metrics.Sample{
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/heap/unused:bytes"},
		{Name: "/gc/heap/live:bytes"},
		{Name: "/sched/goroutines:goroutines"},
	}
	metrics.Read(samples)
	st.HeapInUse = int64(samples[0].Value.Uint64() + samples[1].Value.Uint64())
	st.HeapLive = int64(samples[2].Value.Uint64())
	st.Goroutines = int(samples[3].Value.Uint64())
	return st, nil
}

// ScaleServer is a scale server running as a child process.
type ScaleServer struct {
	URL, StatsURL string
	cmd           *exec.Cmd
	stdin         io.WriteCloser
}

// StartScaleServer runs this binary again as a scale server (see
// MaybeServeScale) holding up to maxProcs processes. Close stops it.
func StartScaleServer(maxProcs int) (*ScaleServer, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, "-test.run=^$")
	cmd.Env = append(os.Environ(), ServerEnv+"="+strconv.Itoa(maxProcs))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &ScaleServer{cmd: cmd, stdin: stdin}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if f := strings.Fields(line); err == nil && len(f) == 2 {
		s.URL, s.StatsURL = f[0], f[1]
		return s, nil
	}
	_ = s.Close()
	return nil, fmt.Errorf("scale server did not start: %q: %w", line, err)
}

// Close shuts the server down (destroying its processes) and waits for it.
func (s *ScaleServer) Close() error {
	_ = s.stdin.Close()
	return s.cmd.Wait()
}

// Stats fetches the server's ServerStats; gc asks it to collect first.
func Stats(ctx context.Context, statsURL string, gc bool) (ServerStats, error) {
	var st ServerStats
	if gc {
		statsURL += "?gc=1"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, statsURL, nil)
	if err != nil {
		return st, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("stats: %s", resp.Status)
	}
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// openers bounds the opens in flight at once, as a real fleet of clients
// does not all dial in the same microsecond.
const openers = 64

// RunScale opens cfg.N cat processes on the server, has each echo a line
// every cfg.Interval for cfg.Duration, measures the round trips and the
// server, then destroys them all.
func RunScale(ctx context.Context, cfg ScaleConfig) (res ScaleResult, err error) {
	res.N = cfg.N
	if res.Idle, err = Stats(ctx, cfg.StatsURL, true); err != nil {
		return res, err
	}
	procs := make([]*client.Process, cfg.N)
	defer func() {
		var wg sync.WaitGroup
		sem := make(chan struct{}, openers)
		errs := make([]error, len(procs))
		for i, p := range procs {
			if p == nil {
				continue
			}
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				if derr := p.Destroy(dctx); derr != nil {
					errs[i] = fmt.Errorf("destroy: %w", derr)
				}
			})
		}
		wg.Wait()
		if err == nil {
			err = errors.Join(errs...)
		}
		if err == nil {
			res.Released, err = Stats(ctx, cfg.StatsURL, true)
		}
	}()

	req := frames.ProcessRequest{
		Executable:       "cat",
		WorkingDirectory: os.TempDir(),
		Environment:      map[string]string{"PATH": "/usr/local/bin:/usr/bin:/bin"},
	}
	run := fmt.Sprintf("%x", rand.Uint64())
	var (
		mu      sync.Mutex
		openErr error
		wg      sync.WaitGroup
		sem     = make(chan struct{}, openers)
	)
	start := time.Now()
	for i := range procs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			p, err := client.Open(ctx, cfg.URL, fmt.Sprintf("scale-%s-%d", run, i), req, nil)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				openErr = cmp(openErr, fmt.Errorf("open %d: %w", i, err))
				return
			}
			procs[i] = p
		})
	}
	wg.Wait()
	res.OpenAll = time.Since(start)
	if openErr != nil {
		return res, openErr
	}

	echoCtx, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()
	samples := make([][]time.Duration, cfg.N)
	errs := make([]error, cfg.N)
	for i, p := range procs {
		wg.Go(func() { samples[i], errs[i] = echo(echoCtx, p, cfg.Interval) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return res, err
	}
	if res.Loaded, err = Stats(ctx, cfg.StatsURL, true); err != nil {
		return res, err
	}
	all := slices.Concat(samples...)
	if len(all) == 0 {
		return res, errors.New("no echo completed")
	}
	slices.Sort(all)
	res.Echoes = len(all)
	res.EchoP50 = all[len(all)/2]
	res.EchoP99 = all[len(all)*99/100]
	res.EchoMax = all[len(all)-1]
	return res, nil
}

func cmp(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// echo writes a line to p's cat every interval (the first after a random
// part of it, so that the fleet does not tick in step) until ctx ends, and
// returns the round trip of each.
func echo(ctx context.Context, p *client.Process, interval time.Duration) ([]time.Duration, error) {
	line := []byte("procwire scale echo line\n")
	got := make([]byte, len(line))
	var samples []time.Duration
	t := time.NewTimer(rand.N(interval))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return samples, nil
		case <-t.C:
		}
		t.Reset(interval)
		start := time.Now()
		if _, err := p.Stdin().Write(line); err != nil {
			return samples, fmt.Errorf("echo write: %w", err)
		}
		if _, err := io.ReadFull(p.Stdout(), got); err != nil {
			return samples, fmt.Errorf("echo read: %w", err)
		}
		samples = append(samples, time.Since(start))
	}
}
