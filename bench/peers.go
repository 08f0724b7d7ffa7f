package bench

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"golang.org/x/crypto/ssh"

	"github.com/procwire/procwire/client"
	"github.com/procwire/procwire/frames"
	"github.com/procwire/procwire/server"
)

// Session is one remote child as a workload sees it: writes go to its
// stdin, reads come from its stdout. One goroutine writes and one reads.
type Session interface {
	io.Reader
	io.Writer
	// CloseStdin half-closes stdin: the child reads EOF after the last
	// byte written.
	CloseStdin() error
	// Close ends the session and the child with it.
	Close() error
}

// Peer is one way of carrying a child's stdio from a server on loopback to
// a client in the same process: procwire, a plain WebSocket or SSH. Open
// may be called concurrently.
type Peer interface {
	Name() string
	Open(ctx context.Context, argv []string) (Session, error)
	Close() error
}

// Peer names, as the report and the benchmarks print them.
const (
	NameProcwire = "procwire"
	NameRaw      = "raw-websocket"
	NameSSH      = "ssh"
)

// maxSessions bounds the processes a peer's server holds at once: the 200
// concurrent sessions with room to spare.
const maxSessions = 512

// serveHTTP serves h on a loopback port and returns the server and its
// ws:// URL.
func serveHTTP(h http.Handler) (*http.Server, string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: time.Minute}
	go func() { _ = hs.Serve(ln) }()
	return hs, "ws://" + ln.Addr().String() + "/", nil
}

// shutdownHTTP closes hs and waits for its handlers.
func shutdownHTTP(hs *http.Server) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := hs.Shutdown(ctx); err != nil {
		return errors.Join(err, hs.Close())
	}
	return nil
}

// --- procwire ---

type procwirePeer struct {
	srv   *server.Server
	hs    *http.Server
	url   string
	seq   atomic.Int64
	close func() error // the executor's
}

// NewProcwire starts a procwire server (its default windows and frame
// size, its children started as procwire serve starts them) on loopback.
func NewProcwire() (Peer, error) {
	exec, closeExec, err := procwireExecutor()
	if err != nil {
		return nil, err
	}
	perProcess := int64(server.DefaultStdoutWindow + server.DefaultStdinWindow + server.DefaultStderrRing)
	srv, err := server.New(server.Config{MaxProcesses: maxSessions, MaxMemory: maxSessions * perProcess,
		Executor: exec, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, errors.Join(err, closeExec())
	}
	hs, url, err := serveHTTP(srv)
	if err != nil {
		return nil, errors.Join(err, closeExec())
	}
	return &procwirePeer{srv: srv, hs: hs, url: url, close: closeExec}, nil
}

func (p *procwirePeer) Name() string { return NameProcwire }

func (p *procwirePeer) Open(ctx context.Context, argv []string) (Session, error) {
	id := fmt.Sprintf("bench-%d", p.seq.Add(1))
	req := frames.ProcessRequest{
		Executable:       argv[0],
		Arguments:        slices.Clone(argv[1:]),
		WorkingDirectory: os.TempDir(),
		Environment:      map[string]string{"PATH": "/usr/local/bin:/usr/bin:/bin"},
	}
	proc, err := client.Open(ctx, p.url, id, req, nil)
	if err != nil {
		return nil, err
	}
	return procwireSession{proc}, nil
}

func (p *procwirePeer) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := errors.Join(p.srv.Shutdown(ctx), shutdownHTTP(p.hs))
	if p.close != nil {
		err = errors.Join(err, p.close())
	}
	return err
}

type procwireSession struct{ p *client.Process }

func (s procwireSession) Read(b []byte) (int, error)  { return s.p.Stdout().Read(b) }
func (s procwireSession) Write(b []byte) (int, error) { return s.p.Stdin().Write(b) }
func (s procwireSession) CloseStdin() error           { return s.p.Stdin().Close() }
func (s procwireSession) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return s.p.Destroy(ctx)
}

// --- raw WebSocket ---

// rawChunk is the read size of the raw pumps, the same 32 KiB the bridge
// reads from a child's pipe.
const rawChunk = 32 << 10

// rawReadLimit bounds one binary message the raw server accepts: the 64 KiB
// writes of the stdin workload with room to spare.
const rawReadLimit = 1 << 20

type rawPeer struct {
	hs  *http.Server
	url string
}

// NewRaw starts the baseline on loopback: a plain coder/websocket server
// that runs the argv a client asks for (no shell), feeds the child's stdin
// from the binary messages it receives (a text message half-closes it) and
// sends the child's stdout back as binary messages of at most rawChunk
// bytes, closing normally at the stdout's EOF. It has no framing, no flow
// control and no replay: the floor procwire's overhead is measured
// against.
func NewRaw() (Peer, error) {
	hs, url, err := serveHTTP(http.HandlerFunc(rawHandler))
	if err != nil {
		return nil, err
	}
	return &rawPeer{hs: hs, url: url}, nil
}

