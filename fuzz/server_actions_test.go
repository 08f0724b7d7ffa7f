package fuzz

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/coder/websocket"

	"github.com/procwire/procwire/frames"
)

// prepare opens the prepared process on its own connection, sends it n
// bytes, reads them back or not, and drops the connection.
func (r *run) prepare(n, read byte, keep bool) {
	r.log("prepare %d bytes, read mode %d, keep %v", n, read, keep)
	c := r.dial("prep")
	sh := r.newShadow(instPrep)
	r.prep = sh
	c.mu.Lock()
	c.sh, c.targets = sh, []*shadow{sh}
	c.mu.Unlock()
	c.sendFrame(catOpen(instPrep, fuzzWindow, fuzzWindow))
	c.waitHello()
	c.mu.Lock()
	_, ok := c.hello.(*frames.Opened)
	c.mu.Unlock()
	r.checkConn(c)
	r.require(ok, "the prepared process was not opened")
	if n > 0 {
		c.sendFrame(&frames.Stdin{Off: 0, Data: sh.pattern(0, int(n))})
	}
	if read != 0 {
		r.require(c.waitUntil("prepared echo", func() bool { return c.outEnd == int64(n) }), "prepared connection ended")
		switch read {
		case 1:
			c.sendFrame(&frames.Ack{Stdout: int64(n)})
		case 2:
			c.sendFrame(&frames.Ack{Stdout: int64(n / 2)})
		}
	}
	r.require(c.ping(), "prepared connection ended")
	c.mu.Lock()
	sh.mu.Lock()
	sh.acked = c.lastAck
	sh.held = c.outEnd
	sh.concurrent = keep
	sh.mu.Unlock()
	c.mu.Unlock()
	if keep {
		r.prepConn = c
		c.uncertain = true // another connection may take the process over
		return
	}
	c.selfClosed = true
	_ = c.ws.CloseNow()
	c.waitEnd()
	r.checkEnd(c)
	c.mu.Lock()
	sh.mu.Lock()
	sh.held = c.outEnd
	sh.mu.Unlock()
	c.mu.Unlock()
}

// onPrep sends stdin or an ack on the prepared process's connection, if it
// is kept open: it races with what the hostile connection does to the
// process (resume, destroy).
func (r *run) onPrep(b byte) {
	c := r.prepConn
	if c == nil || c.broken || c.ended() {
		return
	}
	c.mu.Lock()
	sh, end := c.sh, c.outEnd
	c.mu.Unlock()
	if b&1 == 0 {
		r.log("prep ack %d", end)
		c.sendFrame(&frames.Ack{Stdout: end})
		return
	}
	at := sh.length()
	n := int(b>>1)%64 + 1
	r.log("prep stdin %d len %d", at, n)
	c.sendFrame(&frames.Stdin{Off: at, Data: sh.pattern(at, n)})
}

// resumeFrame is a resume of the prepared process (a made-up one without
// it) with a fuzzed token and offsets.
func (r *run) resumeFrame(p *program) *frames.Resume {
	b := p.byte()
	f := &frames.Resume{ProcessID: strings.Repeat("0", 32), Token: strings.Repeat("1", 64)}
	var held, acked, end int64
	if s := r.prep; s != nil {
		s.mu.Lock()
		f.ProcessID, f.Token = s.id, s.token
		held, acked, end = s.held, s.acked, int64(len(s.stream))
		s.mu.Unlock()
	}
	if c := r.prepConn; c != nil {
		c.mu.Lock()
		held = c.outEnd
		c.mu.Unlock()
	}
	corrupt(f, b&3)
	switch b >> 2 & 7 {
	case 0:
		f.StdoutReceived = held
	case 1:
		f.StdoutReceived = acked
	case 2:
		f.StdoutReceived = max(acked-1, 0)
	case 3:
		f.StdoutReceived = end + 1
	case 4:
		f.StdoutReceived = p.int64()
	case 5:
		f.StdoutReceived = 0
	case 6:
		f.StdoutReceived = held + int64(p.byte())
	case 7:
		f.StdoutReceived = end
	}
	switch b >> 5 & 3 {
	case 1:
		f.StderrReceived = end
	case 2:
		f.StderrReceived = p.int64()
	case 3:
		f.StderrReceived = int64(p.byte())
	}
	return f
}

