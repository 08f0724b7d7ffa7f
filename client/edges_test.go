//go:build linux

package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/client"
	"github.com/procwire/procwire/frames"
	"github.com/procwire/procwire/server"
)

// codeProxy is a WebSocket proxy that ends the connections passing through
// it with a close code and no procwire frame, as a reverse proxy does when
// it reloads (1001), fails (1011) or drops (1006, no close frame at all).
type codeProxy struct {
	url    string
	target string
	wg     sync.WaitGroup

	mu     sync.Mutex
	conns  map[*websocket.Conn]*websocket.Conn // client side -> server side
	down   int                                 // messages forwarded to clients
	closes map[int]websocket.StatusCode        // at these counts of down, close with the code
	closed int
}

func newCodeProxy(t *testing.T, target string) *codeProxy {
	cp := &codeProxy{target: target, conns: map[*websocket.Conn]*websocket.Conn{}, closes: map[int]websocket.StatusCode{}}
	hs := httptest.NewServer(http.HandlerFunc(cp.serve))
	t.Cleanup(func() {
		hs.Close()
		cp.mu.Lock()
		for c, s := range cp.conns {
			c.CloseNow()
			s.CloseNow()
		}
		cp.mu.Unlock()
		cp.wg.Wait()
	})
	cp.url = "ws" + strings.TrimPrefix(hs.URL, "http")
	return cp
}

// closeAt arms a close with code when the n-th message to a client is
// forwarded.
func (cp *codeProxy) closeAt(n int, code websocket.StatusCode) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	cp.closes[n] = code
}

func (cp *codeProxy) serve(w http.ResponseWriter, r *http.Request) {
	h := http.Header{}
	for _, k := range []string{"Authorization", frames.HeaderInstance, frames.HeaderProcess} {
		if v := r.Header.Get(k); v != "" {
			h.Set(k, v)
		}
	}
	up, _, err := websocket.Dial(r.Context(), cp.target, &websocket.DialOptions{HTTPHeader: h, Subprotocols: []string{frames.Subprotocol}})
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	down, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{frames.Subprotocol}})
	if err != nil {
		up.CloseNow()
		return
	}
	down.SetReadLimit(frames.MaxFirstLine)
	up.SetReadLimit(frames.MaxFirstLine)
	cp.mu.Lock()
	cp.conns[down] = up
	cp.wg.Add(1)
	cp.mu.Unlock()
	go cp.pump(up, down, false)
	cp.pump(down, up, true)
}

// pump forwards messages from src to dst until either ends.
func (cp *codeProxy) pump(dst, src *websocket.Conn, toClient bool) {
	client := dst
	if !toClient {
		defer cp.wg.Done()
		client = src
	}
	ctx := context.Background()
	for {
		typ, b, err := src.Read(ctx)
		if err != nil {
			break
		}
		if err := dst.Write(ctx, typ, b); err != nil {
			break
		}
		if toClient {
			cp.mu.Lock()
			cp.down++
			code, ok := cp.closes[cp.down]
			if ok {
				cp.closed++
			}
			cp.mu.Unlock()
			if ok {
				cp.end(client, code)
				return
			}
		}
	}
	dst.CloseNow()
	src.CloseNow()
}

// end closes the client side of a connection with code (1006: with none)
// and drops the server side.
func (cp *codeProxy) end(down *websocket.Conn, code websocket.StatusCode) {
	cp.mu.Lock()
	up := cp.conns[down]
	delete(cp.conns, down)
	cp.mu.Unlock()
	up.CloseNow()
	if code == websocket.StatusAbnormalClosure {
		down.CloseNow()
		return
	}
	// Close waits for the client's answer, which its reader sends.
	down.Close(code, "proxy going away")
}

