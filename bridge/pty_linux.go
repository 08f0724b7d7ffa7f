//go:build linux

package bridge

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/procwire/procwire/proc"
)

// A process started with Config.TTY runs on a pseudo-terminal (PROTOCOL.md
// §10). The server allocates the pair; only the slave reaches the child,
// as its fds 0, 1 and 2, and the child (forked by the init, or by the
// server without one) makes itself a session leader with the slave as its
// controlling terminal (Setsid, Setctty). So the terminal's processes are
// inside the containment and Destroy ends every holder of the slave.
//
// The master is read and written through the runtime poller, with two
// descriptors of the one open file (the stdout pump reads one, the stdin
// pump writes the other, and closing stdin closes only its own), so a
// terminal costs no thread. A read of the master gives EIO once no process
// holds the slave any more: that is stdout's EOF.

// TTY asks Start for a child on a pseudo-terminal (Config.TTY).
type TTY = proc.TTY

// ptyPair is a pseudo-terminal just allocated.
type ptyPair struct {
	master  *os.File // read by the stdout pump; non-blocking, on the poller
	masterW *os.File // a dup of master, written by the stdin pump
	slave   *os.File // blocking; handed to the child and then closed
}

// openPTY allocates a pseudo-terminal of t's size. With owner set, the
// slave belongs to owner's uid and gid with mode 0620, as login gives a
// user's terminal, so that a child running as owner can open it again by
// its name (/dev/pts/N), as tty(1), ssh and script do.
func openPTY(t *proc.TTY, owner *proc.User) (pt *ptyPair, err error) {
	mfd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("open /dev/ptmx: %w", err)
	}
	closeFd := func(fd int) {
		if fd >= 0 {
			_ = unix.Close(fd)
		}
	}
	wfd, sfd := -1, -1
	defer func() {
		if err != nil {
			closeFd(mfd)
			closeFd(wfd)
			closeFd(sfd)
		}
	}()
	if err = unix.IoctlSetPointerInt(mfd, unix.TIOCSPTLCK, 0); err != nil {
		return nil, fmt.Errorf("unlockpt: %w", err)
	}
	// TIOCGPTPEER opens the slave of this very master, whatever /dev/pts
	// is mounted where; before Linux 4.13, by its name.
	r, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(mfd), unix.TIOCGPTPEER,
		uintptr(unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC))
	sfd = int(r)
	if errno != 0 {
		sfd = -1
		n, nerr := unix.IoctlGetInt(mfd, unix.TIOCGPTN)
		if nerr != nil {
			return nil, fmt.Errorf("ptsname: %w", nerr)
		}
		sfd, err = unix.Open("/dev/pts/"+strconv.Itoa(n), unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
		if err != nil {
			sfd = -1
			return nil, fmt.Errorf("open the pty slave: %w", err)
		}
	}
	if owner != nil {
		if err = unix.Fchown(sfd, int(owner.UID), int(owner.GID)); err != nil {
			return nil, fmt.Errorf("chown the pty slave to %s: %w", owner, err)
		}
		if err = unix.Fchmod(sfd, 0o620); err != nil {
			return nil, fmt.Errorf("chmod the pty slave: %w", err)
		}
	}
	if err = setWinsize(mfd, t.Rows, t.Cols, t.XPixel, t.YPixel); err != nil {
		return nil, err
	}
	if wfd, err = unix.FcntlInt(uintptr(mfd), unix.F_DUPFD_CLOEXEC, 0); err != nil {
		wfd = -1
		return nil, fmt.Errorf("dup the pty master: %w", err)
	}
	// os.NewFile puts a non-blocking descriptor on the poller.
	return &ptyPair{
		master:  os.NewFile(uintptr(mfd), "/dev/ptmx"),
		masterW: os.NewFile(uintptr(wfd), "/dev/ptmx"),
		slave:   os.NewFile(uintptr(sfd), "pty slave"),
	}, nil
}

func setWinsize(fd int, rows, cols, xpixel, ypixel uint16) error {
	ws := &unix.Winsize{Row: rows, Col: cols, Xpixel: xpixel, Ypixel: ypixel}
	if err := unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, ws); err != nil {
		return fmt.Errorf("set the window size: %w", err)
	}
	return nil
}

// ErrNoTTY is returned by Resize for a process without a terminal.
var ErrNoTTY = errors.New("the process has no terminal")

// TTY reports whether the process runs on a pseudo-terminal.
func (p *Process) TTY() bool { return p.cfg.TTY != nil }

// Resize sets the window size of the process's terminal; the kernel sends
// SIGWINCH to its foreground process group when the size changes. It
// returns ErrNoTTY for a process on pipes and an error wrapping
// ErrDestroyed after Destroy.
func (p *Process) Resize(rows, cols, xpixel, ypixel uint16) error {
	if p.cfg.TTY == nil {
		return ErrNoTTY
	}
	rc, err := p.stdoutR.SyscallConn()
	if err != nil {
		return fmt.Errorf("resize: %w", err)
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = setWinsize(int(fd), rows, cols, xpixel, ypixel) }); err != nil {
		// Only Destroy closes the master.
		return fmt.Errorf("resize: %w: %w", proc.ErrDestroyed, err)
	}
	return serr
}

// ttyForeground returns the terminal's foreground process group, as a pid
// of the server's namespace, or 0 when it has none (every process left
// it, or the session was hung up) or on pipes.
func (p *Process) ttyForeground() int {
	if p.cfg.TTY == nil {
		return 0
	}
	rc, err := p.stdoutR.SyscallConn()
	if err != nil {
		return 0
	}
	pgrp := 0
	_ = rc.Control(func(fd uintptr) {
		if g, err := unix.IoctlGetInt(int(fd), unix.TIOCGPGRP); err == nil {
			pgrp = g
		}
	})
	return pgrp
}

// ttyEOF reports whether err, from a read of the master, is the end of the
// terminal's output: EIO once no process holds the slave.
func (p *Process) ttyEOF(err error) bool {
	return p.cfg.TTY != nil && errors.Is(err, syscall.EIO)
}
