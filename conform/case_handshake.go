package conform

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/coder/websocket"

	"github.com/procwire/procwire/frames"
)

const subprotocolReason = "subprotocol " + frames.Subprotocol + " required"

func caseSubprotocol(ctx context.Context, t *T) {
	p := t.dial(ctx, dialOptions{})
	if got := p.ws.Subprotocol(); got != frames.Subprotocol {
		t.Fatalf("an upgrade offering %s negotiated %q", frames.Subprotocol, got)
	}
	p.cut()
	for _, offer := range [][]string{nil, {"procwire.v0"}} {
		p, resp, err := t.r.dial(ctx, dialOptions{subprotocols: offer, noSubproto: offer == nil})
		if err != nil {
			status := 0
			if resp != nil {
				status = resp.StatusCode
			}
			t.Fatalf("an upgrade offering %q was refused with HTTP %d (%v), not upgraded and closed 1002", offer, status, err)
		}
		bctx, cancel := t.bounded(ctx)
		t.expectClose(bctx, p, "the close of an upgrade offering "+quoteList(offer), websocket.StatusProtocolError, nil,
			func(r string) bool { return r == subprotocolReason })
		cancel()
	}
}

func quoteList(s []string) string {
	if len(s) == 0 {
		return "no subprotocol"
	}
	return "subprotocol " + s[0]
}

func caseToken(ctx context.Context, t *T) {
	if t.r.cfg.Token == "" {
		t.Skipf("no token given (--token-file): a server without a token serves loopback only, with nothing to refuse")
	}
	for _, o := range []struct {
		what string
		opts dialOptions
	}{
		{"without a token", dialOptions{noToken: true}},
		{"with a wrong token", dialOptions{token: t.r.cfg.Token + "-wrong"}},
	} {
		p, resp, err := t.r.dial(ctx, o.opts)
		if err == nil {
			p.cut()
			t.Fatalf("an upgrade %s was accepted", o.what)
		}
		if resp == nil || resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("an upgrade %s: expected HTTP 401, got %s", o.what, statusOf(resp, err))
		}
	}
}

func statusOf(resp *http.Response, err error) string {
	if resp == nil {
		return "no response (" + err.Error() + ")"
	}
	return resp.Status
}

func caseOrigin(ctx context.Context, t *T) {
	foreign := "https://conform.invalid"
	p, resp, err := t.r.dial(ctx, dialOptions{header: http.Header{"Origin": {foreign}}})
	if err == nil {
		p.cut()
		t.Fatalf("an upgrade with Origin %s was accepted", foreign)
	}
	if resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("an upgrade with Origin %s: expected HTTP 403, got %s", foreign, statusOf(resp, err))
	}
	scheme := "http"
	if t.r.scheme == "wss" {
		scheme = "https"
	}
	own := scheme + "://" + t.r.host
	p, resp, err = t.r.dial(ctx, dialOptions{header: http.Header{"Origin": {own}}})
	if err != nil {
		t.Fatalf("an upgrade with the request's own host as Origin (%s) was refused: %s", own, statusOf(resp, err))
	}
	p.cut()
}

// firstOffer returns the subprotocols that offer msg as the first frame in
// the upgrade (PROTOCOL.md §1).
func firstOffer(t *T, msg []byte) []string {
	sub, ok := frames.FirstSubprotocol(msg)
	if !ok {
		panic("conform: a first frame sample too long for the upgrade")
	}
	return []string{frames.Subprotocol, frames.SubprotocolFirst, sub}
}