// A close without procwire's word, from a hop between (1001 of a proxy
// reloading, 1006, 1011), is a lost connection: a 64 MiB stream resumes
// byte-exact across all three.
func TestCloseWithoutWordResumes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, server.Config{})
	c := ctx(t)
	cp := newCodeProxy(t, e.url)
	cp.closeAt(200, websocket.StatusGoingAway)
	cp.closeAt(500, websocket.StatusAbnormalClosure)
	cp.closeAt(800, websocket.StatusInternalError)
	p := open(t, cp.url, req("cat"), nil)
	const n = 64 << 20
	sent, got, count := streamThrough(t, c, p, n, 11)
	require.Equal(t, int64(n), count)
	require.Equal(t, sent, got, "sha256")
	st, err := p.Wait(c)
	require.NoError(t, err)
	require.Equal(t, client.ExitStatus{}, st)
	cp.mu.Lock()
	require.Equal(t, 3, cp.closed)
	cp.mu.Unlock()
	require.NoError(t, p.Destroy(c))
}

// A real server's Shutdown says destroyed before its 1001: the handle ends
// as destroyed, with the exit, and Destroy settles without a connection.
func TestShutdownEndsAsDestroyed(t *testing.T) {
	e := newEnv(t, server.Config{})
	c := ctx(t)
	p := open(t, e.url, req("sleep", "300"), nil)
	require.NoError(t, e.srv.Shutdown(c))
	await(t, c, client.Ended(p), "the handle to end")
	st, err := p.Wait(c)
	require.NoError(t, err)
	require.Equal(t, client.ExitStatus{Signal: "SIGKILL"}, st)
	_, err = p.Stdin().Write([]byte("x"))
	require.ErrorIs(t, err, client.ErrDestroyed)
	require.NoError(t, p.Destroy(context.Background()))
}

// A server that closes every resume (1011) before answering: the handle
// ends after Options.ResumeBudget of them in a row, with ErrConnectionLost
// wrapping the last close. Default options, so that the log says how long
// a client tries and how many connections it makes.
func TestResumeBudget(t *testing.T) {
	cut := make(chan struct{})
	var resumes atomic.Int32
	f := newFake(t, func(fc *fakeConn, first frames.Frame) {
		switch first := first.(type) {
		case *frames.Open:
			o := opened(first)
			o.GraceMS = 60_000 // the budget, not the grace, ends it
			fc.send(o)
			fc.drain(cut)
		case *frames.Resume:
			resumes.Add(1)
			fc.ws.Close(websocket.StatusInternalError, "internal error")
		}
	})
	p, err := client.Open(ctx(t), f.url, "inst-1", req("cat"), nil)
	require.NoError(t, err)
	start := time.Now()
	err = cutWhileReading(t, p, cut)
	took := time.Since(start)
	require.ErrorIs(t, err, client.ErrConnectionLost)
	var ce websocket.CloseError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, websocket.StatusInternalError, ce.Code)
	require.Equal(t, int32(8), resumes.Load())
	t.Logf("a server closing every resume: the client gave up after %d resumes (%d connections with the open) in %v",
		resumes.Load(), resumes.Load()+1, took)
	require.NoError(t, p.Destroy(ctx(t)), "a destroy asked for goes to the server")
	require.Len(t, f.destroys, 1)
}

// Once the grace ran out with no connection, Destroy settles at once as
// expired, without dialling, whatever its context.
func TestDestroyAfterGrace(t *testing.T) {
	e := newEnv(t, server.Config{Grace: 300 * time.Millisecond})
	c := ctx(t)
	p := open(t, e.purl, req("sleep", "300"), nil)
	e.proxy.Refuse(true)
	e.proxy.CutAll()
	await(t, c, client.Ended(p), "the handle to end")
	_, err := p.Wait(c)
	require.ErrorIs(t, err, client.ErrConnectionLost)
	accepted := e.proxy.Accepted()
	e.proxy.Refuse(false)
	require.ErrorIs(t, p.Destroy(context.Background()), client.ErrExpired)
	require.ErrorIs(t, p.Destroy(context.Background()), client.ErrExpired, "settled once")
	require.Equal(t, accepted, e.proxy.Accepted(), "no dial")
}

// A Destroy that gets no answer returns after Options.DestroyTimeout, even
// with a context that never ends, and settles: a later call says the same.
func TestDestroyBounded(t *testing.T) {
	e := newEnv(t, server.Config{Grace: time.Minute})
	opts := fastOpts()
	opts.DestroyTimeout = 200 * time.Millisecond
	p := open(t, e.purl, req("sleep", "300"), opts)
	e.proxy.Refuse(true)
	e.proxy.CutAll()
	err := p.Destroy(context.Background())
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, p.Destroy(context.Background()), context.DeadlineExceeded)
	_, err = p.Stdout().Read(make([]byte, 1))
	require.ErrorIs(t, err, client.ErrDestroyed)
}

