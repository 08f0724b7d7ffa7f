package conform

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"

	"github.com/coder/websocket"

	"github.com/procwire/procwire/frames"
)

// The two mechanisms for browsers (PROTOCOL.md §1, §3): the token offered as
// the subprotocol procwire.bearer.<base64url>, and application-level pings.

// bearerSubprotocol is the subprotocol carrying token.
func bearerSubprotocol(token string) string {
	return frames.BearerSubprotocolPrefix + base64.RawURLEncoding.EncodeToString([]byte(token))
}

func caseBearerSubprotocol(ctx context.Context, t *T) {
	tok := t.r.cfg.Token
	if tok == "" {
		t.Skipf("no token given (--token-file): a server without a token ignores the bearer subprotocol")
	}
	right, wrong := bearerSubprotocol(tok), bearerSubprotocol(tok+"-wrong")
	p, resp, err := t.r.dial(ctx, dialOptions{noToken: true, subprotocols: []string{frames.Subprotocol, right}})
	if err != nil {
		t.Fatalf("an upgrade carrying the token only as subprotocol %s<token> was refused: %s", frames.BearerSubprotocolPrefix, statusOf(resp, err))
	}
	if got := p.ws.Subprotocol(); got != frames.Subprotocol {
		p.cut()
		t.Fatalf("an upgrade offering %s and the bearer subprotocol negotiated %q, not %s", frames.Subprotocol, got, frames.Subprotocol)
	}
	if got := resp.Header.Values("Sec-WebSocket-Protocol"); len(got) != 1 || got[0] != frames.Subprotocol {
		p.cut()
		t.Fatalf("the upgrade answered Sec-WebSocket-Protocol %q: the token must never be selected or echoed", got)
	}
	// The connection is served: an open on it is answered.
	if err := p.send(ctx, &frames.Open{InstanceID: t.instance(), Request: t.request("cat")}); err != nil {
		t.Fatalf("open: %v", err)
	}
	bctx, cancel := t.bounded(ctx)
	f := t.await(bctx, p, "opened", func(frames.Frame) bool { return true })
	cancel()
	if f.Type() != frames.TypeOpened {
		t.Fatalf("an open on a connection authenticated by subprotocol answered %s", show(f))
	} else {
		o := f.(*frames.Opened)
		t.opened = append(t.opened, opened{o.ProcessID, o.Token})
		t.destroyOn(ctx, p, o.ProcessID)
	}

	for _, c := range []struct {
		what string
		opts dialOptions
	}{
		{"with a wrong token as subprotocol", dialOptions{noToken: true, subprotocols: []string{frames.Subprotocol, wrong}}},
		{"with the token as padded base64url", dialOptions{noToken: true, subprotocols: []string{frames.Subprotocol, right + "="}}},
		{"with the bearer subprotocol offered twice", dialOptions{noToken: true, subprotocols: []string{frames.Subprotocol, right, right}}},
		{"with the right header and a wrong subprotocol", dialOptions{subprotocols: []string{frames.Subprotocol, wrong}}},
		{"with a wrong header and the right subprotocol", dialOptions{token: tok + "-wrong", subprotocols: []string{frames.Subprotocol, right}}},
	} {
		p, resp, err := t.r.dial(ctx, c.opts)
		if err == nil {
			p.cut()
			t.Fatalf("an upgrade %s was accepted", c.what)
		}
		if resp == nil || resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("an upgrade %s: expected HTTP 401, got %s", c.what, statusOf(resp, err))
		}
	}
}

// fillScript writes stdout for ever with builtins only.
const fillScript = `while :; do printf '%s\n' 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef; done`

func casePings(ctx context.Context, t *T) {
	// Pings asked on an open whose stdout window is full and never acked:
	// the pongs still come.
	f := &frames.Open{InstanceID: t.instance(), Request: t.sh(fillScript), StdoutWindow: frames.MinWindow, Pings: true}
	p, a := t.first(ctx, f, nil, "open.pings")
	o, ok := a.(*frames.Opened)
	if !ok {
		t.Fatalf("an open asking for pings answered %s", show(a))
	}
	if !o.Pings {
		t.Fatalf("an open asking for pings answered opened without pings: true: %s", show(o))
	}
	for p.stdoutEnd < o.StdoutWindow {
		if _, err := p.next(ctx); err != nil {
			t.Fatalf("filling the stdout window: %v", err)
		}
	}
	for _, id := range []int64{0, 1, frames.MaxPingID} {
		t.expectPong(ctx, p, id)
	}

	// A resume asking for pings gets them; one that does not, does not,
	// and a ping there is 1002.
	p.cut()
	q, r := t.resumeRawWith(ctx, &frames.Resume{ProcessID: o.ProcessID, Token: o.Token, StdoutReceived: p.stdoutEnd}, dialOptions{})
	if res, ok := r.(*frames.Resumed); !ok || res.Pings {
		t.Fatalf("a resume without pings answered %s", show(r))
	}
	if err := q.send(ctx, &frames.Ping{ID: 5}); err != nil {
		t.Fatalf("ping: %v", err)
	}
	t.expectClose(ctx, q, "a ping on a connection that did not negotiate pings", websocket.StatusProtocolError, streamFrame, nil)
	q, r = t.resumeRawWith(ctx, &frames.Resume{ProcessID: o.ProcessID, Token: o.Token, StdoutReceived: p.stdoutEnd, Pings: true}, dialOptions{})
	if res, ok := r.(*frames.Resumed); !ok || !res.Pings {
		t.Fatalf("a resume asking for pings answered %s", show(r))
	}
	t.expectPong(ctx, q, 77)
	t.destroyOn(ctx, q, o.ProcessID)

	// An open without pings: no pings: true, and a ping is 1002.
	n, no := t.open(ctx, t.instance(), t.request("cat"), openOptions{})
	if no.Pings {
		t.Fatalf("an open without pings answered pings: true")
	}
	if err := n.send(ctx, &frames.Ping{ID: 1}); err != nil {
		t.Fatalf("ping: %v", err)
	}
	t.expectClose(ctx, n, "a ping on a connection that did not negotiate pings", websocket.StatusProtocolError, streamFrame, nil)
	t.destroyFirst(ctx, no.ProcessID, no.Token)
}

// expectPong sends a ping with id and reads until its pong, passing over
// stream frames without acknowledging them.
func (t *T) expectPong(ctx context.Context, p *peer, id int64) {
	if err := p.send(ctx, &frames.Ping{ID: id}); err != nil {
		t.Fatalf("ping %d: %v", id, err)
	}
	for {
		f, err := p.next(ctx)
		if err != nil {
			if ce, ok := errors.AsType[*closedError](err); ok {
				t.Fatalf("ping %d on a connection that negotiated pings: %v", id, ce)
			}
			t.Fatalf("waiting for the pong to ping %d: %v", id, err)
		}
		if g, ok := f.(*frames.Pong); ok {
			if g.ID != id {
				t.Fatalf("ping %d answered %s", id, show(g))
			}
			return
		}
	}
}

// streamFrame allows what a live session sends unasked while a case waits
// for a close.
func streamFrame(f frames.Frame) bool {
	switch f.Type() {
	case frames.TypeCredit, frames.TypeStdout, frames.TypeStderr:
		return true
	}
	return false
}
