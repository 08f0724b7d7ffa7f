package fuzz

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/frames"
	"github.com/procwire/procwire/internal/testkit/fakeexec"
	"github.com/procwire/procwire/internal/testkit/servertest"
	"github.com/procwire/procwire/server"
)

// FuzzServerSession drives a real server.Server, over loopback WebSockets,
// as a hostile peer. Each input is a small program (see run.hostile): the
// first frame of one connection, then up to maxActions actions on it — frames
// valid or not, fuzzed offsets and ids, mutated and raw lines, binary,
// fragmented and oversized messages, abrupt and clean closes. Beside it, a
// well-behaved session round-trips bytes before, during and after.
//
// Children are fakeexec's in-memory cats, so an execution costs a few
// loopback round trips and no fork. Whatever the input, it checks that:
//   - every frame the server sends is canonical, allowed in its place, and
//     carries exactly the bytes that were sent as stdin (stdout and the
//     stderr tee), within the stdout window and the stdin credit;
//   - the connection ends with a close code of PROTOCOL.md §7 (never 1011),
//     or is still usable, and then drains losslessly on it;
//   - a process left behind resumes (§4.3), and every stdin byte the server
//     counted comes back as stdout, exactly once, up to its EOF;
//   - Stats never shows more stdout held than a window, nor more processes
//     than opens; the well-behaved session is never disturbed;
//   - afterwards, no connection, process, child or goroutine is left.
//
// One server serves every input of a fuzz worker, so state leaking from one
// input to the next shows up too.
func FuzzServerSession(f *testing.F) {
	e := newFuzzEnv(f)
	for _, s := range serverSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		newRun(t, e, in).exec()
	})
}

// The fuzzed server's configuration: small windows so that a few hundred
// bytes reach every bound.
const (
	fuzzToken         = "fuzz-token"
	fuzzWindow        = 1024
	fuzzMaxWindow     = 4096
	fuzzMaxData       = 256
	fuzzStderrRing    = 64
	fuzzMaxTombstones = 8
	fuzzMaxProcesses  = 2
	maxActions        = 24
	// inputLimit bounds an input: past it, the server is stuck. The
	// fuzzing engine takes an input slower than 10 s for a hang, and
	// reports it without a word.
	inputLimit = 7 * time.Second
)

// Instances used by the harness. Admit refuses instDenied.
const (
	instGood    = "good"
	instPrep    = "prep"
	instHostile = "hostile"
	instDenied  = "denied"
)

// fuzzEnv is the server shared by the inputs of one worker.
type fuzzEnv struct {
	srv    *server.Server
	lb     *servertest.Loopback // its Handlers: ServeHTTP calls in progress
	url    string
	client *http.Client
	exec   *fakeexec.Executor
	inputs atomic.Uint64
}

func newFuzzEnv(f *testing.F) *fuzzEnv {
	e := &fuzzEnv{exec: newCatExecutor()}
	srv, err := server.New(server.Config{
		Token:    fuzzToken,
		Executor: fakeExecutor{e.exec},
		Admit: func(_ context.Context, inst string) *frames.Error {
			if inst == instDenied {
				return &frames.Error{Code: frames.InstanceNotFound, Operation: "open_process"}
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
		MaxTombstones:   fuzzMaxTombstones,
		MaxProcesses:    fuzzMaxProcesses,
	})
	require.NoError(f, err)
	e.srv = srv
	e.lb = servertest.Serve(srv, nil)
	e.url = e.lb.URL
	e.client = &http.Client{Transport: &http.Transport{}}
	f.Cleanup(func() {
		require.NoError(f, srv.Close())
		e.lb.HTTP.Close()
		e.client.CloseIdleConnections()
	})
	return e
}