// caseFirstInUpgrade checks the first frame in the upgrade (PROTOCOL.md
// §1): a server may take it, or leave it and read the frame from the
// connection; either way the connection is served, and the frame is never
// echoed.
func caseFirstInUpgrade(ctx context.Context, t *T) {
	open := &frames.Open{InstanceID: t.instance(), Request: t.sh(`echo first; exec cat`)}
	offer := firstOffer(t, frames.Append(nil, open))
	p, resp, err := t.r.dial(ctx, dialOptions{subprotocols: offer})
	if err != nil {
		t.Fatalf("an upgrade offering the first frame was refused: %s", statusOf(resp, err))
	}
	if got := resp.Header.Values("Sec-WebSocket-Protocol"); len(got) != 1 || got[0] != p.ws.Subprotocol() || strings.Contains(got[0], frames.FirstSubprotocolPrefix) {
		p.cut()
		t.Fatalf("the upgrade answered Sec-WebSocket-Protocol %q: the first frame must never be selected or echoed", got)
	}
	taken := false
	switch got := p.ws.Subprotocol(); got {
	case frames.SubprotocolFirst:
		taken = true
	case frames.Subprotocol:
		t.Notef("the server selected %s: it reads the first frame from the connection, which the protocol allows", frames.Subprotocol)
		if err := p.send(ctx, open); err != nil {
			t.Fatalf("open: %v", err)
		}
	default:
		p.cut()
		t.Fatalf("an upgrade offering %q negotiated %q", offer[:2], got)
	}
	first, err := t.nextAnswer(ctx, p)
	if err != nil {
		t.Fatalf("waiting for the answer to the open (in the upgrade: %v): %v", taken, err)
	}
	o, ok := first.(*frames.Opened)
	if !ok {
		t.Fatalf("the open (in the upgrade: %v) answered %s, not opened", taken, show(first))
	}
	t.opened = append(t.opened, opened{o.ProcessID, o.Token})
	t.awaitStdout(ctx, p, "first\n", " from the process the upgrade's open started")
	if !taken {
		t.destroyOn(ctx, p, o.ProcessID)
		return
	}
	// Taken, it was the first frame: an open sent now is a second one.
	if err := p.send(ctx, open); err != nil {
		t.Fatalf("second open: %v", err)
	}
	t.expectClose(ctx, p, "an open sent after the upgrade carried one", websocket.StatusProtocolError,
		func(f frames.Frame) bool { return f.Type() == frames.TypeCredit || f.Type() == frames.TypeStdout }, nil)
	// A resume in the upgrade is served as a resume.
	sub := firstOffer(t, frames.Append(nil, &frames.Resume{ProcessID: o.ProcessID, Token: o.Token, StdoutReceived: int64(len("first\n"))}))
	p, resp, err = t.r.dial(ctx, dialOptions{subprotocols: sub})
	if err != nil {
		t.Fatalf("an upgrade offering a resume was refused: %s", statusOf(resp, err))
	}
	if p.ws.Subprotocol() != frames.SubprotocolFirst {
		t.Fatalf("a server that took an open in the upgrade negotiated %q for a resume", p.ws.Subprotocol())
	}
	p.expectFrom(int64(len("first\n")), 0)
	if first, err = t.nextAnswer(ctx, p); err != nil {
		t.Fatalf("waiting for the answer to the resume in the upgrade: %v", err)
	} else if _, ok := first.(*frames.Resumed); !ok {
		t.Fatalf("the resume in the upgrade answered %s, not resumed", show(first))
	}
	t.destroyOn(ctx, p, o.ProcessID)
	// A first frame in the upgrade that does not decode closes as one in a
	// message does.
	s := firstFrameSamples(t.instance())[0]
	want := decodeReason(s)
	p, resp, err = t.r.dial(ctx, dialOptions{subprotocols: firstOffer(t, []byte(s.line+"\n"))})
	if err != nil {
		t.Fatalf("an upgrade offering %s was refused: %s", s.what, statusOf(resp, err))
	}
	t.expectClose(ctx, p, fmt.Sprintf("%s in the upgrade (%s)", s.what, s.line), websocket.StatusInvalidFramePayloadData, nil,
		func(r string) bool { return r == want || strings.HasPrefix(r, want+": ") })
}
