package conform

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/procwire/procwire/frames"
)

// Config says which server to check and how.
type Config struct {
	// URL is the server's ws:// or wss:// endpoint.
	URL string
	// Token is the bearer token; empty sends none (the server then must
	// be loopback-only, and the 401 checks are skipped).
	Token string
	// Header holds extra HTTP headers sent on every upgrade.
	Header http.Header
	// HTTPClient dials the upgrades (for TLS settings); nil is
	// http.DefaultClient.
	HTTPClient *http.Client

	// Cases names the cases to run; empty runs every case. An unknown
	// name is an error of Run.
	Cases []string
	// Slow runs the cases that wait out the server's grace or heartbeat
	// even when those are long (see SlowThreshold); otherwise such a case
	// is a recorded skip.
	Slow bool
	// InstancePrefix starts every instance_id the run opens (default
	// "conform-" and 8 random hex digits). A server that admits only some
	// instances needs one it admits.
	InstancePrefix string
	// WorkingDirectory is the working directory of every process the run
	// opens (default "/").
	WorkingDirectory string
	// CaseTimeout bounds one case (default DefaultCaseTimeout).
	CaseTimeout time.Duration
	// AnswerTimeout bounds each wait for an answer the server owes at
	// once (default DefaultAnswerTimeout): see DefaultAnswerTimeout.
	AnswerTimeout time.Duration
	// Revision names the procwire build running the cases, for the
	// report (default: this module's version and VCS revision).
	Revision string
	// Progress, when set, is called with each result as its case ends.
	Progress func(Result)
}

// DefaultCaseTimeout bounds one case when Config.CaseTimeout is zero.
const DefaultCaseTimeout = 2 * time.Minute

// SlowThreshold is the longest grace_ms or heartbeat_ms a run waits out
// without Config.Slow.
const SlowThreshold = 5 * time.Second

// Outcome is how a case ended.
type Outcome string

// The outcomes of a case.
const (
	Pass Outcome = "pass"
	Fail Outcome = "fail"
	Skip Outcome = "skip"
)

// Result is the outcome of one case.
type Result struct {
	Name     string  `json:"name"`
	Proves   string  `json:"proves"`
	Outcome  Outcome `json:"outcome"`
	Detail   string  `json:"detail,omitempty"` // the first deviation (fail), the reason (skip), a note (pass)
	Duration time.Duration
}

// CaseInfo names a case and what it proves.
type CaseInfo struct {
	Name   string
	Proves string
}

// Cases lists every case in the order Run runs them.
func Cases() []CaseInfo {
	out := make([]CaseInfo, len(allCases))
	for i, c := range allCases {
		out[i] = CaseInfo{Name: c.name, Proves: c.proves}
	}
	return out
}

// caseDef is one conformance case.
type caseDef struct {
	name   string
	proves string
	// needs are commands the case runs on the target; a command the
	// target lacks makes the case a recorded skip.
	needs []string
	run   func(ctx context.Context, t *T)
}

// ErrUnknownCase is returned (wrapped) by Run for a Config.Cases name that
// is no case.
var ErrUnknownCase = errors.New("conform: unknown case")

// Run runs the cases against the server at cfg.URL and returns the report.
// It returns an error only for a bad Config or a cancelled ctx; every
// deviation of the server is a failed case in the report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "ws" && u.Scheme != "wss") || u.Host == "" {
		return nil, fmt.Errorf("conform: URL %q is not a ws:// or wss:// URL", cfg.URL)
	}
	if cfg.InstancePrefix == "" {
		var b [4]byte
		_, _ = rand.Read(b[:])
		cfg.InstancePrefix = "conform-" + hex.EncodeToString(b[:])
	}
	if !frames.ValidInstanceID(cfg.InstancePrefix + "-x") {
		return nil, fmt.Errorf("conform: instance prefix %q does not make valid instance ids", cfg.InstancePrefix)
	}
	if cfg.WorkingDirectory == "" {
		cfg.WorkingDirectory = "/"
	}
	if cfg.CaseTimeout <= 0 {
		cfg.CaseTimeout = DefaultCaseTimeout
	}
	if cfg.AnswerTimeout <= 0 {
		cfg.AnswerTimeout = DefaultAnswerTimeout
	}
	if cfg.Revision == "" {
		cfg.Revision = Revision()
	}
	cases := allCases
	if len(cfg.Cases) > 0 {
		cases = nil
		for _, name := range cfg.Cases {
			i := slices.IndexFunc(allCases, func(c caseDef) bool { return c.name == name })
			if i < 0 {
				return nil, fmt.Errorf("%w %q", ErrUnknownCase, name)
			}
			cases = append(cases, allCases[i])
		}
	}
	r := &runner{cfg: cfg, host: u.Host, scheme: u.Scheme}
	rep := &Report{
		Format:    ReportFormat,
		Target:    redact(u),
		Procwire:  cfg.Revision,
		GoVersion: runtime.Version(),
		StartedAt: frames.FormatTime(time.Now()),
	}
	for _, c := range cases {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		res := r.runCase(ctx, c)
		rep.Cases = append(rep.Cases, res)
		if cfg.Progress != nil {
			cfg.Progress(res)
		}
	}
	rep.FinishedAt = frames.FormatTime(time.Now())
	if r.probe != nil && r.probe.opened != nil {
		o := r.probe.opened
		ev := o.Evidence
		rep.WireRevision = ev.WireRevision
		rep.Evidence = &ev
		rep.Announced = &Announced{
			StdinLimit: o.StdinLimit, StdoutWindow: o.StdoutWindow, StderrWindow: o.StderrWindow,
			GraceMS: o.GraceMS, HeartbeatMS: o.HeartbeatMS, ExitWaitMS: o.ExitWaitMS, MaxData: o.MaxData,
		}
		rep.MissingCommands = r.probe.missing
	}
	for _, res := range rep.Cases {
		switch res.Outcome {
		case Pass:
			rep.Summary.Pass++
		case Fail:
			rep.Summary.Fail++
		case Skip:
			rep.Summary.Skip++
		}
	}
	return rep, ctx.Err()
}

