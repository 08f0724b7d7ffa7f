package conform

import (
	"context"
	"strings"

	"github.com/coder/websocket"

	"github.com/procwire/procwire/frames"
)

// expectDestroyedError checks that resuming process o is refused as
// destroyed (or expired, with actual).
func (t *T) expectResumeRefused(ctx context.Context, o *frames.Opened, actual string) {
	g, first := t.resumeRaw(ctx, &frames.Resume{ProcessID: o.ProcessID, Token: o.Token})
	if _, ok := first.(*frames.Resumed); ok {
		g.cut()
		t.Fatalf("resume of process %s, which should be %s, was answered resumed", o.ProcessID, actual)
	}
	t.expectError(ctx, g, "resume of a "+strings.TrimPrefix(actual, "process_")+" process", first,
		frames.Error{Code: frames.LifecycleConflict, Operation: "resume_process", Expected: "running", Actual: actual})
}

func caseDestroyIdempotent(ctx context.Context, t *T) {
	p, o := t.open(ctx, t.instance(), t.request("sleep", "600"), openOptions{})
	first := t.destroyOn(ctx, p, o.ProcessID)
	if first == nil {
		t.Fatalf("destroy of a running process answered destroyed without an exit")
	}
	for i := range 3 {
		again := t.destroyFirst(ctx, o.ProcessID, o.Token)
		if !sameExit(again, first) {
			t.Fatalf("destroy number %d, on a new connection, reported exit %s; the first reported %s", i+2, exitString(again), exitString(first))
		}
	}
	t.expectResumeRefused(ctx, o, "process_destroyed")

	wrong := []byte(o.Token)
	wrong[0] = "01"[(wrong[0]-'0'+1)%2] // another valid token
	g := t.dial(ctx, dialOptions{})
	if err := g.send(ctx, &frames.Destroy{ProcessID: o.ProcessID, Token: string(wrong)}); err != nil {
		t.Fatalf("destroy: %v", err)
	}
	ans, err := t.nextAnswer(ctx, g)
	if err != nil {
		t.Fatalf("destroy with a wrong token: %v", err)
	}
	t.expectError(ctx, g, "destroy with a wrong token", ans,
		frames.Error{Code: frames.LifecycleConflict, Operation: "destroy_process", Actual: "process_not_found"})
}

func caseDestroyAfterExit(ctx context.Context, t *T) {
	a, o := t.open(ctx, t.instance(), t.sh("exit 3"), openOptions{})
	exit := t.awaitEOFAndExit(ctx, a)
	t.checkExit("sh -c 'exit 3'", exit, wantCode(3))
	got := t.destroyFirst(ctx, o.ProcessID, o.Token)
	t.checkExit("destroy from a new connection", got, exit)
	// The attached connection ends the same way: destroyed (its exit was
	// sent already), close 1000.
	d := t.awaitType(ctx, a, frames.TypeDestroyed).(*frames.Destroyed)
	if d.ProcessID != o.ProcessID {
		t.Fatalf("the attached connection was told %s", show(d))
	}
	t.expectClose(ctx, a, "the close of the attached connection after destroyed", websocket.StatusNormalClosure, nil, nil)
}

func caseDestroyLostAnswer(ctx context.Context, t *T) {
	p, o := t.open(ctx, t.instance(), t.request("sleep", "600"), openOptions{})
	if err := p.send(ctx, &frames.Destroy{}); err != nil {
		t.Fatalf("destroy: %v", err)
	}
	p.cut() // the answer is lost
	first := t.destroyFirst(ctx, o.ProcessID, o.Token)
	if first == nil {
		t.Fatalf("destroy after a lost answer reported no exit")
	}
	again := t.destroyFirst(ctx, o.ProcessID, o.Token)
	if !sameExit(again, first) {
		t.Fatalf("destroy after a lost answer reported exit %s, then %s", exitString(first), exitString(again))
	}
	t.expectResumeRefused(ctx, o, "process_destroyed")
}
