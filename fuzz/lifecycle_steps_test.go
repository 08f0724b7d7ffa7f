package fuzz

import (
	"runtime"
	"strings"
	"time"
)

// Steps.

// exec runs the input, then settles and checks that nothing is left.
func (l *life) exec() {
	l.t.Helper()
	base := runtime.NumGoroutine()
	for steps := 0; steps < lifeMaxSteps && l.p.more(); steps++ {
		l.step()
		l.check()
	}
	l.settle()
	done := make(chan struct{})
	go func() { l.e.lb.Handlers.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Until(l.deadline)):
		l.stuck("a connection is still being served")
	}
	st := l.e.srv.Stats()
	l.require(st.Connections == 0 && len(st.Processes) == 0, "left behind: %+v", st)
	l.require(l.e.exec.Live() == 0, "%d children not destroyed", l.e.exec.Live())
	for runtime.NumGoroutine() > base {
		if time.Now().After(l.deadline) {
			l.stuck("%d goroutines, %d before the input", runtime.NumGoroutine(), base)
		}
		runtime.Gosched()
	}
}

// Steps (the first byte of each, modulo stepCount).
const (
	stepOpen         = iota // instance, key, encodings, executable, header, cut, windows
	stepReopen              // an open repeating a keyed process's instance and key
	stepResume              // a known process, token, offsets, header, cut
	stepDestroyID           // first-frame destroy by process_id+token
	stepDestroyKey          // first-frame destroy by instance_id+open_key
	stepBadFirst            // a destroy with no pair, mixed pairs or half a pair; an open with a bad key or encoding list
	stepStdin               // raw, s2, s2 forced, corrupt s2, wrong offset, fragment then cut
	stepSignal              // fresh, repeated, old or zero id
	stepAck                 // what was received, backwards, beyond
	stepStdinClose          // at the end, or elsewhere
	stepInnerDestroy        // plain, naming its own process by id or key, or another
	stepCut                 // cut or close a connection
	stepRace                // an open racing the same open, or a destroy by its key
	stepCount
)

func (l *life) step() {
	l.t.Helper()
	for _, c := range l.conns {
		c.pump()
	}
	op, a, b, c := l.p.byte(), l.p.byte(), l.p.byte(), l.p.byte()
	switch op % stepCount {
	case stepOpen:
		key := int(a>>2)%(lifeKeys+1) - 1
		l.open(int(a)%lifeInstances, key, b, c)
	case stepReopen:
		var keyed []*lproc
		for _, p := range l.procs {
			if p.key >= 0 {
				keyed = append(keyed, p)
			}
		}
		if len(keyed) == 0 {
			l.open(int(a)%lifeInstances, int(a>>2)%lifeKeys, b, c)
			return
		}
		p := keyed[int(a)%len(keyed)]
		l.open(p.inst, p.key, b, c)
	case stepResume:
		l.resume(a, b, c)
	case stepDestroyID:
		l.destroyByID(a, b, c)
	case stepDestroyKey:
		l.destroyByKey(int(a)%lifeInstances, int(a>>2)%lifeKeys, c)
	case stepBadFirst:
		l.badFirst(a)
	case stepRace:
		l.race(int(a)%lifeInstances, int(a>>2)%lifeKeys, b)
	default:
		cn := l.attachedConn(a)
		if cn == nil {
			return
		}
		switch op % stepCount {
		case stepStdin:
			l.stdin(cn, b, c)
		case stepSignal:
			l.signal(cn, b, c)
		case stepAck:
			l.ack(cn, b)
		case stepStdinClose:
			l.stdinClose(cn, b)
		case stepInnerDestroy:
			l.innerDestroy(cn, b, c)
		case stepCut:
			if b&1 == 0 {
				cn.cut()
				cn.awaitServed()
			} else {
				l.closeNormally(cn)
			}
		}
	}
}

// attachedConn picks an open connection serving a process.
func (l *life) attachedConn(a byte) *lconn {
	var cs []*lconn
	for _, c := range l.conns {
		if c.p != nil && c.p.conn == c && c.attached && !c.ended && !c.selfClosed {
			cs = append(cs, c)
		}
	}
	if len(cs) == 0 {
		return nil
	}
	return cs[int(a)%len(cs)]
}

// limitConns cuts the oldest open connections beyond lifeMaxConns.
func (l *life) limitConns() {
	var open []*lconn
	for _, c := range l.conns {
		if !c.ended && !c.selfClosed {
			open = append(open, c)
		}
	}
	for i := 0; len(open)-i >= lifeMaxConns; i++ {
		open[i].cut()
		open[i].awaitServed()
	}
}

// liveCount is the number of processes the model holds.
func (l *life) liveCount() int {
	n := 0
	for _, p := range l.live {
		if p != nil {
			n++
		}
	}
	return n
}

func (l *life) keyState(inst, key int) *keyState {
	ks := l.kst[[2]int{inst, key}]
	if ks == nil {
		ks = &keyState{}
		l.kst[[2]int{inst, key}] = ks
	}
	return ks
}

// headers returns the routing headers for a first frame naming inst (a
// name, or "") and proc: right (0), absent (1), or one of them wrong (2, 3).
func headers(mode byte, inst, proc string) (string, string, bool) {
	switch mode % 4 {
	case 1:
		return "", "", false
	case 2:
		if inst != "" {
			return "other-instance", proc, true
		}
	case 3:
		if proc != "" {
			return inst, strings.Repeat("0", 32), true
		}
	}
	return inst, proc, false
}
