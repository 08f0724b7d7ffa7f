package proxytest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/client"
	"github.com/procwire/procwire/frames"
	"github.com/procwire/procwire/internal/testkit/cutproxy"
)

// rawOpen opens cat on instance inst through url with a bare WebSocket
// client, so that the test sees every frame and the close.
func rawOpen(t *testing.T, url, inst string) (*websocket.Conn, *frames.Opened) {
	t.Helper()
	ws, _, err := websocket.Dial(testCtx(t), url, &websocket.DialOptions{
		Subprotocols: []string{frames.Subprotocol},
		HTTPHeader: http.Header{"Authorization": {"Bearer " + token},
			frames.HeaderInstance: {inst}},
	})
	require.NoError(t, err)
	t.Cleanup(func() { ws.CloseNow() })
	open := &frames.Open{InstanceID: inst, Request: catRequest()}
	open.Request.Arguments = []string{}
	require.NoError(t, ws.Write(testCtx(t), websocket.MessageText, frames.Append(nil, open)))
	f := readFrame(t, ws)
	opened, ok := f.(*frames.Opened)
	require.True(t, ok, "answer to open: %v", f)
	return ws, opened
}

func readFrame(t *testing.T, ws *websocket.Conn) frames.Frame {
	t.Helper()
	_, b, err := ws.Read(testCtx(t))
	require.NoError(t, err)
	var dec frames.Decoder
	f, err := dec.Decode(b)
	require.NoError(t, err)
	return f
}

