package fuzz

import (
	"bytes"
	"encoding/binary"

	"github.com/coder/websocket"

	"github.com/procwire/procwire/frames"
)

// The program: the input read as a sequence of choices. Past its end every
// read returns 0.

type program struct {
	b []byte
	i int
}

func (p *program) more() bool { return p.i < len(p.b) }

func (p *program) byte() byte {
	if p.i >= len(p.b) {
		return 0
	}
	p.i++
	return p.b[p.i-1]
}

func (p *program) take(n int) []byte {
	n = min(n, len(p.b)-p.i)
	s := p.b[p.i : p.i+n]
	p.i += n
	return s
}

func (p *program) int64() int64 {
	var b [8]byte
	copy(b[:], p.take(8))
	return int64(binary.BigEndian.Uint64(b[:]) &^ (1 << 63))
}

// First frames of the hostile connection (header bits 0-2).
const (
	firstOpen       = iota // open cat on a fresh instance
	firstOpenGood          // open on the well-behaved session's instance
	firstOpenPrep          // open on the prepared process's instance
	firstOpenDenied        // open an instance Admit refuses
	firstOpenFail          // open an executable that does not start
	firstResume            // resume the prepared process, fuzzed offsets
	firstDestroy           // destroy the prepared process
	firstRaw               // a mutated first frame, or raw bytes
)

// Header bits beyond the first frame.
const (
	hdrPrep        = 1 << 3 // prepare a detached process first
	hdrWindowShift = 4      // 2 bits: the windows asked for
	hdrPrepShift   = 6      // 2 bits: how the prepared process was read
)

// Actions on the hostile connection.
const (
	opStdin          = iota // stdin, fuzzed size and offset
	opStdinClose            // stdin_close, fuzzed offset
	opAck                   // ack, fuzzed value
	opSignal                // signal, fuzzed id and name
	opDestroy               // destroy inside the session, fuzzed ids
	opRaw                   // raw bytes
	opMutated               // a valid frame, mutated
	opBinary                // a valid frame as a binary message
	opOversized             // a message at or over the read limit
	opSync                  // ping, then wait for the echo
	opAbrupt                // drop the connection
	opCloseHandshake        // close it cleanly
	opSecondFirst           // open or resume inside the session
	opBurst                 // stdin up to the credit limit, maybe one byte more
	opGood                  // a round trip on the well-behaved session
	opFragmented            // a valid stdin frame in WebSocket fragments
	opPrep                  // stdin or ack on the prepared process's open connection
	numOps
)

// windows are the windows an open asks for (header bits 4-5).
var windows = [4][2]int64{{0, 0}, {1024, 1024}, {4096, 2048}, {1 << 30, 1 << 30}}

