//go:build linux

package client_test

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/client"
	"github.com/procwire/procwire/frames"
	"github.com/procwire/procwire/server"
)

// The connection is cut 20 times at seeded random points of a 64 MiB
// stream through cat: the caller sees one unbroken stream and one exit.
func TestCutsDuringStream(t *testing.T) {
	e := newEnv(t, server.Config{})
	c := ctx(t)
	const n, cuts = 64 << 20, 20
	rng := rand.New(rand.NewPCG(20, 26))
	// About 2 × 4/3 × n bytes cross the proxy (base64, both directions).
	points := make([]int64, cuts)
	for i := range points {
		points[i] = 1 + rng.Int64N(2*n)
	}
	slices.Sort(points)
	p := open(t, e.purl, req("cat"), nil)
	e.proxy.CutAt(points...)
	sent, got, count := streamThrough(t, c, p, n, 7)
	require.Equal(t, int64(n), count)
	require.Equal(t, sent, got, "sha256")
	st, err := p.Wait(c)
	require.NoError(t, err)
	require.Equal(t, client.ExitStatus{}, st)
	require.Equal(t, cuts, e.proxy.Cuts())
	// Every cut but maybe one at the very end was followed by a resume.
	require.GreaterOrEqual(t, e.proxy.Accepted(), cuts)
	require.NoError(t, p.Destroy(c))
}

// A cut while the process sits idle, then while stdout waits unread, then
// while a signal is answered: every call carries on.
func TestCutsAtRest(t *testing.T) {
	e := newEnv(t, server.Config{})
	c := ctx(t)
	p := open(t, e.purl, sh(`echo ready; while read l; do echo "got $l"; echo "err $l" >&2; done; exit 4`), nil)
	require.Equal(t, "ready\n", readLine(t, c, p.Stdout()))
	for i := range 3 {
		require.Equal(t, 1, e.proxy.CutAll())
		_, err := p.Stdin().WriteContext(c, []byte("x\n"))
		require.NoError(t, err)
		require.Equal(t, "got x\n", readLine(t, c, p.Stdout()))
		require.Equal(t, "err x\n", readLine(t, c, p.Stderr()))
		require.Equal(t, i+2, e.proxy.Accepted())
	}
	require.NoError(t, p.Stdin().Close())
	require.Equal(t, "", readAll(t, c, p.Stdout()))
	e.proxy.CutAll()
	st, err := p.Wait(c)
	require.NoError(t, err)
	require.Equal(t, client.ExitStatus{Code: 4}, st)
	require.NoError(t, p.Destroy(c))
}

// A peer that stops answering is found dead by the heartbeat, without any
// cut, and the process is resumed once it answers again.
func TestHeartbeatFindsDeadPeer(t *testing.T) {
	e := newEnv(t, server.Config{Heartbeat: 50 * time.Millisecond})
	c := ctx(t)
	p := open(t, e.purl, sh(`while read l; do echo "got $l"; done`), nil)
	e.proxy.DropReplies(true)
	eventually(t, c, "a reconnection", func() bool { return e.proxy.Accepted() >= 2 })
	e.proxy.DropReplies(false)
	_, err := p.Stdin().WriteContext(c, []byte("x\n"))
	require.NoError(t, err)
	require.Equal(t, "got x\n", readLine(t, c, p.Stdout()))
	require.Zero(t, e.proxy.Cuts())
}

// A reconnection whose handshake the network swallows is abandoned after
// the heartbeat (at least a second) and another made, instead of waited
// for until the grace ends: with every reply dropped, dials go on being
// made, and once replies pass again the process resumes.
func TestReconnectAbandonsAnUnansweredHandshake(t *testing.T) {
	e := newEnv(t, server.Config{Heartbeat: 50 * time.Millisecond, Grace: time.Minute})
	c := ctx(t)
	p := open(t, e.purl, sh(`while read l; do echo "got $l"; done`), nil)
	e.proxy.DropReplies(true)
	eventually(t, c, "a second reconnection while the first goes unanswered", func() bool { return e.proxy.Accepted() >= 3 })
	e.proxy.DropReplies(false)
	_, err := p.Stdin().WriteContext(c, []byte("x\n"))
	require.NoError(t, err)
	require.Equal(t, "got x\n", readLine(t, c, p.Stdout()))
	require.NoError(t, p.Destroy(c))
}

// protocolsSeen records the Sec-WebSocket-Protocol of every upgrade the
// client sends.
type protocolsSeen struct {
	mu   sync.Mutex
	seen []string
	rt   http.RoundTripper
}