// A server that announces more than the client asked for (a larger stdout
// window, a larger stdin limit) breaks the protocol: the client would have
// to hold more than it chose to. Open fails and destroys the process.
func TestOpenedOverWhatWasAsked(t *testing.T) {
	for _, tc := range []struct {
		field string
		edit  func(*frames.Opened)
	}{
		{"opened.stdout_window", func(o *frames.Opened) { o.StdoutWindow = 8192 }},
		{"opened.stdin_limit", func(o *frames.Opened) { o.StdinLimit = 8192 }},
	} {
		t.Run(tc.field, func(t *testing.T) {
			destroyed := make(chan *frames.Destroy, 1)
			f := newFake(t, func(fc *fakeConn, first frames.Frame) {
				o := opened(first.(*frames.Open))
				tc.edit(o)
				fc.send(o)
				if fr, ok := fc.recv(); ok {
					if d, ok := fr.(*frames.Destroy); ok {
						destroyed <- d
						fc.send(&frames.Destroyed{ProcessID: fakeID})
					}
				}
			})
			opts := fastOpts()
			opts.StdoutWindow, opts.StdinWindow = 4096, 4096
			_, err := client.Open(ctx(t), f.url, "inst-1", req("cat"), opts)
			var pe *client.ProtocolError
			require.ErrorAs(t, err, &pe)
			require.Equal(t, tc.field, pe.Field)
			select {
			case d := <-destroyed:
				require.Equal(t, &frames.Destroy{}, d)
			default:
				t.Fatal("the process was not destroyed")
			}
		})
	}
}

// Every upgrade carries the routing headers: Procwire-Instance always,
// Procwire-Process once the process is known.
func TestRoutingHeaders(t *testing.T) {
	type seen struct{ instance, process string }
	var mu sync.Mutex
	var dials []seen
	record := func(r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		dials = append(dials, seen{r.Header.Get(frames.HeaderInstance), r.Header.Get(frames.HeaderProcess)})
	}
	cut := make(chan struct{})
	f := newFake(t, func(fc *fakeConn, first frames.Frame) {
		switch first := first.(type) {
		case *frames.Open:
			fc.send(opened(first))
			fc.drain(cut)
		case *frames.Resume:
			fc.send(&frames.Resumed{ProcessID: fakeID, Evidence: fakeEvidence(), StdinReceived: 0, StdinLimit: 4096})
			for {
				fr, ok := fc.recv()
				if !ok {
					return
				}
				if _, ok := fr.(*frames.Destroy); ok {
					fc.send(&frames.Destroyed{ProcessID: fakeID})
					return
				}
			}
		}
	})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		record(r)
		proxyTo(w, r, f.url)
	}))
	t.Cleanup(hs.Close)
	p, err := client.Open(ctx(t), "ws"+strings.TrimPrefix(hs.URL, "http"), "inst-1", req("cat"), fastOpts())
	require.NoError(t, err)
	blocked := blockedHook(p)
	go func() { _, _ = p.Stdout().ReadContext(ctx(t), make([]byte, 1)) }()
	await(t, ctx(t), blocked, "the read to block")
	close(cut)
	require.NoError(t, p.Destroy(ctx(t)))
	mu.Lock()
	defer mu.Unlock()
	require.GreaterOrEqual(t, len(dials), 2)
	require.Equal(t, seen{"inst-1", ""}, dials[0], "open")
	for _, d := range dials[1:] {
		require.Equal(t, seen{"inst-1", fakeID}, d, "resume")
	}
}

// proxyTo forwards the WebSocket upgrade r to target, message by message.
func proxyTo(w http.ResponseWriter, r *http.Request, target string) {
	up, _, err := websocket.Dial(r.Context(), target, &websocket.DialOptions{Subprotocols: []string{frames.Subprotocol}})
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer up.CloseNow()
	down, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{frames.Subprotocol}})
	if err != nil {
		return
	}
	defer down.CloseNow()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			typ, b, err := up.Read(context.Background())
			if err != nil || down.Write(context.Background(), typ, b) != nil {
				down.CloseNow()
				return
			}
		}
	}()
	for {
		typ, b, err := down.Read(context.Background())
		if err != nil || up.Write(context.Background(), typ, b) != nil {
			break
		}
	}
	up.CloseNow()
	<-done
}

