// Package bridge runs one child process and holds its stdio ready to be put on
// the wire. It contains no network code: the server wraps one *Process per
// session and turns what it sees here into frames.
//
// Start forks the request's executable in a process group of its own, with
// exactly the request's arguments, working directory and environment, only
// file descriptors 0, 1 and 2, as Config.RunAs when set, and never through a
// shell, under a small init of ours (see MaybeRunInit) that gets the
// request over a pipe and ends the child's whole tree when the server dies.
// The whole tree is held in a Containment: a cgroup v2 of its own, else a
// PID namespace, else the init's tree; DefaultContainment picks the best
// the machine allows. A Containment may bound each tree (Limits) with
// cgroup controllers. Three pumps, one goroutine each, move bytes between
// the child's pipes and bounded memory:
//
//   - stdin: PushStdin queues bytes (at most Config.StdinWindow); the pump
//     writes them to the child's pipe and StdinConsumed grows as it does, which
//     the server turns into credit. CloseStdin half-closes the pipe after the
//     last queued byte.
//   - stdout: the pump reads the pipe only while the replay.Buffer has room, so
//     a full window blocks the child exactly as an unread pipe would. The
//     server slices and acknowledges the buffer inside Stdout.
//   - stderr: always drained into a lossy replay.Ring; it never blocks the child.
//
// A fourth goroutine waits for the child and publishes its ExitStatus (Done,
// Exit) once stdout and stderr reached EOF, or Config.ExitWait after the child exited,
// whichever is first; it waits on a pidfd on the runtime's poller, so a
// child costs a goroutine, not an OS thread. Notify wakes the single consumer
// whenever anything observable changed. Destroy kills the containment, reaps
// the child, closes the pipes, waits for every goroutine and for the
// containment to be empty, within Config.DestroyWait, and says what
// survived otherwise.
//
// # Goroutines and locks
//
// Start starts four goroutines per Process; each closes its own done
// channel when it returns, and Destroy waits for all four:
//
//   - pumpStdin owns the writes to the child's stdin pipe (but for
//     PushStdin's own write into an empty queue, under inMu) and closes it
//     when the queue is drained after CloseStdin, or the pipe failed, or at
//     Destroy. It moves stdinPipe between taking, full and broken.
//   - pumpStdout owns the reads of the stdout pipe (or the terminal's
//     master); it reads straight into the replay.Buffer (room reserved and
//     committed under mu, filled by one readv without it; the room is
//     given back before it waits on an idle pipe) and records its EOF,
//     under mu.
//   - pumpStderr owns the reads of the stderr pipe; it writes the ring under
//     errMu.
//   - waitChild owns the pidfd and the init's status pipe: it publishes the
//     exit under mu, after the stdout EOF or ExitWait, and reaps the child
//     (or its init), under mu, only after Destroy killed the containment
//     and, for a process group, once the group is gone. Every kill by the
//     leader's pid holds mu and checks that the leader is not reaped: a
//     reaped pid is the kernel's to give another process.
//
// Callers own the rest: PushStdin queues under inMu, where CloseStdin and
// Destroy end stdin (stdinEnd); Stdout, StdoutExit, Exit and Signal take mu;
// Destroy, serialised by destroyMu, moves destroyState under destroyMu and
// mu.
//
// Lock order: destroyMu, then mu or inMu (Destroy takes them one at a
// time); mu, inMu and errMu are never held together. An OnChange callback
// may run with inMu held (PushStdin's), never with mu or errMu.
//
// The init (package initproc) is a process of its own, not a goroutine:
// its main goroutine reaps, one reads the control pipe (the signals the
// server asks it to send the child's group) and sweeps the tree at its
// EOF, and a guardian's third forwards the signals sent to its own pid;
// it too signals the child's group by the child's pid only while the
// child is not reaped (initproc's leader). It runs from
// initproc's package initialisation, before the server's heavier packages
// are initialised, so a re-executed server reaches it in about a fifth of
// the time it takes to reach main.
//
// The request, config, exit and error types are package proc's, which
// builds everywhere. This package is Linux only: it relies on cgroups, PID
// namespaces, process groups, Pdeathsig, pidfds and /proc.
package bridge
