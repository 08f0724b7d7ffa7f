package conform

import (
	"context"
	"strconv"
	"strings"

	"github.com/coder/websocket"

	"github.com/procwire/procwire/frames"
)

// Terminals (PROTOCOL.md §10). A server without them passes these cases as
// recorded skips: one that refuses open.tty with SandboxCapabilityUnavailable
// requirement "tty", and one that predates open.tty (1007 unknown_field).

// openTTY opens script on a rows x cols terminal with term, or ends the
// case as a skip when the server gives no terminals.
func (t *T) openTTY(ctx context.Context, script string, rows, cols int, term string) (*peer, *frames.Opened) {
	f := &frames.Open{InstanceID: t.instance(), Request: t.sh(script), TTY: &frames.TTY{Rows: rows, Cols: cols, Term: term}}
	p, a := t.first(ctx, f, nil, "open.tty")
	switch a := a.(type) {
	case *frames.Opened:
		t.opened = append(t.opened, opened{a.ProcessID, a.Token})
		if !a.TTY {
			t.Fatalf("an open with tty answered opened without tty: true: %s", show(a))
		}
		return p, a
	case *frames.Error:
		if a.Code == frames.CapabilityUnavailable && a.Requirement == "tty" {
			t.Skipf("the target gives no terminals (it answered %s)", show(a))
		}
		t.Fatalf("an open with tty answered %s", show(a))
	}
	t.Fatalf("an open with tty answered %s, not opened", show(a))
	return nil, nil
}

// awaitStdout reads until stdout received on p holds want.
func (t *T) awaitStdout(ctx context.Context, p *peer, want, why string) {
	t.awaitState(ctx, p, "stdout "+strconv.Quote(want)+why, func() bool { return strings.Contains(string(p.stdout), want) })
}

func caseTTY(ctx context.Context, t *T) {
	script := `tty >/dev/null && echo tty-ok; stty size; echo "$TERM"; echo to-stderr >&2; exit 3`
	p, o := t.openTTY(ctx, script, 24, 80, "xterm-256color")
	t.checkExit("a process on a terminal", t.awaitEOFAndExit(ctx, p), wantCode(3))
	if want := "tty-ok\r\n24 80\r\nxterm-256color\r\nto-stderr\r\n"; string(p.stdout) != want {
		t.Fatalf("a process on a 24x80 terminal with term xterm-256color wrote %s to stdout, expected %s (stderr merged, \\r\\n from the terminal)",
			quoteLine(p.stdout), quoteLine([]byte(want)))
	}
	if len(p.stderr) > 0 {
		t.Fatalf("a stderr frame on a terminal session: %s", quoteLine(p.stderr))
	}
	t.destroyOn(ctx, p, o.ProcessID)

	// resize: SIGWINCH to the foreground job, with the new size.
	p, o = t.openTTY(ctx, `trap 'stty size; exit 0' WINCH; echo ready; while :; do sleep 1 & wait $!; done`, 24, 80, "")
	t.awaitStdout(ctx, p, "ready\r\n", "")
	if err := p.send(ctx, &frames.Resize{Rows: 50, Cols: 132}); err != nil {
		t.Fatalf("resize: %v", err)
	}
	// The answer is the process's, at once: bounded, so that a resize the
	// server drops fails the case instead of holding it.
	bctx, cancel := t.bounded(ctx)
	t.awaitStdout(bctx, p, "50 132\r\n", " after resize to 50x132")
	cancel()
	t.checkExit("a process on a terminal after resize", t.awaitEOFAndExit(ctx, p), wantCode(0))
	if want := "ready\r\n50 132\r\n"; string(p.stdout) != want {
		t.Fatalf("after resize to 50x132 the process wrote %s, expected %s", quoteLine(p.stdout), quoteLine([]byte(want)))
	}
	t.destroyOn(ctx, p, o.ProcessID)

	// resize on pipes is not allowed now.
	p, o = t.open(ctx, t.instance(), t.sh("exec sleep 300"), openOptions{})
	if o.TTY {
		t.Fatalf("an open without tty answered tty: true: %s", show(o))
	}
	if err := p.send(ctx, &frames.Resize{Rows: 50, Cols: 132}); err != nil {
		t.Fatalf("resize: %v", err)
	}
	t.expectClose(ctx, p, "a resize on a session without a terminal", websocket.StatusProtocolError, streamFrame, nil)
	t.destroyFirst(ctx, o.ProcessID, o.Token)
}

func caseTTYReplay(ctx context.Context, t *T) {
	// 2000 numbered lines, then the keystrokes typed after the resume.
	script := `stty -echo; i=0; while [ $i -lt 2000 ]; do echo line-$i; i=$((i+1)); done; read x; echo got-$x`
	p, o := t.openTTY(ctx, script, 24, 80, "")
	t.awaitStdout(ctx, p, "line-1999\r\n", "")
	all := append([]byte(nil), p.stdout...)
	const from = 4000 // mid-line
	if err := p.send(ctx, &frames.Ack{Stdout: from}); err != nil {
		t.Fatalf("ack: %v", err)
	}
	p.cut()
	g, r := t.resume(ctx, o, from)
	if !r.TTY {
		t.Fatalf("resumed for a process on a terminal without tty: true: %s", show(r))
	}
	if err := g.send(ctx, &frames.Stdin{Off: r.StdinReceived, Data: []byte("zz\r")}); err != nil {
		t.Fatalf("stdin: %v", err)
	}
	t.checkExit("the process on a terminal, resumed", t.awaitEOFAndExit(ctx, g), wantCode(0))
	if want := string(all[from:]) + "got-zz\r\n"; string(g.stdout) != want {
		t.Fatalf("the replay from %d of a terminal's output differs: got %d bytes, expected %d (%s...)", from, len(g.stdout), len(want), quoteLine(g.stdout[:min(len(g.stdout), 64)]))
	}
	t.destroyOn(ctx, g, o.ProcessID)
}