// RawHandler is the baseline's handler (see NewRaw), for a benchmark that
// serves it to a client in another process, such as the TypeScript
// client's (js/bench/gopeer). Its URL takes the argv as repeated "arg"
// query parameters.
func RawHandler() http.Handler { return http.HandlerFunc(rawHandler) }

func rawHandler(w http.ResponseWriter, r *http.Request) {
	argv := r.URL.Query()["arg"]
	if len(argv) == 0 {
		http.Error(w, "no arg", http.StatusBadRequest)
		return
	}
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer c.CloseNow()
	c.SetReadLimit(rawReadLimit)
	// Reads and writes take no context, as procwire's server's do: one
	// with a Done channel costs coder/websocket a hand-off to its timeout
	// goroutine per call, which would handicap the baseline. The request's
	// end closes the connection instead.
	ctx := r.Context()
	stop := context.AfterFunc(ctx, func() { c.CloseNow() })
	defer stop()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	in, err := cmd.StdinPipe()
	if err != nil {
		return
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return
	}
	if err := cmd.Start(); err != nil {
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, rawChunk)
		for {
			n, err := out.Read(buf)
			if n > 0 && c.Write(context.Background(), websocket.MessageBinary, buf[:n]) != nil {
				_ = cmd.Process.Kill()
				return
			}
			if err != nil {
				c.Close(websocket.StatusNormalClosure, "")
				return
			}
		}
	}()
	buf := make([]byte, 64<<10)
	for {
		typ, mr, err := c.Reader(context.Background())
		if err != nil {
			_ = cmd.Process.Kill()
			break
		}
		if typ == websocket.MessageText {
			break
		}
		if err := copyMessage(in, mr, buf); err != nil {
			break
		}
	}
	in.Close()
	<-done
	_ = cmd.Wait()
}

// copyMessage writes what r holds to w through buf. Not io.CopyBuffer:
// an *os.File's ReadFrom ignores buf and allocates 32 KiB per call, a
// garbage collection's worth per few thousand messages that would handicap
// the baseline.
func copyMessage(w io.Writer, r io.Reader, buf []byte) error {
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return werr
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func (p *rawPeer) Name() string { return NameRaw }

func (p *rawPeer) Open(ctx context.Context, argv []string) (Session, error) {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = "arg=" + a
	}
	c, _, err := websocket.Dial(ctx, p.url+"?"+strings.Join(q, "&"), nil)
	if err != nil {
		return nil, err
	}
	c.SetReadLimit(rawChunk)
	return &rawSession{c: c}, nil
}

func (p *rawPeer) Close() error { return shutdownHTTP(p.hs) }

type rawSession struct {
	c  *websocket.Conn
	mr io.Reader // the message being read, nil between messages
}

func (s *rawSession) Read(b []byte) (int, error) {
	for {
		if s.mr == nil {
			_, mr, err := s.c.Reader(context.Background())
			if websocket.CloseStatus(err) == websocket.StatusNormalClosure {
				return 0, io.EOF
			}
			if err != nil {
				return 0, err
			}
			s.mr = mr
		}
		n, err := s.mr.Read(b)
		if errors.Is(err, io.EOF) {
			s.mr = nil
			err = nil
		}
		if n > 0 || err != nil {
			return n, err
		}
	}
}

func (s *rawSession) Write(b []byte) (int, error) {
	if err := s.c.Write(context.Background(), websocket.MessageBinary, b); err != nil {
		return 0, err
	}
	return len(b), nil
}

func (s *rawSession) CloseStdin() error {
	return s.c.Write(context.Background(), websocket.MessageText, nil)
}

// Close closes the connection; one the server already closed is no error.
func (s *rawSession) Close() error {
	if err := s.c.CloseNow(); err != nil && !errors.Is(err, net.ErrClosed) {
		return err
	}
	return nil
}

// --- SSH ---

type sshPeer struct {
	ln   net.Listener
	addr string
	cfg  *ssh.ServerConfig

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// NewSSH starts an in-process golang.org/x/crypto/ssh server on loopback
// (default ciphers, key exchanges and MACs; an ed25519 host key; no client
// authentication) that serves exec requests by running the command's
// space-separated words (no shell) with the channel as its stdin and
// stdout, as sshd's exec does.
func NewSSH() (Peer, error) {
	_, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		return nil, err
	}
	signer, err := ssh.NewSignerFromKey(key)
	if err != nil {
		return nil, err
	}
	cfg := &ssh.ServerConfig{NoClientAuth: true}
	cfg.AddHostKey(signer)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &sshPeer{ln: ln, addr: ln.Addr().String(), cfg: cfg, conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.accept)
	return p, nil
}

func (p *sshPeer) Name() string { return NameSSH }

func (p *sshPeer) accept() {
	for {
		nc, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		p.conns[nc] = struct{}{}
		p.mu.Unlock()
		p.wg.Go(func() {
			defer func() {
				p.mu.Lock()
				delete(p.conns, nc)
				p.mu.Unlock()
				nc.Close()
			}()
			p.serveConn(nc)
		})
	}
}

