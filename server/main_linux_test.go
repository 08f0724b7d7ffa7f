package server

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"unsafe"

	"github.com/procwire/procwire/bridge"
)

// runAsChild runs what this binary was started as, when it is not the
// tests: the init of a pid_namespace test's process, or a child of
// TestSignalAfterStdin; either exits.
func runAsChild() {
	bridge.MaybeRunInit()
	if os.Getenv(childEnv) == "signal-order" {
		os.Exit(signalOrderChild())
	}
}

// signalOrderChild waits for SIGINT, round after round. When a signal
// comes it looks whether the line its client wrote before the signal is
// already in its stdin pipe ("in order") or not ("overtaken"), then reads
// that line.
func signalOrderChild() int {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT)
	line := make([]byte, len("quit\n"))
	for {
		if _, err := os.Stdout.WriteString("ready\n"); err != nil {
			return 2
		}
		<-sigs
		var queued int32
		if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, 0, syscall.TIOCINQ, uintptr(unsafe.Pointer(&queued))); errno != 0 {
			fmt.Fprintln(os.Stderr, "FIONREAD:", errno)
			return 2
		}
		if _, err := io.ReadFull(os.Stdin, line); err != nil {
			return 0
		}
		answer := "in order\n"
		if int(queued) < len(line) {
			answer = fmt.Sprintf("overtaken: %d bytes queued\n", queued)
		}
		if _, err := os.Stdout.WriteString(answer); err != nil {
			return 2
		}
	}
}
