//go:build linux

package rsstest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/procwire/procwire/client"
	"github.com/procwire/procwire/frames"
	"github.com/procwire/procwire/internal/size"
)

// budget is the --max-memory of every case.
const budget = 512 << 20

// overhead is what serve's RSS may take beyond its budget: the Go runtime,
// the connections' and processes' own state, and what the collector has
// not yet returned. serve tells the runtime budget+overhead as its soft
// memory limit (debug.SetMemoryLimit).
const overhead = 128 << 20

// testTimeout bounds every case's waits; it bounds hangs, it times nothing.
const testTimeout = 3 * time.Minute

var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "rsstest-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

var buildOnce = sync.OnceValues(func() (string, error) {
	bin := filepath.Join(binDir, "procwire")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/procwire/procwire/cmd/procwire").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build cmd/procwire: %w\n%s", err, out)
	}
	return bin, nil
})

// serveChild is a "procwire serve" child.
type serveChild struct {
	cgroup  *memCgroup // the child's own memory cgroup, or nil
	cmd     *exec.Cmd
	url     string
	metrics string
	log     strings.Builder
	logMu   sync.Mutex
	done    chan struct{}
}

// startServe starts "procwire serve --max-memory budget" with extra flags
// and waits until it listens; it is stopped when the test ends.
func startServe(t *testing.T, extra ...string) *serveChild {
	t.Helper()
	bin, err := buildOnce()
	require.NoError(t, err)
	args := append([]string{"serve", "--addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0",
		"--max-memory", size.Format(budget), "--heartbeat", "-1s"}, extra...)
	s := &serveChild{cmd: exec.Command(bin, args...), done: make(chan struct{})}
	// Killed with the test binary, should it die before its cleanup (a
	// test timeout): no server outlives the test.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	s.cmd.Env = append(os.Environ(), "GOMEMLIMIT=") // serve's own limit, not the test's
	stderr, err := s.cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, s.cmd.Start())
	s.cgroup = newMemCgroup(t, s.cmd.Process.Pid)
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			s.logMu.Lock()
			s.log.WriteString(line + "\n")
			s.logMu.Unlock()
		}
	}()
	go func() {
		<-scanned
		_ = s.cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(func() {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		<-s.done
		s.cgroup.remove(t)
		if t.Failed() {
			t.Logf("serve log:\n%s", s.logText())
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	for s.url == "" || s.metrics == "" {
		text := s.logText()
		for line := range strings.Lines(text) {
			if v, ok := logValue(line, "url"); ok && strings.Contains(line, "listening") {
				s.url = v
			}
			if v, ok := logValue(line, "addr"); ok && strings.Contains(line, "metrics listening") {
				s.metrics = v
			}
		}
		select {
		case <-s.done:
			t.Fatalf("serve exited:\n%s", text)
		case <-ctx.Done():
			t.Fatalf("serve did not listen:\n%s", text)
		case <-time.After(10 * time.Millisecond): // polling the log, with a deadline
		}
	}
	return s
}

func (s *serveChild) logText() string {
	s.logMu.Lock()
	defer s.logMu.Unlock()
	return s.log.String()
}

// logValue returns the value of key in a slog text line.
func logValue(line, key string) (string, bool) {
	_, after, ok := strings.Cut(line, " "+key+"=")
	if !ok {
		return "", false
	}
	v, _, _ := strings.Cut(strings.TrimSpace(after), " ")
	return v, true
}

// status returns a field of /proc/PID/status in bytes (VmHWM, VmRSS).
func (s *serveChild) status(t *testing.T, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	require.NoError(t, err)
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			f := strings.Fields(rest)
			require.Len(t, f, 2)
			require.Equal(t, "kB", f[1])
			kb, err := strconv.ParseInt(f[0], 10, 64)
			require.NoError(t, err)
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, s.cmd.Process.Pid)
	return 0
}

// metric returns the value of a gauge or counter line of /metrics that
// starts with name (labels included), or 0 if there is none.
func (s *serveChild) metric(t *testing.T, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + s.metrics + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, name+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			require.NoError(t, err)
			return v
		}
	}
	return 0
}

// waitMetric polls name until ok(value) or the test's timeout.
func (s *serveChild) waitMetric(t *testing.T, name string, ok func(float64) bool) float64 {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for {
		v := s.metric(t, name)
		if ok(v) {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s stayed at %v", name, v)
		}
		time.Sleep(20 * time.Millisecond) // polling a metric, with a deadline
	}
}

