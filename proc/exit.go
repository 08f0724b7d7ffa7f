package proc

import "strconv"

// ExitStatus is how the child ended: Code 0..255 when Signal is empty, else
// the name of the signal that killed it ("SIGTERM", "SIGRTMIN+3") and Code 0.
type ExitStatus struct {
	Code   int
	Signal string
	// Reason, when not empty, says why: ReasonOOM.
	Reason string
}

// ReasonOOM is the ExitStatus.Reason of a child the kernel's OOM killer
// ended (Signal is SIGKILL).
const ReasonOOM = "oom"

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

// SignalName names Linux signal number n as the wire does: "SIGTERM",
// "SIGRTMIN+3", or "SIG<n>" outside 1..64.
func SignalName(n int) string {
	switch {
	case n > 0 && n < len(signalNames):
		return signalNames[n]
	case n >= sigRTMin && n <= sigRTMax:
		return "SIGRTMIN+" + strconv.Itoa(n-sigRTMin)
	}
	return "SIG" + strconv.Itoa(n)
}
