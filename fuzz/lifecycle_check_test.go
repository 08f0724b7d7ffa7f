package fuzz

import (
	"fmt"
	"strings"

	"github.com/procwire/procwire/frames"
	"github.com/procwire/procwire/server"
)

// Invariants.

type procStats struct {
	byID   map[string]server.ProcessStats
	byInst map[string]server.ProcessStats
	n      int
}

func (l *life) procStats() procStats {
	st := l.e.srv.Stats()
	ps := procStats{byID: map[string]server.ProcessStats{}, byInst: map[string]server.ProcessStats{}}
	for _, p := range st.Processes {
		if !strings.HasPrefix(p.InstanceID, fmt.Sprintf("life%d-", l.seq)) {
			continue
		}
		_, twice := ps.byInst[p.InstanceID]
		l.require(!twice, "two processes on instance %s: %+v", p.InstanceID, st.Processes)
		ps.byID[p.ProcessID] = p
		ps.byInst[p.InstanceID] = p
		ps.n++
	}
	return ps
}

func (l *life) instIndex(name string) int {
	for i, n := range l.insts {
		if n == name {
			return i
		}
	}
	l.fail("no instance %s", name)
	return -1
}

// check compares the server with the model after a step.
func (l *life) check() {
	l.t.Helper()
	for _, c := range l.conns {
		c.pump()
		if c.ended && !c.selfClosed {
			// The server was done with it, or will be: wait, so that
			// Stats shows its process detached.
			c.awaitServed()
		}
	}
	if p := l.e.exec.Misuse(); p != "" {
		l.fail("the server misused a process: %s", p)
	}
	l.require(l.e.srv.Stats().Tombstones <= lifeMaxTombstones, "%d tombstones kept, at most %d", l.e.srv.Stats().Tombstones, lifeMaxTombstones)
	ps := l.procStats()
	l.require(ps.n == l.liveCount(), "Stats lists %d processes, the model %d", ps.n, l.liveCount())
	// The memory budget holds each live process's windows (Config.MaxMemory)
	// and nothing else: no first frame is being read now, and nothing leaks
	// from one process, connection or input to the next.
	want, exact := int64(0), true
	for _, p := range l.live {
		switch {
		case p == nil:
		case p.opened == nil:
			exact = false
		default:
			want += p.opened.StdoutWindow + p.opened.StdinLimit + p.opened.StderrWindow
		}
	}
	if st := l.e.srv.Stats(); exact {
		l.require(st.Memory == want, "Stats.Memory %d, the windows of the live processes %d", st.Memory, want)
	}
	l.require(int(l.e.exec.Live()) == l.liveCount(), "%d children run, the model has %d processes", l.e.exec.Live(), l.liveCount())
	for i, p := range l.live {
		if p == nil {
			continue
		}
		s, ok := ps.byInst[l.insts[i]]
		l.require(ok && s.ProcessID == p.id, "instance %d: Stats %+v, the model %s", i, s, p.id)
		attached := p.conn != nil && !p.conn.ended
		l.require(s.Attached == attached, "%s: attached %v in Stats, %v in the model", p.id, s.Attached, attached)
	}
}

// settle destroys every process left, on its connection or from a new
// one, and closes every connection.
func (l *life) settle() {
	l.t.Helper()
	for _, p := range l.live {
		if p == nil {
			continue
		}
		switch {
		case p.conn != nil && !p.conn.ended:
			l.innerDestroy(p.conn, 0, 0)
		case p.token != "":
			cn := l.dial(l.insts[p.inst], p.id)
			cn.first, cn.p = frames.TypeDestroy, p
			l.destroyFirst(cn, &frames.Destroy{ProcessID: p.id, Token: p.token}, p, true, false, 0)
		default:
			cn := l.dial(l.insts[p.inst], "")
			cn.first, cn.p = frames.TypeDestroy, p
			l.destroyFirst(cn, &frames.Destroy{InstanceID: l.insts[p.inst], OpenKey: l.keys[p.key]}, p, true, false, 0)
		}
	}
	for _, c := range l.conns {
		c.pump()
		if !c.ended && !c.selfClosed {
			c.cut()
		}
		c.awaitServed()
	}
	l.check()
}