// corrupt spoils a resume or destroy's credentials: 0 and 1 leave them, 2
// changes the token, 3 the process id.
func corrupt[F *frames.Resume | *frames.Destroy](f F, how byte) {
	var id, token *string
	switch f := any(f).(type) {
	case *frames.Resume:
		id, token = &f.ProcessID, &f.Token
	case *frames.Destroy:
		id, token = &f.ProcessID, &f.Token
	}
	flip := func(s string) string {
		if s == "" {
			return "0"
		}
		return s[:len(s)-1] + string("10"[s[len(s)-1]&1])
	}
	switch how {
	case 2:
		*token = flip(*token)
	case 3:
		*id = flip(*id)
	}
}

// destroyFrame is a first-frame destroy of the prepared process.
func (r *run) destroyFrame(b byte) *frames.Destroy {
	f := &frames.Destroy{ProcessID: strings.Repeat("0", 32), Token: strings.Repeat("1", 64)}
	if s := r.prep; s != nil {
		s.mu.Lock()
		f.ProcessID, f.Token = s.id, s.token
		s.mu.Unlock()
	}
	if b&4 != 0 {
		f.Token = "" // refused before lookup
	}
	corrupt(f, b&3)
	return f
}

// innerDestroy is a destroy inside the session: plain, naming its own
// process, naming another, or with a wrong token.
func (r *run) innerDestroy(c *hconn, b byte) *frames.Destroy {
	c.mu.Lock()
	sh := c.sh
	c.mu.Unlock()
	f := &frames.Destroy{}
	switch b % 4 {
	case 1, 3:
		if sh == nil {
			f.ProcessID, f.Token = strings.Repeat("a", 32), strings.Repeat("b", 64)
			break
		}
		c.waitHello()
		sh.mu.Lock()
		f.ProcessID, f.Token = sh.id, sh.token
		sh.mu.Unlock()
		if f.ProcessID == "" {
			f.ProcessID, f.Token = strings.Repeat("a", 32), strings.Repeat("b", 64)
		}
		if b%4 == 3 {
			corrupt(f, 2)
		}
	case 2:
		f.ProcessID, f.Token = strings.Repeat("c", 32), strings.Repeat("d", 64)
		if s := r.prep; s != nil && s != sh {
			s.mu.Lock()
			f.ProcessID, f.Token = s.id, s.token
			s.mu.Unlock()
		}
	}
	return f
}

// offset is the stdin offset the server expects, or near it.
func (r *run) offset(c *hconn, b byte) int64 {
	var at int64
	c.mu.Lock()
	sh := c.sh
	c.mu.Unlock()
	if sh != nil {
		at = sh.length()
	}
	if b >= 224 {
		at += int64(b) - 240
	}
	return at
}

// data is n bytes of stdin for offset at.
func (r *run) data(c *hconn, at int64, n int) []byte {
	c.mu.Lock()
	sh := c.sh
	c.mu.Unlock()
	if sh == nil {
		return bytes.Repeat([]byte{'x'}, n)
	}
	return sh.pattern(at, n)
}

// ackValue is an ack of what was received, or near it, or anything.
func (r *run) ackValue(c *hconn, p *program) int64 {
	a := p.byte()
	c.mu.Lock()
	recv, last := c.outEnd, c.lastAck
	c.mu.Unlock()
	k := int64(a >> 3)
	switch a & 7 {
	case 3:
		return recv - k - 1
	case 4:
		return recv + k + 1
	case 5:
		return last
	case 6:
		return 0
	case 7:
		return p.int64()
	}
	return recv
}

