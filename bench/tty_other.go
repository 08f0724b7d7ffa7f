//go:build !linux

package bench

import (
	"errors"
	"os"
	"syscall"
)

// openBenchPTY is Linux's (tty_linux.go): the SSH peer's terminals are
// not served elsewhere.
func openBenchPTY(rows, cols uint16) (master, slave *os.File, err error) {
	return nil, nil, errors.New("bench: pseudo-terminals are opened on Linux only")
}

// ptyProcAttr is not reached: openBenchPTY fails first.
func ptyProcAttr() *syscall.SysProcAttr { return nil }