// hostile runs the hostile connection: the header, the first frame, the
// actions.
func (r *run) hostile() {
	p := &r.p
	hdr := p.byte()
	if hdr&hdrPrep != 0 {
		n, flags := p.byte(), p.byte()
		r.prepare(n, hdr>>hdrPrepShift&3, flags&1 == 1)
	}
	c := r.dial("hostile")
	w := windows[hdr>>hdrWindowShift&3]
	switch kind := hdr & 7; kind {
	case firstOpen:
		r.log("first: open %v", w)
		c.sendFrame(catOpen(instHostile, w[0], w[1]))
	case firstOpenGood:
		r.log("first: open %s", instGood)
		c.sendFrame(catOpen(instGood, w[0], w[1]))
	case firstOpenPrep:
		r.log("first: open %s", instPrep)
		c.sendFrame(catOpen(instPrep, w[0], w[1]))
	case firstOpenDenied:
		r.log("first: open %s", instDenied)
		c.sendFrame(catOpen(instDenied, w[0], w[1]))
	case firstOpenFail:
		r.log("first: open fail")
		o := catOpen(instHostile, w[0], w[1])
		o.Request.Executable = "fail-to-start"
		c.sendFrame(o)
	case firstResume:
		f := r.resumeFrame(p)
		r.log("first: resume %+v", *f)
		c.sendFrame(f)
	case firstDestroy:
		f := r.destroyFrame(p.byte())
		r.log("first: destroy %+v", *f)
		c.sendFrame(f)
	case firstRaw:
		b := p.byte()
		var msg []byte
		if b < 128 {
			msg = r.mutate(p, r.firstTemplate(b))
		} else {
			msg = bytes.Clone(p.take(int(p.byte())))
		}
		r.log("first: raw %q", trim(msg))
		c.send(websocket.MessageText, msg)
	}
	// What follows is judged against the answer: no pipelining.
	c.waitHello()
	r.checkStats()

	oversized := false
	for n := 0; n < maxActions && p.more() && !c.broken && !c.selfClosed; n++ {
		switch op := p.byte() % numOps; op {
		case opStdin:
			size, off := p.byte(), p.byte()
			length := int(size) + 1
			if size >= 200 {
				length = int(size-200) * 8
			}
			at := r.offset(c, off)
			r.log("stdin off %d len %d", at, length)
			c.sendFrame(&frames.Stdin{Off: at, Data: r.data(c, at, length)})
		case opStdinClose:
			at := r.offset(c, p.byte())
			r.log("stdin_close %d", at)
			c.sendFrame(&frames.StdinClose{Off: at})
		case opAck:
			v := r.ackValue(c, p)
			r.log("ack %d", v)
			c.sendFrame(&frames.Ack{Stdout: v})
		case opSignal:
			f := r.signalFrame(c, p.byte(), p.byte())
			r.log("signal %+v", *f)
			c.sendFrame(f)
		case opDestroy:
			f := r.innerDestroy(c, p.byte())
			r.log("destroy %+v", *f)
			c.sendFrame(f)
		case opRaw:
			b := p.byte()
			msg := bytes.Clone(p.take(int(b & 0x7f)))
			if b&0x80 == 0 {
				msg = append(msg, '\n')
			}
			r.log("raw %q", trim(msg))
			c.send(websocket.MessageText, msg)
		case opMutated:
			msg := r.mutate(p, r.template(c, p.byte()))
			r.log("mutated %q", trim(msg))
			c.send(websocket.MessageText, msg)
		case opBinary:
			at := r.offset(c, 0)
			r.log("binary stdin %d", at)
			c.send(websocket.MessageBinary, frames.Append(nil, &frames.Stdin{Off: at, Data: r.data(c, at, 1)}))
		case opOversized:
			kind := p.byte() % 4
			if oversized {
				continue // one per input: they are slow
			}
			oversized = true
			// The close that answers it may overtake the server's hello.
			c.waitHello()
			msg := r.oversized(c, kind)
			r.log("oversized %d: %d bytes", kind, len(msg))
			c.oversized = c.oversized || len(msg) > frames.MaxLine
			c.send(websocket.MessageText, msg)
		case opSync:
			r.log("sync")
			r.sync(c)
		case opAbrupt:
			r.log("abrupt close")
			c.waitHello() // else the process is left behind unknown
			c.selfClosed = true
			_ = c.ws.CloseNow()
		case opCloseHandshake:
			r.log("close handshake")
			c.waitHello()
			c.selfClosed = true
			_ = c.ws.Close(websocket.StatusNormalClosure, "bye")
		case opSecondFirst:
			var f frames.Frame = catOpen(instHostile, 0, 0)
			if p.byte()&1 == 1 {
				f = r.resumeFrame(p)
			}
			r.log("second %s", f.Type())
			c.sendFrame(f)
		case opBurst:
			r.burst(c, p.byte()&1 == 1)
		case opGood:
			n := int(p.byte()%64) + 1
			r.log("good round trip %d", n)
			r.roundTrip(n)
		case opFragmented:
			r.fragmented(c, p.byte(), p.byte())
		case opPrep:
			r.onPrep(p.byte())
		}
		r.checkConn(c)
		r.checkStats()
	}
}
