package fuzz

import (
	"errors"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/procwire/procwire/frames"
)

// race sends, on two new connections at once, a keyed open of cat on a
// free instance and either the same open (b&1 == 0: one process, held by
// the second connection; the first is opened and taken over, or, when its
// open is read last, closed unanswered: both with 4001) or a destroy by its key
// (the open starts nothing or is destroyed; the key ends destroyed). b&2
// makes the start fail.
func (l *life) race(inst, key int, b byte) {
	l.t.Helper()
	ks := l.keyState(inst, key)
	if l.live[inst] != nil || l.liveCount() >= lifeMaxProcesses || ks.tomb != no {
		l.open(inst, key, 0, 0)
		return
	}
	l.limitConns()
	f := catOpen(l.insts[inst], 0, 0)
	f.OpenKey = l.keys[key]
	destroy := b&1 != 0
	fails := destroy && b&2 != 0
	if fails {
		f.Request.Executable = "failcat"
	}
	held := b&4 != 0             // the first open waits in Start until the second frame is read
	cutFirst := held && b&8 != 0 // and its connection is cut meanwhile
	if held {
		f.Request.Executable = "slow" + f.Request.Executable
	}
	p := &lproc{n: len(l.procs), inst: inst, key: key, eofAt: -1, sigs: map[int64]frames.Frame{}}
	var w *lconn // a third connection repeating the open
	x := l.dial(l.insts[inst], "")
	y := l.dial(l.insts[inst], "")
	x.first, x.p = frames.TypeOpen, p
	y.p = p
	var second frames.Frame = f
	y.first = frames.TypeOpen
	if destroy {
		second = &frames.Destroy{InstanceID: l.insts[inst], OpenKey: l.keys[key]}
		y.first = frames.TypeDestroy
	}
	if !held {
		x.send(frames.Append(nil, f))
		y.send(frames.Append(nil, second))
	} else {
		entered, release := make(chan struct{}, 1), make(chan struct{})
		l.e.gate.mu.Lock()
		l.e.gate.entered, l.e.gate.release = entered, release
		l.e.gate.mu.Unlock()
		defer func() {
			l.e.gate.mu.Lock()
			l.e.gate.entered, l.e.gate.release = nil, nil
			l.e.gate.mu.Unlock()
		}()
		x.send(frames.Append(nil, f))
		select {
		case <-entered:
		case <-time.After(time.Until(l.deadline)):
			close(release)
			l.stuck("the held open never started")
		}
		admitted := make(chan struct{})
		if !destroy {
			l.e.admitted.Store(&admitted)
		}
		y.send(frames.Append(nil, second))
		if destroy && b&16 != 0 {
			// The open again, while the first still starts: it may take
			// the process over from the first before the destroy comes
			// (4001 there), or be refused.
			w = l.dial(l.insts[inst], "")
			w.first, w.p, w.want = frames.TypeOpen, p, websocket.StatusNormalClosure
			w.send(frames.Append(nil, f))
			x.wantAny = true
		}
		if destroy {
			// Nothing tells when the destroy is read: a connection's
			// round trip through the server gives it the time.
			z := l.dial("", "")
			z.cut()
			z.awaitServed()
			close(admitted)
		}
		select {
		case <-admitted:
		case <-time.After(time.Until(l.deadline)):
			close(release)
			l.stuck("the racing open was never admitted")
		}
		if cutFirst {
			x.cut()
		}
		l.log("the held open starts")
		close(release)
	}

	if !destroy {
		// Both opened, the same process; whichever was attached first is
		// taken over by the other.
		x.want, y.want = 4001, 4001
		y.await("the answer to the same open", func() bool { return y.hello != nil })
		oy, oky := y.hello.(*frames.Opened)
		winner := y
		if cutFirst {
			// The first open's connection was cut while it started: the
			// second is answered as a repeat of it (opened, the replay).
			l.require(oky, "an open repeating one cut while it started answered %T", y.hello)
			x.awaitServed()
			y.await("the replay after the race", func() bool { return y.credits > 0 })
		} else if !x.await("the answer to the first open", func() bool { return x.hello != nil }) {
			// The second open was read first: the first, on the connection
			// the server accepted before, takes nothing over and is closed
			// with 4001 unanswered (PROTOCOL.md §4.4).
			x.mu.Lock()
			err := x.readErr
			x.mu.Unlock()
			var ce websocket.CloseError
			l.require(errors.As(err, &ce) && ce.Reason == "attached to a newer connection",
				"%s: an open racing a newer connection's ended unanswered with %v", x.name, err)
			l.require(oky, "%s: the newer of two racing opens answered %T", y.name, y.hello)
			x.awaitServed()
		} else {
			ox, okx := x.hello.(*frames.Opened)
			l.require(okx && oky, "racing opens answered %T and %T", x.hello, y.hello)
			l.require(ox.ProcessID == oy.ProcessID && ox.Token == oy.Token && ox.Evidence == oy.Evidence,
				"racing opens opened %+v and %+v", ox, oy)
			timer := time.NewTimer(time.Until(l.deadline))
			defer timer.Stop()
			for x.pump(); !x.ended; x.pump() {
				if y.pump(); y.ended {
					break
				}
				select {
				case <-x.changed:
				case <-y.changed:
				case <-timer.C:
					l.stuck("neither racing open was taken over")
				}
			}
			loser := x
			if y.ended {
				loser, winner = y, x
			}
			loser.awaitServed()
		}
		winner.want = 0
		o := *oy
		p.opened = &o
		p.inEnc, p.outEnc = o.StdinEnc == frames.EncS2, o.OutputEnc == frames.EncS2
		l.procs = append(l.procs, p)
		l.live[inst] = p
		p.conn = winner
		ks.proc = p
		return
	}

	// The open and the destroy by its key: each ends with 1000, nothing
	// is left, and the key is destroyed.
	notFound := &frames.Error{Code: frames.LifecycleConflict, Operation: "destroy_process", Actual: "process_not_found"}
	refused := &frames.Error{Code: frames.LifecycleConflict, Operation: "open_process", Expected: "running", Actual: "process_destroyed"}
	failed := &frames.Error{Code: frames.OperationFailed, Operation: "open_process", Reason: "executable_not_found"}
	x.want, y.want = websocket.StatusNormalClosure, websocket.StatusNormalClosure
	if cutFirst {
		x.awaitServed()
	} else {
		x.awaitEnd("the end of the open racing a destroy")
	}
	y.awaitEnd("the end of the destroy racing an open")
	if w != nil {
		// Refused, or opened and then destroyed: never another process.
		w.awaitEnd("the end of an open repeated while it started")
		ew, _ := w.hello.(*frames.Error)
		_, wo := w.hello.(*frames.Opened)
		l.require(wo && w.destroyed && w.exit != nil || ew != nil && (sameError(ew, refused) || fails && sameError(ew, failed)),
			"%s: an open repeated while a destroy by its key raced it answered %T %+v", w.name, w.hello, ew)
	}
	ex, _ := x.hello.(*frames.Error)
	ey, _ := y.hello.(*frames.Error)
	_, opened := x.hello.(*frames.Opened)

	switch {
	case ey != nil:
		l.require(sameError(ey, notFound), "%s: a destroy racing an open answered %+v", y.name, ey)
		l.require(cutFirst || ex != nil && (sameError(ex, refused) || fails && sameError(ex, failed)),
			"%s: an open whose key a destroy found nothing under answered %T %+v", x.name, x.hello, ex)
	default:
		l.require(y.destroyed && y.exit != nil && !fails, "%s: a destroy racing an open answered %T, destroyed %v", y.name, y.hello, y.destroyed)
		x.mu.Lock()
		takenOver := w != nil && websocket.CloseStatus(x.readErr) == 4001
		x.mu.Unlock()
		l.require(cutFirst || opened && (x.destroyed && x.exit != nil || takenOver) || ex != nil && sameError(ex, refused),
			"%s: an open destroyed by its key answered %T %+v, destroyed %v", x.name, x.hello, ex, x.destroyed)
	}
	_, listed := l.procStats().byInst[l.insts[inst]]
	l.require(!listed, "a process is left on %s after a destroy by its key", l.insts[inst])
	ks.tomb = yes
	if p.id != "" {
		p.gone = true
		l.procs = append(l.procs, p)
		ks.proc = p
	}
}

