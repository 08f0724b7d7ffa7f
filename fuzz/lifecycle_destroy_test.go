package fuzz

import (
	"github.com/coder/websocket"

	"github.com/procwire/procwire/frames"
)

// destroyByID destroys a process from a new connection by process_id and
// token.
func (l *life) destroyByID(a, b, c byte) {
	l.t.Helper()
	l.limitConns()
	p := l.pickProc(a)
	id, token, known := credentials(p, b&1 != 0)
	instName := ""
	if p != nil {
		instName = l.insts[p.inst]
	}
	hInst, hProc, badHeader := headers(c, instName, id)
	if !known || p.gone {
		badHeader = hProc != "" && hProc != id
	}
	cn := l.dial(hInst, hProc)
	cn.first = frames.TypeDestroy
	f := &frames.Destroy{ProcessID: id, Token: token}
	if known {
		cn.p = p
	}
	l.destroyFirst(cn, f, p, known, badHeader, c>>2%4)
}

// destroyByKey destroys from a new connection by instance_id and open_key.
func (l *life) destroyByKey(inst, key int, c byte) {
	l.t.Helper()
	l.limitConns()
	hInst, _, badHeader := headers(c, l.insts[inst], "")
	cn := l.dial(hInst, "")
	cn.first = frames.TypeDestroy
	f := &frames.Destroy{InstanceID: l.insts[inst], OpenKey: l.keys[key]}
	ks := l.keyState(inst, key)
	p := ks.proc
	if p != nil && p.id == "" {
		p = nil
	}
	if p == nil && ks.tomb == no {
		// Nothing under the key: process_not_found, and the key is
		// destroyed.
		if c>>2%4 == 2 && !badHeader {
			cn.send(frames.Append(nil, f))
			cn.cut()
			cn.awaitServed()
			cn.pump()
			ks.tomb = maybe
			if _, ok := cn.hello.(*frames.Error); ok {
				ks.tomb = yes
			}
			return
		}
		if c>>2%4 == 3 {
			cn.sendPart(frames.Append(nil, f))
			cn.awaitServed()
			return
		}
		cn.send(frames.Append(nil, f))
		if badHeader {
			cn.want = websocket.StatusProtocolError
			cn.awaitEnd("the header's refusal")
			return
		}
		cn.want = websocket.StatusNormalClosure
		cn.awaitEnd("process_not_found")
		e, _ := cn.hello.(*frames.Error)
		l.require(e != nil && sameError(e, &frames.Error{Code: frames.LifecycleConflict, Operation: "destroy_process", Actual: "process_not_found"}),
			"%s: destroy by a key never used answered %+v", cn.name, cn.hello)
		ks.tomb = yes
		return
	}
	if p == nil {
		// A key destroyed while nothing was started under it (or maybe):
		// process_not_found again.
		cn.send(frames.Append(nil, f))
		if badHeader {
			cn.want = websocket.StatusProtocolError
			cn.awaitEnd("the header's refusal")
			return
		}
		cn.want = websocket.StatusNormalClosure
		cn.awaitEnd("process_not_found again")
		e, _ := cn.hello.(*frames.Error)
		l.require(e != nil && e.Actual == "process_not_found" && e.Operation == "destroy_process",
			"%s: destroy by a destroyed key answered %+v", cn.name, cn.hello)
		ks.tomb = yes
		return
	}
	cn.p = p
	l.destroyFirst(cn, f, p, true, badHeader, c>>2%4)
}

// destroyFirst sends a first-frame destroy of p (known: the frame names it)
// on cn and checks its answer; cut 2 cuts after sending, 3 inside.
func (l *life) destroyFirst(cn *lconn, f *frames.Destroy, p *lproc, known, badHeader bool, cut byte) {
	l.t.Helper()
	msg := frames.Append(nil, f)
	switch {
	case cut == 3:
		cn.sendPart(msg)
		cn.awaitServed()
		return
	case cut == 2 && known && !badHeader:
		cn.send(msg)
		cn.cut()
		cn.awaitServed()
		cn.pump()
		if !p.gone {
			if _, listed := l.procStats().byID[p.id]; !listed {
				l.gone(p, cn)
			}
		}
		return
	}
	cn.send(msg)
	switch {
	case badHeader:
		cn.want = websocket.StatusProtocolError
		cn.awaitEnd("the header's refusal")
		l.require(cn.hello == nil, "%s: a wrong header answered %T", cn.name, cn.hello)
		return
	case !known:
		cn.want = websocket.StatusNormalClosure
		cn.awaitEnd("process_not_found")
		e, _ := cn.hello.(*frames.Error)
		l.require(e != nil && sameError(e, &frames.Error{Code: frames.LifecycleConflict, Operation: "destroy_process", Actual: "process_not_found"}),
			"%s: destroy of an unknown process answered %+v", cn.name, cn.hello)
		return
	}
	cn.want = websocket.StatusNormalClosure
	if !p.gone {
		// The connection attached is told too: exit, destroyed, 1000.
		if old := p.conn; old != nil {
			old.want = websocket.StatusNormalClosure
		}
	}
	cn.awaitEnd("destroyed")
	l.require(cn.destroyed && cn.exit != nil, "%s: destroy answered %T, exit %v", cn.name, cn.hello, cn.exit)
	if !p.gone {
		l.gone(p, cn)
	}
}

// gone records p destroyed (by cn): its attached connection must end with
// exit and destroyed.
func (l *life) gone(p *lproc, by *lconn) {
	l.t.Helper()
	p.gone = true
	if l.live[p.inst] == p {
		l.live[p.inst] = nil
	}
	if p.key >= 0 {
		ks := l.keyState(p.inst, p.key)
		ks.tomb, ks.proc = yes, p
	}
	if old := p.conn; old != nil && old != by {
		old.want = websocket.StatusNormalClosure
		old.awaitEnd("destroyed, told the attached connection")
		l.require(old.destroyed && old.exit != nil, "%s: its process destroyed elsewhere, it got exit %v destroyed %v", old.name, old.exit, old.destroyed)
	}
	p.conn = nil
	_, listed := l.procStats().byID[p.id]
	l.require(!listed, "Stats lists %s after destroyed", p.id)
}
