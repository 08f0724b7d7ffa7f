package conform

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"

	"github.com/coder/websocket"

	"github.com/procwire/procwire/frames"
)

// The optional fields of v1 (PROTOCOL.md §9): open.open_key and destroy by
// instance_id+open_key. A server that predates them refuses the field with
// 1007 "<frame>.<field>: unknown_field"; its cases are then recorded skips.

// randomKey returns a fresh open_key: 256 random bits in hex.
func randomKey() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// first sends f as the first frame of a new connection dialled with
// header and returns the answer. A close 1007 refusing field as
// unknown_field ends the case as a skip: the target predates it.
func (t *T) first(ctx context.Context, f frames.Frame, header http.Header, field string) (*peer, frames.Frame) {
	p := t.dial(ctx, dialOptions{header: header})
	if err := p.send(ctx, f); err != nil {
		t.Fatalf("%s: %v", f.Type(), err)
	}
	a, err := t.nextAnswer(ctx, p)
	if err != nil {
		if ce, ok := errors.AsType[*closedError](err); ok && ce.code == websocket.StatusInvalidFramePayloadData &&
			strings.HasPrefix(ce.reason, field+": unknown_field") {
			t.Skipf("the target does not implement %s (it refused it: %v), as a server before it does (PROTOCOL.md §9)", field, ce)
		}
		t.Fatalf("%s as a first frame: %v", show(f), err)
	}
	if o, ok := a.(*frames.Opened); ok {
		t.opened = append(t.opened, opened{o.ProcessID, o.Token})
	}
	return p, a
}

// openKeyed opens with key, expecting opened.
func (t *T) openKeyed(ctx context.Context, inst, key string, req frames.ProcessRequest) (*peer, *frames.Opened) {
	p, a := t.first(ctx, &frames.Open{InstanceID: inst, Request: req, OpenKey: key}, nil, "open.open_key")
	o, ok := a.(*frames.Opened)
	if !ok {
		t.Fatalf("an open with an open_key on a free instance answered %s", show(a))
	}
	return p, o
}

// sameOpened ends the case unless b announces the same process as a.
func (t *T) sameOpened(a, b *frames.Opened) {
	switch {
	case b.ProcessID != a.ProcessID:
		t.Fatalf("the repeated open started process %s beside %s: a second process for one open_key", b.ProcessID, a.ProcessID)
	case b.Token != a.Token:
		t.Fatalf("the repeated open of process %s answered another token", a.ProcessID)
	case evidenceDiff(b.Evidence, a.Evidence) != "":
		t.Fatalf("the repeated open: %s", evidenceDiff(b.Evidence, a.Evidence))
	case b.StdoutWindow != a.StdoutWindow || b.StderrWindow != a.StderrWindow || b.GraceMS != a.GraceMS ||
		b.HeartbeatMS != a.HeartbeatMS || b.ExitWaitMS != a.ExitWaitMS || b.MaxData != a.MaxData:
		t.Fatalf("the repeated open announced other bounds: %s, first %s", show(b), show(a))
	}
}

