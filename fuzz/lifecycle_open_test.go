package fuzz

import (
	"strings"

	"github.com/coder/websocket"

	"github.com/procwire/procwire/frames"
)

// open sends an open on a new connection: on instance inst with key (-1:
// none); b chooses encodings and executable, c the header, the cut and the
// windows.
func (l *life) open(inst, key int, b, c byte) {
	l.t.Helper()
	l.limitConns()
	f := catOpen(l.insts[inst], []int64{0, 1024, 2048, 8192}[c>>4%4], []int64{0, 1024, 4096, 1 << 20}[c>>6])
	if key >= 0 {
		f.OpenKey = l.keys[key]
	}
	if b&1 != 0 {
		f.OutputEnc = "s2"
	}
	if b&2 != 0 {
		f.StdinEnc = "s2"
	}
	if b&4 != 0 {
		// Lists naming encodings the server does not know, which it ignores.
		f.OutputEnc, f.StdinEnc = "zstd", "x9,s2"
		if b&1 != 0 {
			f.OutputEnc = "zstd,s2"
		}
	}
	switch b >> 3 % 4 {
	case 1:
		f.Request.Executable = "greet"
	case 2:
		f.Request.Executable = "nosig"
	case 3:
		f.Request.Executable = "failcat"
	}
	hInst, _, badHeader := headers(c, f.InstanceID, "")
	cn := l.dial(hInst, "")
	cn.first = frames.TypeOpen
	cut := c >> 2 % 4 // 0, 1: answered; 2: cut after sending (keyed only); 3: cut inside
	msg := frames.Append(nil, f)
	if cut == 3 {
		cn.sendPart(msg)
		cn.awaitServed()
		return
	}

	// What the server must answer.
	var ks *keyState
	if key >= 0 {
		ks = l.keyState(inst, key)
	}
	cur := l.live[inst]
	var fresh *lproc
	var wantErr *frames.Error
	switch {
	case badHeader:
		cn.want = websocket.StatusProtocolError
	case ks != nil && ks.tomb == yes:
		wantErr = &frames.Error{Code: frames.LifecycleConflict, Operation: "open_process", Expected: "running", Actual: "process_destroyed"}
	case cur != nil && key >= 0 && cur.key == key && cur.sure == 0 && len(cur.stream) == 0 && cur.acked == 0:
		cn.p, cn.reopen = cur, true
	case cur != nil:
		if key >= 0 && cur.key == key && cur.sure == 0 && cur.acked == 0 {
			cn.wantAny = true // stdin cut off: opened again, or already open
			cn.p, cn.reopen = cur, true
		} else {
			wantErr = &frames.Error{Code: frames.LifecycleConflict, Operation: "open_process", Actual: "process_already_open"}
		}
	case l.liveCount() >= lifeMaxProcesses:
		wantErr = &frames.Error{Code: frames.CapabilityUnavailable, Requirement: "resources"}
	case f.Request.Executable == "failcat":
		wantErr = &frames.Error{Code: frames.OperationFailed, Operation: "open_process", Reason: "executable_not_found"}
	}
	if cn.p == nil && !badHeader && wantErr == nil {
		fresh = &lproc{n: len(l.procs), inst: inst, key: key, nosig: f.Request.Executable == "nosig", eofAt: -1, sigs: map[int64]frames.Frame{}}
		if f.Request.Executable == "greet" {
			fresh.greet = greeting
		}
		cn.p = fresh
	}
	if wantErr != nil {
		cn.want = websocket.StatusNormalClosure
	}
	if ks != nil && ks.tomb == maybe && !badHeader {
		// A destroy by this key was cut off: the open is refused with
		// process_destroyed, or answered as if it never came.
		cn.wantAny = true
	}

	if cut == 2 && key >= 0 && !badHeader {
		cn.send(msg)
		cn.cut()
		cn.awaitServed()
		cn.pump()
		l.settleCutOpen(cn, f, fresh, ks)
		return
	}
	cn.send(msg)
	if badHeader {
		cn.awaitEnd("the header's refusal")
		l.require(cn.hello == nil, "%s: a wrong header answered %T", cn.name, cn.hello)
		return
	}
	cn.await("the answer to open", func() bool { return cn.hello != nil })
	l.require(cn.hello != nil, "%s: open unanswered", cn.name)
	if e, ok := cn.hello.(*frames.Error); ok {
		cn.want, cn.wantAny = websocket.StatusNormalClosure, false
		if ks != nil && ks.tomb == maybe && e.Actual == "process_destroyed" {
			wantErr = &frames.Error{Code: frames.LifecycleConflict, Operation: "open_process", Expected: "running", Actual: "process_destroyed"}
		}
		if wantErr == nil && cn.reopen {
			wantErr = &frames.Error{Code: frames.LifecycleConflict, Operation: "open_process", Actual: "process_already_open"}
		}
		l.require(wantErr != nil && sameError(e, wantErr), "%s: open answered %+v, expected %+v", cn.name, e, wantErr)
		if ks != nil && ks.tomb == maybe {
			ks.tomb = yes
		}
		if cn.reopen {
			cur.sure = len(cur.stream) // it was received
		}
		cn.p = nil
		cn.awaitEnd("close after the refusal")
		return
	}
	op := cn.hello.(*frames.Opened)
	l.require(wantErr == nil, "%s: open answered opened, expected %+v", cn.name, wantErr)
	cn.want, cn.wantAny = 0, false
	if ks != nil && ks.tomb == maybe {
		ks.tomb = no
	}
	if cn.reopen {
		// Taken over: the previous connection is closed with 4001, and
		// the replay ends with a credit.
		l.takeOver(cur, cn)
		cn.await("the replay after opened again", func() bool { return cn.credits > 0 })
		l.checkReplay(cn)
		return
	}
	fresh.id, fresh.token = op.ProcessID, op.Token
	l.newProc(fresh, op, cn)
	if ks != nil {
		ks.proc = fresh
	}
}

