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
package client
