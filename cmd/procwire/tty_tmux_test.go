//go:build linux

package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/internal/testkit/cutproxy"
	"github.com/procwire/procwire/server"
)

// The tests of this file use "procwire exec -t" as a person does: in a
// terminal of tmux, typing with send-keys and reading the screen with
// capture-pane. Each runs its own tmux server (a socket in a temporary
// directory), whose one window runs a local sh script that records the
// local terminal's mode (stty -g) before and after exec, and exec's exit
// status. Without tmux they skip, except under CI=true, where they fail.

// screenTimeout bounds each wait for the screen or a file; it times
// nothing.
const screenTimeout = 30 * time.Second

// tmuxSession is one tmux server with one window of rows×cols.
type tmuxSession struct {
	t    *testing.T
	sock string
	dir  string // the script's files: before, after, status, term
}

// needTmux skips the test when tmux is missing, or fails it under CI=true.
func needTmux(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("tmux is missing under CI=true: .ci/run installs it (apt-get install tmux): %v", err)
		}
		t.Skip("tmux is not installed (apt-get install tmux): the terminal tests drive exec -t through it")
	}
}

// startTmux runs sh -c script in a new tmux window of rows×cols: the
// script runs between the mode records; "$D" is the session's directory.
func startTmux(t *testing.T, rows, cols int, env []string, script string) *tmuxSession {
	return startTmuxSettle(t, rows, cols, env, script, false)
}

// startTmuxSettle is startTmux; with settle, the mode after is read once it
// is the one before again, or after 5 s: after a crash of exec, the
// watchdog restores it a moment after the shell saw exec end.
func startTmuxSettle(t *testing.T, rows, cols int, env []string, script string, settle bool) *tmuxSession {
	needTmux(t)
	dir, err := os.MkdirTemp("", "pwtty") // short: a socket path has 108 bytes
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	s := &tmuxSession{t: t, sock: filepath.Join(dir, "sock"), dir: dir}
	wait := ""
	if settle {
		wait = `i=0; while [ "$(stty -g)" != "$(cat "$D/before")" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done; put settled echo "$i"`
	}
	// put NAME CMD... writes CMD's output to "$D/NAME" whole: a reader
	// polling for the file must never see it created and still empty (a
	// "before" read that way once passed requireRaw before exec had made
	// the terminal raw, and the ^C then killed the script).
	run := fmt.Sprintf(`D=%s
put() { n=$1; shift; "$@" > "$D/$n.tmp" && mv "$D/$n.tmp" "$D/$n"; }
put before stty -g
put term echo "$TERM"
%s
s=$?
%s
put after stty -g
put status echo "$s"
echo "local shell: exec ended with $s"
exec sleep 3600
`, dir, script, wait)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "run.sh"), []byte(run), 0o644))
	args := []string{"-f", "/dev/null", "new-session", "-d", "-s", "t", "-x", strconv.Itoa(cols), "-y", strconv.Itoa(rows)}
	for _, kv := range env {
		args = append(args, "-e", kv)
	}
	s.tmux(append(args, "sh", filepath.Join(dir, "run.sh"))...)
	t.Cleanup(func() { _ = exec.Command("tmux", "-S", s.sock, "kill-server").Run() })
	return s
}

// tmux runs a tmux command on the session's server and returns its output.
func (s *tmuxSession) tmux(args ...string) string {
	s.t.Helper()
	cmd := exec.CommandContext(testCtx(s.t), "tmux", append([]string{"-S", s.sock}, args...)...)
	cmd.Env = append(os.Environ(), "TERM=xterm-256color")
	out, err := cmd.CombinedOutput()
	require.NoError(s.t, err, "tmux %v: %s", args, out)
	return string(out)
}

// typeLine types text and Enter.
func (s *tmuxSession) typeLine(text string) {
	s.tmux("send-keys", "-t", "t", "-l", text)
	s.tmux("send-keys", "-t", "t", "Enter")
}

// keys sends tmux key names (C-c, Escape, q).
func (s *tmuxSession) keys(keys ...string) {
	s.tmux(append([]string{"send-keys", "-t", "t"}, keys...)...)
}

