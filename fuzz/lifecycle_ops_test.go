package fuzz

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/coder/websocket"
	"github.com/klauspost/compress/s2"

	"github.com/procwire/procwire/frames"
)

// stdin sends stdin on cn: b chooses the size and the mode, c the cut.
func (l *life) stdin(cn *lconn, b, c byte) {
	l.t.Helper()
	p := cn.p
	n := 1 + int(b>>3)%64
	if b&4 != 0 {
		n += 64 // compressible sizes
	}
	n = min(n, lifeMaxStdin-len(p.stream))
	if n <= 0 {
		l.stdinClose(cn, 0)
		return
	}
	off := int64(len(p.stream))
	data := make([]byte, n)
	for i := range data {
		data[i] = byte(l.seq) + byte(off+int64(i))%7*3 // compressible, distinct per input
	}
	var msg []byte
	accepted := true
	switch c % 8 {
	case 0, 1: // raw
		msg = frames.Append(nil, &frames.Stdin{Off: off, Data: data})
	case 2: // s2 when negotiated
		enc := ""
		if p.inEnc {
			enc = frames.EncS2
		}
		msg = frames.Append(nil, &frames.Stdin{Off: off, Data: data, Enc: enc})
	case 3: // s2, negotiated or not
		msg = frames.Append(nil, &frames.Stdin{Off: off, Data: data, Enc: frames.EncS2})
		if bytes.Contains(msg, []byte(`"enc"`)) && !p.inEnc {
			cn.want, accepted = websocket.StatusProtocolError, false
		}
	case 4: // one s2 block, however small
		msg = fmt.Appendf(nil, `{"type":"stdin","off":%d,"data":"%s","enc":"s2"}`+"\n", off, base64.StdEncoding.EncodeToString(s2.Encode(nil, data)))
		if !p.inEnc {
			cn.want, accepted = websocket.StatusProtocolError, false
		}
	case 5: // a corrupt block: truncated, or declaring more than max_data
		block := s2.Encode(nil, data)
		block = block[:len(block)-1]
		if c&8 != 0 {
			block = append(uvarint(fuzzMaxData+1), 0, 'a')
		}
		msg = fmt.Appendf(nil, `{"type":"stdin","off":%d,"data":"%s","enc":"s2"}`+"\n", off, base64.StdEncoding.EncodeToString(block))
		cn.want, accepted = websocket.StatusInvalidFramePayloadData, false
		cn.wantReason = "stdin.data: bad_payload"
	case 6: // at a wrong offset
		msg = frames.Append(nil, &frames.Stdin{Off: off + 1 + int64(c>>4), Data: data})
		cn.want, accepted = websocket.StatusProtocolError, false
	case 7: // in fragments, cut inside
		cn.sendPart(frames.Append(nil, &frames.Stdin{Off: off, Data: data}))
		cn.awaitServed()
		return
	}
	if p.closed && accepted {
		cn.want, accepted = websocket.StatusProtocolError, false
	}
	if c&0x80 != 0 && accepted {
		// Cut right after: the server may or may not have taken it.
		p.stream = append(p.stream, data...)
		cn.send(msg)
		cn.cut()
		cn.awaitServed()
		cn.pump()
		return
	}
	cn.send(msg)
	if !accepted {
		cn.awaitEnd("the refusal of a stdin frame")
		return
	}
	p.stream = append(p.stream, data...)
	p.sure = len(p.stream)
	if c&0x40 != 0 {
		// A signal right behind it, before cat echoed it: the signal
		// waits for the echo (checked in signal).
		l.signal(cn, (c>>4)<<3&0x18, 0)
	} else if p.running() {
		end := p.outLen()
		l.require(cn.await("the echo", func() bool { return cn.outEnd >= end }), "%s ended before the echo", cn.name)
	} else if p.sigMaybe && p.exit == nil {
		// A signal cut off may kill cat before it echoes.
		l.require(cn.await("the echo or the exit", func() bool { return cn.outEnd >= p.outLen() || cn.exit != nil }), "%s ended before the echo", cn.name)
	} else {
		l.require(cn.sync(), "%s ended after stdin", cn.name)
	}
}

