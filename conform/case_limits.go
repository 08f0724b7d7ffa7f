package conform

import (
	"context"
	"fmt"

	"github.com/procwire/procwire/frames"
)

// The optional fields of issue 21 (PROTOCOL.md §3 open, exit, §6, §9):
// open.exit_reasons and exit.reason, open.limits and evidence.limits. A
// server that predates them refuses the open field with 1007
// "open.<field>: unknown_field"; the case is then a recorded skip. The
// connection invariants (peer.observe) check on every open of every case
// that exit.reason is one the open listed and that evidence.limits comes
// only to an open that carried limits.

// resourcesRefused is the refusal of an open asking looser limits than
// the server's, or one it does not enforce.
var resourcesRefused = frames.Error{Code: frames.CapabilityUnavailable, Requirement: "resources"}

// showLimits renders limits for messages.
func showLimits(l *frames.Limits) string {
	if l == nil {
		return "none"
	}
	return fmt.Sprintf("{pids %d, memory %d, cpu_millicores %d}", l.Pids, l.Memory, l.CPUMillicores)
}

// openFirst sends open f as the first frame of a connection, skipping the
// case when the target refuses field as unknown; it returns the answer.
func (t *T) openFirst(ctx context.Context, f *frames.Open, field string) (*peer, frames.Frame) {
	return t.first(ctx, f, nil, field)
}

func caseExitReasons(ctx context.Context, t *T) {
	// A SIGKILL that is no OOM kill, to an open listing no reason and then
	// to one listing oom (after a name of a later revision): neither exit
	// carries a reason. (An exit with a reason the open did not list is a
	// deviation the peer reports on any open of any case.)
	kill := t.sh(`kill -KILL $$`)
	p, o := t.open(ctx, t.instance(), kill, openOptions{})
	t.checkExit("sh killing itself with SIGKILL, exit_reasons absent", t.awaitEOFAndExit(ctx, p), wantSignal("SIGKILL"))
	t.destroyOn(ctx, p, o.ProcessID)

	p, a := t.openFirst(ctx, &frames.Open{InstanceID: t.instance(), Request: kill, ExitReasons: "zz9,oom"}, "open.exit_reasons")
	o, ok := a.(*frames.Opened)
	if !ok {
		t.Fatalf("an open with exit_reasons \"zz9,oom\" answered %s", show(a))
	}
	t.checkExit("sh killing itself with SIGKILL (no OOM kill), exit_reasons \"zz9,oom\"", t.awaitEOFAndExit(ctx, p), wantSignal("SIGKILL"))
	t.destroyOn(ctx, p, o.ProcessID)

	p, a = t.openFirst(ctx, &frames.Open{InstanceID: t.instance(), Request: t.sh("exit 3"), ExitReasons: "oom"}, "open.exit_reasons")
	if o, ok = a.(*frames.Opened); !ok {
		t.Fatalf("an open with exit_reasons \"oom\" answered %s", show(a))
	}
	t.checkExit("sh -c 'exit 3', exit_reasons \"oom\"", t.awaitEOFAndExit(ctx, p), wantCode(3))
	t.destroyOn(ctx, p, o.ProcessID)
}

// openLimited opens req with limits and returns the connection and the
// answer (opened or an error).
func (t *T) openLimited(ctx context.Context, instance string, req frames.ProcessRequest, l frames.Limits, reasons string) (*peer, frames.Frame) {
	return t.openFirst(ctx, &frames.Open{InstanceID: instance, Request: req, Limits: &l, ExitReasons: reasons}, "open.limits")
}

// refusedResources checks that an open asking l is refused
// resources before anything starts: the instance is still free after it.
func (t *T) refusedResources(ctx context.Context, what string, l frames.Limits) {
	inst := t.instance()
	p, a := t.openLimited(ctx, inst, t.sh("exit 0"), l, "")
	if o, ok := a.(*frames.Opened); ok {
		t.Fatalf("an open asking %s (%s) answered opened with evidence.limits %s, expected %s",
			showLimits(&l), what, showLimits(o.Evidence.Limits), show(&resourcesRefused))
	}
	t.expectError(ctx, p, fmt.Sprintf("an open asking %s (%s)", showLimits(&l), what), a, resourcesRefused)
	q, o := t.open(ctx, inst, t.sh("exit 0"), openOptions{})
	t.awaitEOFAndExit(ctx, q)
	t.destroyOn(ctx, q, o.ProcessID)
}

// memoryHog grows a shell string without bound.
const memoryHog = `x=0123456789abcdef; while :; do x=$x$x; done`