func (p *sshPeer) serveConn(nc net.Conn) {
	sc, chans, reqs, err := ssh.NewServerConn(nc, p.cfg)
	if err != nil {
		return
	}
	defer sc.Close()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { ssh.DiscardRequests(reqs) })
	for nch := range chans {
		if nch.ChannelType() != "session" {
			_ = nch.Reject(ssh.UnknownChannelType, "session only")
			continue
		}
		ch, creqs, err := nch.Accept()
		if err != nil {
			continue
		}
		wg.Go(func() { serveSSHSession(ch, creqs) })
	}
}

// serveSSHSession runs the first exec request of a session channel; after
// a pty-req, under sh -c on a pseudo-terminal (runSSHPTY).
func serveSSHSession(ch ssh.Channel, reqs <-chan *ssh.Request) {
	defer ch.Close()
	var cmdline string
	var pty *ptyRequest
	for req := range reqs {
		var payload struct{ Command string }
		if pr := new(ptyRequest); req.Type == "pty-req" && ssh.Unmarshal(req.Payload, pr) == nil {
			pty = pr
			_ = req.Reply(true, nil)
			continue
		}
		if req.Type == "exec" && ssh.Unmarshal(req.Payload, &payload) == nil {
			cmdline = payload.Command
			_ = req.Reply(true, nil)
			break
		}
		_ = req.Reply(false, nil)
	}
	argv := strings.Fields(cmdline)
	if len(argv) == 0 {
		return
	}
	go ssh.DiscardRequests(reqs) // ends when the channel closes
	var status uint32
	if pty != nil {
		status = runSSHPTY(ch, cmdline, pty)
	} else {
		status = runSSHChild(ch, argv)
	}
	_, _ = ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{status}))
}

func runSSHChild(ch ssh.Channel, argv []string) uint32 {
	cmd := exec.Command(argv[0], argv[1:]...)
	in, err := cmd.StdinPipe()
	if err != nil {
		return 255
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 255
	}
	if err := cmd.Start(); err != nil {
		return 127
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, rawChunk)
		_, _ = io.CopyBuffer(in, ch, buf)
		in.Close()
	}()
	buf := make([]byte, rawChunk)
	if _, err := io.CopyBuffer(ch, out, buf); err != nil {
		_ = cmd.Process.Kill()
	}
	_ = ch.CloseWrite()
	err = cmd.Wait()
	// The stdin pump ends at the client's EOF or when the channel closes.
	_ = ch.Close()
	<-done
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return uint32(ee.ExitCode()) & 0xff
	}
	if err != nil {
		return 255
	}
	return 0
}

func (p *sshPeer) Open(ctx context.Context, argv []string) (Session, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", p.addr)
	if err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { nc.Close() })
	defer stop()
	cc, chans, reqs, err := ssh.NewClientConn(nc, p.addr, &ssh.ClientConfig{
		User:            "bench",
		HostKeyCallback: ssh.InsecureIgnoreHostKey(), //nolint:gosec // loopback, our own server
	})
	if err != nil {
		nc.Close()
		return nil, err
	}
	c := ssh.NewClient(cc, chans, reqs)
	sess, err := c.NewSession()
	if err != nil {
		c.Close()
		return nil, err
	}
	s := &sshSession{c: c, s: sess}
	if s.in, err = sess.StdinPipe(); err == nil {
		if s.out, err = sess.StdoutPipe(); err == nil {
			err = sess.Start(strings.Join(argv, " "))
		}
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	return s, nil
}

func (p *sshPeer) Close() error {
	err := p.ln.Close()
	p.mu.Lock()
	for nc := range p.conns {
		nc.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	return err
}

type sshSession struct {
	c   *ssh.Client
	s   *ssh.Session
	in  io.WriteCloser
	out io.Reader
}

func (s *sshSession) Read(b []byte) (int, error)  { return s.out.Read(b) }
func (s *sshSession) Write(b []byte) (int, error) { return s.in.Write(b) }
func (s *sshSession) CloseStdin() error           { return s.in.Close() }
func (s *sshSession) Close() error {
	s.s.Close()
	return s.c.Close()
}

// NewPeers starts the three peers in the order the report prints them:
// procwire, raw WebSocket, SSH.
func NewPeers() ([]Peer, error) {
	var peers []Peer
	for _, ps := range peerStarters {
		p, err := ps.start()
		if err != nil {
			for _, q := range peers {
				_ = q.Close()
			}
			return nil, err
		}
		peers = append(peers, p)
	}
	return peers, nil
}

// peerStarters lists the peers in the order the report prints them.
var peerStarters = []struct {
	name  string
	start func() (Peer, error)
}{{NameProcwire, NewProcwire}, {NameRaw, NewRaw}, {NameSSH, NewSSH}}
