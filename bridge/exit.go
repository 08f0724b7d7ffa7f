//go:build linux

package bridge

import (
	"bufio"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/procwire/procwire/proc"
)

// waitChild is the one goroutine that waits for the child. It observes the
// exit without reaping (so the group id stays ours), publishes it when stdout
// reached EOF or ExitWait later, whichever is first, and reaps the child
// (or the init) only once Destroy has killed the containment.
func (p *Process) waitChild() {
	defer close(p.waitDone)
	st, err := p.childExit()
	if err != nil {
		// Only if the server ignores SIGCHLD, so that the kernel reaped the
		// child for us and its status is lost, or if something in the server
		// reaps children it does not own (wait4(-1)).
		st = proc.ExitStatus{Code: 255}
	}
	// Wait for both output pipes to end, so that the exit follows the last
	// stdout and stderr byte, but no longer than ExitWait in all.
	t := time.NewTimer(p.cfg.ExitWait)
wait:
	for _, ch := range [...]<-chan struct{}{p.stdoutDone, p.stderrDone} {
		select {
		case <-ch:
		case <-t.C:
			break wait
		case <-p.destroyCh:
			break wait
		}
	}
	t.Stop()

	p.mu.Lock()
	p.exit = st
	p.exited = true
	close(p.done)
	p.mu.Unlock()
	p.changed(proc.ChangeExit)

	<-p.destroyCh
	// Only now that Destroy killed the containment may the leader, whose
	// pid is the group id, be reaped; an init may still be dying. A
	// process group's leader is reaped only once its group is gone: the
	// kernel may give a reaped pid to another process, which may lead a
	// group of its own, and Destroy's group kill must not reach it. The
	// reap holds mu, which every kill by that number holds too.
	if _, err := p.pidfd.waitExited(); err == nil {
		if p.contain.kind == ContainProcessGroup {
			waitGroupGone(p.pid)
		}
		p.mu.Lock()
		_ = p.pidfd.reap()
		p.reaped = true
		p.mu.Unlock()
	}
	_ = p.pidfd.close()
	p.closeCtl()
	if p.statusR != nil {
		_ = p.statusR.Close()
	}
}

// childExit waits for the child's exit: the child's own, or in a PID
// namespace what its init reports; when the init died without a report
// (SIGKILL), the init's.
func (p *Process) childExit() (proc.ExitStatus, error) {
	st, err := p.childStatus()
	if err == nil && st.Signal == "SIGKILL" {
		dir := ""
		if p.cgroup != nil {
			dir = p.cgroup.dir
		}
		if oomKilled(dir, p.v1) {
			st.Reason = proc.ReasonOOM
		}
	}
	return st, err
}

// childStatus is childExit's status, without the reason.
func (p *Process) childStatus() (proc.ExitStatus, error) {
	if p.status != nil {
		word, n, err := readStatus(p.status)
		switch {
		case err != nil:
		case word == "exit":
			return proc.ExitStatus{Code: n & 0xff}, nil
		case word == "signal":
			return proc.ExitStatus{Signal: proc.SignalName(n)}, nil
		}
	}
	return p.pidfd.waitExited()
}

// readStatus reads one line the init reported (initproc's report):
// "started", "error N", "exit N" or "signal N".
func readStatus(r *bufio.Reader) (word string, n int, err error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", 0, err
	}
	word, num, _ := strings.Cut(strings.TrimSuffix(line, "\n"), " ")
	if num != "" {
		if n, err = strconv.Atoi(num); err != nil {
			return "", 0, fmt.Errorf("init reported %q", line)
		}
	}
	return word, n, nil
}
