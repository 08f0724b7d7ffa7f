//go:build linux

package bridge

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/procwire/procwire/bridge/internal/initproc"
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
	ttyNr   string   // the slave as /proc/PID/stat's tty_nr names it
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
	var st unix.Stat_t
	if err = unix.Fstat(sfd, &st); err != nil {
		return nil, fmt.Errorf("stat the pty slave: %w", err)
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
		ttyNr:   statTTYNr(st.Rdev),
	}, nil
}

// statTTYNr is device dev as /proc/PID/stat's tty_nr writes it (the
// kernel's new_encode_dev).
func statTTYNr(dev uint64) string {
	major, minor := uint64(unix.Major(dev)), uint64(unix.Minor(dev))
	return strconv.FormatUint(minor&0xff|major<<8|(minor&^0xff)<<12, 10)
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

// onMaster calls fn with the terminal's master, unless the process has no
// terminal or Destroy closed it.
func (p *Process) onMaster(fn func(master int)) {
	if p.cfg.TTY == nil {
		return
	}
	if rc, err := p.stdoutR.SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) { fn(int(fd)) })
	}
}

// signalForeground sends sig to the terminal's foreground process group,
// as the key would, and reports whether it had one: a live process of
// this terminal's session, on this terminal, in the group TIOCGPGRP
// names. The number TIOCGPGRP gives is never signalled on its own word:
// the terminal keeps naming its foreground group after the group's last
// process ended (until the session's shell takes the terminal back, or
// for good under a program that never does), and the kernel may give the
// number meanwhile to a process elsewhere that leads a group of its own (a
// fork bomb anywhere goes through the 32,768 pids in seconds).
//
// So a member is found first: the group's leader (whose pid is the
// group's id), else any process of the group from /proc. It is pinned by a
// pidfd and then checked to be in the group, in the session and on the
// terminal; a check that passes while the pidfd's process lives was made
// of that process, whose life keeps the number the group's. Through the
// leader's pidfd the signal then goes to the group the kernel holds by
// reference (PIDFD_SIGNAL_PROCESS_GROUP, Linux 6.9), a number no more;
// through another member's, or on an older kernel, by number at once,
// while the member still holds it. p.mu must be held.
func (p *Process) signalForeground(sig syscall.Signal) (sent bool) {
	p.onMaster(func(master int) {
		fg, err := unix.IoctlGetInt(master, unix.TIOCGPGRP)
		if err != nil || fg <= 0 {
			return
		}
		sid, err := unix.IoctlGetInt(master, unix.TIOCGSID)
		if err != nil {
			return
		}
		g := fgGroup{pgrp: strconv.Itoa(fg), sid: strconv.Itoa(sid), ttyNr: p.ttyNr}
		if sent = g.signalThrough(fg, fg, sig); sent {
			return
		}
		for _, pid := range initproc.ProcsWhere(func(_ int, stat []string) bool { return g.holds(stat) }) {
			if sent = g.signalThrough(pid, fg, sig); sent {
				return
			}
		}
	})
	return sent
}

// fgGroup is a terminal's foreground group as its processes' stat fields
// show it.
type fgGroup struct{ pgrp, sid, ttyNr string }

// holds reports whether stat (initproc.ProcsWhere's fields) is a live
// process of g: in the group, in the session, on the terminal.
func (g fgGroup) holds(stat []string) bool {
	return len(stat) > 4 && stat[0] != "Z" && stat[0] != "X" && stat[2] == g.pgrp && stat[3] == g.sid && stat[4] == g.ttyNr
}

// signalThrough sends sig to group fg through pid, one of its processes:
// pinned by a pidfd, checked, and then by reference when pid is the
// group's leader, else by number (signalForeground). It reports whether
// pid was one of g's and the signal went.
func (g fgGroup) signalThrough(pid, fg int, sig syscall.Signal) bool {
	pfd, err := unix.PidfdOpen(pid, 0)
	switch {
	case errors.Is(err, unix.ENOSYS):
		pfd = -1 // before Linux 5.3: the check alone
	case err != nil:
		return false // gone
	default:
		defer unix.Close(pfd)
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil || !g.holds(initproc.StatFields(b)) {
		return false
	}
	if pfd >= 0 {
		if unix.PidfdSendSignal(pfd, 0, nil, 0) != nil {
			return false // ended since the check, which may have been of another
		}
		if pid == fg {
			switch err := unix.PidfdSendSignal(pfd, sig, nil, unix.PIDFD_SIGNAL_PROCESS_GROUP); {
			case err == nil:
				return true
			case !errors.Is(err, unix.EINVAL):
				return false // the group ended
			}
			// Before Linux 6.9: by number, below.
		}
	}
	return syscall.Kill(-fg, sig) == nil
}

// ttyEOF reports whether err, from a read of the master, is the end of the
// terminal's output: EIO once no process holds the slave.
func (p *Process) ttyEOF(err error) bool {
	return p.cfg.TTY != nil && errors.Is(err, syscall.EIO)
}
