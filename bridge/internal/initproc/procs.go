//go:build linux

package initproc

import (
	"os"
	"strconv"
	"syscall"
)

// CloseOnExecFrom3 marks every descriptor from 3 up close-on-exec, so that
// nothing this process inherited without that flag (a shell's `exec 9>>f`,
// a socket passed by a service manager) reaches a child: the child gets
// exactly its stdin, stdout and stderr. Descriptors Go opens already have
// the flag, so this changes nothing for them.
func CloseOnExecFrom3() {
	const closeRangeCloexec = 1 << 2 // CLOSE_RANGE_CLOEXEC
	if _, _, e := syscall.Syscall(sysCloseRange, 3, ^uintptr(0), closeRangeCloexec); e == 0 {
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

// ProcsWhere lists the live (not zombie) processes for which match holds;
// stat holds the fields of /proc/PID/stat after the command name: state,
// ppid, pgrp, ...
func ProcsWhere(match func(pid int, stat []string) bool) []int {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	var pids []int
	for _, name := range names {
		if name[0] < '0' || name[0] > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + name + "/stat")
		if err != nil {
			continue // exited meanwhile
		}
		f := StatFields(b)
		if len(f) < 3 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		pid, _ := strconv.Atoi(name)
		if match(pid, f) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// Descendants lists the live descendants of root, from /proc.
func Descendants(root int) []int {
	var pids []int
	for _, id := range descendants(root) {
		pids = append(pids, id.pid)
	}
	return pids
}

// procID is a process as a walk of /proc saw it: its pid, and its start
// time (stat's starttime, clock ticks after boot), which tells it from a
// later process given the same pid.
type procID struct {
	pid   int
	start string
	ppid  int
	pgrp  int
}

// descendants lists the live descendants of root, from /proc.
func descendants(root int) []procID {
	seen := map[int]procID{}
	ProcsWhere(func(pid int, stat []string) bool {
		id := procID{pid: pid}
		id.ppid, _ = strconv.Atoi(stat[1])
		id.pgrp, _ = strconv.Atoi(stat[2])
		if len(stat) > statStart {
			id.start = stat[statStart]
		}
		seen[pid] = id
		return false
	})
	var out []procID
	for _, id := range seen {
		for p, n := id.ppid, 0; p != 0 && n < 1<<16; p, n = seen[p].ppid, n+1 {
			if p == root {
				out = append(out, id)
				break
			}
		}
	}
	return out
}

// statStart is the index of starttime among StatFields.
const statStart = 19

// StartOf is pid's start time now; "" when it has none (gone).
func StartOf(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	if f := StatFields(b); len(f) > statStart {
		return f[statStart]
	}
	return ""
}

// signal sends sig to the process id names and to no other: through a
// pidfd, opened before its start time is read again, so that a pid whose
// process ended since the walk and which another process took (a fork
// bomb goes through the kernel's 32,768 pids in seconds) is never
// signalled. Without pidfds (Linux before 5.3) it is kill(2).
func (id procID) signal(sig syscall.Signal) {
	fd, _, e := syscall.RawSyscall(sysPidfdOpen, uintptr(id.pid), 0, 0)
	switch {
	case e == syscall.ENOSYS:
		_ = syscall.Kill(id.pid, sig)
		return
	case e != 0:
		return // gone
	}
	defer syscall.Close(int(fd))
	if id.start == "" || StartOf(id.pid) != id.start {
		return // another process's pid now
	}
	_, _, _ = syscall.RawSyscall6(sysPidfdSendSignal, fd, uintptr(sig), 0, 0, 0, 0)
}

// StatFields returns the fields of /proc/PID/stat after the command name:
// "pid (comm) state ppid pgrp ...", where comm may hold spaces and parens,
// so the fields start after the last ')'. nil if there is none. (Not
// package strings: see TestImportsStayLight.)
func StatFields(b []byte) []string {
	i := len(b) - 1
	for i >= 0 && b[i] != ')' {
		i--
	}
	if i < 0 {
		return nil
	}
	var f []string
	start := -1
	for j, c := range trimNewline(b[i+1:]) {
		switch {
		case c == ' ' && start >= 0:
			f = append(f, string(b[i+1+start:i+1+j]))
			start = -1
		case c != ' ' && start < 0:
			start = j
		}
	}
	if rest := trimNewline(b[i+1:]); start >= 0 {
		f = append(f, string(rest[start:]))
	}
	return f
}

// trimNewline returns b without its trailing newlines.
func trimNewline(b []byte) []byte {
	for len(b) > 0 && b[len(b)-1] == '\n' {
		b = b[:len(b)-1]
	}
	return b
}
