//go:build linux && !(mips || mipsle || mips64 || mips64le)

package bridge

import (
	"encoding/binary"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

// waitid(2) constants and the siginfo_t layout for SIGCHLD.
const (
	pPID    = 1
	wEXITED = 0x4
	wNOWAIT = 0x1000000

	cldExited = 1
	cldKilled = 2
	cldDumped = 3

	// si_signo, si_errno, si_code, then the union, aligned like a pointer;
	// in it si_pid, si_uid, si_status (mips orders the header differently).
	siCodeOff   = 8
	siStatusOff = (12+unsafe.Sizeof(uintptr(0))-1)&^(unsafe.Sizeof(uintptr(0))-1) + 8
)

// waitExited blocks until child pid has exited and returns its status,
// leaving it a zombie (WNOWAIT).
func waitExited(pid int) (ExitStatus, error) {
	var info [16]uint64 // siginfo_t is 128 bytes
	for {
		_, _, e := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid),
			uintptr(unsafe.Pointer(&info)), wEXITED|wNOWAIT, 0, 0)
		if e == syscall.EINTR {
			continue
		}
		if e != 0 {
			return ExitStatus{}, e
		}
		break
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(&info)), len(info)*8)
	code := int32(binary.NativeEndian.Uint32(b[siCodeOff:]))
	status := int(int32(binary.NativeEndian.Uint32(b[siStatusOff:])))
	switch code {
	case cldExited:
		return ExitStatus{Code: status & 0xff}, nil
	case cldKilled, cldDumped:
		return ExitStatus{Signal: signalName(status)}, nil
	}
	// WEXITED reports nothing else; keep the information if it ever does.
	return ExitStatus{Code: 255}, nil
}

// reap collects the exited child pid.
func reap(pid int) error {
	var ws syscall.WaitStatus
	for {
		_, err := syscall.Wait4(pid, &ws, 0, nil)
		if err != syscall.EINTR {
			return err
		}
	}
}

// waitGroupGone waits until process group pgid has no live member (zombies
// waiting for their new parent to reap them do not count), re-killing
// members that appear, until stop fires. It reports whether the group is
// gone. The kernel has no event for this, so it polls /proc with backoff;
// after a group SIGKILL the first look usually suffices.
func waitGroupGone(pgid int, stop <-chan time.Time) bool {
	backoff := time.Millisecond
	for {
		if err := syscall.Kill(-pgid, 0); err == syscall.ESRCH {
			return true
		}
		if !groupHasLive(pgid) {
			return true
		}
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-stop:
			t.Stop()
			return false
		}
		backoff = min(2*backoff, 50*time.Millisecond)
	}
}

// groupHasLive reports whether /proc lists a process of group pgid that is
// not a zombie.
func groupHasLive(pgid int) bool {
	d, err := os.Open("/proc")
	if err != nil {
		return false
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	want := strconv.Itoa(pgid)
	for _, name := range names {
		if name[0] < '0' || name[0] > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + name + "/stat")
		if err != nil {
			continue // exited meanwhile
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces and parens.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 3 || f[2] != want {
			continue
		}
		if f[0] != "Z" && f[0] != "X" {
			return true
		}
	}
	return false
}
