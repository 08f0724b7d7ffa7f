package conform

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"time"

	"github.com/procwire/procwire/frames"
)

// argumentsDigest is PROTOCOL.md §6's digest, computed here on its own so
// that a fault shared with package frames would still be seen.
func argumentsDigest(args []string) string {
	h := sha256.New()
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(args)))
	h.Write(n[:])
	for _, a := range args {
		binary.BigEndian.PutUint32(n[:], uint32(len(a)))
		h.Write(n[:])
		h.Write([]byte(a))
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

func caseOpenEvidence(ctx context.Context, t *T) {
	inst := t.instance()
	// Arguments that an echo must not normalise: empty, spaces, quotes,
	// a backslash, a tab, non-ASCII.
	args := []string{"-c", `printf '%s|' "$@"`, "conform", "", "two words", `quote" back\slash`, "tab\there", "ünïcødé ✓"}
	req := t.request("sh", args...)
	before := time.Now()
	p, o := t.open(ctx, inst, req, openOptions{stdoutWindow: 1 << 16})
	ev := o.Evidence
	for _, c := range []struct{ field, got, want string }{
		{"wire_revision", ev.WireRevision, frames.WireRevision},
		{"instance_id", ev.InstanceID, inst},
		{"process_id", ev.ProcessID, o.ProcessID},
		{"executable", ev.Executable, req.Executable},
		{"working_directory", ev.WorkingDirectory, req.WorkingDirectory},
		{"arguments_digest", ev.ArgumentsDigest, argumentsDigest(args)},
	} {
		if c.got != c.want {
			t.Fatalf("evidence.%s is %q, expected %q (opened %s)", c.field, c.got, c.want, show(o))
		}
	}
	started, err := frames.ParseTime(ev.StartedAt)
	if err != nil {
		t.Fatalf("evidence.started_at %q is not canonical: %v", ev.StartedAt, err)
	}
	if skew := started.Sub(before); skew < -time.Hour || skew > time.Hour {
		t.Notef("started_at is %v away from this machine's clock", skew.Round(time.Second))
	}
	if o.StdoutWindow > 1<<16 {
		t.Fatalf("opened.stdout_window %d is more than the %d asked for", o.StdoutWindow, 1<<16)
	}
	if o.StdinLimit < 1 {
		t.Fatalf("opened.stdin_limit is %d: no stdin can ever be sent", o.StdinLimit)
	}
	const want = "|two words|quote\" back\\slash|tab\there|ünïcødé ✓|" // the empty argument first
	exit := t.awaitEOFAndExit(ctx, p)
	if got := string(p.stdout); got != want {
		t.Fatalf("the child saw the arguments as %q, expected %q", got, want)
	}
	t.checkExit("sh -c printf", exit, wantCode(0))
	t.destroyOn(ctx, p, o.ProcessID)
}

func caseStartFailure(ctx context.Context, t *T) {
	inst := t.instance()
	const missing = "conform-no-such-executable-7f3a9c"
	p := t.dial(ctx, dialOptions{})
	if err := p.send(ctx, &frames.Open{InstanceID: inst, Request: t.request(missing)}); err != nil {
		t.Fatalf("open: %v", err)
	}
	first, err := t.nextAnswer(ctx, p)
	if err != nil {
		t.Fatalf("open of a missing executable: %v", err)
	}
	if o, ok := first.(*frames.Opened); ok {
		t.opened = append(t.opened, opened{o.ProcessID, o.Token})
	}
	t.expectError(ctx, p, "open of a missing executable", first,
		frames.Error{Code: frames.OperationFailed, Operation: "open_process", Reason: "executable_not_found"})
	p, o := t.open(ctx, inst, t.sh("exit 0"), openOptions{})
	t.awaitExit(ctx, p)
	t.destroyOn(ctx, p, o.ProcessID)
}

func caseOnePerInstance(ctx context.Context, t *T) {
	inst := t.instance()
	p1, o1 := t.open(ctx, inst, t.sh("exit 0"), openOptions{})
	t.awaitEOFAndExit(ctx, p1)

	secondOpen := func(what string) {
		p := t.dial(ctx, dialOptions{})
		if err := p.send(ctx, &frames.Open{InstanceID: inst, Request: t.sh("exit 0")}); err != nil {
			t.Fatalf("open: %v", err)
		}
		first, err := t.nextAnswer(ctx, p)
		if err != nil {
			t.Fatalf("a second open on %s %s: %v", inst, what, err)
		}
		if o, ok := first.(*frames.Opened); ok {
			t.opened = append(t.opened, opened{o.ProcessID, o.Token})
			t.Fatalf("a second open on instance %s %s was answered opened (process %s beside %s)", inst, what, o.ProcessID, o1.ProcessID)
		}
		t.expectError(ctx, p, "a second open on the instance "+what, first,
			frames.Error{Code: frames.LifecycleConflict, Operation: "open_process", Actual: "process_already_open"})
	}
	secondOpen("while its process is attached, after it exited")
	p1.cut()
	secondOpen("while its exited process is detached")

	t.destroyFirst(ctx, o1.ProcessID, o1.Token)
	p, o := t.open(ctx, inst, t.sh("exit 0"), openOptions{})
	t.awaitExit(ctx, p)
	t.destroyOn(ctx, p, o.ProcessID)
}