// report logs and checks the peak RSS of the case against the budget.
func (s *serveChild) report(t *testing.T, idle int64) {
	t.Helper()
	hwm := s.status(t, "VmHWM")
	t.Logf("RSS: idle %.0f MiB, peak %.0f MiB; budget %d MiB + overhead %d MiB = %d MiB (peak/budget %.2f)",
		mib(idle), mib(hwm), budget>>20, overhead>>20, (budget+overhead)>>20, float64(hwm)/budget)
	require.LessOrEqual(t, hwm, int64(budget+overhead), "peak RSS above the budget plus the stated overhead")
	if peak, ok := s.cgroup.peak(t); ok {
		// The cgroup holds the server and its children, and counts the
		// kernel's memory for them (page cache, socket buffers) too.
		t.Logf("cgroup %s: peak %.0f MiB", s.cgroup.file, mib(peak))
		require.LessOrEqual(t, peak, int64(budget+overhead), "the server's cgroup peak above the budget plus the stated overhead")
	} else {
		t.Logf("cgroup: none of its own (no writable memory controller)")
	}
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// dialRaw connects to the server with the subprocotol and nothing else.
func dialRaw(t *testing.T, s *serveChild) *websocket.Conn {
	t.Helper()
	ws, _, err := websocket.Dial(ctxT(t), s.url, &websocket.DialOptions{Subprotocols: []string{frames.Subprotocol}})
	require.NoError(t, err)
	ws.SetReadLimit(1 << 30)
	t.Cleanup(func() { ws.CloseNow() })
	return ws
}

func request(exe string, args ...string) frames.ProcessRequest {
	return frames.ProcessRequest{Executable: exe, Arguments: args, WorkingDirectory: "/",
		Environment: map[string]string{"PATH": "/usr/bin:/bin"}}
}

func skipShort(t *testing.T) {
	switch {
	case testing.Short():
		t.Skip("heavy: a few hundred MiB per case; .ci/run runs it")
	case raceEnabled:
		t.Skip("run once, without -race, by .ci/run")
	}
}

// TestRSSFirstFrames: four connections send a first frame of nearly 128 MiB
// (the line limit) at once, an object padded with whitespace and no type:
// each is refused 1007, type missing_field (the reproduction, which
// took RSS to 1.75× the budget).
func TestRSSFirstFrames(t *testing.T) {
	skipShort(t)
	s := startServe(t)
	idle := s.status(t, "VmRSS")
	body := `"instance_id":"big"}`
	msg := []byte("{" + strings.Repeat(" ", frames.MaxFirstLine-2-len(body)) + body)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			ws := dialRaw(t, s)
			_ = ws.Write(ctxT(t), websocket.MessageText, msg) // fails if the server closes first
			_, _, err := ws.Read(ctxT(t))
			var ce websocket.CloseError
			if !errors.As(err, &ce) {
				t.Errorf("connection %d: %v", i, err)
				return
			}
			if ce.Code != websocket.StatusInvalidFramePayloadData && ce.Code != websocket.StatusNormalClosure {
				t.Errorf("connection %d: close %d %q", i, ce.Code, ce.Reason)
			}
		})
	}
	wg.Wait()
	s.report(t, idle)
}

// TestRSSFirstFramesDecoded: four connections send at once an open whose
// 256 arguments of 64 KiB (the most a frame may carry) are written as
// \u0001 escapes, 96 MiB of line that decodes to 16 MiB of values; each is
// refused by the start (the arguments exceed the kernel's).
func TestRSSFirstFramesDecoded(t *testing.T) {
	skipShort(t)
	s := startServe(t)
	idle := s.status(t, "VmRSS")
	arg := strings.Repeat(`\u0001`, frames.MaxArgumentBytes)
	args := strings.TrimSuffix(strings.Repeat(`"`+arg+`",`, frames.MaxArguments), ",")
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			msg := fmt.Sprintf(`{"type":"open","instance_id":"dec-%d","request":{"executable":"true","arguments":[%s],"working_directory":"/","environment":{}}}`, i, args)
			ws := dialRaw(t, s)
			if err := ws.Write(ctxT(t), websocket.MessageText, []byte(msg)); err != nil {
				t.Errorf("connection %d: %v", i, err)
				return
			}
			_, b, err := ws.Read(ctxT(t))
			if err != nil {
				t.Errorf("connection %d: %v", i, err)
				return
			}
			var dec frames.Decoder
			f, err := dec.Decode(b)
			if err != nil {
				t.Errorf("connection %d: %v", i, err)
				return
			}
			if e, ok := f.(*frames.Error); !ok || e.Operation != "open_process" {
				t.Errorf("connection %d: %v", i, f)
			}
		})
	}
	wg.Wait()
	s.report(t, idle)
}

// TestRSSNeverReadingClients: processes writing without end at the
// largest stdout window (64 MiB), their clients never reading, as many as
// the budget takes (the next is refused): the server holds every window
// full.
func TestRSSNeverReadingClients(t *testing.T) {
	skipShort(t)
	s := startServe(t)
	idle := s.status(t, "VmRSS")
	const window = 64 << 20
	opened := 0
	for i := 0; ; i++ {
		ws := dialRaw(t, s)
		open := &frames.Open{InstanceID: fmt.Sprintf("never-%d", i), Request: request("cat", "/dev/zero"), StdoutWindow: window}
		require.NoError(t, ws.Write(ctxT(t), websocket.MessageText, frames.Append(nil, open)))
		_, b, err := ws.Read(ctxT(t))
		require.NoError(t, err)
		var dec frames.Decoder
		f, err := dec.Decode(b)
		require.NoError(t, err)
		if e, refused := f.(*frames.Error); refused {
			require.Equal(t, "resources", e.Requirement)
			break
		}
		require.IsType(t, &frames.Opened{}, f)
		opened++
	}
	require.Positive(t, opened)
	held := s.waitMetric(t, "procwire_stdout_held_bytes", func(v float64) bool { return v >= float64(opened*window) })
	t.Logf("%d processes hold %.0f MiB of stdout", opened, held/(1<<20))
	s.report(t, idle)
}

