package conform

import (
	"context"
	"errors"
	"time"

	"github.com/procwire/procwire/frames"
)

// wait waits d, or ends the case when ctx ends first.
func (t *T) wait(ctx context.Context, d time.Duration) {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
	case <-ctx.Done():
		t.Fatalf("the case ran out of time waiting %v", d)
	}
}

func caseGraceExpiry(ctx context.Context, t *T) {
	grace := time.Duration(t.r.probe.opened.GraceMS) * time.Millisecond
	if grace > SlowThreshold && !t.r.cfg.Slow {
		t.Skipf("grace_ms is %d: waiting it out takes longer than %v; run with --slow", grace.Milliseconds(), SlowThreshold)
	}
	inst := t.instance()
	p, o := t.open(ctx, inst, t.request("sleep", "600"), openOptions{})
	p.cut()
	// Past the grace, with room for a loaded server to act on its timer.
	t.wait(ctx, grace+max(time.Second, grace/2))
	t.expectResumeRefused(ctx, o, "process_expired")
	// The tombstone answers destroy; the instance is free again.
	t.destroyFirst(ctx, o.ProcessID, o.Token)
	p, o = t.open(ctx, inst, t.sh("exit 0"), openOptions{})
	t.awaitExit(ctx, p)
	t.destroyOn(ctx, p, o.ProcessID)
}

func caseHeartbeat(ctx context.Context, t *T) {
	hb := time.Duration(t.r.probe.opened.HeartbeatMS) * time.Millisecond
	if hb == 0 {
		t.Fatalf("heartbeat_ms is 0: a WebSocket server pings every heartbeat_ms (PROTOCOL.md §1)")
	}
	p, o := t.open(ctx, t.instance(), t.request("sleep", "600"), openOptions{})
	pctx, cancel := context.WithTimeout(ctx, max(hb, 10*time.Second))
	err := p.ws.Ping(pctx) // the peer's reader reads the pong
	cancel()
	if err != nil {
		t.Fatalf("the server did not answer a ping: %v", err)
	}
	if hb > SlowThreshold && !t.r.cfg.Slow {
		t.Skipf("pings are answered; heartbeat_ms is %d: waiting out its pings takes longer than %v; run with --slow", hb.Milliseconds(), SlowThreshold)
	}

	// The server pings a connection whose process is quiet, and does not
	// time it out.
	within := 3*hb + 2*time.Second
	deadline := time.Now().Add(within)
	for p.pings.Load() < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("%d pings from the server in %v, heartbeat_ms %d", p.pings.Load(), within, hb.Milliseconds())
		}
		wctx, cancel := context.WithTimeout(ctx, hb/10)
		f, err := p.next(wctx)
		cancel()
		switch {
		case err == nil:
			if f.Type() != frames.TypeCredit {
				t.Fatalf("a quiet process's connection carried %s", show(f))
			}
		case wctx.Err() != nil && ctx.Err() == nil:
		default:
			t.Fatalf("a connection to a quiet process ended after %d pings: %v", p.pings.Load(), err)
		}
	}

	// A peer that stops answering pings is dropped: q reads nothing for
	// three intervals, after which its connection must have ended. (Were
	// it still up, the bounded read below would time out.)
	q, _ := t.resumeWith(ctx, o, 0, dialOptions{manual: true})
	stall := 3*hb + time.Second
	t.wait(ctx, stall)
	rctx, cancel := context.WithTimeout(ctx, hb+5*time.Second)
	defer cancel()
	for {
		_, err := q.next(rctx)
		if err == nil {
			continue
		}
		if rctx.Err() != nil && ctx.Err() == nil {
			t.Fatalf("a peer that answered no ping for %v was not dropped (heartbeat_ms %d)", stall, hb.Milliseconds())
		}
		if _, ok := errors.AsType[*closedError](err); !ok {
			t.Fatalf("after a stall of %v: %v", stall, err)
		}
		break
	}
}
