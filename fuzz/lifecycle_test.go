package fuzz

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/frames"
	"github.com/procwire/procwire/internal/testkit/fakeexec"
	"github.com/procwire/procwire/internal/testkit/servertest"
	"github.com/procwire/procwire/proc"
	"github.com/procwire/procwire/server"
)

// FuzzServerLifecycle drives one in-process server.Server through a
// sequence of connections, each input a small program (see life.step):
// opens with and without open_key (repeated keys, reused instances,
// compression offered or not, a child whose signals fail, one that greets
// before reading, a start that fails), resumes with fuzzed tokens and
// offsets, first-frame destroys by process_id+token and by
// instance_id+open_key (and malformed ones), races (the same open twice, an
// open and a destroy by its key, the first open held in Start, its
// connection cut meanwhile) and, inside sessions, stdin raw and
// s2-compressed (valid, corrupt, not negotiated), signals with fresh,
// repeated and old ids, right behind stdin or not, acks, stdin_close and
// destroys naming the process or not; cuts come between steps, right after
// a frame was sent, and inside a first frame or a stdin frame sent in
// fragments. The routing headers are right, absent or wrong.
//
// A model of every process (its instance, key, token, stdin, exit, signal
// answers) predicts each answer; what a cut leaves uncertain is settled
// from Stats once the server has finished with the cut connection, or by
// the next answer that shows it. After every step it checks that:
//   - every frame the server sends decodes, is canonical, is allowed in its
//     place and carries the bytes sent as stdin (stdout, and stderr, the tee);
//   - every connection ends with the close code its frames call for (an
//     answer then 1000, 1002, 1007, 4001 when taken over), within 123 bytes
//     of reason, or stays usable; never 1011;
//   - Stats lists exactly the live processes of the model, at most one per
//     instance, each attached as the model says; the executor runs as many
//     children; the memory budget holds exactly their windows;
//   - an open repeating a live process's instance and open_key answers
//     opened for the same process (id, token, evidence, windows,
//     encodings) and replays it, or process_already_open once a client
//     showed it had the token, and never starts a second process;
//   - after destroyed, Stats no longer lists the process; a resume of it
//     answers process_destroyed, a destroy destroyed again; an open with
//     its key, or with a key a destroy by key found nothing under, answers
//     process_destroyed and starts nothing;
//   - a signal is answered once per ask, with its id: delivered then its
//     exit, already_exited, or the signal_failed error with error.id, and a
//     repeated id gets the answer recorded for it; a delivered signal came
//     after every stdin byte sent before it was echoed;
//   - afterwards no connection, process, child or goroutine is left.
//
// Children are fakeexec's in-memory cats (no fork), so an execution is a few
// loopback round trips per step.
func FuzzServerLifecycle(f *testing.F) {
	e := newLifeEnv(f)
	for _, s := range lifeSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		newLife(t, e, in).exec()
	})
}

const (
	lifeInstances    = 3
	lifeKeys         = 3
	lifeMaxProcesses = 2
	lifeMaxSteps     = 32
	// lifeMaxTombstones exceeds the tombstones one input can make (one per
	// step, and one per process at the end), so the newest, this input's,
	// are all kept.
	lifeMaxTombstones = 2*lifeMaxSteps + 8
	lifeMaxStdin      = 640 // stdin per process: below every window, so nothing waits for credit or acks
	lifeMaxConns      = 5   // connections left open at once
	connHeader        = "X-Fuzz-Conn"
)

// lifeEnv is the server shared by the inputs of one worker.
type lifeEnv struct {
	srv    *server.Server
	url    string
	client *http.Client
	exec   *fakeexec.Executor
	gate   *lifeGate
	// admitted, when set, is closed by the next Admit: an open was read.
	admitted atomic.Pointer[chan struct{}]

	mu     sync.Mutex
	served map[string]chan struct{} // by connHeader: closed when its handler returned
	lb     *servertest.Loopback     // its Handlers: ServeHTTP calls in progress
	inputs uint64
}

func newLifeEnv(f *testing.F) *lifeEnv {
	e := &lifeEnv{gate: &lifeGate{}, served: map[string]chan struct{}{}}
	e.exec = newLifeExecutor(e.gate)
	srv, err := server.New(server.Config{
		Token:    fuzzToken,
		Executor: fakeExecutor{e.exec},
		Admit: func(context.Context, string) *frames.Error {
			if ch := e.admitted.Swap(nil); ch != nil {
				close(*ch)
			}
			return nil
		},
		StdoutWindow:    fuzzWindow,
		MaxStdoutWindow: fuzzMaxWindow,
		StdinWindow:     fuzzWindow,
		MaxStdinWindow:  fuzzMaxWindow,
		StderrRing:      fuzzStderrRing,
		MaxFrameData:    fuzzMaxData,
		Grace:           time.Minute, // never expires within an input
		Heartbeat:       -1,
		MaxTombstones:   lifeMaxTombstones,
		MaxProcesses:    lifeMaxProcesses,
	})
	require.NoError(f, err)
	e.srv = srv
	e.lb = servertest.Serve(srv, func(w http.ResponseWriter, r *http.Request, next http.Handler) {
		e.mu.Lock()
		done := e.served[r.Header.Get(connHeader)]
		delete(e.served, r.Header.Get(connHeader))
		e.mu.Unlock()
		if done != nil {
			defer close(done)
		}
		next.ServeHTTP(w, r)
	})
	e.url = e.lb.URL
	e.client = &http.Client{Transport: &http.Transport{}}
	f.Cleanup(func() {
		require.NoError(f, srv.Close())
		e.lb.HTTP.Close()
		e.client.CloseIdleConnections()
	})
	return e
}

// lifeGate holds an open while it starts: an executable named "slow…"
// waits in Start, once entered is told, until release is closed (or the
// open is cut off).
type lifeGate struct {
	mu      sync.Mutex
	entered chan struct{}
	release chan struct{}
}

// newLifeExecutor returns in-memory cats for the lifecycle harness: "slow…"
// starts held by g, "nosig" starts one whose Signal fails while it runs, as
// a signal the OS refuses (EPERM), and "greet" one that writes greeting
// before its stdin.
func newLifeExecutor(g *lifeGate) *fakeexec.Executor {
	e := &fakeexec.Executor{}
	e.BeforeStart = func(ctx context.Context, req *proc.Request, cfg proc.Config) error {
		checkWindows(e, cfg)
		name, ok := strings.CutPrefix(req.Executable, "slow")
		if !ok {
			return nil
		}
		g.mu.Lock()
		entered, release := g.entered, g.release
		g.mu.Unlock()
		if entered != nil {
			entered <- struct{}{}
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		req.Executable = name
		return nil
	}
	e.Setup = func(req proc.Request, p *fakeexec.Process) {
		switch req.Executable {
		case "nosig":
			p.SignalErr = func() error { return fmt.Errorf("kill: %w", syscall.EPERM) }
		case "greet":
			p.Write(greeting)
		}
	}
	return e
}

// greeting is what the executable "greet" writes to stdout first, before
// it copies its stdin: stdout a client may acknowledge before it sends
// anything.
var greeting = []byte("hello, procwire\n")
