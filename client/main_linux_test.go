package client_test

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"unsafe"
)

// runAsChild runs a child of TestSignalAfterStdin when this binary was
// started as one; it exits.
func runAsChild() {
	if os.Getenv(childEnv) == "signal-order" {
		os.Exit(signalOrderChild())
	}
}

// signalOrderChild answers each SIGINT with whether the line its client
// wrote before the signal was already in its stdin pipe when the signal
// came ("first <line>") or not ("signal first"). Go's signal delivery has
// no window in which a signal waits for an unrelated event, unlike a
// shell's trap around its wait builtin, so the child never misses one.
func signalOrderChild() int {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT)
	line := make([]byte, len("quit\n"))
	if _, err := os.Stdout.WriteString("ready\n"); err != nil {
		return 2
	}
	for {
		<-sigs
		var queued int32
		if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, 0, syscall.TIOCINQ, uintptr(unsafe.Pointer(&queued))); errno != 0 {
			fmt.Fprintln(os.Stderr, "FIONREAD:", errno)
			return 2
		}
		if int(queued) < len(line) {
			if _, err := fmt.Fprintf(os.Stdout, "signal first: %d bytes queued\n", queued); err != nil {
				return 2
			}
			continue
		}
		if _, err := io.ReadFull(os.Stdin, line); err != nil {
			return 0
		}
		if _, err := fmt.Fprintf(os.Stdout, "first %s", line); err != nil {
			return 2
		}
	}
}
