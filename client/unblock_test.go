//go:build linux

package client_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/client"
	"github.com/procwire/procwire/frames"
	"github.com/procwire/procwire/server"
)

// Every blocking call wakes, with a typed error, on cancellation, on
// Destroy, on the server's shutdown and when the grace runs out.
func TestUnblock(t *testing.T) {
	type call struct {
		name string
		// drop holds the server's answers back so that the call blocks.
		drop bool
		do   func(c context.Context, p *client.Process) error
	}
	calls := []call{
		{name: "Stdout.Read", do: func(c context.Context, p *client.Process) error {
			_, err := p.Stdout().ReadContext(c, make([]byte, 1))
			return err
		}},
		{name: "Stderr.Read", do: func(c context.Context, p *client.Process) error {
			_, err := p.Stderr().ReadContext(c, make([]byte, 1))
			return err
		}},
		{name: "Stdin.Write", do: func(c context.Context, p *client.Process) error {
			_, err := p.Stdin().WriteContext(c, make([]byte, 4<<20))
			return err
		}},
		{name: "Wait", do: func(c context.Context, p *client.Process) error {
			st, err := p.Wait(c)
			if err == nil && st != (client.ExitStatus{Signal: "SIGKILL"}) {
				return errors.New("unexpected exit " + st.String())
			}
			return err
		}},
		{name: "Signal", drop: true, do: func(c context.Context, p *client.Process) error {
			_, err := p.Signal(c, frames.SIGTERM)
			return err
		}},
	}
	causes := []struct {
		name string
		// cause makes the blocked call return; want checks what it returned.
		cause func(t *testing.T, e *env, p *client.Process, cancel context.CancelFunc)
		want  func(t *testing.T, c call, err error)
	}{
		{
			name:  "cancel",
			cause: func(t *testing.T, e *env, p *client.Process, cancel context.CancelFunc) { cancel() },
			want:  func(t *testing.T, _ call, err error) { require.ErrorIs(t, err, context.Canceled) },
		},
		{
			name: "destroy",
			cause: func(t *testing.T, e *env, p *client.Process, _ context.CancelFunc) {
				go func() { _ = p.Destroy(context.Background()) }() // settled below
			},
			want: func(t *testing.T, c call, err error) {
				if c.name == "Wait" {
					require.NoError(t, err, "Wait returns the exit of the destroyed process")
					return
				}
				require.ErrorIs(t, err, client.ErrDestroyed)
			},
		},
		{
			name: "shutdown",
			cause: func(t *testing.T, e *env, p *client.Process, _ context.CancelFunc) {
				require.NoError(t, e.srv.Shutdown(ctx(t)))
			},
			// The server says destroyed before it closes: the calls end
			// as destroyed (Wait with the exit). When its word is lost
			// (the proxy drops it), the client resumes until the grace
			// runs out.
			want: func(t *testing.T, c call, err error) {
				if c.drop {
					require.ErrorIs(t, err, client.ErrConnectionLost)
					return
				}
				if c.name == "Wait" {
					require.NoError(t, err, "Wait returns the exit of the destroyed process")
					return
				}
				if strings.HasSuffix(c.name, ".Read") && errors.Is(err, io.EOF) {
					return // the killed child's stream ended before destroyed came
				}
				require.ErrorIs(t, err, client.ErrDestroyed)
			},
		},
		{
			name: "grace",
			cause: func(t *testing.T, e *env, p *client.Process, _ context.CancelFunc) {
				e.proxy.Refuse(true)
				e.proxy.CutAll()
			},
			want: func(t *testing.T, _ call, err error) { require.ErrorIs(t, err, client.ErrConnectionLost) },
		},
	}
	for _, cs := range causes {
		for _, cl := range calls {
			t.Run(cs.name+"/"+cl.name, func(t *testing.T) {
				t.Parallel()
				// The grace and shutdown causes wait for the grace to run
				// out; the others end with a Destroy that may have to
				// reconnect (after the cut below), which a loaded machine
				// may not do within so short a grace (a CI run: "process
				// expired" after the destroy cause).
				grace := 500 * time.Millisecond
				if cs.name == "cancel" || cs.name == "destroy" {
					grace = 10 * time.Second
				}
				e := newEnv(t, server.Config{Grace: grace})
				c := ctx(t)
				opts := fastOpts()
				opts.StdinWindow = 1024
				p := open(t, e.purl, req("sleep", "300"), opts)
				if cl.drop {
					e.proxy.DropReplies(true)
				}
				blocked := blockedHook(p)
				cctx, cancel := context.WithCancel(c)
				defer cancel()
				done := make(chan error, 1)
				go func() { done <- cl.do(cctx, p) }()
				await(t, c, blocked, "the call to block")
				cs.cause(t, e, p, cancel)
				var err error
				select {
				case err = <-done:
				case <-c.Done():
					t.Fatal("the call did not return")
				}
				cs.want(t, cl, err)

				// Whatever ended the call, the process can be destroyed,
				// unless the server is gone before the client heard of its
				// shutdown: then Destroy cannot settle.
				e.proxy.DropReplies(false)
				e.proxy.Refuse(false)
				e.proxy.CutAll()
				if cs.name == "grace" || cs.name == "shutdown" && cl.drop {
					// The grace ran out with no connection: the server
					// destroyed the process, and Destroy says so at once.
					require.ErrorIs(t, p.Destroy(context.Background()), client.ErrExpired)
					return
				}
				require.NoError(t, p.Destroy(c))
			})
		}
	}
}

// Destroy itself wakes on cancellation when its answer does not come, and
// a later Destroy settles.
func TestDestroyUnblocksOnCancel(t *testing.T) {
	e := newEnv(t, server.Config{})
	c := ctx(t)
	p := open(t, e.purl, req("sleep", "300"), nil)
	e.proxy.DropReplies(true)
	cctx, cancel := context.WithCancel(c)
	blocked := blockedHook(p)
	done := make(chan error, 1)
	go func() { done <- p.Destroy(cctx) }()
	await(t, c, blocked, "Destroy to block")
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	e.proxy.DropReplies(false)
	e.proxy.CutAll()
	require.NoError(t, p.Destroy(c))
}
