// Command procwire serves processes over procwire.v1 and uses them.
//
//	procwire serve [flags]                       run a server
//	procwire exec [flags] URL [--] CMD [ARGS...]  run CMD remotely as if it were a local child
//	procwire attach [flags] HANDLE               resume a process exec --detach left running
//	procwire demo [flags]                        stream data through a remote cat over a cut connection
//	procwire version                             print the version
//
// Run "procwire help" for the flags.
//
// # Goroutines and locks
//
// Each command runs on the goroutine that called run, which starts the
// others below and waits for each before it returns, except where said.
//
// serve (serve.go):
//   - the HTTP server's Serve on the listener, and the ops listener's
//     (ops.go), each reporting its end on an errc; serving.shutdown stops
//     the server, then the HTTP server, then the ops listener, and reads
//     the errc.
//   - the certificate reloader (loadCert), reloading on SIGHUP until its
//     stop func, which waits for it.
//   - during a drain, the watcher that ends it early on a second signal
//     (drain.go).
//
// exec and attach (exec.go, attach.go, tty.go):
//   - while connecting, the watcher that cancels on a signal
//     (interruptible).
//   - mirror's copies (startCopies): stdout, stderr and the wait for the
//     process's end, in mirror's WaitGroup with one goroutine per signal
//     forwarded; mirror waits for them after destroying the process. The
//     stdin copy is not waited for: it may sit in a read of a local stdin
//     that never ends, and its next write fails once the process is
//     destroyed.
//   - on a terminal, the resize follower (followResize); its stop waits.
//
// demo (demo.go): the in-process server's Serve (demoServer.shutdown waits
// for it) and the stream's writer (demoStream.write), which writes each
// part once the reader, on the command's goroutine, has read the one
// before back and cut the connection. On a failed read the writer is told
// to give up through quit and is not waited for: a write it is blocked in
// ends when the process is destroyed.
//
// Locks: lockedWriter.mu serializes the writes of remote stderr's copy and
// the command's own messages to the local stderr; handshakeLog.mu guards
// the last refused handshake's status and body. Neither is held while
// taking another lock: there is no lock order. rawTerminal (an atomic) is
// the local terminal to restore, read by restoreOnPanic on any goroutine.
package main