// redact returns the URL without credentials or query.
func redact(u *url.URL) string {
	c := *u
	c.User = nil
	c.RawQuery = ""
	c.Fragment = ""
	return c.String()
}

// runner holds the state of one run.
type runner struct {
	cfg    Config
	host   string
	scheme string

	probeOnce sync.Once
	probe     *probeResult

	mu    sync.Mutex
	peers []*peer // connections of the running case, closed at its end
}

// track registers a connection to close when the case ends.
func (r *runner) track(p *peer) {
	r.mu.Lock()
	r.peers = append(r.peers, p)
	r.mu.Unlock()
}

// runCase runs one case in its own goroutine (T.Fatal ends it with
// runtime.Goexit, as testing.T does) and returns its result.
func (r *runner) runCase(ctx context.Context, c caseDef) Result {
	start := time.Now()
	t := &T{r: r, name: c.name, outcome: Pass}
	ctx, cancel := context.WithTimeout(ctx, r.cfg.CaseTimeout)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer t.cleanup()
		defer func() {
			if v := recover(); v != nil {
				t.outcome, t.detail = Fail, fmt.Sprintf("conform: internal error: %v", v)
			}
		}()
		if c.needs != nil {
			t.needCommands(ctx, c.needs...)
		}
		c.run(ctx, t)
	}()
	<-done
	if t.outcome == Fail && ctx.Err() != nil && !strings.Contains(t.detail, "deadline") && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.detail += fmt.Sprintf(" (the case ran out of its %v)", r.cfg.CaseTimeout)
	}
	return Result{Name: c.name, Proves: c.proves, Outcome: t.outcome, Detail: t.detail, Duration: time.Since(start)}
}

// T is the state of one running case.
type T struct {
	r       *runner
	name    string
	seq     int
	outcome Outcome
	detail  string
	notes   []string
	opened  []opened // processes to destroy at the end
	lacking string   // the executable an open found missing
}

// opened is a process a case started.
type opened struct {
	id, token string
}

// Fatalf records the first deviation and ends the case as failed.
func (t *T) Fatalf(format string, args ...any) {
	t.outcome, t.detail = Fail, fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// Skipf ends the case as a recorded skip with the reason.
func (t *T) Skipf(format string, args ...any) {
	t.outcome, t.detail = Skip, fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// Notef adds a note to a passing case's detail.
func (t *T) Notef(format string, args ...any) {
	t.notes = append(t.notes, fmt.Sprintf(format, args...))
	if t.outcome == Pass {
		t.detail = strings.Join(t.notes, "; ")
	}
}

// instance returns a fresh instance id for this case.
func (t *T) instance() string {
	t.seq++
	return fmt.Sprintf("%s-%s-%d", t.r.cfg.InstancePrefix, t.name, t.seq)
}

// cleanup closes the case's connections and destroys the processes it
// opened, best effort, so that a run leaves nothing behind on the target.
func (t *T) cleanup() {
	r := t.r
	r.mu.Lock()
	peers := r.peers
	r.peers = nil
	r.mu.Unlock()
	for _, p := range peers {
		p.cut()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, o := range t.opened {
		p, _, err := r.dial(ctx, dialOptions{})
		if err != nil {
			continue
		}
		if p.send(ctx, &frames.Destroy{ProcessID: o.id, Token: o.token}) == nil {
			for {
				if _, err := p.next(ctx); err != nil {
					break
				}
			}
		}
		p.cut()
	}
	r.mu.Lock()
	peers = r.peers
	r.peers = nil
	r.mu.Unlock()
	for _, p := range peers {
		p.cut()
	}
}
