package proxytest

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/client"
	"github.com/procwire/procwire/frames"
	"github.com/procwire/procwire/internal/testkit/cutproxy"
)

// upgrades records, for every upgrade a client sends, whether it offered
// the first frame and the status it was answered with.
type upgrades struct {
	rt   http.RoundTripper
	mu   sync.Mutex
	seen []upgrade
}

type upgrade struct {
	offered bool
	status  int
}

func (u *upgrades) RoundTrip(r *http.Request) (*http.Response, error) {
	offered := strings.Contains(strings.Join(r.Header.Values("Sec-WebSocket-Protocol"), ","), frames.FirstSubprotocolPrefix)
	resp, err := u.rt.RoundTrip(r)
	status := 0
	if resp != nil {
		status = resp.StatusCode
	}
	u.mu.Lock()
	u.seen = append(u.seen, upgrade{offered, status})
	u.mu.Unlock()
	return resp, err
}

func (u *upgrades) all() []upgrade {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]upgrade(nil), u.seen...)
}

// TestNginxCappingHeadersTakesTheOpenAsAMessage: nginx whose header
// buffers are below the 4 KiB a first frame may take in the upgrade
// (large_client_header_buffers 2 1k) answers the upgrade carrying the open
// with 400 ("Request Header Or Cookie Too Large"). The client sends the
// open again as a message: the process runs after one refused request,
// and the resume after a cut goes as a message from the start.
func TestNginxCappingHeadersTakesTheOpenAsAMessage(t *testing.T) {
	a := startBackend(t)
	ng := startNginxWith(t, time.Second, "    large_client_header_buffers 2 1k;", a)
	cut, err := cutproxy.New(ng.addr)
	require.NoError(t, err)
	defer cut.Close()
	ctx := testCtx(t)

	r := catRequest()
	r.Environment["PADDING"] = strings.Repeat("p", 1500) // over 1 KiB, under the 4 KiB offered
	rec := &upgrades{rt: httpTransport()}
	p, err := client.Open(ctx, wsURL(cut.Addr()), "nginx-capped", r, &client.Options{
		Token: token, HTTPClient: &http.Client{Transport: rec},
		ReconnectMin: 2 * time.Millisecond, ReconnectMax: 50 * time.Millisecond,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Destroy(t.Context()) })
	line := func(s string) {
		t.Helper()
		_, err := p.Stdin().WriteContext(ctx, []byte(s))
		require.NoError(t, err)
		buf := make([]byte, len(s))
		_, err = io.ReadFull(p.Stdout(), buf)
		require.NoError(t, err)
		require.Equal(t, s, string(buf))
	}
	line("before the cut\n")
	require.Equal(t, 1, cut.CutAll())
	line("after the cut\n")
	require.NoError(t, p.Stdin().Close())
	st, err := p.Wait(ctx)
	require.NoError(t, err)
	require.Equal(t, client.ExitStatus{}, st)
	require.NoError(t, p.Destroy(ctx))

	seen := rec.all()
	require.GreaterOrEqual(t, len(seen), 3, "the refused open, the open, a resume: %v", seen)
	require.Equal(t, upgrade{true, http.StatusBadRequest}, seen[0], "nginx refuses the open in the upgrade")
	for i, u := range seen[1:] {
		require.False(t, u.offered, "upgrade %d after the refusal offered the first frame", i+1)
	}
	m := a.scrape(t)
	require.Equal(t, 1.0, m["procwire_processes_opened_total"], "one process, started by the open sent as a message")
	require.GreaterOrEqual(t, m["procwire_resumes_total"], 1.0)
}
