package conform

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/procwire/procwire/frames"
)

// holdFill is how much stdout the hold script writes before it reads
// stdin: more than a stdout window of 16 KiB, the largest pipe buffer and
// whatever a server reads ahead, so the child blocks on its stdout until
// the case reads and acknowledges it. That is how a case holds a child
// still and then releases it without a signal (a signal waits for the
// stdin before it, PROTOCOL.md §5).
const holdFill = 2<<20 + 16<<10

// holdWindow is the stdout window a hold case asks for.
const holdWindow = 16 << 10

// holdScript writes holdFill bytes to stdout, then counts its stdin.
var holdScript = fmt.Sprintf("head -c %d /dev/zero; exec wc -c", holdFill)

// maxStdinSent bounds the stdin one case sends to fill a limit.
const maxStdinSent = 16 << 20

// release reads and acknowledges the hold script's stdout, so that it goes
// on to read its stdin.
func (t *T) release(ctx context.Context, p *peer) {
	t.awaitState(ctx, p, fmt.Sprintf("the child's %d bytes of stdout", holdFill), func() bool { return p.stdoutEnd >= holdFill })
}

// settle takes in the frames the server sent within d, without
// acknowledging stdout.
func (t *T) settle(ctx context.Context, p *peer, d time.Duration) {
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for {
		if _, err := p.next(wctx); err != nil {
			if wctx.Err() != nil && ctx.Err() == nil {
				return
			}
			t.Fatalf("%v", err)
		}
	}
}

// wcCount parses what the hold script's wc -c printed after its fill.
func (t *T) wcCount(p *peer) int64 {
	from := holdFill - p.stdoutStart
	if from < 0 || from > int64(len(p.stdout)) {
		t.Fatalf("stdout ended at %d, before the child's wc -c", p.stdoutEnd)
	}
	out := strings.TrimSpace(string(p.stdout[from:]))
	n, err := strconv.ParseInt(out, 10, 64)
	if err != nil {
		t.Fatalf("wc -c printed %q, not a count", out)
	}
	return n
}

func caseStdinCredit(ctx context.Context, t *T) {
	p, o := t.open(ctx, t.instance(), t.sh(holdScript), openOptions{stdinWindow: 1 << 20, stdoutWindow: holdWindow})
	limit := p.limit
	n := min(limit, maxStdinSent)
	if n < limit {
		t.Notef("stdin_limit %d: sent only the first %d bytes", limit, n)
	}
	// Every write must complete while the child reads nothing: the server
	// takes stdin up to the limit whatever the child does.
	off := t.sendStdin(ctx, p, 0, n, o.MaxData)
	t.release(ctx, p)
	t.awaitState(ctx, p, fmt.Sprintf("credit past %d once the child read", off), func() bool { return p.limit > off })
	extra := min(p.limit-off, 100_000)
	off = t.sendStdin(ctx, p, off, extra, o.MaxData)
	if err := p.send(ctx, &frames.StdinClose{Off: off}); err != nil {
		t.Fatalf("stdin_close: %v", err)
	}
	exit := t.awaitEOFAndExit(ctx, p)
	if got := t.wcCount(p); got != off {
		t.Fatalf("wc -c counted %d of the %d stdin bytes sent", got, off)
	}
	t.checkExit("wc -c", exit, wantCode(0))
	t.destroyOn(ctx, p, o.ProcessID)
}

var overrunReason = regexp.MustCompile(`^received ([0-9]+) bytes, allowed ([0-9]+)$`)

// settleTime is how long the overrun case takes in the credit a server
// grants while the child's pipe fills.
const settleTime = 300 * time.Millisecond

// caseStdinOverrun sends stdin past stdin_limit and expects close 1008
// with its reason, then resumes and checks that none of it reached the child.
func caseStdinOverrun(ctx context.Context, t *T) {
	// A large window, so that the pipe's own buffer filling is not worth a
	// grant and the limit holds still while the child reads nothing.
	p, o := t.open(ctx, t.instance(), t.sh(holdScript), openOptions{stdinWindow: 4 << 20, stdoutWindow: holdWindow})
	if p.limit > maxStdinSent {
		t.Skipf("stdin_limit %d is more than this case sends (%d)", p.limit, maxStdinSent)
	}
	off, over, limit := t.sendOverrun(ctx, p, o)
	ce, accepted, covered := t.awaitOverrunClose(ctx, p, off+over)
	if covered >= off+over {
		t.Skipf("the server granted credit up to %d while the child read nothing, covering the overrun: no overrun to test", covered)
	}
	t.checkOverrunClose(p, ce, accepted, off, over, limit)

	// The process is only detached: resume, release the child and let
	// wc -c count what it received.
	p, r := t.resume(ctx, o, p.stdoutEnd)
	if r.StdinReceived != off {
		t.Fatalf("after the overrun, resumed.stdin_received is %d, expected %d (the bytes before it)", r.StdinReceived, off)
	}
	if err := p.send(ctx, &frames.StdinClose{Off: off}); err != nil {
		t.Fatalf("stdin_close: %v", err)
	}
	t.awaitEOFAndExit(ctx, p)
	if got := t.wcCount(p); got != off {
		t.Fatalf("wc -c counted %d bytes, the limit was %d: bytes past the limit reached the child", got, off)
	}
	t.destroyOn(ctx, p, o.ProcessID)
}

