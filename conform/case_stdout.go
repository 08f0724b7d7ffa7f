package conform

import (
	"context"
	"fmt"
	"time"

	"github.com/procwire/procwire/frames"
)

// linesScript prints "line 0" .. "line n-1", one per line, with the
// shell's builtins only.
func linesScript(n int) string {
	return fmt.Sprintf(`i=0; while [ $i -lt %d ]; do echo "line $i"; i=$((i+1)); done`, n)
}

// lines is what linesScript(n) prints.
func lines(n int) []byte {
	var b []byte
	for i := range n {
		b = fmt.Appendf(b, "line %d\n", i)
	}
	return b
}

// checkContent ends the case unless what p received equals want at the
// same offsets.
func (t *T) checkContent(p *peer, want []byte) {
	got := p.stdout
	start := p.stdoutStart
	if start+int64(len(got)) > int64(len(want)) {
		t.Fatalf("stdout runs to %d, the child printed %d bytes", start+int64(len(got)), len(want))
	}
	for i := range got {
		if got[i] != want[start+int64(i)] {
			t.Fatalf("stdout byte %d is %q, the child printed %q", start+int64(i), got[i], want[start+int64(i)])
		}
	}
}

// slowAck is how long the slow reader takes before each ack.
const slowAck = 2 * time.Millisecond

func caseSlowReader(ctx context.Context, t *T) {
	const n = 30000
	want := lines(n)
	p, o := t.open(ctx, t.instance(), t.sh(linesScript(n)), openOptions{stdoutWindow: 16 << 10})
	w := o.StdoutWindow
	for p.eof == nil {
		f, err := p.next(ctx)
		if err != nil {
			t.Fatalf("reading stdout at %d (acked %d, window %d): %v", p.stdoutEnd, p.acked, w, err)
		}
		if _, ok := f.(*frames.Stdout); ok && p.stdoutEnd-p.acked >= max(w/2, 1) {
			// A slow reader: the window fills while it dawdles.
			time.Sleep(slowAck)
			if err := p.send(ctx, &frames.Ack{Stdout: p.stdoutEnd}); err != nil {
				t.Fatalf("ack: %v", err)
			}
		}
	}
	t.checkContent(p, want)
	if p.eof.Off != int64(len(want)) {
		t.Fatalf("stdout_eof at %d, the child printed %d bytes", p.eof.Off, len(want))
	}
	if err := p.send(ctx, &frames.Ack{Stdout: p.eof.Off}); err != nil {
		t.Fatalf("ack: %v", err)
	}
	t.checkExit("the printing shell", t.awaitExit(ctx, p), wantCode(0))
	t.destroyOn(ctx, p, o.ProcessID)
}

func caseReplayCut(ctx context.Context, t *T) {
	const n = 10000
	want := lines(n)
	total := int64(len(want))
	p, o := t.open(ctx, t.instance(), t.sh(linesScript(n)), openOptions{stdoutWindow: 1 << 20})

	// Cut 1: before reading anything.
	p.cut()
	p, _ = t.resume(ctx, o, 0)
	t.awaitState(ctx, p, "3000 bytes of stdout", func() bool { return p.stdoutEnd >= 3000 })
	t.checkContent(p, want)

	// Cut 2: mid-frame, between the ack and what was received.
	if p.acked < 1000 {
		if err := p.send(ctx, &frames.Ack{Stdout: 1000}); err != nil {
			t.Fatalf("ack: %v", err)
		}
	}
	from := p.acked + (p.stdoutEnd-p.acked)/2
	p.cut()
	p, _ = t.resume(ctx, o, from)
	exit := t.awaitEOFAndExit(ctx, p)
	t.checkContent(p, want)
	if p.eof.Off != total {
		t.Fatalf("stdout_eof at %d after a resume from %d, the child printed %d bytes", p.eof.Off, from, total)
	}
	t.checkExit("the printing shell", exit, wantCode(0))

	// Cuts 3 and 4: one byte short of the end, and at the end. The
	// replay is stdout_eof and exit, and only then credit.
	for _, from := range []int64{total - 1, total} {
		p.cut()
		p, _ = t.resume(ctx, o, from)
		t.await(ctx, p, "the replayed exit", func(f frames.Frame) bool {
			if c, ok := f.(*frames.Credit); ok && p.exit == nil {
				t.Fatalf("resume from %d of an exited process: %s before the replayed stdout_eof and exit", from, show(c))
			}
			return f.Type() == frames.TypeExit
		})
		if p.eof == nil || p.stdoutEnd != total {
			t.Fatalf("resume from %d: the replay ended at %d without stdout_eof %d", from, p.stdoutEnd, total)
		}
		t.checkContent(p, want)
		t.checkExit(fmt.Sprintf("the exit replayed after a resume from %d", from), p.exit, exit)
	}
	t.destroyOn(ctx, p, o.ProcessID)
}