// healthz returns the status of the backend's /healthz.
func (b *backend) healthz(t *testing.T) int {
	t.Helper()
	resp, err := http.Get("http://" + b.metrics + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

// waitHealthz polls /healthz until it answers want; it returns how long
// that took.
func (b *backend) waitHealthz(t *testing.T, want int) time.Duration {
	t.Helper()
	start := time.Now()
	for b.healthz(t) != want {
		require.Less(t, time.Since(start), testTimeout, "/healthz never answered %d", want)
		time.Sleep(time.Millisecond) // polling, with a deadline
	}
	return time.Since(start)
}

// seqOutput is what "seq 1 n" writes.
func seqOutput(n int) []byte {
	var b bytes.Buffer
	for i := 1; i <= n; i++ {
		b.WriteString(strconv.Itoa(i))
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// TestNginxDrain: two backends behind nginx, routing by instance. The one
// holding a long seq and a cat is sent SIGTERM with --drain-timeout: its
// /healthz turns 503 at once, new opens land on the other backend (nginx
// tries it on the 503 before the upgrade), the seq streams on to its end
// byte-exact, and when the drain timeout passes the cat, still running,
// gets exit, destroyed and 1001, as from any shutdown.
func TestNginxDrain(t *testing.T) {
	const drainTimeout = 10 * time.Second // the seq needs well under a second; CI is slower
	a := startBackend(t, "--drain-timeout", drainTimeout.String())
	b := startBackend(t, "--drain-timeout", drainTimeout.String())
	ng := startNginx(t, time.Second, a, b)
	ctx := testCtx(t)
	url := wsURL(ng.addr)

	last, lastOpened := rawOpen(t, url, "drain-last")
	own, other := owner(t, a, b)
	// The seq goes through a proxy that cuts its connection mid-drain.
	cut, err := cutproxy.New(ng.addr)
	require.NoError(t, err)
	defer cut.Close()

	// A seq on the same backend: instances are tried until one hashes there.
	const n = 2_000_000
	want := seqOutput(n)
	var seq *client.Process
	for i := 0; seq == nil; i++ {
		require.Less(t, i, 100, "no instance hashed to the backend")
		p, err := client.Open(ctx, wsURL(cut.Addr()), fmt.Sprintf("drain-seq-%d", i), frames.ProcessRequest{
			Executable: "seq", Arguments: []string{"1", strconv.Itoa(n)}, WorkingDirectory: "/",
			Environment: map[string]string{"PATH": "/usr/bin:/bin"},
		}, &client.Options{Token: token})
		require.NoError(t, err)
		if own.scrape(t)["procwire_processes_opened_total"] == 2 {
			seq = p
		} else {
			require.NoError(t, p.Destroy(ctx))
		}
	}
	t.Cleanup(func() { _ = seq.Destroy(context.Background()) })
	head := make([]byte, 64<<10)
	_, err = seq.Stdout().Read(head[:1]) // the seq runs, its window full
	require.NoError(t, err)

	openedBefore := other.scrape(t)["procwire_processes_opened_total"]
	sigterm := time.Now()
	require.NoError(t, own.cmd.Process.Signal(syscall.SIGTERM))
	healthzAfter := own.waitHealthz(t, http.StatusServiceUnavailable)
	require.Equal(t, http.StatusOK, other.healthz(t))

	// New opens, on instances hashing to either backend, all land on the other.
	const opens = 20
	for i := range opens {
		p, err := client.Open(ctx, url, fmt.Sprintf("drain-new-%d", i), catRequest(), &client.Options{Token: token})
		require.NoError(t, err, "open %d", i)
		require.NoError(t, p.Destroy(ctx))
	}
	mo, mt := own.scrape(t), other.scrape(t)
	require.Equal(t, 2.0, mo["procwire_processes_opened_total"], "the draining backend started nothing")
	require.Equal(t, openedBefore+opens, mt["procwire_processes_opened_total"])
	turnedAway := sum(mo, `procwire_refusals_total{code="503",reason="server_draining"}`)
	require.Positive(t, turnedAway, "no new open hashed to the draining backend")

	// The seq's connection is cut: it resumes on the draining backend
	// (nginx did not mark it down for its 503s) and streams on to its end.
	require.Positive(t, cut.CutAll())
	var got bytes.Buffer
	got.Write(head[:1])
	_, err = got.ReadFrom(seq.Stdout())
	require.NoError(t, err)
	require.Equal(t, len(want), got.Len())
	require.Equal(t, sha256.Sum256(want), sha256.Sum256(got.Bytes()), "seq's output through the draining backend")
	exit, err := seq.Wait(ctx)
	require.NoError(t, err)
	require.Equal(t, 0, exit.Code)
	require.NoError(t, seq.Destroy(ctx))
	seqDone := time.Since(sigterm)
	resumes := own.scrape(t)["procwire_resumes_total"]
	require.GreaterOrEqual(t, resumes, 1.0, "the seq resumed on the draining backend")

	// The cat is still running; at the drain timeout it is destroyed.
	require.Equal(t, &frames.Exit{Signal: "SIGKILL"}, readFrame(t, last))
	destroyedAfter := time.Since(sigterm)
	require.Equal(t, &frames.Destroyed{ProcessID: lastOpened.ProcessID}, readFrame(t, last))
	_, _, err = last.Read(ctx)
	require.Equal(t, websocket.StatusGoingAway, websocket.CloseStatus(err), "%v", err)
	require.GreaterOrEqual(t, destroyedAfter, drainTimeout, "destroyed before the drain timeout")
	<-own.done
	require.NoError(t, own.exitErr)

	t.Logf("drain: /healthz 503 %v after SIGTERM; %d new opens all on the other backend (%.0f turned away by the draining one with 503 before the upgrade); "+
		"seq 1 %d (%d bytes) byte-exact through the draining backend (%.0f resume(s) after a cut), done %v after SIGTERM; "+
		"the last process got exit, destroyed and 1001 %v after SIGTERM (--drain-timeout %v)",
		healthzAfter.Round(time.Microsecond), opens, turnedAway, n, len(want), resumes, seqDone.Round(time.Millisecond),
		destroyedAfter.Round(time.Millisecond), drainTimeout)
}

// TestDrainSecondSignalMeansNow: a second SIGTERM during a drain destroys
// what is left at once (exit, destroyed, 1001), long before the timeout.
func TestDrainSecondSignalMeansNow(t *testing.T) {
	a := startBackend(t, "--drain-timeout", "1h")
	ws, opened := rawOpen(t, wsURL(a.addr), "drain-now")
	require.NoError(t, a.cmd.Process.Signal(syscall.SIGTERM))
	a.waitHealthz(t, http.StatusServiceUnavailable)
	start := time.Now()
	require.NoError(t, a.cmd.Process.Signal(syscall.SIGTERM))
	require.Equal(t, &frames.Exit{Signal: "SIGKILL"}, readFrame(t, ws))
	require.Equal(t, &frames.Destroyed{ProcessID: opened.ProcessID}, readFrame(t, ws))
	_, _, err := ws.Read(testCtx(t))
	require.Equal(t, websocket.StatusGoingAway, websocket.CloseStatus(err), "%v", err)
	<-a.done
	require.NoError(t, a.exitErr)
	t.Logf("second SIGTERM: destroyed and exited %v after it", time.Since(start).Round(time.Millisecond))
}