// screen is what the window shows.
func (s *tmuxSession) screen() string {
	return s.tmux("capture-pane", "-p", "-t", "t")
}

// waitScreen waits until the screen satisfies ok.
func (s *tmuxSession) waitScreen(what string, ok func(screen string) bool) string {
	s.t.Helper()
	deadline := time.Now().Add(screenTimeout)
	for {
		sc := s.screen()
		if ok(sc) {
			return sc
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("the screen never showed %s:\n%s", what, sc)
		}
		time.Sleep(20 * time.Millisecond) // polling the screen, not synchronisation
	}
}

// waitText waits until the screen holds text count times or more.
func (s *tmuxSession) waitText(text string, count int) string {
	s.t.Helper()
	return s.waitScreen(fmt.Sprintf("%q %d times", text, count), func(sc string) bool { return strings.Count(sc, text) >= count })
}

// lastLine is the screen's last line that is not empty.
func lastLine(screen string) string {
	lines := strings.Split(strings.TrimRight(screen, "\n "), "\n")
	return strings.TrimRight(lines[len(lines)-1], " ")
}

// waitFile waits until the script wrote name (whole: the script's put),
// and returns it trimmed.
func (s *tmuxSession) waitFile(name string) string {
	s.t.Helper()
	deadline := time.Now().Add(screenTimeout)
	for {
		b, err := os.ReadFile(filepath.Join(s.dir, name))
		if err == nil {
			return strings.TrimSpace(string(b))
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("%s never written; the screen:\n%s", name, s.screen())
		}
		time.Sleep(20 * time.Millisecond) // polling a file, not synchronisation
	}
}

// paneTTYMode is the window's terminal's mode now (stty -g).
func (s *tmuxSession) paneTTYMode() string { return s.paneStty("-g") }

// paneTTYFlags is the window's terminal's settings now, as stty -a lists
// them ("-isig" when ISIG is off).
func (s *tmuxSession) paneTTYFlags() string { return s.paneStty("-a") }

// paneStty runs stty with arg on the window's terminal.
func (s *tmuxSession) paneStty(arg string) string {
	tty := strings.TrimSpace(s.tmux("display-message", "-p", "-t", "t", "#{pane_tty}"))
	out, err := exec.Command("stty", "-F", tty, arg).Output()
	require.NoError(s.t, err)
	return strings.TrimSpace(string(out))
}

// requireRaw waits until the window's terminal is raw (exec -t made it
// so): not in the mode it had before exec, and with no signal keys, no
// line editing and no echo, so that a ^C typed next is a byte for the
// remote terminal, not a SIGINT for the script.
func (s *tmuxSession) requireRaw() {
	s.t.Helper()
	before := s.waitFile("before")
	require.NotEmpty(s.t, before)
	require.Eventually(s.t, func() bool {
		if s.paneTTYMode() == before {
			return false
		}
		flags := strings.Fields(s.paneTTYFlags())
		return slices.Contains(flags, "-isig") && slices.Contains(flags, "-icanon") && slices.Contains(flags, "-echo")
	}, screenTimeout, 10*time.Millisecond, "the local terminal is raw while exec -t runs")
}

// execPID is the pid of the script's child (exec).
func (s *tmuxSession) execPID() int {
	sh := strings.TrimSpace(s.tmux("display-message", "-p", "-t", "t", "#{pane_pid}"))
	b, err := os.ReadFile("/proc/" + sh + "/task/" + sh + "/children")
	require.NoError(s.t, err)
	f := strings.Fields(string(b))
	require.Len(s.t, f, 1, "the script runs one child: %q", b)
	pid, err := strconv.Atoi(f[0])
	require.NoError(s.t, err)
	return pid
}

// requireRestored checks that exec ended with status and left the local
// terminal's mode as it found it, and returns the mode.
func (s *tmuxSession) requireRestored(status string) {
	s.t.Helper()
	require.Equal(s.t, status, s.waitFile("status"), "exec's status; the screen:\n%s", s.screen())
	before, after := s.waitFile("before"), s.waitFile("after")
	require.NotEmpty(s.t, before)
	require.Equal(s.t, before, after, "stty -g before and after exec")
}

