package fuzz

import (
	"github.com/coder/websocket"

	"github.com/procwire/procwire/frames"
)

// resume resumes a process: a chooses it, b the token and offsets, c the
// header and the cut.
func (l *life) resume(a, b, c byte) {
	l.t.Helper()
	l.limitConns()
	p := l.pickProc(a)
	id, token, known := credentials(p, b&1 != 0)
	f := &frames.Resume{ProcessID: id, Token: token}
	if known {
		switch b >> 1 % 5 {
		case 1:
			f.StdoutReceived = p.acked
		case 2:
			f.StdoutReceived = p.maxOut
		case 3:
			f.StdoutReceived = p.acked - 1 // a gap when acked
		case 4:
			f.StdoutReceived = p.maxOut + 1 // beyond, when exact
		}
		f.StdoutReceived = max(f.StdoutReceived, 0)
		f.StderrReceived = int64(b>>4) * 8
	}
	instName := ""
	if p != nil {
		instName = l.insts[p.inst]
	}
	hInst, hProc, badHeader := headers(c, instName, id)
	if !known || p.gone {
		// The instance header is checked only against a live process.
		badHeader = hProc != "" && hProc != id
	}
	cn := l.dial(hInst, hProc)
	cn.first = frames.TypeResume
	cn.outEnd = f.StdoutReceived
	msg := frames.Append(nil, f)
	switch c >> 2 % 4 {
	case 3:
		cn.sendPart(msg)
		cn.awaitServed()
		return
	case 2:
		if known && !p.gone && !badHeader {
			cn.p = p
			cn.send(msg)
			cn.cut()
			cn.awaitServed()
			cn.pump()
			ps, listed := l.procStats().byID[p.id]
			l.require(listed, "a cut resume lost %s", p.id)
			if old := p.conn; old != nil && !ps.Attached {
				old.want = 4001
				p.conn = nil
				old.awaitEnd("4001 after a cut resume took the process over")
			}
			return
		}
	}
	var wantErr *frames.Error
	switch {
	case badHeader:
		cn.want = websocket.StatusProtocolError
	case !known:
		wantErr = &frames.Error{Code: frames.LifecycleConflict, Operation: "resume_process", Actual: "process_not_found"}
	case p.gone:
		wantErr = &frames.Error{Code: frames.LifecycleConflict, Operation: "resume_process", Expected: "running", Actual: "process_destroyed"}
	case f.StdoutReceived < p.acked:
		wantErr = &frames.Error{Code: frames.OperationFailed, Operation: "resume_process", Reason: "replay_gap"}
	case f.StdoutReceived > p.maxOut:
		if !p.outExact() {
			cn.wantAny = true // cat may have produced it
		}
		wantErr = &frames.Error{Code: frames.OperationFailed, Operation: "resume_process", Reason: "replay_beyond_end"}
	}
	if wantErr != nil {
		cn.want = websocket.StatusNormalClosure
	}
	if !badHeader && known && !p.gone {
		cn.p = p // resumed, unless refused
	}
	cn.send(msg)
	if badHeader {
		cn.awaitEnd("the header's refusal")
		l.require(cn.hello == nil, "%s: a wrong header answered %T", cn.name, cn.hello)
		return
	}
	cn.await("the answer to resume", func() bool { return cn.hello != nil })
	l.require(cn.hello != nil, "%s: resume unanswered", cn.name)
	if e, ok := cn.hello.(*frames.Error); ok {
		l.require(wantErr != nil && sameError(e, wantErr), "%s: resume answered %+v, expected %+v", cn.name, e, wantErr)
		if e.Reason == "replay_gap" {
			l.require(e.Gap != nil && e.Gap.Requested == f.StdoutReceived && e.Gap.Oldest == p.acked, "%s: gap %+v", cn.name, e.Gap)
		}
		cn.want = websocket.StatusNormalClosure
		cn.p = nil
		cn.awaitEnd("close after the refusal")
		return
	}
	l.require(wantErr == nil || cn.wantAny, "%s: resume answered resumed, expected %+v", cn.name, wantErr)
	cn.want, cn.wantAny = 0, false
	l.takeOver(p, cn)
	cn.await("the replay after resumed", func() bool { return cn.credits > 0 })
	l.checkReplay(cn)
}