func caseLimits(ctx context.Context, t *T) {
	// limits {} asks nothing tighter: evidence says those in force.
	p, a := t.openLimited(ctx, t.instance(), t.sh("exit 0"), frames.Limits{}, "")
	o, ok := a.(*frames.Opened)
	if !ok {
		t.Fatalf("an open with limits {} answered %s, expected opened", show(a))
	}
	if o.Evidence.Limits == nil {
		t.Fatalf("an open with limits {} answered opened without evidence.limits (PROTOCOL.md §6: sent to an open that carried limits, even {})")
	}
	server := *o.Evidence.Limits
	t.awaitEOFAndExit(ctx, p)
	t.destroyOn(ctx, p, o.ProcessID)

	// A limit the server does not enforce is refused, whatever its value.
	unenforced := []struct {
		name string
		on   int64
		ask  frames.Limits
	}{
		{"pids", server.Pids, frames.Limits{Pids: 1 << 20}},
		{"memory", server.Memory, frames.Limits{Memory: 1 << 40}},
		{"cpu_millicores", server.CPUMillicores, frames.Limits{CPUMillicores: 1 << 20}},
	}
	for _, u := range unenforced {
		if u.on == 0 {
			t.refusedResources(ctx, u.name+", which the server does not enforce", u.ask)
		}
	}
	if server == (frames.Limits{}) {
		t.Skipf("the server enforces no limits (limits {} answered evidence.limits {}): tighter and looser limits untested; each limit asked was refused resources, as it must be")
	}

	// One above the server's is refused; one tighter is in force, with the
	// server's others.
	tight := server
	switch {
	case server.Memory > 0:
		tight.Memory = server.Memory
		if server.Memory >= 128<<20 {
			tight.Memory = 64 << 20
		}
		t.refusedResources(ctx, fmt.Sprintf("memory above the server's %d", server.Memory), frames.Limits{Memory: server.Memory + 1})
	case server.Pids > 0:
		tight.Pids = max(server.Pids/2, min(server.Pids, 16))
		t.refusedResources(ctx, fmt.Sprintf("pids above the server's %d", server.Pids), frames.Limits{Pids: server.Pids + 1})
	default:
		tight.CPUMillicores = max(server.CPUMillicores/2, 1)
		t.refusedResources(ctx, fmt.Sprintf("cpu_millicores above the server's %d", server.CPUMillicores), frames.Limits{CPUMillicores: server.CPUMillicores + 1})
	}
	ask := frames.Limits{Pids: tight.Pids * boolInt(tight.Pids != server.Pids), Memory: tight.Memory * boolInt(tight.Memory != server.Memory),
		CPUMillicores: tight.CPUMillicores * boolInt(tight.CPUMillicores != server.CPUMillicores)}
	p, a = t.openLimited(ctx, t.instance(), t.sh("exit 0"), ask, "")
	if o, ok = a.(*frames.Opened); !ok {
		t.Fatalf("an open asking %s, within the server's %s, answered %s", showLimits(&ask), showLimits(&server), show(a))
	}
	if got := o.Evidence.Limits; got == nil || *got != tight {
		t.Fatalf("an open asking %s of a server enforcing %s: evidence.limits %s, expected %s",
			showLimits(&ask), showLimits(&server), showLimits(got), showLimits(&tight))
	}
	t.checkExit("sh -c 'exit 0' under tighter limits", t.awaitEOFAndExit(ctx, p), wantCode(0))
	t.destroyOn(ctx, p, o.ProcessID)

	if server.Memory == 0 {
		return
	}
	// A shell growing without bound under the memory limit: an OOM kill
	// says oom to the open that listed it, and nothing to one that did
	// not (the peer checks); an allocation refused (RLIMIT_AS) ends it
	// with a code.
	mem := frames.Limits{Memory: tight.Memory}
	for _, reasons := range []string{"oom", ""} {
		p, a = t.openLimited(ctx, t.instance(), t.sh(memoryHog), mem, reasons)
		if o, ok = a.(*frames.Opened); !ok {
			t.Fatalf("an open of a memory hog asking %s answered %s", showLimits(&mem), show(a))
		}
		exit := t.awaitEOFAndExit(ctx, p)
		switch {
		case exit.Signal == "SIGKILL" && reasons == "oom" && exit.Reason == "":
			t.Notef("a memory hog under memory %d was SIGKILLed without reason oom (the server did not tell the OOM kill)", mem.Memory)
		case exit.Signal == "SIGKILL", exit.Signal == "" && exit.Code != 0:
			if reasons != "" {
				t.Notef("a memory hog under memory %d ended %s", mem.Memory, show(exit))
			}
		default:
			t.Fatalf("a memory hog under memory %d (exit_reasons %q) ended %s, expected SIGKILL (reason oom) or a failed allocation's code", mem.Memory, reasons, show(exit))
		}
		t.destroyOn(ctx, p, o.ProcessID)
	}
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