// waitProcess waits until a process with exactly argv runs on this machine
// (the server is in this test), and returns its pid.
func waitProcess(t *testing.T, argv ...string) int {
	t.Helper()
	want := strings.Join(argv, "\x00") + "\x00"
	deadline := time.Now().Add(screenTimeout)
	for {
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			if b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil && string(b) == want {
				return pid
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no process %q", argv)
		}
		time.Sleep(20 * time.Millisecond) // polling /proc, not synchronisation
	}
}

// gone reports whether pid has exited (or is a zombie).
func gone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	_, after, _ := strings.Cut(string(b), ") ")
	return strings.HasPrefix(after, "Z")
}

// shellPrompt is the remote shell's prompt in these tests (PS1 is it and
// a space, which capture-pane trims).
const shellPrompt = "rsh$"

// execTTY is the script line running an interactive remote sh with exec -t.
func execTTY(bin, url string, flags ...string) string {
	return fmt.Sprintf("%s exec -t %s --env PATH=/usr/bin:/bin --env 'PS1=%s ' %s -- sh", bin, url, shellPrompt, strings.Join(flags, " "))
}

// A person's session: the prompt, the size and TERM, a resize of the
// window, ^C interrupting sleep without ending the shell, less and vi
// opening and quitting, and the remote exit, with the local terminal raw
// while exec runs and as it was after.
func TestTTYShellInTmux(t *testing.T) {
	needTmux(t)
	s := newServer(t, server.Config{})
	ts := startTmux(t, 24, 80, nil, execTTY(binary, s.url))
	ts.waitText(shellPrompt, 1)
	ts.requireRaw()

	// The size and TERM: the remote terminal's are the local one's.
	ts.typeLine("stty size; tty; echo TERM=$TERM")
	sc := ts.waitText(shellPrompt, 2)
	require.Contains(t, sc, "\n24 80\n")
	require.Contains(t, sc, "\n/dev/pts/")
	require.Contains(t, sc, "\nTERM="+ts.waitFile("term")+"\n")

	// A resize of the window follows.
	ts.tmux("resize-window", "-t", "t", "-x", "100", "-y", "30")
	ts.typeLine("clear; stty size")
	ts.waitScreen("30 100", func(sc string) bool { return strings.Contains(sc, "\n30 100\n") || strings.HasPrefix(sc, "30 100\n") })

	// ^C interrupts sleep; the shell goes on.
	ts.typeLine("clear; sleep 97")
	pid := waitProcess(t, "sleep", "97")
	ts.keys("C-c")
	require.Eventually(t, func() bool { return gone(pid) }, screenTimeout, 10*time.Millisecond, "^C did not end sleep")
	ts.waitScreen("the prompt after ^C", func(sc string) bool { return strings.HasPrefix(lastLine(sc), shellPrompt) })
	ts.typeLine("echo alive $((6*7))")
	ts.waitText("alive 42", 1)
	_, err := os.Stat(filepath.Join(ts.dir, "status"))
	require.ErrorIs(t, err, os.ErrNotExist, "exec still runs")

	// less opens (its prompt at the bottom) and quits with q.
	ts.typeLine("clear; seq 1 500 | less")
	ts.waitScreen("less's first page", func(sc string) bool {
		return strings.HasPrefix(sc, "1\n2\n3\n") && strings.Contains(sc, "\n29\n") && !strings.Contains(sc, "\n30\n")
	})
	ts.keys("q")
	ts.waitScreen("the prompt after less", func(sc string) bool { return strings.HasPrefix(lastLine(sc), shellPrompt) })

	// vi opens, edits, writes and quits.
	file := filepath.Join(ts.dir, "vi.txt")
	ts.typeLine("clear; vi " + file)
	ts.waitScreen("vi's empty buffer", func(sc string) bool { return strings.Count(sc, "\n~") >= 20 })
	ts.tmux("send-keys", "-t", "t", "-l", "ihello from vi")
	ts.keys("Escape")
	ts.tmux("send-keys", "-t", "t", "-l", ":wq")
	ts.keys("Enter")
	ts.waitScreen("the prompt after vi", func(sc string) bool { return strings.HasPrefix(lastLine(sc), shellPrompt) })
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	require.Equal(t, "hello from vi\n", string(b))

	// The remote exit is exec's, and the terminal is as it was.
	ts.typeLine("exit 3")
	ts.requireRestored("3")
	ts.waitText("local shell: exec ended with 3", 1)
	s.requireNoProcess(t)
}

