//go:build linux

package bridge

import (
	"strconv"
	"sync"
	"syscall"

	"github.com/procwire/procwire/bridge/internal/initproc"
	"github.com/procwire/procwire/proc"
)

// A warm init (ContainOptions.WarmInit) is the init of the next process,
// started ahead: its stdio pipes, its cgroups and its init made, forked
// and admitted, and sent its set-up (limits, hardening, a private /proc),
// which it applies while it waits on its control pipe for its child. A
// Start whose process would get the same init (the same containment
// limits, the same set-up and the same user for the init) takes it and
// sends it only the child, instead of re-executing the server then; the
// next one is made in the background (when: below).
// An init re-executed from a large server binary costs milliseconds before
// it can read its payload (package initproc), and its hardening most of
// one more: together most of a cold first byte.
//
// Up to ContainOptions.WarmInits of them wait, the oldest taken first:
// an init takes milliseconds of CPU to start, and with one only, a start
// that follows the last by less than that finds its init still starting.
// The next warm init is made once the process that took the last one has
// printed its first output and the stdout pump has handed it on (or after
// firstOutputWait): its start-up, milliseconds of CPU, would otherwise
// delay that first byte on a 2-CPU machine, by about a millisecond when
// made beside the child's start and by a few hundred µs when made between
// the output's read and its frame (bench's ColdPhases, client-read). A
// Start that finds none ready has it made at once.
//
// Its goroutine: refill, one at a time, started by startRefill, making
// inits until depth wait, and tracked by wg; Close waits for it. Its lock,
// warm.mu, is taken alone; a Start may wait on it for a refill under way.
type warmInit struct {
	mu     sync.Mutex
	on     bool      // ContainOptions.WarmInit, until Close
	depth  int       // how many may wait: ContainOptions.WarmInits
	spares []*launch // forked, admitted and sent their set-up, oldest first
	key    spareKey  // the spares'
	making bool      // refill runs
	// waiting: a Start waits on made for the refill under way, which
	// started before it and so ends sooner than a cold init would. One
	// at a time: a second Start would only queue behind the first.
	waiting bool
	made    *sync.Cond // on mu; refill broadcasts each init it makes, and its end
	wg      sync.WaitGroup
	// startRefill starts the refill that making announces, once (a
	// sync.OnceFunc); nil when none waits to start.
	startRefill func()

	onRefill      func() // tests: called for each init a refill makes, or fails to
	onRefillStart func() // tests: called as a refill is started
}

// spareKey is what a process's init depends on beyond its child: the
// limits of its cgroups, its set-up, and the user it runs as (the
// server's own when hardened: it drops privileges for the child only).
type spareKey struct {
	limits   Limits
	setup    string // the init's set-up, initproc.SetupKey
	uid, gid uint32
	groups   string
	runAs    bool
}

// spareKeyOf returns l's key, and false when its start cannot use a warm
// init: no init at all, or a terminal, whose slave is made per process.
func spareKeyOf(l *launch) (spareKey, bool) {
	if l.ct.initMode() == "" || l.c.TTY != nil {
		return spareKey{}, false
	}
	pl := l.payload()
	k := spareKey{limits: l.limits, setup: initproc.SetupKey(pl)}
	if u := l.c.RunAs; u != nil && pl.Harden == nil {
		k.runAs, k.uid, k.gid = true, u.UID, u.GID
		for _, g := range u.Groups {
			k.groups += strconv.FormatUint(uint64(g), 10) + ","
		}
	}
	return k, true
}

// takeWarm hands l the warm init if one matching l is ready, or is being
// made and nobody else waits for it, and reports whether it did. Either
// way the next one will be made for l's key, unless l cannot use one: by
// refill, which the caller calls once its process printed its first
// output, or its start failed, so that the making (the re-execution of
// the server, milliseconds of CPU) does not compete with the first byte
// of the process it follows.
func (ct *Containment) takeWarm(l *launch) (taken bool, refill func()) {
	w := &ct.warm
	refill = func() {}
	key, ok := spareKeyOf(l)
	if !ok {
		return false, refill
	}
	w.mu.Lock()
	if w.on && len(w.spares) == 0 && w.making && !w.waiting {
		if w.startRefill != nil {
			w.startRefill() // this start needs it now
		}
		w.waiting = true
		for w.making && len(w.spares) == 0 {
			w.made.Wait()
		}
		w.waiting = false
	}
	if !w.on {
		w.mu.Unlock()
		return false, refill
	}
	var spare *launch
	var stale []*launch // made for another key
	if w.key == key && len(w.spares) > 0 {
		spare, w.spares = w.spares[0], w.spares[1:]
	} else {
		stale, w.spares = w.spares, nil
	}
	w.key = key
	if !w.making {
		w.making = true
		w.wg.Add(1)
		c := l.c
		w.startRefill = sync.OnceFunc(func() {
			if w.onRefillStart != nil {
				w.onRefillStart()
			}
			go ct.refill(key, c)
		})
		refill = w.startRefill
	}
	w.mu.Unlock()
	for _, s := range stale {
		s.discard()
	}
	if spare == nil {
		return false, refill
	}
	l.adopt(spare)
	return true, refill
}

