package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/procwire/procwire/client"
	"github.com/procwire/procwire/frames"
)

// Keystroke echo through a pseudo-terminal (issue 20): one byte typed into
// cat on a raw terminal and its echo read back, through procwire's tty
// session and through SSH with a pty-req, as ssh -t does. Both run the
// same script under sh -c on a 24x80 terminal: raw mode without echo (so
// that the byte comes back once, from cat), a marker, then cat.

// TTYPeer is a Peer that can run a command on a remote terminal.
type TTYPeer interface {
	Peer
	// OpenTTY runs sh -c script on a new rows x cols terminal; the
	// session's reads are what the terminal writes, its writes are typed.
	OpenTTY(ctx context.Context, script string, rows, cols uint16) (Session, error)
}

// KeystrokeScript puts the terminal in raw mode without echo, writes the
// marker R, and runs cat.
const KeystrokeScript = "stty raw -echo && printf R && exec cat"

// KeystrokeEcho types one byte into cat on a raw terminal and reads its
// echo, n times in a row, and returns every round trip. The session's
// start (up to the marker) is not timed.
func KeystrokeEcho(ctx context.Context, p TTYPeer, n int) (samples []time.Duration, err error) {
	s, err := p.OpenTTY(ctx, KeystrokeScript, 24, 80)
	if err != nil {
		return nil, fmt.Errorf("%s: open a terminal: %w", p.Name(), err)
	}
	defer closeSession(s, &err)
	mark := make([]byte, 1)
	for mark[0] != 'R' {
		if _, err := io.ReadFull(s, mark); err != nil {
			return nil, fmt.Errorf("%s: waiting for the terminal: %w", p.Name(), err)
		}
	}
	return echoes(p.Name(), s, n)
}

// --- procwire ---

// OpenTTY opens sh -c script with client.Options.TTY.
func (p *procwirePeer) OpenTTY(ctx context.Context, script string, rows, cols uint16) (Session, error) {
	id := fmt.Sprintf("bench-tty-%d", p.seq.Add(1))
	req := frames.ProcessRequest{
		Executable:       "sh",
		Arguments:        []string{"-c", script},
		WorkingDirectory: os.TempDir(),
		Environment:      map[string]string{"PATH": "/usr/local/bin:/usr/bin:/bin"},
	}
	proc, err := client.Open(ctx, p.url, id, req, &client.Options{TTY: &client.TTY{Rows: rows, Cols: cols, Term: "xterm"}})
	if err != nil {
		return nil, err
	}
	return procwireSession{proc}, nil
}

// --- SSH ---

// OpenTTY asks for a pty (pty-req, as ssh -t) and runs script in it.
func (p *sshPeer) OpenTTY(ctx context.Context, script string, rows, cols uint16) (Session, error) {
	c, sess, err := p.dialSession(ctx)
	if err != nil {
		return nil, err
	}
	s := &sshSession{c: c, s: sess}
	err = sess.RequestPty("xterm", int(rows), int(cols), ssh.TerminalModes{})
	if err == nil {
		if s.in, err = sess.StdinPipe(); err == nil {
			if s.out, err = sess.StdoutPipe(); err == nil {
				err = sess.Start(script)
			}
		}
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	return s, nil
}

// ptyRequest is the payload of an SSH pty-req (RFC 4254 §6.2).
type ptyRequest struct {
	Term              string
	Columns, Rows     uint32
	WidthPx, HeightPx uint32
	Modes             string
}

// runSSHPTY runs cmdline under sh -c on a new pseudo-terminal, as sshd
// does for a session with a pty: the terminal's master is copied to and
// from the channel, read and written through the runtime poller (as
// procwire's server does), and the child leads a new session with the
// slave as its controlling terminal.
func runSSHPTY(ch ssh.Channel, cmdline string, pr *ptyRequest) uint32 {
	master, slave, err := openBenchPTY(uint16(pr.Rows), uint16(pr.Columns))
	if err != nil {
		return 255
	}
	defer master.Close()
	cmd := exec.Command("sh", "-c", cmdline)
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "TERM=" + pr.Term}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = ptyProcAttr()
	err = cmd.Start()
	slave.Close()
	if err != nil {
		return 127
	}
	go func() {
		buf := make([]byte, rawChunk)
		_, _ = io.CopyBuffer(master, ch, buf)
		// The client is gone: hang the terminal up, as sshd does when the
		// channel closes (the kernel sends SIGHUP to the session).
		master.Close()
	}()
	buf := make([]byte, rawChunk)
	// EIO: no process holds the slave any more, the terminal's EOF.
	_, _ = io.CopyBuffer(ch, master, buf)
	_ = ch.CloseWrite()
	err = cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return uint32(ee.ExitCode()) & 0xff
	}
	if err != nil {
		return 255
	}
	return 0
}

// dialSession connects to the SSH server and opens a session channel.
func (p *sshPeer) dialSession(ctx context.Context) (*ssh.Client, *ssh.Session, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", p.addr)
	if err != nil {
		return nil, nil, err
	}
	stop := context.AfterFunc(ctx, func() { nc.Close() })
	defer stop()
	cc, chans, reqs, err := ssh.NewClientConn(nc, p.addr, &ssh.ClientConfig{
		User:            "bench",
		HostKeyCallback: ssh.InsecureIgnoreHostKey(), //nolint:gosec // loopback, our own server
	})
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	c := ssh.NewClient(cc, chans, reqs)
	sess, err := c.NewSession()
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	return c, sess, nil
}
