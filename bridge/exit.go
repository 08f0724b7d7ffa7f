//go:build linux

package bridge

import "time"

// waitChild is the one goroutine that waits for the child. It observes the
// exit without reaping (so the group id stays ours), publishes it when stdout
// reached EOF or ExitWait later, whichever is first, and reaps the child
// only once Destroy has killed the group.
func (p *Process) waitChild() {
	defer close(p.waitDone)
	st, err := p.pidfd.waitExited()
	if err != nil {
		// Only if the server ignores SIGCHLD, so that the kernel reaped the
		// child for us and its status is lost, or if something in the server
		// reaps children it does not own (wait4(-1)).
		st = ExitStatus{Code: 255}
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
	p.published = true
	close(p.done)
	p.mu.Unlock()
	p.changed()

	<-p.destroyCh
	if err == nil {
		// Only now that Destroy killed the group may the leader, whose pid
		// is the group id, be reaped.
		_ = p.pidfd.reap()
	}
	_ = p.pidfd.close()
}
