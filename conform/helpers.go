package conform

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/coder/websocket"

	"github.com/procwire/procwire/frames"
)

// shellCommands are the commands the shell cases use besides sh itself.
var shellCommands = []string{"cat", "wc", "head", "sleep", "stty", "tty"}

// probeResult is what the first open of a run found out.
type probeResult struct {
	opened  *frames.Opened
	missing []string // commands the target lacks ("sh" when it has no shell)
	// skip or fail, when set, is the outcome every case needing a process
	// takes: the target refused the probe's open. A deviation after the
	// open is left for the cases to find, each under its own name.
	skip, fail string
}

// probeTarget opens one process that lists the shell commands the target
// lacks; its opened supplies the evidence and limits of the report.
func (r *runner) probeTarget(ctx context.Context) *probeResult {
	r.probeOnce.Do(func() {
		pr := &probeResult{}
		r.probe = pr
		t := &T{r: r, name: "probe", outcome: Pass}
		done := make(chan struct{})
		go func() {
			defer close(done)
			defer t.cleanup()
			script := `for c in "$@"; do command -v "$c" >/dev/null 2>&1 || printf '%s\n' "$c"; done`
			p, o := t.open(ctx, t.instance(), t.request("sh", append([]string{"-c", script, "sh"}, shellCommands...)...), openOptions{})
			pr.opened = o
			t.awaitEOFAndExit(ctx, p)
			pr.missing = strings.Fields(string(p.stdout))
			t.destroyOn(ctx, p, o.ProcessID)
		}()
		<-done
		switch {
		case t.outcome == Skip && t.lacking == "sh":
			pr.missing = []string{"sh"}
		case t.outcome == Skip:
			pr.skip = t.detail
		case t.outcome == Fail && pr.opened == nil:
			pr.fail = "the first open failed: " + t.detail
		}
	})
	return r.probe
}

// needCommands ends the case as a skip when the target lacks a command
// (always including sh) or refused the probe, as a failure when the probe
// found a deviation.
func (t *T) needCommands(ctx context.Context, cmds ...string) {
	pr := t.r.probeTarget(ctx)
	switch {
	case pr.fail != "":
		t.Fatalf("%s", pr.fail)
	case pr.skip != "":
		t.Skipf("%s", pr.skip)
	}
	var lack []string
	for _, c := range append([]string{"sh"}, cmds...) {
		if slices.Contains(pr.missing, c) && !slices.Contains(lack, c) {
			lack = append(lack, c)
		}
	}
	if len(lack) > 0 {
		t.Skipf("the target lacks %s", strings.Join(lack, ", "))
	}
}

// request builds a process request with the run's working directory and a
// small fixed environment.
func (t *T) request(exe string, args ...string) frames.ProcessRequest {
	if args == nil {
		args = []string{}
	}
	return frames.ProcessRequest{
		Executable:       exe,
		Arguments:        args,
		WorkingDirectory: t.r.cfg.WorkingDirectory,
		Environment:      map[string]string{"PATH": "/usr/local/bin:/usr/bin:/bin", "LC_ALL": "C"},
	}
}

// sh builds a request running script with sh -c.
func (t *T) sh(script string) frames.ProcessRequest {
	return t.request("sh", "-c", script)
}

// dial connects or ends the case.
func (t *T) dial(ctx context.Context, o dialOptions) *peer {
	p, _, err := t.r.dial(ctx, o)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return p
}

// openOptions are the optional fields of an open.
type openOptions struct {
	stdoutWindow, stdinWindow int64
	outputEnc, stdinEnc       string // encodings offered
}

