//go:build linux

package bridge

import (
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// closeOnExecFrom3 marks every descriptor from 3 up close-on-exec, so that
// nothing this process inherited without that flag (a shell's `exec 9>>f`,
// a socket passed by a service manager) reaches a child: the child gets
// exactly its stdin, stdout and stderr. Descriptors Go opens already have
// the flag, so this changes nothing for them.
func closeOnExecFrom3() {
	if unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC) == nil {
		return
	}
	// Before Linux 5.11: one by one.
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range ents {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd >= 3 {
			syscall.CloseOnExec(fd)
		}
	}
}