func caseReplayGap(ctx context.Context, t *T) {
	const n = 10000
	want := lines(n)
	p, o := t.open(ctx, t.instance(), t.sh(linesScript(n)), openOptions{stdoutWindow: 1 << 20})
	t.awaitState(ctx, p, "20000 bytes of stdout", func() bool { return p.stdoutEnd >= 20000 })
	if p.acked < 16384 {
		if err := p.send(ctx, &frames.Ack{Stdout: 16384}); err != nil {
			t.Fatalf("ack: %v", err)
		}
	}
	acked, received := p.acked, p.stdoutEnd
	p.cut()

	const from = 1000
	g, first := t.resumeRaw(ctx, &frames.Resume{ProcessID: o.ProcessID, Token: o.Token, StdoutReceived: from})
	switch first.(type) {
	case *frames.Resumed:
		// Allowed only if the server still holds offset 1000: its first
		// stdout must start there.
		g.anyStart = true
		f := t.await(ctx, g, "the replay", func(f frames.Frame) bool { return f.Type() == frames.TypeStdout })
		if off := f.(*frames.Stdout).Off; off != from {
			t.Fatalf("resume from %d, below the ack of %d, answered resumed and replayed from %d: %d bytes skipped silently (expected replay_gap)",
				from, acked, off, off-from)
		}
		t.Notef("the server still held offset %d after an ack of %d: nothing to refuse", from, acked)
		g.cut()
	default:
		e := t.expectError(ctx, g, fmt.Sprintf("resume from %d below the ack of %d", from, acked), first,
			frames.Error{Code: frames.OperationFailed, Operation: "resume_process", Reason: "replay_gap"})
		if e.Gap == nil || e.Gap.Requested != from || e.Gap.Oldest <= from || e.Gap.Oldest > acked {
			t.Fatalf("replay_gap after a resume from %d with %d acked carries gap %s", from, acked, show(e))
		}
	}

	// The refusal did not end the process.
	p, _ = t.resume(ctx, o, received)
	t.awaitEOFAndExit(ctx, p)
	t.checkContent(p, want)
	t.destroyOn(ctx, p, o.ProcessID)
}

func caseReplayBeyondEnd(ctx context.Context, t *T) {
	p, o := t.open(ctx, t.instance(), t.sh("printf 0123456789"), openOptions{})
	t.awaitEOFAndExit(ctx, p)
	total := p.eof.Off
	p.cut()
	for _, from := range []int64{total + 1, total + 1<<20} {
		g, first := t.resumeRaw(ctx, &frames.Resume{ProcessID: o.ProcessID, Token: o.Token, StdoutReceived: from})
		if _, ok := first.(*frames.Resumed); ok {
			g.cut()
			t.Fatalf("resume from %d, past the %d bytes sent, was answered resumed", from, total)
		}
		t.expectError(ctx, g, fmt.Sprintf("resume from %d past the %d bytes sent", from, total), first,
			frames.Error{Code: frames.OperationFailed, Operation: "resume_process", Reason: "replay_beyond_end"})
	}
	p, _ = t.resume(ctx, o, total)
	t.awaitExit(ctx, p)
	if p.eof == nil || p.eof.Off != total {
		t.Fatalf("resume from %d after the refusals: no stdout_eof %d before the exit", total, total)
	}
	t.destroyOn(ctx, p, o.ProcessID)
}