var signalNames = [...]frames.SignalName{frames.SIGINT, frames.SIGTERM, frames.SIGKILL, "SIGHUP"}

func (r *run) signalFrame(c *hconn, a, b byte) *frames.Signal {
	var last int64
	if n := len(c.signalIDs); n > 0 {
		last = c.signalIDs[n-1]
	}
	f := &frames.Signal{Signal: signalNames[b%4]}
	switch a & 3 {
	case 0:
		f.ID = last + 1
	case 1:
		f.ID = last
	case 2:
		f.ID = last - 1
	case 3:
		f.ID = int64(a >> 2)
	}
	return f
}

// firstTemplate is a valid first frame to mutate.
func (r *run) firstTemplate(b byte) []byte {
	switch b % 4 {
	case 1:
		f := &frames.Resume{ProcessID: strings.Repeat("0", 32), Token: strings.Repeat("1", 64)}
		if s := r.prep; s != nil {
			s.mu.Lock()
			f.ProcessID, f.Token, f.StdoutReceived = s.id, s.token, s.held
			s.mu.Unlock()
		}
		return frames.Append(nil, f)
	case 2:
		return frames.Append(nil, r.destroyFrame(0))
	case 3:
		o := catOpen(instHostile, 2048, 0)
		o.Request.Arguments = []string{"-u", "ü\x01"}
		o.Request.Environment = map[string]string{"A": "b", "LANG": "C.UTF-8"}
		return frames.Append(nil, o)
	}
	return frames.Append(nil, catOpen(instHostile, 0, 0))
}

// template is a valid frame inside a session, to mutate.
func (r *run) template(c *hconn, b byte) []byte {
	at := r.offset(c, 0)
	c.mu.Lock()
	recv := c.outEnd
	c.mu.Unlock()
	var f frames.Frame
	switch b % 8 {
	case 0:
		f = &frames.Stdin{Off: at, Data: r.data(c, at, 4)}
	case 1:
		f = &frames.StdinClose{Off: at}
	case 2:
		f = &frames.Ack{Stdout: recv}
	case 3:
		f = &frames.Signal{ID: int64(len(c.signalIDs)) + 1, Signal: frames.SIGTERM}
	case 4:
		f = &frames.Destroy{}
	case 5:
		f = catOpen(instHostile, 0, 0)
	case 6:
		f = r.resumeFrame(&program{})
	case 7:
		f = r.innerDestroy(c, 1)
	}
	return frames.Append(nil, f)
}

// interesting are bytes a mutation inserts: JSON's structure, digits,
// escapes, the line end and invalid UTF-8.
const interesting = "{}[]\",:\\ 0123456789-+.eEtrufalsn\n\t\r\x00\xff\xc3"

// mutate applies up to four mutations from the program to line.
func (r *run) mutate(p *program, line []byte) []byte {
	for range p.byte() % 5 {
		pos, v := p.byte(), p.byte()
		i := int(pos) * (len(line) + 1) / 256
		ch := interesting[int(v>>2)%len(interesting)]
		switch v & 3 {
		case 0:
			if i < len(line) {
				line[i] = v
			}
		case 1:
			line = slices.Insert(line, i, ch)
		case 2:
			if i < len(line) {
				line = slices.Delete(line, i, i+1)
			}
		case 3:
			if i < len(line) {
				line[i] = ch
			}
		}
	}
	return line
}