func caseOpenKeyRepeat(ctx context.Context, t *T) {
	inst, key := t.instance(), randomKey()
	req := t.sh("printf abc; exec cat")
	p1, o1 := t.openKeyed(ctx, inst, key, req)
	t.awaitState(ctx, p1, "the child's abc", func() bool { return p1.stdoutEnd >= 3 })
	p1.cut() // opened may as well have been lost: nothing acknowledged it

	p2, a := t.first(ctx, &frames.Open{InstanceID: inst, Request: req, OpenKey: key}, nil, "open.open_key")
	o2, ok := a.(*frames.Opened)
	if !ok {
		t.Fatalf("an open repeating instance_id and open_key of a live process answered %s, expected opened for process %s", show(a), o1.ProcessID)
	}
	t.sameOpened(o1, o2)
	t.awaitState(ctx, p2, "the replay from 0", func() bool { return p2.stdoutEnd >= 3 })
	if string(p2.stdout) != "abc" {
		t.Fatalf("the repeated open replayed %q, the child printed \"abc\"", p2.stdout)
	}

	// Stdin shows the server that this client has opened: a repeat is
	// now process_already_open, as is an open with another key.
	if err := p2.send(ctx, &frames.Stdin{Off: 0, Data: []byte("x")}); err != nil {
		t.Fatalf("stdin: %v", err)
	}
	t.awaitState(ctx, p2, "cat's echo", func() bool { return p2.stdoutEnd >= 4 })
	for _, k := range []struct{ what, key string }{{"the same open_key, after stdin", key}, {"another open_key", randomKey()}} {
		g, a := t.first(ctx, &frames.Open{InstanceID: inst, Request: req, OpenKey: k.key}, nil, "open.open_key")
		if o, ok := a.(*frames.Opened); ok {
			g.cut()
			if o.ProcessID != o1.ProcessID {
				t.Fatalf("an open with %s on a live instance started process %s beside %s", k.what, o.ProcessID, o1.ProcessID)
			}
			t.Fatalf("an open with %s answered opened for process %s, expected process_already_open", k.what, o.ProcessID)
		}
		t.expectError(ctx, g, "an open with "+k.what, a,
			frames.Error{Code: frames.LifecycleConflict, Operation: "open_process", Actual: "process_already_open"})
	}

	// After destroy the key starts nothing.
	t.destroyOn(ctx, p2, o1.ProcessID)
	g, a := t.first(ctx, &frames.Open{InstanceID: inst, Request: req, OpenKey: key}, nil, "open.open_key")
	if o, ok := a.(*frames.Opened); ok {
		g.cut()
		t.Fatalf("an open repeating the open_key of destroyed process %s answered opened (process %s)", o1.ProcessID, o.ProcessID)
	}
	t.expectError(ctx, g, "an open repeating the open_key of a destroyed process", a,
		frames.Error{Code: frames.LifecycleConflict, Operation: "open_process", Expected: "running", Actual: "process_destroyed"})
}

// destroyByKey sends destroy by instance and key as the first frame of a
// new connection and returns the connection and the first answer.
func (t *T) destroyByKey(ctx context.Context, inst, key string) (*peer, frames.Frame) {
	return t.first(ctx, &frames.Destroy{InstanceID: inst, OpenKey: key}, nil, "destroy.instance_id")
}

// expectDestroyed reads [exit] destroyed{id}, close 1000 after first, and
// returns the exit.
func (t *T) expectDestroyed(ctx context.Context, p *peer, what string, first frames.Frame, id string) *frames.Exit {
	f := first
	if _, ok := f.(*frames.Exit); ok {
		var err error
		if f, err = p.next(ctx); err != nil {
			t.Fatalf("%s, after its exit: %v", what, err)
		}
	}
	d, ok := f.(*frames.Destroyed)
	if !ok || d.ProcessID != id {
		t.Fatalf("%s answered %s, expected destroyed for process %s", what, show(f), id)
	}
	t.expectClose(ctx, p, "the close after destroyed", websocket.StatusNormalClosure, nil, nil)
	t.forget(id)
	return p.exit
}

