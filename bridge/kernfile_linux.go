//go:build linux

package bridge

import (
	"os"

	"golang.org/x/sys/unix"
)

// The files of cgroupfs and /proc that a process's start and its destroy
// read and write (cgroup.kill, cgroup.events, oom_score_adj, and a v1
// cgroup's limits, cgroup.procs and the pids.max a destroy sets to 0) are
// read and written here with plain system calls: os.ReadFile and
// os.WriteFile register a kernfs file with the poller, which costs each
// access four system calls more than its open, read or write and close
// (epoll_ctl in and out, and two fcntl), on the path of every process.
// A cgroup v2's limits (limiter.writeV2) keep os.WriteFile: this machine
// has no v2 controllers, and their test writes them into a plain
// directory, where the files must be created.

// writeKernFile writes b to the existing file at path in one write(2).
func writeKernFile(path string, b []byte) error {
	fd, err := openKernFile(path, unix.O_WRONLY)
	if err != nil {
		return err
	}
	n, err := ignoringEINTR(func() (int, error) { return unix.Write(fd, b) })
	if err == nil && n < len(b) {
		err = unix.EIO // a kernfs write is taken whole or refused
	}
	if cerr := unix.Close(fd); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return &os.PathError{Op: "write", Path: path, Err: err}
	}
	return nil
}

// readKernFile reads the file at path into buf, and returns what it read:
// at most len(buf) bytes, which a caller sizes to the file it reads.
func readKernFile(path string, buf []byte) ([]byte, error) {
	fd, err := openKernFile(path, unix.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	n := 0
	for n < len(buf) {
		k, err := ignoringEINTR(func() (int, error) { return unix.Read(fd, buf[n:]) })
		if err != nil {
			return nil, &os.PathError{Op: "read", Path: path, Err: err}
		}
		if k == 0 {
			break
		}
		n += k
	}
	return buf[:n], nil
}

func openKernFile(path string, mode int) (int, error) {
	fd, err := ignoringEINTR(func() (int, error) { return unix.Open(path, mode|unix.O_CLOEXEC, 0) })
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return fd, nil
}

// removeDir removes the empty directory at path, as a cgroup is removed:
// rmdir(2) alone, where os.Remove tries unlink(2) first.
func removeDir(path string) error {
	if _, err := ignoringEINTR(func() (int, error) { return 0, unix.Rmdir(path) }); err != nil {
		return &os.PathError{Op: "rmdir", Path: path, Err: err}
	}
	return nil
}

func ignoringEINTR(f func() (int, error)) (int, error) {
	for {
		n, err := f()
		if err != unix.EINTR {
			return n, err
		}
	}
}