// oversized is an ack padded with whitespace (allowed inside the object)
// to exactly the read limit with its '\n' (valid), the limit without it
// (a line over the limit), one byte over, or 1 MiB.
func (r *run) oversized(c *hconn, kind byte) []byte {
	c.mu.Lock()
	v := c.lastAck
	c.mu.Unlock()
	size, nl := frames.MaxLine, true
	switch kind {
	case 1:
		nl = false
	case 2:
		size++
	case 3:
		size = 1 << 20
	}
	head := fmt.Appendf(nil, `{"type":"ack","stdout":%d`, v)
	pad := size - len(head) - 1
	if nl {
		pad--
	}
	msg := append(head, bytes.Repeat([]byte{' '}, pad)...)
	msg = append(msg, '}')
	if nl {
		msg = append(msg, '\n')
	}
	return msg
}

// sync waits until the server handled everything sent, and for the stdout
// that cat must then have echoed: up to the stdin sent, or a window past
// the last ack.
func (r *run) sync(c *hconn) {
	if !c.ping() {
		return
	}
	c.waitHello()
	c.mu.Lock()
	sh, attached, acked := c.sh, c.attached(), c.lastAck
	c.mu.Unlock()
	if !attached {
		return
	}
	// The server took every ack sent on c, in order.
	sh.mu.Lock()
	sh.acked = max(sh.acked, acked)
	end := int64(len(sh.stream))
	want := min(end, sh.acked+sh.window)
	concurrent, closed, stdinWindow := sh.concurrent, sh.closed, sh.stdinWindow
	sh.mu.Unlock()
	if concurrent {
		return // the stdin sent may not all be taken
	}
	c.waitUntil(fmt.Sprintf("echo up to %d", want), func() bool {
		return c.outEnd >= want || c.eof >= 0 || c.destroyed || c.bad != ""
	})
	// Once cat consumed all its stdin (echoed it, or died), credit never
	// stalls on a remainder (§5): the whole window is granted again, or
	// the grant is held back only while less than a quarter window of
	// growth is pending, so the client has more than three quarters left.
	c.mu.Lock()
	consumed := c.outEnd == end || c.eof >= 0
	c.mu.Unlock()
	if consumed && !closed {
		least := end + stdinWindow - max(stdinWindow/4, 1) + 1
		c.waitUntil(fmt.Sprintf("credit up to %d", least), func() bool {
			return c.limit >= least || c.destroyed || c.bad != ""
		})
	}
}

// burst sends stdin up to the credit limit (at most 8 KiB), and with extra
// one byte beyond it.
func (r *run) burst(c *hconn, extra bool) {
	c.waitHello()
	c.mu.Lock()
	sh, limit := c.sh, c.limit
	c.mu.Unlock()
	if sh == nil {
		return
	}
	at := sh.length()
	stop := min(limit, at+8<<10)
	r.log("burst %d..%d extra %v", at, stop, extra)
	for at < stop && !c.broken {
		n := min(stop-at, fuzzMaxData)
		c.sendFrame(&frames.Stdin{Off: at, Data: sh.pattern(at, int(n))})
		at += n
	}
	if extra {
		c.sendFrame(&frames.Stdin{Off: at, Data: sh.pattern(at, 1)})
	}
}

// fragmented sends a valid stdin frame in up to three WebSocket fragments.
func (r *run) fragmented(c *hconn, a, b byte) {
	at := r.offset(c, 0)
	msg := frames.Append(nil, &frames.Stdin{Off: at, Data: r.data(c, at, 8)})
	i := int(a) % (len(msg) + 1)
	j := max(i, int(b)%(len(msg)+1))
	r.log("fragmented stdin %d at %d, %d", at, i, j)
	if c.broken {
		return
	}
	c.sent++
	c.note(msg, c.sent == 1)
	ctx, cancel := context.WithDeadline(context.Background(), r.deadline)
	defer cancel()
	w, err := c.ws.Writer(ctx, websocket.MessageText)
	if err != nil {
		c.broken = true
		return
	}
	for _, part := range [][]byte{msg[:i], msg[i:j], msg[j:]} {
		if _, err := w.Write(part); err != nil {
			c.broken = true
		}
	}
	if err := w.Close(); err != nil {
		c.broken = true
	}
}