// signal sends a signal on cn: b chooses the id and the signal, c the cut.
func (l *life) signal(cn *lconn, b, c byte) {
	l.t.Helper()
	p := cn.p
	id := p.lastSig + 1
	switch b % 8 {
	case 4:
		id = p.lastSig // repeated (0 when none: refused)
	case 5:
		id = max(p.lastSig-1, 1) // older
	case 6:
		id = 0 // refused (1007)
	case 7:
		id = p.lastSig + 2 + int64(b>>5) // skipping ids
	}
	name := []frames.SignalName{frames.SIGINT, frames.SIGTERM, frames.SIGKILL}[int(b>>3)%3]
	msg := frames.Append(nil, &frames.Signal{ID: id, Signal: name})
	if id == 0 {
		msg = []byte(`{"type":"signal","id":0,"signal":"` + string(name) + `"}` + "\n")
		cn.want = websocket.StatusInvalidFramePayloadData
		cn.wantReason = "signal.id: "
		cn.send(msg)
		cn.awaitEnd("the refusal of signal 0")
		return
	}
	if c&0x80 != 0 {
		cn.asked[id]++
		cn.send(msg)
		cn.cut()
		cn.awaitServed()
		cn.pump()
		if id > p.lastSig {
			p.lastSig = id
			p.sigs[id] = nil
			if !p.nosig && p.exit == nil {
				p.sigMaybe = true
			}
		}
		return
	}
	// The answer due.
	var want frames.Frame
	fresh := id > p.lastSig
	switch {
	case fresh && p.exit == nil && p.sigMaybe:
		// want nil: delivered, or already_exited after the one cut off.
	case fresh && p.exit != nil:
		want = &frames.Signaled{ID: id, Result: frames.SignalAlreadyExited}
	case fresh && p.nosig:
		want = &frames.Error{Code: frames.OperationFailed, Operation: "signal_process", Reason: "signal_failed", ID: id}
	case fresh:
		want = &frames.Signaled{ID: id, Result: frames.SignalDelivered}
	default:
		r, ok := p.sigs[id]
		switch {
		case !ok:
			want = &frames.Signaled{ID: id, Result: frames.SignalAlreadyExited}
		case r != nil:
			want = r
		}
	}
	cn.asked[id]++
	count := len(cn.answers)
	cn.send(msg)
	l.require(cn.await("the answer to signal", func() bool { return len(cn.answers) > count }), "%s ended before answering signal %d", cn.name, id)
	got := cn.answers[count]
	if want != nil {
		l.require(sameAnswer(got, want), "%s: signal %d answered %s, expected %s", cn.name, id, frames.Append(nil, got), frames.Append(nil, want))
	} else {
		// Its first ask was cut off: whatever it got then.
		ok := false
		switch g := got.(type) {
		case *frames.Signaled:
			ok = g.ID == id && (!p.nosig || g.Result == frames.SignalAlreadyExited)
		case *frames.Error:
			ok = g.ID == id && p.nosig && g.Reason == "signal_failed"
		}
		l.require(ok, "%s: signal %d, asked before a cut, answered %s", cn.name, id, frames.Append(nil, got))
	}
	if fresh {
		p.lastSig = id
	}
	p.sigs[id] = got
	if s, ok := got.(*frames.Signaled); ok && s.Result == frames.SignalDelivered {
		// cat dies of it: stdout_eof, then the exit.
		l.require(cn.await("the exit after the signal", func() bool { return cn.exit != nil }), "%s ended before the exit", cn.name)
		l.require(cn.exit.Signal == string(name) || !fresh, "%s: killed by %s, exit %+v", cn.name, name, cn.exit)
		if fresh && p.sure == len(p.stream) {
			// Delivered after every stdin byte before it was written
			// (PROTOCOL.md §5): cat echoed all of it before it died.
			l.require(cn.eof && p.eofAt == p.outLen(), "%s: signal %d killed cat at stdout %d, stdin before it %d bytes (+%d greeting)",
				cn.name, id, p.eofAt, len(p.stream), len(p.greet))
		}
	}
}

// sameAnswer compares signal answers; an error's message is free.
func sameAnswer(got, want frames.Frame) bool {
	switch w := want.(type) {
	case *frames.Signaled:
		g, ok := got.(*frames.Signaled)
		return ok && *g == *w
	case *frames.Error:
		g, ok := got.(*frames.Error)
		return ok && sameError(g, w)
	}
	return false
}