// A process left by Detach is taken over by Attach from its Handle: the
// stdout nobody read is replayed from 0, stdin goes on from what the server
// received, and the exit is the process's.
func TestDetachAttach(t *testing.T) {
	e := newEnv(t, server.Config{})
	c := ctx(t)
	p := open(t, e.url, sh(`echo one; read x; echo "got $x"; read y; echo "got $y"; exit 3`), nil)
	_, err := p.Stdin().Write([]byte("a\n"))
	require.NoError(t, err)
	// Received, not read: nothing is acknowledged.
	eventually(t, c, "the answer to arrive", func() bool { return p.Stdout().Received() == int64(len("one\ngot a\n")) })
	h := p.Handle()
	require.Equal(t, instanceID(t), h.InstanceID)
	require.Equal(t, p.ID(), h.ProcessID)
	p.Detach()
	_, err = p.Stdin().Write([]byte("x"))
	require.ErrorIs(t, err, client.ErrDetached)
	_, err = p.Wait(c)
	require.ErrorIs(t, err, client.ErrDetached)
	require.ErrorIs(t, p.Destroy(c), client.ErrDetached, "the process stays for Attach")

	q, err := client.Attach(c, e.url, h, fastOpts())
	require.NoError(t, err)
	t.Cleanup(func() { _ = q.Destroy(context.Background()) })
	require.Equal(t, p.Evidence(), q.Evidence())
	require.Equal(t, "one\n", readLine(t, c, q.Stdout()), "replayed from 0")
	require.Equal(t, "got a\n", readLine(t, c, q.Stdout()))
	_, err = q.Stdin().Write([]byte("b\n"))
	require.NoError(t, err)
	require.Equal(t, "got b\n", readLine(t, c, q.Stdout()))
	require.Equal(t, "", readAll(t, c, q.Stdout()))
	st, err := q.Wait(c)
	require.NoError(t, err)
	require.Equal(t, client.ExitStatus{Code: 3}, st)
	require.NoError(t, q.Destroy(c))
}

// Attach to a process whose earlier reader acknowledged stdout: the server
// no longer holds offset 0 (replay_gap), so Attach goes on from the oldest
// byte it holds, and loses nothing after it.
func TestAttachAfterAcknowledgedStdout(t *testing.T) {
	e := newEnv(t, server.Config{})
	c := ctx(t)
	// Acks are batched by a quarter window: with a 1 KiB window, reading
	// a line of 256 bytes acknowledges it.
	p := open(t, e.url, req("cat"), &client.Options{StdoutWindow: 1 << 10})
	first := strings.Repeat("f", 255) + "\n"
	_, err := p.Stdin().Write([]byte(first))
	require.NoError(t, err)
	require.Equal(t, first, readLine(t, c, p.Stdout()))
	h := p.Handle()
	// The ack of the line read goes out before the next stdin on the same
	// connection: once the echo of that stdin arrived, the server has
	// dropped the line.
	_, err = p.Stdin().Write([]byte("second\n"))
	require.NoError(t, err)
	eventually(t, c, "the echo to arrive", func() bool { return p.Stdout().Received() == int64(len(first+"second\n")) })
	p.Detach()

	q, err := client.Attach(c, e.url, h, fastOpts())
	require.NoError(t, err)
	t.Cleanup(func() { _ = q.Destroy(context.Background()) })
	require.Equal(t, "second\n", readLine(t, c, q.Stdout()), "from the oldest byte held")
	require.NoError(t, q.Stdin().Close())
	require.Equal(t, "", readAll(t, c, q.Stdout()))
	st, err := q.Wait(c)
	require.NoError(t, err)
	require.True(t, st.Success())
}

