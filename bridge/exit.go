//go:build linux

package bridge

import (
	"strconv"
	"time"
)

// ExitStatus is how the child ended: Code 0..255 when Signal is empty, else
// the name of the signal that killed it ("SIGTERM", "SIGRTMIN+3") and Code 0.
type ExitStatus struct {
	Code   int
	Signal string
}

// String returns "exit 3" or "signal SIGTERM".
func (s ExitStatus) String() string {
	if s.Signal != "" {
		return "signal " + s.Signal
	}
	return "exit " + strconv.Itoa(s.Code)
}

// signalNames are the Linux names of signals 1..31 (the numbering of x86,
// arm and most other architectures; not alpha, mips or sparc).
var signalNames = [...]string{
	1: "SIGHUP", 2: "SIGINT", 3: "SIGQUIT", 4: "SIGILL", 5: "SIGTRAP",
	6: "SIGABRT", 7: "SIGBUS", 8: "SIGFPE", 9: "SIGKILL", 10: "SIGUSR1",
	11: "SIGSEGV", 12: "SIGUSR2", 13: "SIGPIPE", 14: "SIGALRM", 15: "SIGTERM",
	16: "SIGSTKFLT", 17: "SIGCHLD", 18: "SIGCONT", 19: "SIGSTOP", 20: "SIGTSTP",
	21: "SIGTTIN", 22: "SIGTTOU", 23: "SIGURG", 24: "SIGXCPU", 25: "SIGXFSZ",
	26: "SIGVTALRM", 27: "SIGPROF", 28: "SIGWINCH", 29: "SIGIO", 30: "SIGPWR",
	31: "SIGSYS",
}

// Kernel realtime signal range. The kernel's SIGRTMIN is 32; glibc reserves
// 32 and 33 and calls 34 SIGRTMIN. Names here use the kernel's numbering, so
// the number is always recoverable: 32 is "SIGRTMIN+0", 34 is "SIGRTMIN+2"
// (PROTOCOL.md §3 allows SIGRTMIN+0 ..= SIGRTMIN+32).
const (
	sigRTMin = 32
	sigRTMax = 64
)

// signalName names signal number n.
func signalName(n int) string {
	switch {
	case n > 0 && n < len(signalNames):
		return signalNames[n]
	case n >= sigRTMin && n <= sigRTMax:
		return "SIGRTMIN+" + strconv.Itoa(n-sigRTMin)
	}
	return "SIG" + strconv.Itoa(n)
}

// waitChild is the one goroutine that waits for the child. It observes the
// exit without reaping (so the group id stays ours), publishes it when stdout
// reached EOF or ExitWait later, whichever is first, and reaps the child
// only once Destroy has killed the group.
func (p *Process) waitChild() {
	defer close(p.waitDone)
	st, err := waitExited(p.pid)
	if err != nil {
		// Only if the server ignores SIGCHLD, so that the kernel reaped the
		// child for us and its status is lost.
		st = ExitStatus{Code: 255}
	}
	// Wait for both output pipes to end, so that the exit follows the last
	// stdout and stderr byte, but no longer than ExitWait in all.
	t := time.NewTimer(p.cfg.ExitWait)
wait:
	for _, ch := range [...]<-chan struct{}{p.stdoutDone, p.stderrDone} {
		select {
		case <-ch:
		case <-t.C:
			break wait
		case <-p.destroyCh:
			break wait
		}
	}
	t.Stop()

	p.mu.Lock()
	p.exit = st
	p.published = true
	close(p.done)
	p.mu.Unlock()
	p.changed()

	<-p.destroyCh
	if err == nil {
		// Fails only if something else in the server reaps children it does
		// not own (wait4(-1)); then there is nothing left to reap.
		_ = reap(p.pid)
	}
}
