package server

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"unsafe"

	"go.uber.org/goleak"

	"github.com/procwire/procwire/bridge"
)

// childEnv names the child a test starts by running the test binary itself.
const childEnv = "PROCWIRE_SERVER_TEST_CHILD"

func TestMain(m *testing.M) {
	bridge.MaybeRunInit() // this binary is the init of the pid_namespace tests
	if os.Getenv(childEnv) == "signal-order" {
		os.Exit(signalOrderChild())
	}
	goleak.VerifyTestMain(m)
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
