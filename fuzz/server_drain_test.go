package fuzz

import (
	"github.com/procwire/procwire/frames"
)

// After the input: every process left is drained, checked and destroyed.

// settleAll ends the hostile connection, then drains and destroys every
// process still live.
func (r *run) settleAll() {
	for _, c := range r.conns {
		if c != r.good {
			r.settle(c)
		}
	}
	for _, sh := range r.shadows {
		sh.mu.Lock()
		pending := sh.id != "" && !sh.gone && sh.name != instGood
		held := sh.held
		sh.mu.Unlock()
		if pending {
			r.resumeAndDrain(sh, held)
		}
	}
}

// settle ends connection c: drained and destroyed on itself if it is still
// usable, else checked to have closed as PROTOCOL.md §7 allows.
func (r *run) settle(c *hconn) {
	if !c.ended() {
		c.waitHello()
		alive := c.ping()
		c.mu.Lock()
		attached := c.attached() && !c.destroyed
		c.mu.Unlock()
		concurrent := attached && c.sh.isConcurrent()
		switch {
		case alive && attached && !concurrent:
			r.log("drain %s on itself", c.name)
			r.drain(c, c.sh.length())
		case alive && attached:
			// Usable, but how much of the stdin sent the server took is
			// told only by a resume.
			c.selfClosed = true
			_ = c.ws.CloseNow()
		case alive && c.sent == 0:
			c.selfClosed = true
			_ = c.ws.CloseNow()
		}
		c.waitEnd()
	}
	r.checkEnd(c)
	c.mu.Lock()
	if c.attached() {
		c.sh.mu.Lock()
		c.sh.held = c.outEnd
		c.sh.mu.Unlock()
	}
	c.mu.Unlock()
}

// resumeAndDrain resumes a detached process from offset from (or, after a
// replay_gap, from the oldest byte held), then drains and destroys it.
func (r *run) resumeAndDrain(sh *shadow, from int64) {
	for attempt := 0; ; attempt++ {
		r.log("resume %s from %d", sh.name, from)
		c := r.dial("resume-" + sh.name)
		c.mu.Lock()
		c.sh, c.targets, c.outEnd, c.lastAck = sh, []*shadow{sh}, from, -1
		c.mu.Unlock()
		sh.mu.Lock()
		f := &frames.Resume{ProcessID: sh.id, Token: sh.token, StdoutReceived: from}
		sh.mu.Unlock()
		c.sendFrame(f)
		c.waitHello()
		r.checkConn(c)
		c.mu.Lock()
		hello := c.hello
		c.mu.Unlock()
		switch h := hello.(type) {
		case *frames.Resumed:
			c.autoAck.Store(true)
			r.drain(c, h.StdinReceived)
			c.waitEnd()
			r.checkEnd(c)
			return
		case *frames.Error:
			c.waitEnd()
			r.checkEnd(c)
			sh.mu.Lock()
			destroySent := sh.destroySent
			sh.mu.Unlock()
			switch {
			case h.Reason == "replay_gap" && attempt == 0 && h.Gap != nil && h.Gap.Requested == from && h.Gap.Oldest > from:
				from = h.Gap.Oldest
				continue
			case h.Actual == "process_destroyed" && destroySent:
				return
			}
			r.fail("resume of %s refused: %+v (a process outlives a violation of its connection)", sh.name, h)
		default:
			r.fail("resume of %s: no answer", sh.name)
		}
	}
}

// drain closes stdin at offset total (the stdin the server holds), reads
// and acknowledges all stdout up to its EOF and the exit, checks that it
// is exactly the stdin (a prefix of it, for a killed cat), and destroys
// the process.
func (r *run) drain(c *hconn, total int64) {
	sh := c.sh
	// What the server did not take was refused with the connection that
	// carried it; no more stdin is sent.
	sh.mu.Lock()
	sh.stream = sh.stream[:min(total, int64(len(sh.stream)))]
	sh.mu.Unlock()
	c.sendFrame(&frames.StdinClose{Off: total})
	c.startAutoAck()
	ok := c.waitUntil("stdout_eof and exit", func() bool { return c.eof >= 0 && c.exit != nil || c.bad != "" })
	r.checkConn(c)
	r.require(ok, "%s ended before stdout_eof and exit", c.name)
	c.mu.Lock()
	eof, exit := c.eof, *c.exit
	c.mu.Unlock()
	sh.mu.Lock()
	signalSent := sh.signalSent
	sh.mu.Unlock()
	if exit.Signal == "" {
		r.require(eof == total, "%s: stdout ended at %d, but the server held %d bytes of stdin: lost or invented", c.name, eof, total)
	} else {
		r.require(signalSent && eof <= total, "%s: killed (%+v) with stdout ending at %d of %d", c.name, exit, eof, total)
	}
	c.sendFrame(&frames.Destroy{})
	ok = c.waitUntil("destroyed", func() bool { return c.destroyed || c.bad != "" })
	r.checkConn(c)
	r.require(ok, "%s ended before destroyed", c.name)
	c.waitEnd()
	r.checkEnd(c)
	sh.mu.Lock()
	sh.gone = true
	sh.mu.Unlock()
}

// trim shortens a message for the trace.
func trim(b []byte) []byte {
	if len(b) > 200 {
		return append(b[:200:200], "..."...)
	}
	return b
}
