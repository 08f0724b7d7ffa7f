package conform

import (
	"context"
	"net/http"

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