// A stream hands over every byte it holds before it reports an error: the
// stderr a process wrote just before its exit is read after Destroy.
func TestStreamsDrainAfterDestroy(t *testing.T) {
	e := newEnv(t, server.Config{})
	c := ctx(t)
	p := open(t, e.url, sh(`echo out; echo err >&2`), nil)
	st, err := p.Wait(c)
	require.NoError(t, err)
	require.True(t, st.Success())
	// stdout_eof comes before exit: both streams are complete.
	require.NoError(t, p.Destroy(c))
	require.Equal(t, "out\n", readAll(t, c, p.Stdout()))
	require.Equal(t, "err\n", readAll(t, c, p.Stderr()))
	n, err := p.Stderr().ReadContext(c, make([]byte, 8))
	require.Equal(t, 0, n)
	require.ErrorIs(t, err, io.EOF, "nothing after io.EOF")
	require.Equal(t, int64(0), p.Stderr().Dropped())
}

// exchangeBounds returns the bytes an Open of r on an instance named like
// inst moves through e's proxy: in the upgrade, and in all (the upgrade, open
// and opened).
func exchangeBounds(t *testing.T, e *env, inst string, r frames.ProcessRequest) (upgrade, all int64) {
	c := ctx(t)
	before := e.proxy.Forwarded()
	ws, _, err := websocket.Dial(c, e.purl, &websocket.DialOptions{
		HTTPHeader:   http.Header{frames.HeaderInstance: []string{inst}},
		Subprotocols: []string{frames.Subprotocol},
	})
	require.NoError(t, err)
	upgrade = e.proxy.Forwarded() - before
	ws.CloseNow()
	before = e.proxy.Forwarded()
	p, err := client.Open(c, e.purl, inst, r, fastOpts())
	require.NoError(t, err)
	all = e.proxy.Forwarded() - before
	require.NoError(t, p.Destroy(c))
	return upgrade, all
}

// The open/opened exchange cut at every byte offset through a proxy: Open
// repeats the handshake with its key, and exactly one process runs (its
// output once, byte-exact); once destroyed, nothing is left on the
// instance. A cut within the upgrade (its request or the answer's headers)
// is a lost connection too, repeated, not a failed Open.
func TestOpenCutAtEveryOffset(t *testing.T) {
	t.Parallel()
	e := newEnv(t, server.Config{Grace: 5 * time.Second})
	dir := t.TempDir()
	r := sh(`echo started >> "$MARK"; echo hello; exec cat`)
	r.Environment["MARK"] = dir + "/probe-0000"
	upgrade, all := exchangeBounds(t, e, "cut-0000", r)
	step := int64(1)
	if testing.Short() {
		step = 37
	}
	for k := int64(1); k < all; k += step {
		if k <= upgrade && k%8 != 0 {
			continue // within the upgrade nothing was sent: a sample is enough
		}
		c := ctx(t) // a bound per cut, not for them all
		inst := fmt.Sprintf("cut-%04d", k)
		mark := fmt.Sprintf("%s/mark-%04d", dir, k)
		r.Environment["MARK"] = mark
		e.proxy.CutAt(k)
		p, err := client.Open(c, e.purl, inst, r, fastOpts())
		require.NoError(t, err, "cut at %d of %d", k, all)
		require.Equal(t, "hello\n", readLine(t, c, p.Stdout()), "cut at %d", k)
		require.NoError(t, p.Destroy(c))
		require.Equal(t, "started\n", readFile(t, mark), "cut at %d: one process", k)
		require.Empty(t, e.srv.Stats().Processes, "cut at %d: nothing left", k)
	}
}