// TestRSSStderrFloods: processes flooding stderr into 32 MiB rings, as
// many as the budget takes, their clients reading until each has seen
// twice its ring go by.
func TestRSSStderrFloods(t *testing.T) {
	skipShort(t)
	const ring = 32 << 20
	s := startServe(t, "--stderr-ring", size.Format(ring))
	idle := s.status(t, "VmRSS")
	var procs []*client.Process
	for i := 0; ; i++ {
		p, err := client.Open(ctxT(t), s.url, fmt.Sprintf("flood-%d", i), request("sh", "-c", "cat /dev/zero >&2"), nil)
		var re *client.RemoteError
		if errors.As(err, &re) && re.Frame.Requirement == "resources" {
			break
		}
		require.NoError(t, err)
		procs = append(procs, p)
	}
	require.NotEmpty(t, procs)
	var wg sync.WaitGroup
	for _, p := range procs {
		wg.Go(func() {
			n, err := io.CopyN(io.Discard, p.Stderr(), 2*ring)
			if err != nil {
				t.Errorf("stderr after %d bytes: %v", n, err)
			}
		})
	}
	wg.Wait()
	t.Logf("%d processes flooded %d MiB of stderr each", len(procs), 2*ring>>20)
	for _, p := range procs {
		require.NoError(t, p.Destroy(ctxT(t)))
	}
	s.report(t, idle)
}

// TestRSSWindowChurn: four workers, each opening a process that fills the
// largest stdout window, reading it all, destroying it, and again.
func TestRSSWindowChurn(t *testing.T) {
	skipShort(t)
	s := startServe(t)
	idle := s.status(t, "VmRSS")
	const window = 64 << 20
	const rounds = 4
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for r := range rounds {
				p, err := client.Open(ctxT(t), s.url, fmt.Sprintf("churn-%d-%d", w, r),
					request("head", "-c", strconv.Itoa(2*window), "/dev/zero"), &client.Options{StdoutWindow: window})
				if err != nil {
					t.Errorf("worker %d round %d: %v", w, r, err)
					return
				}
				n, err := io.Copy(io.Discard, p.Stdout())
				if err != nil || n != 2*window {
					t.Errorf("worker %d round %d: %d bytes, %v", w, r, n, err)
				}
				if err := p.Destroy(ctxT(t)); err != nil {
					t.Errorf("worker %d round %d: destroy: %v", w, r, err)
				}
			}
		})
	}
	wg.Wait()
	t.Logf("4 workers × %d rounds of %d MiB through a %d MiB window", rounds, 2*window>>20, window>>20)
	s.report(t, idle)
}

// memCgroup is a memory cgroup of the child's own, cgroup v2 (memory.peak)
// or v1 (memory.max_usage_in_bytes), where one can be made.
type memCgroup struct {
	dir  string
	file string // the peak's file
}

// newMemCgroup moves pid into a new memory cgroup below the test's own, or
// returns nil where none can be made.
func newMemCgroup(t *testing.T, pid int) *memCgroup {
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil
	}
	var candidates []memCgroup
	for line := range strings.Lines(string(self)) {
		f := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(f) != 3 {
			continue
		}
		name := fmt.Sprintf("rsstest-%d", pid)
		switch {
		case f[0] == "0" && f[1] == "":
			candidates = append(candidates, memCgroup{filepath.Join("/sys/fs/cgroup", f[2], name), "memory.peak"})
		case f[1] == "memory":
			candidates = append(candidates, memCgroup{filepath.Join("/sys/fs/cgroup/memory", f[2], name), "memory.max_usage_in_bytes"})
		}
	}
	for _, c := range candidates {
		if os.Mkdir(c.dir, 0o755) != nil {
			continue
		}
		if _, err := os.Stat(filepath.Join(c.dir, c.file)); err != nil ||
			os.WriteFile(filepath.Join(c.dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644) != nil {
			_ = os.Remove(c.dir)
			continue
		}
		return &c
	}
	return nil
}

// peak returns the cgroup's peak memory.
func (c *memCgroup) peak(t *testing.T) (int64, bool) {
	if c == nil {
		return 0, false
	}
	b, err := os.ReadFile(filepath.Join(c.dir, c.file))
	require.NoError(t, err)
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	require.NoError(t, err)
	return n, true
}

// remove removes the cgroup once the child and its children are gone.
func (c *memCgroup) remove(t *testing.T) {
	if c == nil {
		return
	}
	if err := os.Remove(c.dir); err != nil {
		t.Errorf("remove cgroup %s: %v", c.dir, err)
	}
}