// badFirst sends a first frame the server refuses before doing anything:
// a destroy with no pair (1002), or one that does not decode (1007): mixed
// pairs, half a pair, an open whose open_key or encoding list breaks its
// pattern.
func (l *life) badFirst(a byte) {
	l.t.Helper()
	l.limitConns()
	cn := l.dial("", "")
	cn.first = frames.TypeDestroy
	key, id, tok := l.keys[0], strings.Repeat("ab", 16), strings.Repeat("cd", 32)
	var line string
	open := func(field, value, reason string) {
		f := catOpen(l.insts[int(a>>3)%lifeInstances], 0, 0)
		b := frames.Append(nil, f)
		line = string(b[:len(b)-2]) + `,"` + field + `":"` + value + `"}`
		cn.first, cn.want, cn.wantReason = frames.TypeOpen, websocket.StatusInvalidFramePayloadData, reason
	}
	switch a % 8 {
	case 0:
		line, cn.want = `{"type":"destroy"}`, websocket.StatusProtocolError
	case 1:
		line, cn.want = `{"type":"destroy","process_id":"`+id+`","open_key":"`+key+`"}`, websocket.StatusInvalidFramePayloadData
		cn.wantReason = "destroy: bad_destroy"
	case 2:
		line, cn.want = `{"type":"destroy","instance_id":"`+l.insts[0]+`","token":"`+tok+`"}`, websocket.StatusInvalidFramePayloadData
		cn.wantReason = "destroy: bad_destroy"
	case 3:
		line, cn.want = `{"type":"destroy","instance_id":"`+l.insts[0]+`"}`, websocket.StatusInvalidFramePayloadData
		cn.wantReason = "destroy.open_key: missing_field"
	case 4:
		open("open_key", "ABCDEF"+key[6:], "open.open_key: bad_value") // upper case
	case 5:
		open("open_key", key[:63], "open.open_key: bad_value")
	case 6:
		open("output_enc", "S2", "open.output_enc: bad_value")
	case 7:
		open("stdin_enc", "a,b,c,d,e,f,g,h,s2", "open.stdin_enc: bad_value")
	}
	cn.send([]byte(line + "\n"))
	cn.awaitEnd("the refusal of a malformed first frame")
	l.require(cn.hello == nil, "%s: a malformed first frame answered %T", cn.name, cn.hello)
}
