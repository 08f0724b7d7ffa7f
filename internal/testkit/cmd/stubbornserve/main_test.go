//go:build linux

package main

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/procwire/procwire/client"
	"github.com/procwire/procwire/frames"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestFirstDestroyFails runs the command and drives it with the Go client:
// the first destroy is answered processes_survived and the process still
// runs; the second destroys it; cancelling run's context shuts it down.
func TestFirstDestroyFails(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sctx, stop := context.WithCancel(ctx)
	ready := make(chan string, 1)
	done := make(chan int, 1)
	go func() { done <- run(sctx, []string{"-grace", "30s"}, io.Discard, ready) }()
	var addr string
	select {
	case addr = <-ready:
	case code := <-done:
		t.Fatalf("run exited with %d before listening", code)
	}

	p, err := client.Open(ctx, "ws://"+addr+"/", "stubborn-1", frames.ProcessRequest{
		Executable: "cat", WorkingDirectory: "/", Environment: map[string]string{"PATH": "/usr/bin:/bin"},
	}, nil)
	require.NoError(t, err)
	var re *client.RemoteError
	require.ErrorAs(t, p.Destroy(ctx), &re)
	require.Equal(t, frames.OperationFailed, re.Frame.Code)
	require.Equal(t, "destroy_process", re.Frame.Operation)
	require.Equal(t, "processes_survived", re.Frame.Reason)

	_, err = p.Stdin().Write([]byte("x\n"))
	require.NoError(t, err)
	b := make([]byte, 2)
	_, err = io.ReadFull(p.Stdout(), b)
	require.NoError(t, err)
	require.Equal(t, "x\n", string(b))
	require.NoError(t, p.Destroy(ctx))

	stop()
	require.Equal(t, 0, <-done)
}

// TestBadUsage: an argument is refused before anything listens.
func TestBadUsage(t *testing.T) {
	require.Equal(t, 2, run(context.Background(), []string{"extra"}, io.Discard, nil))
	require.Equal(t, 2, run(context.Background(), []string{"-nope"}, io.Discard, nil))
}