func (p *protocolsSeen) RoundTrip(r *http.Request) (*http.Response, error) {
	p.mu.Lock()
	p.seen = append(p.seen, strings.Join(r.Header.Values("Sec-WebSocket-Protocol"), ", "))
	p.mu.Unlock()
	return p.rt.RoundTrip(r)
}

func (p *protocolsSeen) all() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.seen)
}

// With FirstFrameAsMessage no upgrade carries a first frame: the open and
// the resume after a cut go as messages, and the process runs as usual.
// Without it, the open goes in the upgrade.
func TestFirstFrameAsMessage(t *testing.T) {
	for _, asMessage := range []bool{false, true} {
		t.Run(fmt.Sprint("as message ", asMessage), func(t *testing.T) {
			e := newEnv(t, server.Config{})
			rec := &protocolsSeen{rt: &http.Transport{}}
			opts := fastOpts()
			opts.HTTPClient = &http.Client{Transport: rec}
			opts.FirstFrameAsMessage = asMessage
			echoAcrossACut(t, e, opts)
			seen := rec.all()
			require.GreaterOrEqual(t, len(seen), 2, "the open and a resume")
			if !asMessage {
				require.Contains(t, seen[0], frames.FirstSubprotocolPrefix, "the open in the upgrade")
				return
			}
			for _, s := range seen {
				require.NotContains(t, s, frames.FirstSubprotocolPrefix)
				require.NotContains(t, s, frames.SubprotocolFirst)
			}
		})
	}
}

// echoAcrossACut opens a process through e's proxy with opts, cuts its
// connection once, and checks that a line written after the cut comes
// back and the process exits 0.
func echoAcrossACut(t *testing.T, e *env, opts *client.Options) {
	t.Helper()
	c := ctx(t)
	p := open(t, e.purl, sh(`echo ready; read l; echo "got $l"`), opts)
	require.Equal(t, "ready\n", readLine(t, c, p.Stdout()))
	require.Equal(t, 1, e.proxy.CutAll())
	_, err := p.Stdin().WriteContext(c, []byte("x\n"))
	require.NoError(t, err)
	require.Equal(t, "got x\n", readLine(t, c, p.Stdout()))
	st, err := p.Wait(c)
	require.NoError(t, err)
	require.Equal(t, client.ExitStatus{}, st)
	require.NoError(t, p.Destroy(c))
}

// capsFirst stands for a proxy whose header limits refuse an upgrade that
// carries the first frame: it answers status itself to every such request
// and passes the others on.
type capsFirst struct {
	protocolsSeen
	status int
}

func (c *capsFirst) RoundTrip(r *http.Request) (*http.Response, error) {
	sub := strings.Join(r.Header.Values("Sec-WebSocket-Protocol"), ", ")
	if !strings.Contains(sub, frames.FirstSubprotocolPrefix) {
		return c.protocolsSeen.RoundTrip(r)
	}
	c.mu.Lock()
	c.seen = append(c.seen, sub)
	c.mu.Unlock()
	return &http.Response{
		Status: fmt.Sprintf("%d %s", c.status, http.StatusText(c.status)), StatusCode: c.status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{}, Body: http.NoBody, Request: r,
	}, nil
}

// A hop that refuses an upgrade for the size of its headers (431, or 400
// as nginx and HAProxy answer) costs one refused request: the open goes
// again as a message, and so does every later first frame (the resume
// after a cut). Any other refusal stands.
func TestAHopRefusingTheFirstFrameCostsOneRequest(t *testing.T) {
	for _, status := range []int{http.StatusRequestHeaderFieldsTooLarge, http.StatusBadRequest} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			e := newEnv(t, server.Config{})
			rec := &capsFirst{protocolsSeen: protocolsSeen{rt: &http.Transport{}}, status: status}
			opts := fastOpts()
			opts.HTTPClient = &http.Client{Transport: rec}
			echoAcrossACut(t, e, opts)
			seen := rec.all()
			require.GreaterOrEqual(t, len(seen), 3, "the refused open, the open, a resume")
			require.Contains(t, seen[0], frames.FirstSubprotocolPrefix, "the open offered in the upgrade")
			for _, s := range seen[1:] {
				require.NotContains(t, s, frames.FirstSubprotocolPrefix, "after the refusal")
			}
		})
	}
	t.Run("403 stands", func(t *testing.T) {
		e := newEnv(t, server.Config{})
		rec := &capsFirst{protocolsSeen: protocolsSeen{rt: &http.Transport{}}, status: http.StatusForbidden}
		opts := fastOpts()
		opts.HTTPClient = &http.Client{Transport: rec}
		_, err := client.Open(ctx(t), e.purl, instanceID(t), sh("true"), opts)
		require.Error(t, err)
		require.Len(t, rec.all(), 1, "not repeated")
	})
}