// seqCRLF is seq 1 n as a terminal writes it.
func seqCRLF(n int) []byte {
	var b bytes.Buffer
	for i := 1; i <= n; i++ {
		b.WriteString(strconv.Itoa(i))
		b.WriteString("\r\n")
	}
	return b.Bytes()
}

// seq 1000000 on a remote terminal, cut 10 times on its way, arrives
// whole, each line once and in order, into a local file.
func TestTTYSeqAcrossTenCuts(t *testing.T) {
	needTmux(t)
	s := newServer(t, server.Config{})
	proxy, err := cutproxy.New(strings.TrimSuffix(strings.TrimPrefix(s.url, "ws://"), "/"))
	require.NoError(t, err)
	t.Cleanup(func() { proxy.Close() })
	const lines, cuts = 1000000, 10
	want := seqCRLF(lines)
	// Cuts spread over the stream: on the wire, stdout is base64 in JSON
	// frames (4/3 of the bytes, and more).
	var at []int64
	for i := 1; i <= cuts; i++ {
		at = append(at, int64(len(want))*4/3*int64(i)/(cuts+2))
	}
	proxy.CutAt(at...)
	out := "out"
	ts := startTmux(t, 24, 80, nil, fmt.Sprintf(`%s exec -t ws://%s/ -- seq %d > "$D/%s"`, binary, proxy.Addr(), lines, out))
	ts.requireRestored("0")
	got, err := os.ReadFile(filepath.Join(ts.dir, out))
	require.NoError(t, err)
	require.Equal(t, cuts, proxy.Cuts(), "the proxy cut the connection %d times", cuts)
	require.Equal(t, len(want), len(got), "bytes")
	n := bytes.Count(got, []byte("\r\n"))
	if !bytes.Equal(want, got) {
		i := 0
		for i < len(got) && got[i] == want[i] {
			i++
		}
		t.Fatalf("%d lines; the first wrong byte is at %d: %q", n, i, got[max(0, i-20):min(len(got), i+20)])
	}
	t.Logf("tmux: %d lines of seq %d arrived once each, in order, across %d cuts (%d connections)", n, lines, proxy.Cuts(), proxy.Accepted())
	s.requireNoProcess(t)
}

var (
	hookBinaryOnce sync.Once
	hookBinary     string
	hookBinaryErr  error
)

// testhookBinary is procwire built with the procwire_testhook tag, which
// can panic on demand (tty_testhook.go).
func testhookBinary(t *testing.T) string {
	hookBinaryOnce.Do(func() {
		hookBinary = filepath.Join(filepath.Dir(binary), "procwire-testhook")
		out, err := exec.Command("go", "build", "-tags", "procwire_testhook", "-o", hookBinary, ".").CombinedOutput()
		if err != nil {
			hookBinaryErr = fmt.Errorf("build: %w: %s", err, out)
		}
	})
	require.NoError(t, hookBinaryErr)
	return hookBinary
}