// Open cancelled at every byte offset of the exchange (the proxy stalls the
// connection there): nothing is left, whether the open reached the server
// or not. Its destroy by key frees the instance, and an open frame still in
// flight would be refused.
func TestOpenCancelledAtEveryOffset(t *testing.T) {
	t.Parallel()
	e := newEnv(t, server.Config{Grace: 5 * time.Second})
	r := req("sleep", "300")
	upgrade, all := exchangeBounds(t, e, "cancel-0000", r)
	step := int64(1)
	if testing.Short() {
		step = 37
	}
	holds := 0
	for k := int64(1); k < all; k += step {
		if k <= upgrade && k%8 != 0 {
			continue // within the upgrade nothing was sent: a sample is enough
		}
		c := ctx(t) // a bound per cancel, not for them all
		inst := fmt.Sprintf("cancel-%04d", k)
		e.proxy.HoldAt(k)
		octx, cancel := context.WithCancel(c)
		done := make(chan error, 1)
		go func() {
			p, err := client.Open(octx, e.purl, inst, r, fastOpts())
			if err == nil {
				err = p.Destroy(c) // the hold came after opened was read
				if err == nil {
					err = errOpened
				}
			}
			done <- err
		}()
		holds++
		require.NoError(t, e.proxy.WaitHolds(c, holds))
		cancel()
		err := <-done
		e.proxy.CutAll()
		require.ErrorIs(t, err, context.Canceled, "cancel at %d of %d", k, all)
		// The destroy by key finished before Open returned.
		require.Empty(t, e.srv.Stats().Processes, "cancel at %d: nothing left", k)
	}
	// And the instances are free: the last one takes a new process.
	q, err := client.Open(ctx(t), e.url, fmt.Sprintf("cancel-%04d", all-1), req("true"), fastOpts())
	require.NoError(t, err)
	require.NoError(t, q.Destroy(ctx(t)))
}

// errOpened says an Open meant to be cancelled returned a process.
var errOpened = errors.New("opened")

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	require.NoError(t, err)
	return string(b)
}

// A signal the server fails to deliver is answered in-band for that
// signal's id: Signal returns the typed error at once, and the handle and
// its connection go on.
func TestSignalFailedInBand(t *testing.T) {
	var conns atomic.Int32
	f := newFake(t, func(fc *fakeConn, first frames.Frame) {
		conns.Add(1)
		fc.send(opened(first.(*frames.Open)))
		for {
			fr, ok := fc.recv()
			if !ok {
				return
			}
			switch fr := fr.(type) {
			case *frames.Signal:
				if fr.Signal == frames.SIGINT {
					fc.send(&frames.Error{Code: frames.OperationFailed, Operation: "signal_process", Reason: "signal_failed", Message: "operation not permitted", ID: fr.ID})
				} else {
					fc.send(&frames.Signaled{ID: fr.ID, Result: frames.SignalDelivered})
				}
			case *frames.Destroy:
				fc.send(&frames.Exit{Signal: "SIGKILL"})
				fc.send(&frames.Destroyed{ProcessID: fakeID})
				return
			}
		}
	})
	p := openFake(t, f)
	c := ctx(t)
	for range 3 {
		_, err := p.Signal(c, frames.SIGINT)
		var re *client.RemoteError
		require.ErrorAs(t, err, &re)
		require.Equal(t, "signal_failed", re.Frame.Reason)
		ok, err := p.Signal(c, frames.SIGTERM)
		require.NoError(t, err)
		require.True(t, ok)
	}
	require.Equal(t, int32(1), conns.Load(), "one connection")
	require.NoError(t, p.Destroy(c))
}

// A stdin write the server cannot perform is answered in-band: later
// writes and the close fail with the typed error, and the rest of the
// handle goes on.
func TestStdinFailedInBand(t *testing.T) {
	f := newFake(t, func(fc *fakeConn, first frames.Frame) {
		fc.send(opened(first.(*frames.Open)))
		for {
			fr, ok := fc.recv()
			if !ok {
				return
			}
			switch fr.(type) {
			case *frames.Stdin:
				fc.send(&frames.Error{Code: frames.OperationFailed, Operation: "write_stdin", Reason: "stdin_failed"})
				fc.send(&frames.Stdout{Off: 0, Data: []byte("still here\n")})
			case *frames.Destroy:
				fc.send(&frames.Destroyed{ProcessID: fakeID})
				return
			}
		}
	})
	p := openFake(t, f)
	c := ctx(t)
	_, err := p.Stdin().Write([]byte("x"))
	require.NoError(t, err, "held by the client")
	require.Equal(t, "still here\n", readLine(t, c, p.Stdout()))
	var re *client.RemoteError
	_, err = p.Stdin().Write([]byte("y"))
	require.ErrorAs(t, err, &re)
	require.Equal(t, "write_stdin", re.Frame.Operation)
	require.ErrorAs(t, p.Stdin().Close(), &re)
	require.NoError(t, p.Destroy(c))
}