// refill makes warm inits for key, from config c, until depth wait for
// the next Starts, or the containment is closed, or the key changed (a
// Start with another key discarded them), or a making fails.
func (ct *Containment) refill(key spareKey, c proc.Config) {
	w := &ct.warm
	defer w.wg.Done()
	for {
		w.mu.Lock()
		if !w.on || w.key != key || len(w.spares) >= w.depth {
			w.making, w.startRefill = false, nil
			w.made.Broadcast()
			w.mu.Unlock()
			return
		}
		w.mu.Unlock()
		spare, err := ct.newSpare(c)
		w.mu.Lock()
		if err == nil && w.on && w.key == key && len(w.spares) < w.depth {
			w.spares, spare = append(w.spares, spare), nil
		}
		// Done with the init that fills the pool, not at the next turn: a
		// Start that takes it meanwhile must see no refill under way, and
		// announce the next one for after its own first output.
		done := err != nil || !w.on || w.key != key || len(w.spares) >= w.depth
		if done {
			w.making, w.startRefill = false, nil
		}
		w.made.Broadcast()
		w.mu.Unlock()
		if spare != nil {
			spare.discard()
		}
		if w.onRefill != nil {
			w.onRefill()
		}
		if done {
			return
		}
	}
}

// newSpare starts an init for a process of config c, without a request:
// its stdio, cgroups and init forked and admitted, as Start would, and the
// init sent its set-up, which it applies as soon as it runs.
func (ct *Containment) newSpare(c proc.Config) (*launch, error) {
	l := &launch{ct: ct, c: c, limits: ct.Limits().Tighten(c.Limits), dir: "/", env: []string{}, pidFD: -1, cgFD: -1}
	if err := l.openStdio(); err != nil {
		l.closeAll()
		return nil, err
	}
	l.setAttr()
	err := l.makeCgroups()
	if l.cgFD >= 0 {
		defer syscall.Close(l.cgFD)
	}
	if err == nil {
		err = l.prepareInit()
	}
	if err == nil {
		err = l.fork()
	}
	if err != nil {
		return nil, l.fail(err)
	}
	if err := l.admit(); err != nil {
		return nil, l.fail(err)
	}
	if err := l.sendSetup(); err != nil {
		l.abandon()
		return nil, l.fail(err)
	}
	return l, nil
}

// adopt takes over what spare made: the server's ends of the stdio, the
// status and control pipes, the cgroups, and the init.
func (l *launch) adopt(spare *launch) {
	l.files = spare.files
	l.inW, l.outR, l.errR = spare.inW, spare.outR, spare.errR
	l.statusR, l.ctlW, l.status = spare.statusR, spare.ctlW, spare.status
	l.cg, l.v1 = spare.cg, spare.v1
	l.mode, l.pid, l.pfd = spare.mode, spare.pid, spare.pfd
}

// discard ends a warm init nobody will take: its init, which was waiting
// for its payload, is killed and reaped, and its pipes and cgroups go.
func (l *launch) discard() {
	l.abandon()
	_ = l.fail(nil)
}

// Close ends the containment's warm init and stops making them; Starts
// after it start their init cold. It waits for a warm init being made.
// It is idempotent; a Containment without WarmInit has nothing to close.
func (ct *Containment) Close() error {
	w := &ct.warm
	w.mu.Lock()
	w.on = false
	spares := w.spares
	w.spares = nil
	if w.startRefill != nil {
		w.startRefill() // it ends at once, with nothing made
	}
	w.mu.Unlock()
	w.wg.Wait()
	for _, s := range spares {
		s.discard()
	}
	return nil
}

// WarmInits reports whether the containment keeps a warm init
// (ContainOptions.WarmInit, until Close) and whether one is ready now.
func (ct *Containment) WarmInits() (on, ready bool) {
	w := &ct.warm
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.on, len(w.spares) > 0
}