// open starts a process on instance and returns the connection serving it
// and its opened. A refusal ends the case: a skip when the target lacks the
// executable or did not admit the instance, a failure otherwise.
func (t *T) open(ctx context.Context, instance string, req frames.ProcessRequest, o openOptions) (*peer, *frames.Opened) {
	p := t.dial(ctx, dialOptions{})
	f := &frames.Open{InstanceID: instance, Request: req, StdoutWindow: o.stdoutWindow, StdinWindow: o.stdinWindow,
		OutputEnc: o.outputEnc, StdinEnc: o.stdinEnc}
	if err := p.send(ctx, f); err != nil {
		t.Fatalf("open: %v", err)
	}
	first, err := t.nextAnswer(ctx, p)
	if err != nil {
		t.Fatalf("waiting for the answer to open %s on %s: %v", req.Executable, instance, err)
	}
	switch a := first.(type) {
	case *frames.Opened:
		t.opened = append(t.opened, opened{a.ProcessID, a.Token})
		return p, a
	case *frames.Error:
		if a.Code == frames.OperationFailed && a.Reason == "executable_not_found" {
			t.lacking = req.Executable
			t.Skipf("the target has no %q (open answered %s)", req.Executable, show(a))
		}
		if a.Code == frames.InstanceNotFound {
			t.Skipf("the target did not admit instance %q (%s); choose an admitted prefix", instance, show(a))
		}
		t.Fatalf("open %s on %s answered %s", req.Executable, instance, show(a))
	}
	t.Fatalf("open answered %s, not opened", show(first))
	return nil, nil
}

// resume re-attaches process o from stdout offset from, expecting resumed.
func (t *T) resume(ctx context.Context, o *frames.Opened, from int64) (*peer, *frames.Resumed) {
	return t.resumeWith(ctx, o, from, dialOptions{})
}

// resumeWith is resume over a connection dialled with opts.
func (t *T) resumeWith(ctx context.Context, o *frames.Opened, from int64, opts dialOptions) (*peer, *frames.Resumed) {
	p, first := t.resumeRawWith(ctx, &frames.Resume{ProcessID: o.ProcessID, Token: o.Token, StdoutReceived: from}, opts)
	r, ok := first.(*frames.Resumed)
	if !ok {
		t.Fatalf("resume from %d answered %s, not resumed", from, show(first))
	}
	if d := evidenceDiff(r.Evidence, o.Evidence); d != "" {
		t.Fatalf("resumed evidence differs from opened's: %s", d)
	}
	if r.ProcessID != o.ProcessID {
		t.Fatalf("resumed names process %s, resumed was %s", r.ProcessID, o.ProcessID)
	}
	p.expectFrom(from, o.StdoutWindow)
	// What the server holds from the last ack it got may start below
	// from; acknowledging from at once keeps the window's accounting on
	// both sides the same.
	if err := p.send(ctx, &frames.Ack{Stdout: from}); err != nil {
		t.Fatalf("ack after resume: %v", err)
	}
	return p, r
}

// resumeRaw sends f on a new connection and returns the first answer.
func (t *T) resumeRaw(ctx context.Context, f *frames.Resume) (*peer, frames.Frame) {
	return t.resumeRawWith(ctx, f, dialOptions{})
}

func (t *T) resumeRawWith(ctx context.Context, f *frames.Resume, opts dialOptions) (*peer, frames.Frame) {
	p := t.dial(ctx, opts)
	p.expectFrom(f.StdoutReceived, 0)
	if err := p.send(ctx, f); err != nil {
		t.Fatalf("resume: %v", err)
	}
	first, err := t.nextAnswer(ctx, p)
	if err != nil {
		t.Fatalf("waiting for the answer to resume from %d: %v", f.StdoutReceived, err)
	}
	return p, first
}

// await reads frames until pred accepts one, acknowledging stdout as it
// comes so that the window never stalls. The connection's end or a
// deviation ends the case.
func (t *T) await(ctx context.Context, p *peer, what string, pred func(frames.Frame) bool) frames.Frame {
	for {
		f, err := p.next(ctx)
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		if _, ok := f.(*frames.Stdout); ok && p.window > 0 && p.stdoutEnd-p.acked >= p.window/2 {
			if err := p.send(ctx, &frames.Ack{Stdout: p.stdoutEnd}); err != nil {
				t.Fatalf("ack: %v", err)
			}
		}
		if pred(f) {
			return f
		}
	}
}