// Every way out of exec -t leaves the local terminal's mode as it found
// it: ^C typed into a remote program (a byte, whose SIGINT is mirrored),
// SIGTERM and SIGHUP to exec, a lost server, a panic in one of exec's
// goroutines (restored before exec ends), and the crashes exec cannot
// handle itself, a panic in a goroutine of no one and SIGKILL, which the
// watchdog repairs a moment after exec's end. The remote exit is in
// TestTTYShellInTmux.
func TestTTYWaysOutRestoreTheTerminal(t *testing.T) {
	needTmux(t)
	s := newServer(t, server.Config{})
	cases := []struct {
		name   string
		env    []string
		remote string // the remote command line, default an interactive sh
		lose   bool   // reach the server through a proxy that will refuse
		leaves bool   // exec ends without destroying: the process waits out the grace
		crash  bool   // exec dies without restoring: the watchdog does
		act    func(t *testing.T, ts *tmuxSession, proxy *cutproxy.Proxy)
		status string
	}{
		{name: "ctrl-c", remote: "sleep 96", act: func(t *testing.T, ts *tmuxSession, _ *cutproxy.Proxy) {
			waitProcess(t, "sleep", "96")
			ts.keys("C-c")
		}, status: "130"},
		{name: "sigterm", act: signalExec(syscall.SIGTERM), status: "143"},
		{name: "sighup", act: signalExec(syscall.SIGHUP), status: "129"},
		{name: "sigkill", act: signalExec(syscall.SIGKILL), status: "137", leaves: true, crash: true},
		{name: "lost-server", lose: true, leaves: true, act: func(t *testing.T, ts *tmuxSession, proxy *cutproxy.Proxy) {
			proxy.Refuse(true)
			require.Positive(t, proxy.CutAll())
		}, status: strconv.Itoa(exitFailure)},
		{name: "panic", env: []string{"PROCWIRE_TEST_PANIC=output"}, status: "2", leaves: true},
		{name: "panic-elsewhere", env: []string{"PROCWIRE_TEST_PANIC=output", "PROCWIRE_TEST_PANIC_BARE=1"}, status: "2", leaves: true, crash: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			url := s.url
			var proxy *cutproxy.Proxy
			if c.lose {
				// A server of its own, whose short grace ends exec's resumes.
				lost := newServer(t, server.Config{Grace: 2 * time.Second})
				var err error
				proxy, err = cutproxy.New(strings.TrimSuffix(strings.TrimPrefix(lost.url, "ws://"), "/"))
				require.NoError(t, err)
				t.Cleanup(func() { proxy.Close() })
				url = "ws://" + proxy.Addr() + "/"
			}
			bin := binary
			if c.env != nil {
				bin = testhookBinary(t)
			}
			line := execTTY(bin, url)
			if c.remote != "" {
				line = fmt.Sprintf("%s exec -t %s -- %s", bin, url, c.remote)
			}
			ts := startTmuxSettle(t, 24, 80, c.env, line, c.crash)
			if c.act != nil {
				if c.remote == "" {
					ts.waitText(shellPrompt, 1)
				}
				ts.requireRaw()
				c.act(t, ts, proxy)
			}
			ts.requireRestored(c.status)
			if c.crash {
				t.Logf("the watchdog restored the mode within %s×50ms of exec's end", ts.waitFile("settled"))
			} else {
				_, err := os.Stat(filepath.Join(ts.dir, "settled"))
				require.ErrorIs(t, err, os.ErrNotExist)
			}
			if !c.leaves {
				s.requireNoProcess(t)
			}
		})
	}
}

// signalExec sends sig to exec.
func signalExec(sig syscall.Signal) func(*testing.T, *tmuxSession, *cutproxy.Proxy) {
	return func(t *testing.T, ts *tmuxSession, _ *cutproxy.Proxy) {
		require.NoError(t, syscall.Kill(ts.execPID(), sig))
	}
}

// exec -t --detach records the terminal in the handle; attach, later and
// from a window of another size, makes the local terminal raw as exec -t
// does, sends its size at once, and restores the terminal at the end.
func TestTTYAttachOfADetachedTerminal(t *testing.T) {
	needTmux(t)
	s := newServer(t, server.Config{})
	script := fmt.Sprintf(`%s exec -t --detach --handle-file "$D/handle" %s --env 'PS1=%s ' -- sh || exit 99
echo detached; read go
%s attach --handle-file "$D/handle"`, binary, s.url, shellPrompt, binary)
	ts := startTmux(t, 24, 80, nil, script)
	ts.waitText("detached", 1)
	b, err := os.ReadFile(filepath.Join(ts.dir, "handle"))
	require.NoError(t, err)
	require.Contains(t, string(b), `"tty":true`)
	ts.tmux("resize-window", "-t", "t", "-x", "90", "-y", "20")
	ts.typeLine("")
	ts.waitText(shellPrompt, 1)
	ts.requireRaw()
	ts.typeLine("stty size; test -t 0 && echo on a terminal")
	sc := ts.waitText(shellPrompt, 2)
	require.Contains(t, sc, "\n20 90\n")
	require.Contains(t, sc, "\non a terminal\n")
	ts.typeLine("exit 5")
	ts.requireRestored("5")
	s.requireNoProcess(t)
}
