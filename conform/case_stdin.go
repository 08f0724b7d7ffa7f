package conform

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/coder/websocket"

	"github.com/procwire/procwire/frames"
)

// holdScript prints "ready" and reads nothing from stdin until SIGTERM,
// which makes it wc -c: so the case decides when the child starts reading.
// (SIGTERM, not SIGINT: a shell started in the background ignores SIGINT
// and its children cannot trap it.)
// SIGINT it ignores: a signal that only makes the server answer.
const holdScript = `trap 'exec wc -c' TERM; trap '' INT; echo ready; while :; do sleep 1; done`

// maxStdinSent bounds the stdin one case sends to fill a limit.
const maxStdinSent = 16 << 20

// awaitReady waits for holdScript's "ready".
func (t *T) awaitReady(ctx context.Context, p *peer) {
	t.await(ctx, p, `the child's "ready"`, func(frames.Frame) bool { return bytes.HasPrefix(p.stdout, []byte("ready\n")) })
}

// release sends SIGTERM with id to holdScript and waits for signaled.
func (t *T) release(ctx context.Context, p *peer, id int64) {
	if err := p.send(ctx, &frames.Signal{ID: id, Signal: frames.SIGTERM}); err != nil {
		t.Fatalf("signal: %v", err)
	}
	s := t.awaitType(ctx, p, frames.TypeSignaled).(*frames.Signaled)
	if s.ID != id || s.Result != frames.SignalDelivered {
		t.Fatalf("signal %d (SIGTERM) to a running child answered %s", id, show(s))
	}
}

// wcCount parses what holdScript's wc -c printed after "ready".
func (t *T) wcCount(p *peer) int64 {
	out := strings.TrimSpace(strings.TrimPrefix(string(p.stdout), "ready\n"))
	n, err := strconv.ParseInt(out, 10, 64)
	if err != nil {
		t.Fatalf("wc -c printed %q, not a count", out)
	}
	return n
}

func caseStdinCredit(ctx context.Context, t *T) {
	p, o := t.open(ctx, t.instance(), t.sh(holdScript), openOptions{stdinWindow: 1 << 20})
	t.awaitReady(ctx, p)
	limit := p.limit
	n := min(limit, maxStdinSent)
	if n < limit {
		t.Notef("stdin_limit %d: sent only the first %d bytes", limit, n)
	}
	// Every write must complete while the child reads nothing: the server
	// takes stdin up to the limit whatever the child does.
	off := t.sendStdin(ctx, p, 0, n, o.MaxData)
	t.release(ctx, p, 1)
	t.await(ctx, p, fmt.Sprintf("credit past %d once the child read", off), func(frames.Frame) bool { return p.limit > off })
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

func caseStdinOverrun(ctx context.Context, t *T) {
	// A large window, so that the pipe's own buffer filling is not worth a
	// grant and the limit holds still while the child reads nothing.
	p, o := t.open(ctx, t.instance(), t.sh(holdScript), openOptions{stdinWindow: 4 << 20})
	t.awaitReady(ctx, p)
	if p.limit > maxStdinSent {
		t.Skipf("stdin_limit %d is more than this case sends (%d)", p.limit, maxStdinSent)
	}
	// Fill the child's pipe, so that received stays ahead of consumed,
	// then take in every credit sent so far: a signal the child ignores
	// is answered after them.
	off := t.sendStdin(ctx, p, 0, min(p.limit, 256<<10), o.MaxData)
	if err := p.send(ctx, &frames.Signal{ID: 1, Signal: frames.SIGINT}); err != nil {
		t.Fatalf("signal: %v", err)
	}
	t.awaitType(ctx, p, frames.TypeSignaled)
	limit := p.limit
	off = t.sendStdin(ctx, p, off, limit-off, o.MaxData)
	over := min(o.MaxData, 4096)
	// The overrun, then what a server that took it would act on: the
	// release and the end of stdin, so that wc -c shows what reached it.
	for _, f := range []frames.Frame{
		&frames.Stdin{Off: off, Data: bytes.Repeat([]byte{'!'}, int(over))},
		&frames.Signal{ID: 2, Signal: frames.SIGTERM},
		&frames.StdinClose{Off: off + over},
	} {
		if err := p.send(ctx, f); err != nil {
			break // the server may have closed already
		}
	}
	accepted := ""
	covered := int64(0) // the largest limit announced before the server reacted
	var ce *closedError
	for ce == nil {
		f, err := p.next(ctx)
		if err != nil {
			var ok bool
			if ce, ok = err.(*closedError); !ok {
				t.Fatalf("after stdin past the limit: %v", err)
			}
			break
		}
		switch f.(type) {
		case *frames.Credit, *frames.Stderr:
		default:
			if accepted == "" {
				accepted, covered = show(f), p.maxLimit
			}
		}
		if f.Type() == frames.TypeExit {
			break
		}
	}
	if accepted == "" {
		covered = p.maxLimit
	}
	if covered >= off+over {
		t.Skipf("the server granted credit up to %d while the child read nothing, covering the overrun: no overrun to test", covered)
	}
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

	// The process is only detached: resume and let wc -c count what the
	// child received.
	p, r := t.resume(ctx, o, int64(len(p.stdout)))
	if r.StdinReceived != off {
		t.Fatalf("after the overrun, resumed.stdin_received is %d, expected %d (the bytes before it)", r.StdinReceived, off)
	}
	t.release(ctx, p, 3)
	if err := p.send(ctx, &frames.StdinClose{Off: off}); err != nil {
		t.Fatalf("stdin_close: %v", err)
	}
	t.awaitEOFAndExit(ctx, p)
	p.stdout = append([]byte("ready\n"), p.stdout...)
	if got := t.wcCount(p); got != off {
		t.Fatalf("wc -c counted %d bytes, the limit was %d: bytes past the limit reached the child", got, off)
	}
	t.destroyOn(ctx, p, o.ProcessID)
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