// awaitState reads until cond holds, which it may already: a frame read
// by an earlier wait may have made it true (a credit that came while the
// case waited for stdout), and nothing more may come.
func (t *T) awaitState(ctx context.Context, p *peer, what string, cond func() bool) {
	if cond() {
		return
	}
	t.await(ctx, p, what, func(frames.Frame) bool { return cond() })
}

// awaitType reads until a frame of type typ.
func (t *T) awaitType(ctx context.Context, p *peer, typ frames.Type) frames.Frame {
	return t.await(ctx, p, typ.String(), func(f frames.Frame) bool { return f.Type() == typ })
}

// awaitExit reads until the exit and returns it. When stdout ended it
// checks that stdout_eof came first (the normal case, PROTOCOL.md §5).
func (t *T) awaitExit(ctx context.Context, p *peer) *frames.Exit {
	if p.exit != nil {
		return p.exit
	}
	return t.awaitType(ctx, p, frames.TypeExit).(*frames.Exit)
}

// awaitEOFAndExit reads until both stdout_eof and exit arrived. exit
// normally follows stdout_eof, but may come first when the pipe did not end
// within exit_wait_ms of the child's death (a loaded machine), so either
// order is taken.
func (t *T) awaitEOFAndExit(ctx context.Context, p *peer) *frames.Exit {
	if p.eof == nil || p.exit == nil {
		t.awaitState(ctx, p, "stdout_eof and exit", func() bool { return p.eof != nil && p.exit != nil })
	}
	return p.exit
}

// awaitClose reads until the connection ends; a frame allow refuses ends
// the case. It returns the close.
func (t *T) awaitClose(ctx context.Context, p *peer, what string, allow func(frames.Frame) bool) *closedError {
	for {
		f, err := p.next(ctx)
		if err != nil {
			if ce, ok := errors.AsType[*closedError](err); ok {
				return ce
			}
			t.Fatalf("waiting for %s: %v", what, err)
		}
		if allow == nil || !allow(f) {
			t.Fatalf("waiting for %s, the server sent %s", what, show(f))
		}
	}
}

// expectClose waits for a close with code, whose reason satisfies reason
// (when not nil).
func (t *T) expectClose(ctx context.Context, p *peer, what string, code websocket.StatusCode, allow func(frames.Frame) bool, reason func(string) bool) *closedError {
	ce := t.awaitClose(ctx, p, what, allow)
	if ce.code != code {
		t.Fatalf("%s: expected close %d, got %v", what, int(code), ce)
	}
	if reason != nil && !reason(ce.reason) {
		t.Fatalf("%s: close %d with reason %q", what, int(code), ce.reason)
	}
	return ce
}

// expectError reads the answer to a first frame, which must be an error
// matching want on every field want sets, followed by close 1000.
func (t *T) expectError(ctx context.Context, p *peer, what string, first frames.Frame, want frames.Error) *frames.Error {
	e, ok := first.(*frames.Error)
	if !ok {
		t.Fatalf("%s: expected error %s, got %s", what, show(&want), show(first))
	}
	if e.Code != want.Code ||
		want.Operation != "" && e.Operation != want.Operation ||
		want.Expected != "" && e.Expected != want.Expected ||
		want.Actual != "" && e.Actual != want.Actual ||
		want.Reason != "" && e.Reason != want.Reason ||
		want.Requirement != "" && e.Requirement != want.Requirement {
		t.Fatalf("%s: expected error %s, got %s", what, show(&want), show(e))
	}
	t.expectClose(ctx, p, what+" (the close after the error)", websocket.StatusNormalClosure, nil, nil)
	return e
}

// destroyOn destroys the process served by p with a destroy inside the
// session: exit (unless already sent here), destroyed, close 1000.
func (t *T) destroyOn(ctx context.Context, p *peer, id string) *frames.Exit {
	if err := p.send(ctx, &frames.Destroy{}); err != nil {
		t.Fatalf("destroy: %v", err)
	}
	d := t.await(ctx, p, "destroyed", func(f frames.Frame) bool { return f.Type() == frames.TypeDestroyed }).(*frames.Destroyed)
	if d.ProcessID != id {
		t.Fatalf("destroy answered %s for process %s", show(d), id)
	}
	t.expectClose(ctx, p, "the close after destroyed", websocket.StatusNormalClosure, nil, nil)
	t.forget(id)
	return p.exit
}