// newProc records a process started by an open answered op (nil when
// unknown) on cn.
func (l *life) newProc(p *lproc, op *frames.Opened, cn *lconn) {
	if op != nil {
		o := *op
		p.opened = &o
		p.inEnc, p.outEnc = op.StdinEnc == frames.EncS2, op.OutputEnc == frames.EncS2
	}
	l.procs = append(l.procs, p)
	l.live[p.inst] = p
	if cn != nil && !cn.selfClosed {
		p.conn = cn
	}
}

// settleCutOpen settles a keyed open whose connection was cut after it was
// sent: from what cn received, and Stats.
func (l *life) settleCutOpen(cn *lconn, f *frames.Open, fresh *lproc, ks *keyState) {
	l.t.Helper()
	st := l.procStats()
	inst := l.instIndex(f.InstanceID)
	ps, listed := st.byInst[f.InstanceID]
	cur := l.live[inst]
	switch {
	case cn.reopen:
		// Opened again or refused: either way the same process; if it was
		// taken over, the connection before is closed with 4001.
		l.require(listed && ps.ProcessID == cur.id, "the process of %s is gone after a cut open", f.InstanceID)
		if old := cur.conn; old != nil && !ps.Attached {
			old.want = 4001
			cur.conn = nil
			old.awaitEnd("4001 after a cut open took the process over")
		}
	case fresh != nil && listed:
		if ks.tomb == maybe {
			ks.tomb = no
		}
		fresh.id = ps.ProcessID
		var op *frames.Opened
		if o, ok := cn.hello.(*frames.Opened); ok {
			op = o
			fresh.token = o.Token
		}
		l.newProc(fresh, op, nil)
		if op == nil {
			// Learnt from the next open with the key.
			fresh.opened = nil
		}
		ks.proc = fresh
	case fresh != nil:
		// Nothing started: the open was not read, or refused.
		if _, refused := cn.hello.(*frames.Error); refused && ks.tomb == maybe {
			ks.tomb = yes
		}
	default:
		l.require(!listed || cur != nil && ps.ProcessID == cur.id, "a refused cut open started %+v", ps)
	}
}

// takeOver records that cn took p over from the connection before.
func (l *life) takeOver(p *lproc, cn *lconn) {
	if old := p.conn; old != nil && old != cn {
		old.want = 4001
		p.conn = cn
		old.awaitEnd("4001 after the process was taken over")
	}
	p.conn = cn
}

// checkReplay checks a connection that took a process over, once its
// first credit came: the replay holds the exit and EOF that happened, and
// settles whether a signal cut off was delivered.
func (l *life) checkReplay(cn *lconn) {
	p := cn.p
	if p.exit != nil {
		l.require(cn.exit != nil, "%s: the replay lacks the exit %+v", cn.name, p.exit)
	}
	if p.eofAt >= 0 {
		l.require(cn.eof, "%s: the replay lacks stdout_eof", cn.name)
	}
}

// sameError reports whether got has the code, operation, expected, actual,
// requirement and reason of want.
func sameError(got, want *frames.Error) bool {
	return got.Code == want.Code && got.Operation == want.Operation && got.Expected == want.Expected &&
		got.Actual == want.Actual && got.Requirement == want.Requirement && got.Reason == want.Reason && got.ID == want.ID
}

// pickProc picks a process of the input, or nil for a made-up one.
func (l *life) pickProc(a byte) *lproc {
	if len(l.procs) == 0 || int(a)%(len(l.procs)+1) == len(l.procs) {
		return nil
	}
	return l.procs[int(a)%(len(l.procs)+1)]
}

// credentials names p (nil: a made-up process) with its token, or a wrong
// one; known is false when they name nothing the server knows.
func credentials(p *lproc, wrong bool) (id, token string, known bool) {
	id, token = strings.Repeat("ab", 16), strings.Repeat("cd", 32)
	if p == nil || p.id == "" {
		return id, token, false
	}
	if wrong || p.token == "" {
		return p.id, token, false
	}
	return p.id, p.token, true
}
