// Package proc holds the types that cross the seam between the procwire
// server and whatever runs its children: the request, the per-process
// configuration, the exit status and the typed errors. It has no
// platform-specific code, so a server with its own executor builds on every
// platform; package bridge is the Linux implementation.
//
// # The executor contract
//
// An executor starts one child per request and hands the server a process
// it pulls from (server.Process). Whatever runs the child, the server relies
// on this:
//
//   - Windows. The process allocates at most Config.StdoutWindow bytes of
//     stdout that the server has not acknowledged, Config.StderrRing bytes
//     of stderr and Config.StdinWindow bytes of queued stdin: the server
//     announces exactly those windows to the client. With a full stdout
//     window it stops reading the child's stdout, so the child blocks.
//   - Ownership. The process owns the stdout replay buffer and the stderr
//     ring; the server reads and acknowledges them only inside the process's
//     Stdout and Stderr callbacks, under the process's lock, and keeps no
//     view past the callback. Both stay readable after Destroy.
//   - Order. The exit is published (Done closed, Exit ok) after the stdout
//     EOF is recorded in the buffer whenever stdout ends within
//     Config.ExitWait of the child's death; otherwise ExitWait after the
//     death, and stdout goes on to its own EOF or to Destroy. A destroyed
//     stream has no EOF.
//   - Destroy ends everything the child started (its containment), not only
//     the child, within Config.DestroyWait. It returns nil only when nothing
//     of it survives; otherwise an error (a *SurvivorsError naming what
//     survived, a *DestroyTimeoutError) and a later call tries again. Once it
//     returned nil it returns nil.
//   - Identity. A child runs with exactly the request's arguments, working
//     directory and environment, only stdin, stdout and stderr open, and as
//     Config.RunAs when set; an executor that cannot honour RunAs refuses the
//     start.
package proc