// destroyFirst destroys process id with destroy as the first frame of a new
// connection and returns the exit it reported (nil if none): exit,
// destroyed, close 1000.
func (t *T) destroyFirst(ctx context.Context, id, token string) *frames.Exit {
	p := t.dial(ctx, dialOptions{})
	if err := p.send(ctx, &frames.Destroy{ProcessID: id, Token: token}); err != nil {
		t.Fatalf("destroy: %v", err)
	}
	f, err := t.nextAnswer(ctx, p)
	if err != nil {
		t.Fatalf("waiting for the answer to destroy of %s as a first frame: %v", id, err)
	}
	if _, ok := f.(*frames.Exit); ok {
		if f, err = p.next(ctx); err != nil {
			t.Fatalf("destroy of %s as a first frame, after its exit: %v", id, err)
		}
	}
	d, ok := f.(*frames.Destroyed)
	if !ok || d.ProcessID != id {
		t.Fatalf("destroy of %s as a first frame answered %s, not destroyed", id, show(f))
	}
	t.expectClose(ctx, p, "the close after destroyed", websocket.StatusNormalClosure, nil, nil)
	t.forget(id)
	return p.exit
}

// forget drops id from the processes the cleanup destroys.
func (t *T) forget(id string) {
	t.opened = slices.DeleteFunc(t.opened, func(o opened) bool { return o.id == id })
}

// sendStdin sends n bytes of pattern from offset off in frames of at most
// maxData bytes and returns the offset after them.
func (t *T) sendStdin(ctx context.Context, p *peer, off, n, maxData int64) int64 {
	buf := make([]byte, min(n, maxData))
	for end := off + n; off < end; {
		c := min(end-off, maxData)
		for i := range c {
			buf[i] = pattern(off + i)
		}
		if err := p.send(ctx, &frames.Stdin{Off: off, Data: buf[:c]}); err != nil {
			t.Fatalf("stdin at %d (the limit is %d): %v", off, p.limit, err)
		}
		off += c
	}
	return off
}

// pattern is the byte at offset i of the stdin the cases send.
func pattern(i int64) byte { return "0123456789abcdef\n"[i%17] }

// exitString renders an exit for messages.
func exitString(e *frames.Exit) string {
	if e == nil {
		return "none"
	}
	return show(e)
}

// sameExit reports whether two exits are equal (both nil included).
func sameExit(a, b *frames.Exit) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// wantCode is the exit of a process that exited with code.
func wantCode(code int) *frames.Exit { return &frames.Exit{Code: code} }

// wantSignal is the exit of a process killed by sig.
func wantSignal(sig string) *frames.Exit { return &frames.Exit{Signal: sig} }

// checkExit ends the case unless got equals want.
func (t *T) checkExit(what string, got, want *frames.Exit) {
	if !sameExit(got, want) {
		t.Fatalf("%s: exit %s, expected %s", what, exitString(got), exitString(want))
	}
}

// evidenceDiff names the first field where got differs from want, or "".
func evidenceDiff(got, want frames.Evidence) string {
	for _, f := range []struct{ name, got, want string }{
		{"wire_revision", got.WireRevision, want.WireRevision},
		{"provider", got.Provider, want.Provider},
		{"provider_revision", got.ProviderRevision, want.ProviderRevision},
		{"instance_id", got.InstanceID, want.InstanceID},
		{"process_id", got.ProcessID, want.ProcessID},
		{"executable", got.Executable, want.Executable},
		{"working_directory", got.WorkingDirectory, want.WorkingDirectory},
		{"arguments_digest", got.ArgumentsDigest, want.ArgumentsDigest},
		{"started_at", got.StartedAt, want.StartedAt},
	} {
		if f.got != f.want {
			return fmt.Sprintf("evidence.%s is %q, opened had %q", f.name, f.got, f.want)
		}
	}
	return ""
}