// ack sends an ack on cn: what it received, backwards, or beyond.
func (l *life) ack(cn *lconn, b byte) {
	l.t.Helper()
	p := cn.p
	if p.running() {
		// All the stdout cat wrote (the greeting, the echo) first.
		end := p.outLen()
		l.require(cn.await("stdout before an ack", func() bool { return cn.outEnd >= end }), "%s ended before its stdout", cn.name)
	}
	v := cn.outEnd
	switch b % 4 {
	case 1:
		if p.acked == 0 {
			break
		}
		v = p.acked - 1
		cn.want = websocket.StatusProtocolError
	case 2:
		v = p.outLen() + 1 + int64(b>>4)
		cn.want = websocket.StatusProtocolError
	}
	if v < p.acked {
		cn.want = websocket.StatusProtocolError
	}
	cn.sendFrame(&frames.Ack{Stdout: v})
	if cn.want != 0 {
		cn.awaitEnd("the refusal of an ack")
		return
	}
	l.require(cn.sync(), "%s ended after a valid ack", cn.name)
	p.acked = max(p.acked, v)
}

// stdinClose closes stdin on cn, at its end or elsewhere.
func (l *life) stdinClose(cn *lconn, b byte) {
	l.t.Helper()
	p := cn.p
	off := int64(len(p.stream))
	if b%4 == 3 {
		off += 1 + int64(b>>4)
		cn.want = websocket.StatusProtocolError
	}
	running := p.running()
	cn.sendFrame(&frames.StdinClose{Off: off})
	if cn.want != 0 {
		cn.awaitEnd("the refusal of stdin_close")
		return
	}
	p.closed = true
	if running {
		l.require(cn.await("the exit after stdin_close", func() bool { return cn.exit != nil }), "%s ended before its exit", cn.name)
		l.require(cn.eof && cn.exit.Signal == "" && cn.exit.Code == 0, "%s: cat exits 0 after its EOF, not %+v", cn.name, cn.exit)
		return
	}
	l.require(cn.sync(), "%s ended after stdin_close", cn.name)
}

// innerDestroy destroys cn's process from inside its session: b chooses
// how the frame names it, c the cut.
func (l *life) innerDestroy(cn *lconn, b, c byte) {
	l.t.Helper()
	p := cn.p
	f := &frames.Destroy{}
	switch b % 8 {
	case 1:
		f.ProcessID, f.Token = p.id, p.token
	case 2:
		if p.key >= 0 {
			f.InstanceID, f.OpenKey = l.insts[p.inst], l.keys[p.key]
		}
	case 4: // a key that did not open it
		f.InstanceID, f.OpenKey = l.insts[p.inst], l.keys[(p.key+1)%lifeKeys]
		cn.want = websocket.StatusProtocolError
	case 5: // its id with another token
		f.ProcessID, f.Token = p.id, strings.Repeat("cd", 32)
		cn.want = websocket.StatusProtocolError
	case 6: // its key on another instance
		if p.key >= 0 {
			f.InstanceID, f.OpenKey = l.insts[(p.inst+1)%lifeInstances], l.keys[p.key]
			cn.want = websocket.StatusProtocolError
		}
	case 3:
		for _, o := range l.procs {
			if o != p && o.token != "" {
				f.ProcessID, f.Token = o.id, o.token
				cn.want = websocket.StatusProtocolError
				break
			}
		}
	}
	cn.sendFrame(f)
	if cn.want != 0 {
		cn.awaitEnd("the refusal of a destroy naming another process")
		return
	}
	if c&0x80 != 0 {
		cn.cut()
		cn.awaitServed()
		cn.pump()
		if _, listed := l.procStats().byID[p.id]; !listed {
			l.gone(p, cn)
		}
		return
	}
	cn.want = websocket.StatusNormalClosure
	cn.awaitEnd("destroyed")
	l.require(cn.destroyed, "%s: destroy inside the session not answered destroyed", cn.name)
	l.require(cn.exit != nil, "%s: destroyed without an exit", cn.name)
	l.gone(p, cn)
}

// closeNormally closes cn with 1000 from the client's side.
func (l *life) closeNormally(cn *lconn) {
	l.log("%s close 1000", cn.name)
	cn.selfClosed = true
	_ = cn.ws.Close(websocket.StatusNormalClosure, "")
	cn.detach()
	cn.awaitServed()
}
