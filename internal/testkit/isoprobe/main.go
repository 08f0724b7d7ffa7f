//go:build linux

// Command isoprobe is run by the isolation tests as a workload: it tries,
// against each process id it is given, everything one process could do to
// another it should not reach, and prints one line per attempt:
//
//	PID mem ok|ERRNO       read the memory (/proc/PID/mem at its first readable mapping)
//	PID environ ok|ERRNO   read /proc/PID/environ
//	PID fd0 ok|ERRNO       open its standard input through /proc/PID/fd/0
//	PID signal ok|ERRNO    send it signal 0 (the permission check of kill) through a pidfd of /proc/PID
//	PID ptrace ok|ERRNO    PTRACE_SEIZE it (the permission check of PTRACE_ATTACH; the target is not stopped)
//
// An argument file:PATH instead of a pid tries to read the file:
//
//	file:PATH read ok|ERRNO
//
// Its first line is "self uid=UID pidns=NS". Process ids are those of
// /proc, the machine's; ptrace takes them in the probe's PID namespace,
// where a process of another namespace is not found (ESRCH).
package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

func main() {
	runtime.LockOSThread() // ptrace is a thread's
	ns, _ := os.Readlink("/proc/self/ns/pid")
	fmt.Printf("self uid=%d pidns=%s\n", os.Getuid(), ns)
	for _, arg := range os.Args[1:] {
		if path, ok := strings.CutPrefix(arg, "file:"); ok {
			_, err := os.ReadFile(path)
			fmt.Printf("%s read %s\n", arg, result(err))
			continue
		}
		pid, err := strconv.Atoi(arg)
		if err != nil {
			fmt.Fprintf(os.Stderr, "isoprobe: %q is not a pid\n", arg)
			os.Exit(2)
		}
		dir := "/proc/" + arg
		report(pid, "mem", readMem(dir))
		_, err = os.ReadFile(dir + "/environ")
		report(pid, "environ", err)
		report(pid, "fd0", openClose(dir+"/fd/0"))
		report(pid, "signal", signal0(dir))
		report(pid, "ptrace", unix.PtraceSeize(pid))
	}
}

// report prints one attempt: ok, or the errno that refused it.
func report(pid int, what string, err error) {
	fmt.Printf("%d %s %s\n", pid, what, result(err))
}

// result is "ok", or the errno that refused an attempt.
func result(err error) string {
	if err == nil {
		return "ok"
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return unix.ErrnoName(errno)
	}
	return "error:" + strings.ReplaceAll(err.Error(), " ", "_")
}

// readMem reads 8 bytes of the first readable mapping of the process.
func readMem(dir string) error {
	mem, err := os.Open(dir + "/mem")
	if err != nil {
		return err
	}
	defer mem.Close()
	maps, err := os.Open(dir + "/maps")
	if err != nil {
		return err
	}
	defer maps.Close()
	s := bufio.NewScanner(maps)
	for s.Scan() {
		f := strings.Fields(s.Text())
		if len(f) < 2 || f[1][0] != 'r' {
			continue
		}
		lo, _, _ := strings.Cut(f[0], "-")
		addr, err := strconv.ParseUint(lo, 16, 64)
		if err != nil {
			return err
		}
		_, err = mem.ReadAt(make([]byte, 8), int64(addr))
		return err
	}
	if err := s.Err(); err != nil {
		return err
	}
	return errors.New("no readable mapping")
}

func openClose(path string) error {
	f, err := os.Open(path)
	if err == nil {
		f.Close()
	}
	return err
}

// signal0 checks whether the process may be signalled, through a pidfd
// (the /proc/PID directory), so that the process is the one meant even
// across PID namespaces.
func signal0(dir string) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.PidfdSendSignal(fd, 0, nil, 0)
}
