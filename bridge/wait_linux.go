//go:build linux && !(mips || mipsle || mips64 || mips64le)

package bridge

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
	"unsafe"

	"github.com/procwire/procwire/bridge/internal/initproc"
	"github.com/procwire/procwire/proc"
)

// waitid(2) constants and the siginfo_t layout for SIGCHLD (the options
// and si_pid's place are initproc's, whose init waits too).
const (
	pPIDFD  = 3
	wEXITED = initproc.WExited
	wNOHANG = initproc.WNoHang
	wNOWAIT = initproc.WNoWait

	cldExited = 1
	cldKilled = 2
	cldDumped = 3

	siCodeOff   = 8
	siPidOff    = initproc.SiPidOff
	siStatusOff = siPidOff + 8
)

// pidfd is a process file descriptor for the child, on the runtime's
// poller: waiting for the child's exit parks a goroutine, never an OS
// thread (os.Process.Wait, even with a pidfd, blocks a thread in waitid).
type pidfd struct {
	f  *os.File
	rc syscall.RawConn
}

// newPidfd takes over fd, a pidfd from clone(CLONE_PIDFD).
func newPidfd(fd int) (*pidfd, error) {
	if err := syscall.SetNonblock(fd, true); err != nil {
		syscall.Close(fd)
		return nil, fmt.Errorf("pidfd: %w", err)
	}
	// A non-blocking descriptor goes on the poller.
	f := os.NewFile(uintptr(fd), "pidfd")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("pidfd: %w", err)
	}
	return &pidfd{f: f, rc: rc}, nil
}

// waitExited waits until the child has exited and returns its status,
// leaving it a zombie (WNOWAIT): the goroutine sleeps on the poller until
// the pidfd turns readable, then asks waitid with WNOHANG.
func (p *pidfd) waitExited() (proc.ExitStatus, error) {
	var (
		st      proc.ExitStatus
		waitErr error
	)
	err := p.rc.Read(func(fd uintptr) bool {
		var exited bool
		st, exited, waitErr = waitid(fd, wEXITED|wNOWAIT|wNOHANG)
		return exited || waitErr != nil
	})
	if err != nil {
		return proc.ExitStatus{}, err
	}
	return st, waitErr
}

// reap collects the exited child. It does not block: the child has exited.
func (p *pidfd) reap() error {
	var err error
	cerr := p.rc.Control(func(fd uintptr) { _, _, err = waitid(fd, wEXITED|wNOHANG) })
	return errors.Join(cerr, err)
}

// close releases the pidfd.
func (p *pidfd) close() error { return p.f.Close() }

// waitid calls waitid(P_PIDFD, fd, options). exited is false when WNOHANG
// found the child still running.
func waitid(fd uintptr, options int) (st proc.ExitStatus, exited bool, err error) {
	var info [16]uint64 // siginfo_t is 128 bytes
	for {
		_, _, e := syscall.Syscall6(syscall.SYS_WAITID, pPIDFD, fd,
			uintptr(unsafe.Pointer(&info)), uintptr(options), 0, 0)
		if e == syscall.EINTR {
			continue
		}
		if e != 0 {
			return proc.ExitStatus{}, false, e
		}
		break
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(&info)), len(info)*8)
	if binary.NativeEndian.Uint32(b[siPidOff:]) == 0 {
		return proc.ExitStatus{}, false, nil // WNOHANG: still running
	}
	code := int32(binary.NativeEndian.Uint32(b[siCodeOff:]))
	status := int(int32(binary.NativeEndian.Uint32(b[siStatusOff:])))
	switch code {
	case cldExited:
		return proc.ExitStatus{Code: status & 0xff}, true, nil
	case cldKilled, cldDumped:
		return proc.ExitStatus{Signal: proc.SignalName(status)}, true, nil
	}
	// WEXITED reports nothing else; keep the information if it ever does.
	return proc.ExitStatus{Code: 255}, true, nil
}

// waitGroupGone waits until process group pgid has no live member (zombies
// waiting for their new parent to reap them do not count), re-killing
// members that appear. Its leader must be unreaped, so that pgid is the
// group's until then (waitChild). The kernel has no event for this, so it
// polls /proc with backoff; after a group SIGKILL the first look usually
// suffices.
func waitGroupGone(pgid int) {
	for backoff := time.Millisecond; ; backoff = min(2*backoff, 50*time.Millisecond) {
		if err := syscall.Kill(-pgid, 0); err == syscall.ESRCH || !groupHasLive(pgid) {
			return
		}
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		time.Sleep(backoff) // no event to wait for: look again, less and less often
	}
}

// groupHasLive reports whether /proc lists a process of group pgid that is
// not a zombie.
func groupHasLive(pgid int) bool {
	want := strconv.Itoa(pgid)
	return len(initproc.ProcsWhere(func(_ int, stat []string) bool { return stat[2] == want })) > 0
}
