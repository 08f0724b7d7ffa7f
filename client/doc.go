// Package client drives one remote process over procwire: it opens the
// process on a procwire server and gives its stdio back as Go streams, with
// reconnection hidden from the caller.
//
//	p, err := client.Open(ctx, "wss://host:7777/", "inst-1", frames.ProcessRequest{
//		Executable:       "cat",
//		Arguments:        []string{"-u"},
//		WorkingDirectory: "/tmp",
//		Environment:      map[string]string{"PATH": "/usr/bin:/bin"},
//	}, &client.Options{Token: token})
//	if err != nil {
//		return err
//	}
//	defer p.Destroy(context.Background()) // bounded by Options.DestroyTimeout
//	go func() {
//		io.WriteString(p.Stdin(), "hello\n")
//		p.Stdin().Close() // the process reads EOF
//	}()
//	out, err := io.ReadAll(p.Stdout()) // "hello\n", then EOF
//	status, err := p.Wait(ctx)         // exit status 0
//
// Stdin blocks while the server's credit window is full; Stdout is lossless
// and reading it is what lets the process write more; Stderr is bounded and
// best effort. When the connection is lost the Process reconnects with a
// jittered backoff and resumes within the server's grace: no stdout byte is
// lost or repeated, and no stdin byte reaches the process twice. What
// cannot be hidden ends the handle with a typed error on every pending and
// later call: *RemoteError (the server's refusal, such as a replay gap or an
// expired process), *ProtocolError (the server broke PROTOCOL.md, including
// evidence that does not match the request), ErrConnectionLost and
// ErrDestroyed.
//
// Destroy ends every use of a Process: call it when done, also after the
// exit. It frees the instance on the server and stops the goroutines the
// Process owns (a supervisor, and one reader, one writer and one heartbeat
// per connection). It never takes longer than Options.DestroyTimeout, so a
// context that never ends is safe. Detach instead leaves the process to the
// server's grace, for Attach (with Handle) to take over from anywhere.
//
// Only the server's own word ends a handle: a destroyed or error frame, or
// 4001 (resumed elsewhere). A close without it (1001 from a reloading
// proxy, 1006, 1011) is a lost connection, resumed byte-exact. Resumes
// that reach the server and fail are bounded by Options.ResumeBudget.
//
// Inside, a pure state machine (machine.go: frames in; frames and events
// out) is driven by a supervisor (supervisor.go: dial, backoff, resume,
// destroy) under the handle (process.go, stream.go).
//
// Every blocking call has a variant taking a context (ReadContext,
// WriteContext, CloseContext) or takes one (Wait, Signal, Destroy), and
// wakes on its cancellation, on Destroy and on the end of the handle.
//
// # Goroutines and locks
//
// A Process runs these goroutines; each owns what follows its name.
//
//   - supervisor (supervise, one per handle, from Open or Attach until
//     superDone): the attached connection's life. It dials, resumes with
//     backoff (reconnect), starts and ends the three goroutines below for
//     each connection (serve), and destroys a process the handle failed on
//     (autoDestroy).
//   - read loop (readLoop, one per connection): reading the socket, with
//     the connection's link.Reader (its buffer and decoder). It hands each
//     frame to the machine under Process.mu. A stdout payload is decoded
//     straight into the stdout queue: the reader reserves room at the
//     queue's end under Process.mu (reserveStdout), decodes into it without
//     the lock and commits it with the frame; only the reader produces into
//     the queue, and Reads only drain it, so the room stays put. While a
//     blocked Read without a deadline reads the socket itself (the lending
//     read, lend.go: one hand-off between goroutines less per message),
//     the loop steps aside; the connection's reader state, under
//     Process.mu, says who reads it, and the loop takes it back when
//     another call waits, for a ping, or when it sat unread for a while.
//   - writer (writeLoop, one per connection): writing the frames the
//     machine has to send, whenever woken, and the bytes a caller's write
//     left pending in the coalescer. It writes holding Process.turn (a
//     link.Turn, which serves one connection after the other: attach).
//   - heartbeat (pingLoop, one per connection when the server announced a
//     heartbeat; link.Heartbeat): a ping every heartbeat; a pong not back
//     within it ends the connection, which the supervisor resumes.
//
// The callers' goroutines (Read, Write, Close, Wait, Signal, Destroy) take
// Process.mu to call the machine and wait for a change with it released,
// each on the channel of its kind (Process.changed: stdout, stderr, stdin,
// the rest), so that a frame wakes only the calls it concerns and a change
// of the handle's state wakes all. A Write sends its last frames itself when the turn is
// free and the socket takes them without waiting (flush, link.Turn.Kick);
// else the writer does. A Destroy whose supervisor has stopped destroys on
// a connection of its own, holding Process.destroyToken.
//
// Lock order: Process.turn, then Process.mu (the holder of the turn takes
// mu, briefly, for each message it encodes; a caller takes the turn with
// TryLock only, never holding mu). The coalescer's lock nests inside the
// turn. Who reads the socket (the loop or a lending Read) is the
// connection's reader state under mu, and is changed only with mu held; a
// lending Read, like the loop, reads with mu released, and the loop
// returns only once no Read is inside a read of its connection. The machine is guarded by mu; the attached connection
// (Process.cur) and its write buffer by the turn. No lock is held across a
// read of the socket; a write is made holding the turn only.
package client
