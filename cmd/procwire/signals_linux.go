package main

import (
	"strconv"
	"strings"
	"syscall"
	"unsafe"
)

// signalNumbers maps the signal names of exit frames to Linux numbers.
var signalNumbers = map[string]syscall.Signal{
	"SIGHUP": 1, "SIGINT": 2, "SIGQUIT": 3, "SIGILL": 4, "SIGTRAP": 5,
	"SIGABRT": 6, "SIGBUS": 7, "SIGFPE": 8, "SIGKILL": 9, "SIGUSR1": 10,
	"SIGSEGV": 11, "SIGUSR2": 12, "SIGPIPE": 13, "SIGALRM": 14, "SIGTERM": 15,
	"SIGSTKFLT": 16, "SIGCHLD": 17, "SIGCONT": 18, "SIGSTOP": 19, "SIGTSTP": 20,
	"SIGTTIN": 21, "SIGTTOU": 22, "SIGURG": 23, "SIGXCPU": 24, "SIGXFSZ": 25,
	"SIGVTALRM": 26, "SIGPROF": 27, "SIGWINCH": 28, "SIGIO": 29, "SIGPWR": 30,
	"SIGSYS": 31,
}

// sigRTMin is the kernel's first realtime signal; the bridge names 32+n
// "SIGRTMIN+n".
const sigRTMin = 32

// signalNumber returns the number of a signal name of an exit frame.
func signalNumber(name string) (syscall.Signal, bool) {
	if n, ok := signalNumbers[name]; ok {
		return n, true
	}
	if name == "SIGRTMIN" {
		return sigRTMin, true
	}
	if rest, ok := strings.CutPrefix(name, "SIGRTMIN+"); ok {
		if n, err := strconv.Atoi(rest); err == nil && n >= 0 && sigRTMin+n <= 64 {
			return syscall.Signal(sigRTMin + n), true
		}
	}
	return 0, false
}

// reraise makes this process die of sig as the remote process did: the
// signal's disposition is reset to the kernel's default (not Go's handler,
// which would print a stack dump for some), then the signal is sent to
// ourselves. It returns if that did not end the process (the default is to
// ignore the signal, or it is blocked). RLIMIT_CORE is set to 0 first, so
// that a remote SIGSEGV or SIGQUIT does not dump this process's core into
// the working directory. Tests replace it.
var reraise = func(sig syscall.Signal) {
	switch sig {
	case syscall.SIGSTOP, syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU,
		syscall.SIGCONT, syscall.SIGCHLD, syscall.SIGURG, syscall.SIGWINCH:
		return // their default does not end a process
	}
	_ = syscall.Setrlimit(syscall.RLIMIT_CORE, &syscall.Rlimit{})
	var act struct { // the kernel's struct sigaction; all zero is SIG_DFL
		handler  uintptr
		flags    uint64
		restorer uintptr
		mask     uint64
	}
	// SIGKILL (the OOM killer's) has no disposition to reset: sigaction
	// refuses it, and it kills all the same.
	if sig != syscall.SIGKILL {
		_, _, errno := syscall.RawSyscall6(syscall.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&act)), 0, 8, 0, 0)
		if errno != 0 {
			return
		}
	}
	_ = syscall.Kill(syscall.Getpid(), sig)
}
