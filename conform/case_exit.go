package conform

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/procwire/procwire/frames"
)

// signalExitWait bounds the wait for the exit of a child a signal was
// delivered to.
const signalExitWait = 20 * time.Second

func caseExitCodes(ctx context.Context, t *T) {
	for _, code := range []int{0, 7, 255} {
		p, o := t.open(ctx, t.instance(), t.sh(fmt.Sprintf("exit %d", code)), openOptions{})
		exit := t.awaitEOFAndExit(ctx, p)
		t.checkExit(fmt.Sprintf("sh -c 'exit %d'", code), exit, wantCode(code))
		p.cut()
		p, _ = t.resume(ctx, o, 0)
		t.checkExit(fmt.Sprintf("sh -c 'exit %d', replayed after a resume", code), t.awaitEOFAndExit(ctx, p), exit)
		t.destroyOn(ctx, p, o.ProcessID)
	}
}

// signalAndExit sends sig with id to the child on p, checks that it was
// delivered, and waits (bounded) for the exit.
func (t *T) signalAndExit(ctx context.Context, p *peer, id int64, sig frames.SignalName) *frames.Exit {
	if err := p.send(ctx, &frames.Signal{ID: id, Signal: sig}); err != nil {
		t.Fatalf("signal: %v", err)
	}
	s := t.awaitType(ctx, p, frames.TypeSignaled).(*frames.Signaled)
	if s.ID != id || s.Result != frames.SignalDelivered {
		t.Fatalf("signal %d (%s) to a running child answered %s", id, sig, show(s))
	}
	wctx, cancel := context.WithTimeout(ctx, signalExitWait)
	defer cancel()
	f, err := p.next(wctx)
	for ; err == nil && f.Type() != frames.TypeExit; f, err = p.next(wctx) {
	}
	if err != nil {
		if wctx.Err() != nil && ctx.Err() == nil {
			t.Fatalf("%s was delivered but the child did not exit within %v (does the server's child ignore %s?)", sig, signalExitWait, sig)
		}
		t.Fatalf("waiting for the exit after %s: %v", sig, err)
	}
	return f.(*frames.Exit)
}

func caseExitSignals(ctx context.Context, t *T) {
	for _, sig := range []frames.SignalName{frames.SIGTERM, frames.SIGKILL, frames.SIGINT} {
		p, o := t.open(ctx, t.instance(), t.request("sleep", "600"), openOptions{})
		exit := t.signalAndExit(ctx, p, 1, sig)
		t.checkExit(fmt.Sprintf("sleep after %s", sig), exit, wantSignal(string(sig)))
		p.cut()
		p, _ = t.resume(ctx, o, 0)
		t.checkExit(fmt.Sprintf("sleep after %s, replayed after a resume", sig), t.awaitExit(ctx, p), exit)
		t.destroyOn(ctx, p, o.ProcessID)
	}
}

// awaitReady waits for a child's "ready" line.
func (t *T) awaitReady(ctx context.Context, p *peer) {
	t.awaitState(ctx, p, `the child's "ready"`, func() bool { return bytes.HasPrefix(p.stdout, []byte("ready\n")) })
}

func caseSignalAnswers(ctx context.Context, t *T) {
	// A shell that survives SIGTERM and says so each time.
	p, o := t.open(ctx, t.instance(), t.sh(`trap 'echo term' TERM; echo ready; while :; do sleep 1; done`), openOptions{})
	t.awaitReady(ctx, p)
	count := func() int { return bytes.Count(p.stdout, []byte("term\n")) }
	ask := func(id int64, sig frames.SignalName, want string) {
		if err := p.send(ctx, &frames.Signal{ID: id, Signal: sig}); err != nil {
			t.Fatalf("signal: %v", err)
		}
		s := t.awaitType(ctx, p, frames.TypeSignaled).(*frames.Signaled)
		if s.ID != id || s.Result != want {
			t.Fatalf("signal %d (%s) answered %s, expected result %s", id, sig, show(s), want)
		}
	}
	ask(1, frames.SIGTERM, frames.SignalDelivered)
	t.awaitState(ctx, p, "the child's first \"term\"", func() bool { return count() >= 1 })
	ask(1, frames.SIGTERM, frames.SignalDelivered) // a repeat: answered, not delivered
	ask(2, frames.SIGTERM, frames.SignalDelivered)
	t.awaitState(ctx, p, "the child's second \"term\"", func() bool { return count() >= 2 })
	exit := t.signalAndExit(ctx, p, 3, frames.SIGKILL)
	t.checkExit("the shell after SIGKILL", exit, wantSignal("SIGKILL"))
	if count() != 2 {
		t.Fatalf("the child saw SIGTERM %d times for signals 1, 1 (repeated) and 2: a repeated id was delivered again", count())
	}
	ask(1, frames.SIGTERM, frames.SignalDelivered) // recorded
	ask(4, frames.SIGKILL, frames.SignalAlreadyExited)
	t.destroyOn(ctx, p, o.ProcessID)
}
