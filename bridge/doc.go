// Package bridge runs one child process and holds its stdio ready to be put on
// the wire. It contains no network code: the server wraps one *Process per
// session and turns what it sees here into frames.
//
// Start forks the request's executable in a process group of its own, with
// exactly the request's arguments, working directory and environment, and
// never through a shell. Three pumps, one goroutine each, move bytes between
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
// whichever is first. Notify wakes the single consumer whenever anything
// observable changed. Destroy kills the group, reaps the child, closes the
// pipes and waits for every goroutine, within Config.DestroyWait.
//
// The package is Linux only: it relies on process groups, Pdeathsig, waitid and
// /proc.
package bridge