// sendOverrun fills the child's pipe up to the stdin limit, then sends over
// bytes past it at off and the stdin_close that a server taking them would
// act on. limit is the stdin_limit the overrun broke.
func (t *T) sendOverrun(ctx context.Context, p *peer, o *frames.Opened) (off, over, limit int64) {
	// Fill the child's pipe, so that received stays ahead of consumed,
	// and take in the credit granted while it filled.
	off = t.sendStdin(ctx, p, 0, min(p.limit, 256<<10), o.MaxData)
	t.settle(ctx, p, settleTime)
	limit = p.limit
	off = t.sendStdin(ctx, p, off, limit-off, o.MaxData)
	over = min(o.MaxData, 4096)
	// The overrun, then the end of stdin; the child is released by
	// awaitOverrunClose so that wc -c shows what reached it.
	for _, f := range []frames.Frame{
		&frames.Stdin{Off: off, Data: bytes.Repeat([]byte{'!'}, int(over))},
		&frames.StdinClose{Off: off + over},
	} {
		if err := p.send(ctx, f); err != nil {
			break // the server may have closed already
		}
	}
	return off, over, limit
}

// awaitOverrunClose releases the child (acknowledging its fill) and reads
// until the connection closes or the process exits. It returns the close,
// if any, the first frame that shows the overrun was taken ("" if none),
// and the largest limit the server announced before it received the
// overrun's end (a grant still in flight when it was sent may cover it).
func (t *T) awaitOverrunClose(ctx context.Context, p *peer, end int64) (ce *closedError, accepted string, covered int64) {
	covered = p.maxLimit
	for ce == nil && p.exit == nil {
		// A server that closed for the overrun never reads this ack.
		if p.stdoutEnd > p.acked && p.stdoutEnd <= holdFill {
			if err := p.send(ctx, &frames.Ack{Stdout: p.stdoutEnd}); err != nil && accepted != "" {
				t.Fatalf("ack: %v", err)
			}
		}
		f, err := p.next(ctx)
		if err != nil {
			var ok bool
			if ce, ok = errors.AsType[*closedError](err); !ok {
				t.Fatalf("after stdin past the limit: %v", err)
			}
			break
		}
		switch f := f.(type) {
		case *frames.Credit:
			if f.StdinReceived < end {
				covered = max(covered, f.StdinLimit)
			}
			continue
		case *frames.Stderr:
			continue
		case *frames.Stdout:
			if f.Off+int64(len(f.Data)) <= holdFill {
				continue
			}
		}
		if accepted == "" {
			accepted = show(f)
		}
	}
	return ce, accepted, covered
}

// checkOverrunClose fails the case unless the overrun of over bytes at off,
// past limit, was refused with close 1008 and the reason PROTOCOL.md §7
// words.
func (t *T) checkOverrunClose(p *peer, ce *closedError, accepted string, off, over, limit int64) {
	if accepted != "" {
		got := "nothing"
		if p.exit != nil {
			got = fmt.Sprintf("%d bytes", t.wcCount(p))
		}
		t.Fatalf("stdin of %d bytes past stdin_limit %d was accepted: no close 1008, the server answered %s; wc -c counted %s",
			over, limit, accepted, got)
	}
	if ce.code != websocket.StatusPolicyViolation {
		t.Fatalf("stdin of %d bytes past stdin_limit %d: expected close 1008, got %v", over, limit, ce)
	}
	m := overrunReason.FindStringSubmatch(ce.reason)
	if m == nil {
		t.Fatalf("close 1008 with reason %q, expected \"received N bytes, allowed M\"", ce.reason)
	}
	if n, _ := strconv.ParseInt(m[1], 10, 64); n != off+over {
		t.Fatalf("close 1008 %q: %d bytes were received", ce.reason, off+over)
	}
	if a, _ := strconv.ParseInt(m[2], 10, 64); a < limit || a >= off+over {
		t.Fatalf("close 1008 %q: the limit announced was %d", ce.reason, limit)
	}
}

func caseHalfClose(ctx context.Context, t *T) {
	p, o := t.open(ctx, t.instance(), t.sh("wc -c; echo after-eof"), openOptions{})
	n := min(100_000, p.limit)
	off := t.sendStdin(ctx, p, 0, n, o.MaxData)
	if err := p.send(ctx, &frames.StdinClose{Off: off}); err != nil {
		t.Fatalf("stdin_close: %v", err)
	}
	exit := t.awaitEOFAndExit(ctx, p)
	lines := strings.Split(string(p.stdout), "\n")
	if len(lines) != 3 || strings.TrimSpace(lines[0]) != strconv.FormatInt(off, 10) || lines[1] != "after-eof" {
		t.Fatalf("after %d stdin bytes and stdin_close, the child printed %q, expected %q", off, p.stdout, fmt.Sprintf("%d\nafter-eof\n", off))
	}
	t.checkExit("wc -c", exit, wantCode(0))
	// A repeated stdin_close at the same offset changes nothing: the
	// connection stays, as a signal's answer shows.
	if err := p.send(ctx, &frames.StdinClose{Off: off}); err != nil {
		t.Fatalf("stdin_close: %v", err)
	}
	if err := p.send(ctx, &frames.Signal{ID: 1, Signal: frames.SIGTERM}); err != nil {
		t.Fatalf("signal: %v", err)
	}
	if s := t.awaitType(ctx, p, frames.TypeSignaled).(*frames.Signaled); s.ID != 1 || s.Result != frames.SignalAlreadyExited {
		t.Fatalf("signal 1 to an exited child answered %s, expected already_exited", show(s))
	}
	if err := p.send(ctx, &frames.Stdin{Off: off, Data: []byte("x")}); err != nil {
		t.Fatalf("stdin: %v", err)
	}
	t.expectClose(ctx, p, "stdin after stdin_close", websocket.StatusProtocolError, nil, nil)
	t.destroyFirst(ctx, o.ProcessID, o.Token)
}