func caseDestroyByKey(ctx context.Context, t *T) {
	inst, key := t.instance(), randomKey()
	a, o := t.openKeyed(ctx, inst, key, t.request("sleep", "600"))
	g, first := t.destroyByKey(ctx, inst, key)
	exit := t.expectDestroyed(ctx, g, "destroy by instance_id and open_key", first, o.ProcessID)
	if exit == nil {
		t.Fatalf("destroy by key of a running process answered destroyed without an exit")
	}
	// The attached connection ends the same way.
	if d := t.awaitType(ctx, a, frames.TypeDestroyed).(*frames.Destroyed); d.ProcessID != o.ProcessID {
		t.Fatalf("the attached connection was told %s", show(d))
	}
	t.expectClose(ctx, a, "the close of the attached connection after destroyed", websocket.StatusNormalClosure, nil, nil)
	g, first = t.destroyByKey(ctx, inst, key)
	if again := t.expectDestroyed(ctx, g, "a repeated destroy by key", first, o.ProcessID); !sameExit(again, exit) {
		t.Fatalf("a repeated destroy by key reported exit %s, the first %s", exitString(again), exitString(exit))
	}

	// A key that started nothing is remembered as destroyed: an open
	// carrying it later starts nothing.
	inst2, key2 := t.instance(), randomKey()
	for range 2 {
		g, first = t.destroyByKey(ctx, inst2, key2)
		t.expectError(ctx, g, "destroy by a key that started nothing", first,
			frames.Error{Code: frames.LifecycleConflict, Operation: "destroy_process", Actual: "process_not_found"})
	}
	g, first = t.first(ctx, &frames.Open{InstanceID: inst2, Request: t.sh("exit 0"), OpenKey: key2}, nil, "open.open_key")
	if o, ok := first.(*frames.Opened); ok {
		g.cut()
		t.Fatalf("an open with a key destroyed before its open arrived started process %s", o.ProcessID)
	}
	t.expectError(ctx, g, "an open with a key destroyed before it", first,
		frames.Error{Code: frames.LifecycleConflict, Operation: "open_process", Expected: "running", Actual: "process_destroyed"})
	// The instance itself was never taken.
	p, o2 := t.open(ctx, inst2, t.sh("exit 0"), openOptions{})
	t.awaitExit(ctx, p)
	t.destroyOn(ctx, p, o2.ProcessID)

	// A destroy naming both pairs does not decode; one naming none is not
	// allowed as a first frame.
	t.expectDecodeClose(ctx, t.dial(ctx, dialOptions{}), decodeSample{"a destroy naming both pairs",
		`{"type":"destroy","process_id":"` + sampleID + `","token":"` + sampleToken + `","instance_id":"` + inst2 + `","open_key":"` + key2 + `"}`})
	q := t.dial(ctx, dialOptions{})
	if err := q.send(ctx, &frames.Destroy{}); err != nil {
		t.Fatalf("destroy: %v", err)
	}
	t.expectClose(ctx, q, "a first-frame destroy naming nothing", websocket.StatusProtocolError, nil, nil)
}

func caseRoutingHeaders(ctx context.Context, t *T) {
	inst, other := t.instance(), t.instance()
	hdr := func(kv ...string) http.Header {
		h := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			h.Set(kv[i], kv[i+1])
		}
		return h
	}
	mismatch := func(what string, f frames.Frame, h http.Header) {
		g := t.dial(ctx, dialOptions{header: h})
		if err := g.send(ctx, f); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		a, err := g.next(ctx)
		if err == nil {
			if o, ok := a.(*frames.Opened); ok {
				t.opened = append(t.opened, opened{o.ProcessID, o.Token})
			}
			t.Fatalf("%s was served, answered %s: expected close 1002 before anything is done", what, show(a))
		}
		if ce, ok := errors.AsType[*closedError](err); !ok || ce.code != websocket.StatusProtocolError {
			t.Fatalf("%s: expected close 1002, got %v", what, err)
		}
	}

	// A header that disagrees with the first frame is refused before
	// anything is done: the instance stays free.
	req := t.request("cat")
	mismatch("an open whose Procwire-Instance names another instance", &frames.Open{InstanceID: inst, Request: req},
		hdr(frames.HeaderInstance, other))
	p, o := t.openWith(ctx, inst, req, hdr(frames.HeaderInstance, inst))

	good := hdr(frames.HeaderInstance, inst, frames.HeaderProcess, o.ProcessID)
	wrong := hdr(frames.HeaderInstance, inst, frames.HeaderProcess, sampleID)
	resume := &frames.Resume{ProcessID: o.ProcessID, Token: o.Token}
	mismatch("a resume whose Procwire-Process names another process", resume, wrong)
	mismatch("a resume whose Procwire-Instance names another instance", resume, hdr(frames.HeaderInstance, other, frames.HeaderProcess, o.ProcessID))
	mismatch("a destroy whose Procwire-Process names another process", &frames.Destroy{ProcessID: o.ProcessID, Token: o.Token}, wrong)

	// None of them touched the process: it is still attached to p.
	if err := p.send(ctx, &frames.Stdin{Off: 0, Data: []byte("still\n")}); err != nil {
		t.Fatalf("stdin: %v", err)
	}
	t.awaitState(ctx, p, "cat's echo after the refused connections", func() bool { return string(p.stdout) == "still\n" })

	// Headers that agree are accepted.
	q, _ := t.resumeWith(ctx, o, p.stdoutEnd, dialOptions{header: good})
	g := t.dial(ctx, dialOptions{header: good})
	if err := g.send(ctx, &frames.Destroy{ProcessID: o.ProcessID, Token: o.Token}); err != nil {
		t.Fatalf("destroy: %v", err)
	}
	a, err := g.next(ctx)
	if err != nil {
		t.Fatalf("destroy with agreeing headers: %v", err)
	}
	t.expectDestroyed(ctx, g, "destroy with agreeing headers", a, o.ProcessID)
	t.awaitType(ctx, q, frames.TypeDestroyed)
}

// openWith is open over a connection carrying header.
func (t *T) openWith(ctx context.Context, inst string, req frames.ProcessRequest, header http.Header) (*peer, *frames.Opened) {
	p, a := t.first(ctx, &frames.Open{InstanceID: inst, Request: req}, header, "open")
	o, ok := a.(*frames.Opened)
	if !ok {
		t.Fatalf("an open with routing headers that agree answered %s", show(a))
	}
	return p, o
}

// caseStaleConnection: a repeated open or a resume read from a connection
// the server accepted before the one holding the process (a client's
// abandoned attempt, its first frame still buffered at the server) must
// not take the process from the live connection (PROTOCOL.md §4.4).
func caseStaleConnection(ctx context.Context, t *T) {
	inst, key := t.instance(), randomKey()
	req := t.sh("exec cat")
	older := t.dial(ctx, dialOptions{}) // accepted first, its open sent last
	p, o := t.openKeyed(ctx, inst, key, req)
	if err := older.send(ctx, &frames.Open{InstanceID: inst, Request: req, OpenKey: key}); err != nil {
		t.Fatalf("open on the older connection: %v", err)
	}
	t.expectClose(ctx, older, "an open repeated on a connection accepted before the one holding the process", frames.CloseResumedElsewhere, nil, nil)
	var stdinOff int64
	echo := func(p *peer, what string) {
		off := p.stdoutEnd
		if err := p.send(ctx, &frames.Stdin{Off: stdinOff, Data: []byte("x")}); err != nil {
			t.Fatalf("stdin on %s: %v", what, err)
		}
		stdinOff++
		t.awaitState(ctx, p, "cat's echo on "+what, func() bool { return p.stdoutEnd > off })
	}
	echo(p, "the newer connection, after the stale open")

	older = t.dial(ctx, dialOptions{})
	p2, _ := t.resume(ctx, o, p.stdoutEnd)
	if err := older.send(ctx, &frames.Resume{ProcessID: o.ProcessID, Token: o.Token, StdoutReceived: p.stdoutEnd}); err != nil {
		t.Fatalf("resume on the older connection: %v", err)
	}
	t.expectClose(ctx, older, "a resume on a connection accepted before the one holding the process", frames.CloseResumedElsewhere, nil, nil)
	echo(p2, "the newer connection, after the stale resume")
	t.destroyOn(ctx, p2, o.ProcessID)
}
